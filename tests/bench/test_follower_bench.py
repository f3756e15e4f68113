"""The in-sync follower under sustained load and on a large backlog (run on demand: `make bench`).

The benchmark's own PostgreSQL clusters (tests/bench/clusters.py: a publisher's and a subscriber's, logical
replication on, so the product's publication captures from the WAL); a real `manage.py replfollow` process applies.

- follower_4subs_1000tps: one publication, four subscriptions (two PostgreSQL databases on the subscriber's cluster,
  two MariaDB databases), writers committing BENCH_SUSTAINED_RATE (1,000) three-statement transactions per second in
  all for BENCH_SUSTAINED_SECONDS (60). Every BENCH_LAG_SAMPLE seconds (0.1) each subscriber is asked how far it
  got; its lag then is the age of the oldest committed transaction it does not show yet (0 when it shows them all).
  Printed: the p99 of the worst subscription beside PostgreSQL's own logical replication with four subscriptions
  under the same writers, sampled the same way (BENCH_FOLLOWER_PEER=0: left out, the peer's figure is then 1000).
- follower_memory_3m_rows: BENCH_MEMORY_ROWS (3,000,000) rows written in BENCH_MEMORY_TX_ROWS-row (1,000)
  transactions while no follower runs, then one replfollow process applies the backlog; its peak resident size
  (VmHWM) beside the 300 MB ceiling.

Asserted: every subscriber ends with the publisher's rows (counts and key sums), nothing about time. A subscription
whose feed the follower cut (a backlog over repl_max_backlog that stopped shrinking) syncs again with REPL_SYNC before
the comparison, and says so; its lag is reported as measured.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import ReplSubscriber, Server
from replication_admin.servers.actions import do_register_server
from replication_admin.transactional.sync import FEED_CUT
from tests.bench.clusters import TABLE, builtin_subscription, pg, registered, two_clusters
from tests.conftest import server_data
from tests.faults.test_durability import follower
from tests.transactional.test_follower_down import wait_for
from tests.transactional.test_trx_replication import run

pytestmark = [pytest.mark.bench, pytest.mark.live_db, pytest.mark.spark]

PUB_PORT = int(os.environ.get("BENCH_FOLLOWER_PORT", "5451"))
SUB_PORT = PUB_PORT + 1
RATE = float(os.environ.get("BENCH_SUSTAINED_RATE", "1000"))
SECONDS = float(os.environ.get("BENCH_SUSTAINED_SECONDS", "60"))
WRITERS = int(os.environ.get("BENCH_WRITERS", "4"))
SAMPLE = float(os.environ.get("BENCH_LAG_SAMPLE", "0.1"))
MEMORY_ROWS = int(os.environ.get("BENCH_MEMORY_ROWS", "3000000"))
MEMORY_TX_ROWS = int(os.environ.get("BENCH_MEMORY_TX_ROWS", "1000"))
CEILING_MB = 300.0
# BENCH_FOLLOWER_PEER=0 leaves PostgreSQL's own replication out (the line's peer is then 1000 ms).
PEER = os.environ.get("BENCH_FOLLOWER_PEER", "1") not in ("", "0")
# Each writer's keys start here times its number: a subscriber's largest key of that range is how far it got.
SPAN = 1_000_000_000
PEER_SUBS = ("fpeer1", "fpeer2", "fpeer3", "fpeer4")


@pytest.fixture
def clusters(transactional_db, monkeypatch) -> Iterator[None]:
    """transactional_db: the follower is another process and reads the catalog the test commits; it runs as in
    production (DEBUG off: no query log kept)."""
    monkeypatch.setenv("REPLADMIN_DEBUG", "0")
    with two_clusters(PUB_PORT, SUB_PORT, ("fpub", "fsub1", "fsub2", "fpeer", *PEER_SUBS, "mpub", "msub")):
        yield


def subscribe(pub: Server, subs: list[Server]) -> None:
    """Publish `t` of the publisher (its capture as the cluster allows: the WAL) and make each subscriber an in-sync
    subscriber of it."""
    run(pub, "REPL_PUBLISH ('f', 'f.log'); REPL_PUB_ADD ('f', 't', 2, 0, null)")
    for sub in subs:
        run(sub, f"REPL_SERVER ('{pub.name}', '{pub.name}'); REPL_SUBSCRIBE ('{pub.name}', 'f'); "
                 f"REPL_INIT_COPY ('{pub.name}', 'f'); SYNC_REPL ()")  # fmt: skip


# --- follower_4subs_1000tps --------------------------------------------------------------------------------


class Writers:
    """WRITERS threads committing RATE three-statement transactions per second in all (an insert, an update of the
    row just inserted, a delete of the writer's row 100 back) for SECONDS; writer w's keys are w * SPAN + i, and
    `committed[w][i]` is when its i-th transaction committed. Each transaction goes in one round trip."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.committed: list[list[float]] = [[] for _ in range(WRITERS)]
        self.errors: list[BaseException] = []
        self.done = threading.Event()

    def run(self) -> None:
        threads = [threading.Thread(target=self._write, args=(w,)) for w in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.done.set()
        assert not self.errors, self.errors[0]

    def _write(self, w: int) -> None:
        rate = RATE / WRITERS
        try:
            with pg(PUB_PORT, self.db) as conn:
                started = time.perf_counter()
                for i in range(int(rate * SECONDS)):
                    key = w * SPAN + i
                    conn.execute(
                        f"BEGIN; INSERT INTO t (id, v, amount) VALUES ({key}, 'steady', 1.00); "
                        f"UPDATE t SET amount = amount + 1 WHERE id = {key}; "
                        f"DELETE FROM t WHERE id = {key - 100} AND {i} >= 100; COMMIT"
                    )
                    self.committed[w].append(time.perf_counter())
                    ahead = started + (i + 1) / rate - time.perf_counter()
                    if ahead > 0:
                        time.sleep(ahead)
        except BaseException as exc:  # reported by run()
            self.errors.append(exc)

    def written(self) -> int:
        return sum(len(c) for c in self.committed)


def progress_sql() -> str:
    """Each writer's largest key on a subscriber, in one round trip (each a look-up of the primary key)."""
    parts = [f"(SELECT max(id) FROM t WHERE id >= {w * SPAN} AND id < {(w + 1) * SPAN})" for w in range(WRITERS)]
    return "SELECT " + ", ".join(parts)


def sample_lag(
    writers: Writers, subscribers: dict[str, Callable[[], contextlib.AbstractContextManager]]
) -> dict[str, list[float]]:
    """While the writers write: every SAMPLE seconds, each subscriber's lag (seconds): the age of the oldest
    transaction committed before the look that it does not show yet."""
    lags: dict[str, list[float]] = {name: [] for name in subscribers}
    query = progress_sql()
    with contextlib.ExitStack() as stack:
        cursors = {name: stack.enter_context(connect()).cursor() for name, connect in subscribers.items()}
        while not writers.done.is_set():
            for name, cursor in cursors.items():
                at = time.perf_counter()
                tops = cursor.execute(query).fetchone()
                worst = 0.0
                for w, top in enumerate(tops):
                    shown = -1 if top is None else int(top) - w * SPAN
                    committed = writers.committed[w]
                    if shown + 1 < len(committed) and committed[shown + 1] < at:
                        worst = max(worst, at - committed[shown + 1])
                lags[name].append(worst)
            time.sleep(SAMPLE)
    return lags


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def under_load(db: str, subscribers: dict[str, Callable[[], contextlib.AbstractContextManager]]) -> dict[str, list]:
    writers = Writers(db)
    lags: dict[str, list[float]] = {}
    sampler = threading.Thread(target=lambda: lags.update(sample_lag(writers, subscribers)))
    sampler.start()
    writers.run()
    sampler.join()
    print(f"\n{db}: {writers.written() / SECONDS:.0f} tx/s written by {WRITERS} writers for {SECONDS:.0f} s")
    for name, values in lags.items():
        print(f"  {name}: lag p50 {p(values, 0.5) * 1000:.0f} ms, p99 {p(values, 0.99) * 1000:.0f} ms, "
              f"max {max(values or [0]) * 1000:.0f} ms over {len(values)} samples")  # fmt: skip
    return lags


def warm_up(subs: list[Server], log: Path) -> None:
    """One transaction before the load, seen on every subscriber: the follower is up and streaming."""
    with pg(PUB_PORT, "fpub") as conn:
        conn.execute("INSERT INTO t (id, v, amount) VALUES (-1, 'warm', 0)")
    for sub in subs:
        with connections.connect(sub) as conn:
            cursor = conn.cursor()
            wait_for(f"{sub.name} applying the first transaction",
                     lambda c=cursor: c.execute("SELECT count(*) FROM t WHERE id = -1").fetchone()[0], log)  # fmt: skip


def cut_feed(name: str) -> str:
    """ "cut" when the follower cut the subscriber's feed (its backlog over the threshold without shrinking)."""
    row = ReplSubscriber.objects.filter(subscriber=name).values_list("state", "last_error").first()
    return "cut" if row and row[0] == ReplSubscriber.DISCONNECTED and row[1].endswith(FEED_CUT) else ""


def rows_and_sum(cursor) -> tuple[int, int]:
    count, total = cursor.execute("SELECT count(*), coalesce(sum(id), 0) FROM t").fetchone()
    return int(count), int(total)


def builtin_p99() -> float:
    """PostgreSQL's own logical replication, four subscriptions of one publication under the same writers: the worst
    subscription's p99 lag in ms."""
    for name in PEER_SUBS:
        builtin_subscription(PUB_PORT, "fpeer", SUB_PORT, name, name=name)
    lags = under_load("fpeer", {name: lambda n=name: pg(SUB_PORT, n) for name in PEER_SUBS})
    with pg(PUB_PORT, "fpeer") as conn:
        expected = rows_and_sum(conn.cursor())
    for name in PEER_SUBS:
        with pg(SUB_PORT, name) as conn:
            wait_for(f"{name} applying every row", lambda c=conn: rows_and_sum(c.cursor()) == expected)
    return max(p(values, 0.99) for values in lags.values()) * 1000


def test_the_follower_keeps_four_subscriptions_under_a_thousand_transactions_a_second(
    clusters, live_database, settings, tmp_path, jobs_sync, spark
):
    peer = builtin_p99() if PEER else 1000.0

    # The product: a real replfollow process, two PostgreSQL and two MariaDB subscribers.
    with pg(PUB_PORT, "fpub") as conn:
        conn.execute(TABLE)
    pub = registered("fpub", PUB_PORT, "fpub")
    subs = [registered("fsub1", SUB_PORT, "fsub1"), registered("fsub2", SUB_PORT, "fsub2")]
    subs += [
        do_register_server(Actor.command(), server_data("mysql", f"fmy{n}", live_database("mysql"))) for n in (1, 2)
    ]
    subscribe(pub, subs)
    with follower(settings, tmp_path) as proc:
        warm_up(subs, tmp_path / "replfollow.log")
        print(f"\nreplfollow: pid {proc.pid}", flush=True)
        product_lags = under_load("fpub", {sub.name: lambda s=sub: connections.connect(s) for sub in subs})
        with pg(PUB_PORT, "fpub") as conn:
            expected = rows_and_sum(conn.cursor())
        for sub in subs:
            with connections.connect(sub) as conn:
                answer = wait_for(f"{sub.name} applying every row or cut", lambda c=conn, s=sub: rows_and_sum(
                    c.cursor()) == expected or cut_feed(s.name), tmp_path / "replfollow.log")  # fmt: skip
            if answer == "cut":  # fallen too far behind: it syncs again as an operator would have it do
                print(f"  {sub.name}: its feed was cut (the backlog stayed over repl_max_backlog); REPL_SYNC")
                run(sub, "REPL_SYNC ('fpub', 'f')")
            with connections.connect(sub) as conn:
                assert rows_and_sum(conn.cursor()) == expected
        assert proc.poll() is None, (tmp_path / "replfollow.log").read_text()
    product = max(p(values, 0.99) for values in product_lags.values()) * 1000
    print(f"\nBENCH follower_4subs_1000tps: product={product:.1f} peer={peer:.1f} ratio={product / peer:.3f}")


# --- follower_memory_3m_rows -------------------------------------------------------------------------------


def peak_mb(pid: int) -> float:
    """The process's peak resident size so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_one_follower_applies_a_backlog_of_three_million_rows_within_bounded_memory(
    clusters, settings, tmp_path, jobs_sync, spark
):
    with pg(PUB_PORT, "mpub") as conn:
        conn.execute(TABLE)
    pub, sub = registered("mpub", PUB_PORT, "mpub"), registered("msub", SUB_PORT, "msub")
    subscribe(pub, [sub])
    started = time.perf_counter()
    with pg(PUB_PORT, "mpub") as conn:
        for low in range(1, MEMORY_ROWS + 1, MEMORY_TX_ROWS):
            high = min(MEMORY_ROWS, low + MEMORY_TX_ROWS - 1)
            conn.execute(
                "INSERT INTO t (id, v, amount) SELECT g, 'backlog row ' || g, g * 0.25 "
                f"FROM generate_series({low}, {high}) g"
            )
        expected = rows_and_sum(conn.cursor())
    print(f"\nthe backlog: {MEMORY_ROWS} rows in {MEMORY_ROWS // MEMORY_TX_ROWS} transactions, written in "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    log = tmp_path / "replfollow.log"
    with follower(settings, tmp_path) as proc, pg(SUB_PORT, "msub") as conn:
        started = time.perf_counter()
        peak, shown = 0.0, 0.0
        deadline = time.monotonic() + 1800  # a guard against hanging, not a timing assertion
        while (now := rows_and_sum(conn.cursor())) != expected:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the backlog was never applied\n" + log.read_text()
            peak = max(peak, peak_mb(proc.pid))
            if time.perf_counter() - shown >= 10:
                shown = time.perf_counter()
                print(f"  {shown - started:.0f} s: {now[0]} rows applied, peak {peak:.0f} MB", flush=True)
            time.sleep(0.5)
        peak = max(peak, peak_mb(proc.pid))
        print(f"applied in {time.perf_counter() - started:.0f} s; replfollow's peak resident size {peak:.0f} MB")
    print(f"\nBENCH follower_memory_3m_rows: product={peak:.1f} peer={CEILING_MB:.0f} ratio={peak / CEILING_MB:.3f}")

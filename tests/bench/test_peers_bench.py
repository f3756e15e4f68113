"""replication_admin beside PostgreSQL's own logical replication and pglogical (run on demand: `make bench`).

Two PostgreSQL 15 clusters of the benchmark's own (wal_level=logical, pglogical preloaded when installed), a
publisher on one and a subscriber on the other; each peer replicates its own database, and every workload goes
through the same client (pyodbc, the product's connections). Printed, each with the peers' figures beside:

- backlog apply: N one-row transactions, then 100 transactions of 1,000 rows, written while the peer is stopped
  (subscription disabled; for replication_admin nothing syncing), then timed from the moment it starts until
  the subscriber has every row: transactions or rows per second;
- commit → visible at a steady 50 transactions per second (p50 / p95);
- the publisher's write rate with each peer replicating, against the same writes into an unreplicated
  database of the same cluster (1 and 4 clients, one-row and 1,000-row transactions).

Asserted: every peer delivered every row (counts and key sums equal), nothing else.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import ReplSubscriber, Server
from replication_admin.transactional import sync as trx_sync
from replication_admin.transactional.actions import do_publish
from tests.bench.clusters import HAS_PGLOGICAL, TABLE, builtin_subscription, pg, registered, two_clusters
from tests.bench.test_capture_bench import write
from tests.bench.test_trx_bench import report
from tests.transactional.test_trx_replication import run

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

# The benchmark's two clusters (BENCH_PEER_PORT and the next one: another run on the machine may hold the default).
PUB_PORT = int(os.environ.get("BENCH_PEER_PORT", "5441"))
SUB_PORT = PUB_PORT + 1
SMALL = int(os.environ.get("BENCH_PEER_TXNS", "3000"))
BULK_TXNS, BULK_ROWS = int(os.environ.get("BENCH_PEER_BULK_TXNS", "100")), 1000
LATENCY_TXNS, RATE = int(os.environ.get("BENCH_PEER_LATENCY_TXNS", "500")), 50.0
# BENCH_PEER_ONLY=latency measures commit → visible alone (no backlogs, write rates or sustained load).
ONLY_LATENCY = os.environ.get("BENCH_PEER_ONLY", "") == "latency"
# Only the backlog figures (the latency, write-rate and sustained parts left out): a quick comparison of applies.
BACKLOG_ONLY = os.environ.get("BENCH_PEER_BACKLOG_ONLY", "") not in ("", "0")


def rows_and_sum(port: int, db: str) -> tuple[int, int]:
    with pg(port, db) as conn:
        count, total = conn.execute("SELECT count(*), coalesce(sum(id), 0) FROM t").fetchone()
    return int(count), int(total)


def wait_until(port: int, db: str, count: int, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    with pg(port, db) as conn:
        while conn.execute("SELECT count(*) FROM t").fetchone()[0] < count:
            assert time.monotonic() < deadline, f"{db} never reached {count} rows"
            time.sleep(0.002)


@dataclass
class Peer:
    """One way of replicating pub database `name` to sub database `name`: start/stop its apply."""

    name: str
    start: Callable[[], None]
    stop: Callable[[], None]
    follow: Callable[[threading.Event], None] | None = None  # runs the apply until the event is set


def builtin_peer() -> Peer:
    db = "peer_builtin"
    builtin_subscription(PUB_PORT, db, SUB_PORT, db)

    def toggle(on: bool) -> None:
        with pg(SUB_PORT, db) as conn:
            conn.execute(f"ALTER SUBSCRIPTION bench {'ENABLE' if on else 'DISABLE'}")

    return Peer(db, lambda: toggle(True), lambda: toggle(False))


def pglogical_peer() -> Peer:
    db = "peer_pglogical"
    for port, node in ((PUB_PORT, "provider"), (SUB_PORT, "subscriber")):
        with pg(port, db) as conn:
            conn.execute("CREATE EXTENSION pglogical")
            conn.execute(TABLE)
            dsn = f"host=127.0.0.1 port={port} user=postgres dbname={db}"
            conn.execute("SELECT pglogical.create_node(node_name := %s, dsn := %s)", [node, dsn])
    with pg(PUB_PORT, db) as conn:
        conn.execute("SELECT pglogical.replication_set_add_table('default', 't')")
    with pg(SUB_PORT, db) as conn:
        conn.execute(
            "SELECT pglogical.create_subscription(subscription_name := 'bench', provider_dsn := %s, "
            "synchronize_structure := false, synchronize_data := false)",
            [f"host=127.0.0.1 port={PUB_PORT} user=postgres dbname={db}"],
        )
        deadline = time.monotonic() + 60
        while conn.execute("SELECT status FROM pglogical.show_subscription_status('bench')").fetchone()[0] != (
            "replicating"
        ):
            assert time.monotonic() < deadline, "pglogical's subscription never started replicating"
            time.sleep(0.2)

    def toggle(on: bool) -> None:
        with pg(SUB_PORT, db) as conn:
            verb = "enable" if on else "disable"
            conn.execute(f"SELECT pglogical.alter_subscription_{verb}('bench', true)")

    return Peer(db, lambda: toggle(True), lambda: toggle(False))


def product_peer(capture: str) -> Peer:
    """replication_admin capturing from the WAL ("wal") or by triggers ("triggers")."""
    db = f"peer_product_{capture}"
    with pg(PUB_PORT, db) as conn:  # the subscription creates the subscriber's table
        conn.execute(TABLE)
    pub_name, sub_name = f"p{capture}", f"s{capture}"
    pub, sub = registered(pub_name, PUB_PORT, db), registered(sub_name, SUB_PORT, db)
    do_publish(Actor.command(), pub, "b", "b.log", False, None, capture=capture)
    run(pub, "REPL_PUB_ADD ('b', 't', 2, 0, null)")
    run(sub, f"REPL_SERVER ('{pub_name}', '{pub_name}'); REPL_SUBSCRIBE ('{pub_name}', 'b'); "
             f"REPL_INIT_COPY ('{pub_name}', 'b')")  # fmt: skip

    def sync() -> None:
        run(sub, f"REPL_SYNC ('{pub_name}', 'b')")

    def follow(done: threading.Event) -> None:
        run(sub, "SYNC_REPL()")
        trx_sync.follow_loop(done.is_set, interval=0.05)
        ReplSubscriber.objects.filter(subscriber=sub_name).update(follow=False)  # the next peer's loop is its own

    return Peer(db, sync, lambda: None, follow)


@pytest.fixture
def clusters(db) -> Iterator[None]:
    names = ("peer_builtin", "peer_pglogical", "peer_product_wal", "peer_product_triggers", "plain")
    with two_clusters(PUB_PORT, SUB_PORT, names, pglogical=True):
        yield


def write_each(db: str, first: int, count: int, rows: int = 1) -> None:
    """`count` transactions of `rows` new rows each, through pyodbc (one client, committed one by one)."""
    server = _odbc(db)
    write(server, "t", 1, count, rows, first)


def _odbc(db: str) -> Server:
    return registered(f"w_{db}", PUB_PORT, db)


def backlog(peer: Peer, first: int, txns: int, rows: int) -> float:
    """Rows of a backlog applied per second (the peer stopped while the backlog is written). A peer's apply
    worker takes a moment to start after its subscription is enabled: its time runs from the first row of the
    backlog on the subscriber to the last. replication_admin's runs from the start of its REPL_SYNC (its first
    rows commit with its first batch) to its end."""
    peer.stop()
    write_each(peer.name, first, txns, rows)
    expected = rows_and_sum(PUB_PORT, peer.name)[0]
    if peer.follow is not None:
        started = time.perf_counter()
        peer.start()  # replication_admin: one REPL_SYNC applies the backlog
        elapsed = time.perf_counter() - started
        assert rows_and_sum(SUB_PORT, peer.name)[0] == expected
        return txns * rows / elapsed
    peer.start()
    wait_until(SUB_PORT, peer.name, expected - txns * rows + 1)
    started = time.perf_counter()
    wait_until(SUB_PORT, peer.name, expected)
    return (txns * rows - 1) / (time.perf_counter() - started)


def latency(peer: Peer, first: int) -> tuple[float, float]:
    """Commit → visible on the subscriber, p50 and p95, at RATE transactions per second."""
    done = threading.Event()
    seen: dict[int, float] = {}
    committed: dict[int, float] = {}
    server = _odbc(peer.name)  # registered here: the catalog is not written from the writer's thread

    def watch() -> None:
        with pg(SUB_PORT, peer.name) as conn:
            while len(seen) < LATENCY_TXNS and not done.is_set():
                top = conn.execute("SELECT coalesce(max(id), 0) FROM t WHERE id >= %s", [first]).fetchone()[0]
                now = time.perf_counter()
                for n in range(first + len(seen), int(top) + 1):
                    seen[n] = now
                time.sleep(0.0005)

    def writer() -> None:
        try:
            with connections.connect(server, autocommit=False) as conn:
                cursor = conn.cursor()
                for n in range(first, first + LATENCY_TXNS):
                    cursor.execute("INSERT INTO t (id, v, amount) VALUES (?, 'live', 1.00)", n)
                    conn.commit()
                    committed[n] = time.perf_counter()
                    time.sleep(1.0 / RATE)
            deadline = time.perf_counter() + 30
            while len(seen) < LATENCY_TXNS and time.perf_counter() < deadline:
                time.sleep(0.01)
        finally:
            done.set()

    watcher, writing = threading.Thread(target=watch), threading.Thread(target=writer)
    watcher.start()
    writing.start()
    if peer.follow is not None:
        peer.follow(done)
    writing.join()
    watcher.join()
    ordered = sorted(seen[n] - committed[n] for n in committed if n in seen)
    assert len(ordered) == LATENCY_TXNS
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


def test_replication_admin_beside_postgresql_logical_replication_and_pglogical(clusters, jobs_sync, spark):
    peers = [
        builtin_peer(),
        *([pglogical_peer()] if HAS_PGLOGICAL and not ONLY_LATENCY else []),
        product_peer("wal"),
        product_peer("triggers"),
    ]
    if not HAS_PGLOGICAL:
        print("\npglogical is not installed (apt-get install postgresql-15-pglogical): its column is left out")
    results: dict[str, dict[str, float]] = {p.name: {} for p in peers}
    starts: dict[str, int] = {}  # the next free key of each database
    for peer in peers:
        peer.start()
        first = 1
        if not ONLY_LATENCY:
            results[peer.name]["small_tx_per_s"] = backlog(peer, first, SMALL, 1)
            first += SMALL
            results[peer.name]["bulk_rows_per_s"] = backlog(peer, first, BULK_TXNS, BULK_ROWS)
            first += BULK_TXNS * BULK_ROWS
        if BACKLOG_ONLY:
            peer.start()
            wait_until(SUB_PORT, peer.name, rows_and_sum(PUB_PORT, peer.name)[0])
            assert rows_and_sum(SUB_PORT, peer.name) == rows_and_sum(PUB_PORT, peer.name)
            peer.stop()
            continue
        peer.start()
        p50, p95 = latency(peer, first)
        first += LATENCY_TXNS
        results[peer.name] |= {"latency_p50_ms": p50 * 1000, "latency_p95_ms": p95 * 1000}
        if peer.follow is not None:
            peer.start()  # the product's subscriber catches up before the contents are compared
        wait_until(SUB_PORT, peer.name, rows_and_sum(PUB_PORT, peer.name)[0])
        assert rows_and_sum(SUB_PORT, peer.name) == rows_and_sum(PUB_PORT, peer.name)
        peer.stop()
        starts[peer.name] = first
    if BACKLOG_ONLY:
        backlog_lines(results)
        return
    builtin = results["peer_builtin"]
    for capture in ("triggers", "wal"):
        product = results[f"peer_product_{capture}"]
        for quantile in ("p50", "p95"):
            mine, peer_ms = product[f"latency_{quantile}_ms"], builtin[f"latency_{quantile}_ms"]
            report(f"trx_latency_{quantile}_ms", product=mine, peer=peer_ms, ratio=mine / peer_ms, capture=capture)
    if ONLY_LATENCY:
        return
    backlog_lines(results)
    # The publisher's write rate: the unreplicated database and each peer with only that peer replicating,
    # alternated twice per workload (the best round counts), so they share the machine's state.
    with pg(PUB_PORT, "plain") as conn:
        conn.execute(TABLE)
    starts["plain"] = 1
    baseline: dict[str, float] = {}
    for clients in (1, 4):
        for rows, txns in ((1, 1500), (1000, 30)):
            key = f"write_{clients}c_{rows}r_rows_per_s"
            for _round in range(2):
                for peer in [None, *peers]:
                    name = "plain" if peer is None else peer.name
                    if peer is not None:
                        peer.start()  # caught up before the timed writes: no backlog decoded meanwhile
                        wait_until(SUB_PORT, name, rows_and_sum(PUB_PORT, name)[0])
                    rate = write(_odbc(name), "t", clients, txns, rows, starts[name])
                    starts[name] += clients * txns * rows
                    if peer is None:
                        baseline[key] = max(baseline.get(key, 0.0), rate)
                    else:
                        peer.stop()
                        results[name][key] = max(results[name].get(key, 0.0), rate)
    for peer in peers:
        peer.start()
        wait_until(SUB_PORT, peer.name, rows_and_sum(PUB_PORT, peer.name)[0])
        assert rows_and_sum(SUB_PORT, peer.name) == rows_and_sum(PUB_PORT, peer.name)
    for name, figures in results.items():
        ratios = {k.replace("_rows_per_s", "_vs_unreplicated"): v / baseline[k] for k, v in figures.items()
                  if k in baseline}  # fmt: skip
        report(f"peers {name}", **figures, **ratios)
    # Target: no cut and no falling behind at 1,000 tx/s for 60 s (a backlog that stays bounded).
    for peer in peers:
        if peer.follow is not None:
            peer.start()
            figures = sustained(peer, starts[peer.name])
            assert rows_and_sum(SUB_PORT, peer.name) == rows_and_sum(PUB_PORT, peer.name)
            report(f"peers sustained {SUSTAINED_RATE:.0f} tx/s for {SUSTAINED_SECONDS:.0f} s ({peer.name})", **figures)
    for capture in ("wal", "triggers"):
        product = results[f"peer_product_{capture}"]
        report(
            f"peers replication_admin ({capture}) / PostgreSQL logical replication",
            small_backlog=product["small_tx_per_s"] / builtin["small_tx_per_s"],
            bulk_backlog=product["bulk_rows_per_s"] / builtin["bulk_rows_per_s"],
            latency_p50=product["latency_p50_ms"] / builtin["latency_p50_ms"],
        )


def backlog_lines(results: dict[str, dict[str, float]]) -> None:
    """The backlog figures of each capture mode beside PostgreSQL's logical replication applying the same backlog:
    one-row transactions per second and rows of 1,000-row transactions per second."""
    builtin = results["peer_builtin"]
    for capture in ("wal", "triggers"):
        product = results[f"peer_product_{capture}"]
        for name, key in (
            ("trx_backlog_1row_pg_pg", "small_tx_per_s"),
            ("trx_backlog_1000row_pg_pg", "bulk_rows_per_s"),
        ):
            print(
                f"\nBENCH {name}_{capture}: product={product[key]:.1f} peer={builtin[key]:.1f} "
                f"ratio={product[key] / builtin[key]:.3f}"
            )


SUSTAINED_RATE = float(os.environ.get("BENCH_SUSTAINED_RATE", "1000"))
SUSTAINED_SECONDS = float(os.environ.get("BENCH_SUSTAINED_SECONDS", "60"))


def sustained(peer: Peer, first: int) -> dict[str, float]:
    """One-row transactions at SUSTAINED_RATE for SUSTAINED_SECONDS while the follower applies them: the largest
    backlog seen (publisher rows not yet on the subscriber, sampled every 0.25 s), the backlog at the end of the
    writes, the seconds to drain it, and whether the feed was cut."""
    done, writing_done = threading.Event(), threading.Event()
    samples: list[int] = []
    server = _odbc(peer.name)
    written = {"n": 0}

    def writer() -> None:
        try:
            with connections.connect(server, autocommit=False) as conn:
                cursor = conn.cursor()
                started = time.perf_counter()
                total = int(SUSTAINED_RATE * SUSTAINED_SECONDS)
                for i in range(total):
                    cursor.execute("INSERT INTO t (id, v, amount) VALUES (?, 'steady', 1.00)", first + i)
                    conn.commit()
                    written["n"] = i + 1
                    ahead = started + (i + 1) / SUSTAINED_RATE - time.perf_counter()
                    if ahead > 0:
                        time.sleep(ahead)
        finally:
            drained["written"] = time.perf_counter()
            writing_done.set()

    def sampler() -> None:
        with pg(SUB_PORT, peer.name) as conn:
            while not writing_done.is_set():
                applied = conn.execute("SELECT count(*) FROM t WHERE id >= %s", [first]).fetchone()[0]
                samples.append(written["n"] - int(applied))
                time.sleep(0.25)
        wait_until(SUB_PORT, peer.name, rows_and_sum(PUB_PORT, peer.name)[0], seconds=300)
        drained["at"] = time.perf_counter()
        done.set()

    drained: dict[str, float] = {}
    threads = [threading.Thread(target=writer), threading.Thread(target=sampler)]
    for thread in threads:
        thread.start()
    assert peer.follow is not None
    peer.follow(done)
    for thread in threads:
        thread.join()
    cut = ReplSubscriber.objects.filter(
        subscriber=f"s{peer.name.rsplit('_', 1)[-1]}", state=ReplSubscriber.DISCONNECTED
    )
    return {
        "tx_per_s_written": written["n"] / SUSTAINED_SECONDS,
        "max_backlog_rows": float(max(samples or [0])),
        "end_backlog_rows": float(samples[-1] if samples else 0),
        "drain_s": drained["at"] - drained["written"],
        "cut": float(cut.exists()),
    }

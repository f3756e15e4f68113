"""Bi-directional snapshot replication benchmark (run on demand: `make bench`). It prints figures and
ratios measured in the same run; it asserts correctness only (conflicts recorded, replicas equal).

A PostgreSQL publisher table of 1,000,000 rows x 4 columns (+ ROWGUID), subscribed by a MariaDB and a
SQLite server through the statement language:

- the full copy of both subscriber tables (REPL_INIT_SNAPSHOT, 50,000 rows per commit): the initial copy,
  then a re-copy of the filled tables, then the MariaDB one again at 1,000 rows per commit;
- a sync (REPL_UPDATE_SNAPSHOT) of 10,000 changed rows: 5,000 on the publisher and 2,500 on each
  subscriber (updates, inserts and deletes), 1,000 of whose keys (10%) are changed on the publisher and
  on a subscriber, so they conflict (update/update, insert/insert, update/delete and delete/update);
  median of 3 runs, each on a fresh change set, with the job's phase timings;
- the ratio of the re-copy's time (both subscribers) to the sync's;
- `BENCH bidir_initial_copy_1m`: product = a MariaDB subscriber's initial copy of a PostgreSQL publisher's
  1,000,000 rows, peer = a full refresh of the same rows (a snapshot, PostgreSQL -> MariaDB) in the same run;
  `BENCH bidir_recopy_1m`: product = the re-copy of the filled subscriber, peer = the initial copy. Ratios are
  peer / product: higher is better. BENCH_BIDIR_COPY_ROWS sets the rows while iterating.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest

from replication_admin.core.audit import Actor
from replication_admin.models import ConflictBackup, JobRun
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import assert_converged
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.bench, pytest.mark.spark, pytest.mark.live_db]

ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
SYNC_RUNS = 3
CHANGES = 10_000
CONFLICTS = 1_000


def report(name: str, **figures) -> None:
    text = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
    print(f"\nBENCH {name}: {text}")


def run(text: str):
    started = time.perf_counter()
    outcome = execute(Actor.command(), text, wait=True)[-1]
    elapsed = time.perf_counter() - started
    assert outcome.ok, outcome.message
    return elapsed, outcome


def init(monkeypatch, server, rows_per_commit: int):
    """REPL_INIT_SNAPSHOT of one subscriber."""
    return run(f"REPL_INIT_SNAPSHOT ('{server.name}', 'bpg.items', 2, {rows_per_commit})")


# --- the change sets ---------------------------------------------------------------------------------------
#
# Existing rows are addressed by slot: slot s of run r is the key s * STRIDE + r + 1, so every run
# changes its own keys, spread over the whole table. New keys lie above the table's keys, per run.


@dataclass(frozen=True)
class Keys:
    """Slots first..last (inclusive) of existing keys; for inserts, offsets of new keys."""

    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


STRIDE = ROWS // 22_000  # the highest slot used is 21,899
assert STRIDE >= SYNC_RUNS, "BENCH_ROWS must be at least 66,000"

# Publisher, 5,000 changes: 4,000 updates, 500 deletes, 500 inserts.
PUB = {"update": [Keys(0, 3_999)], "delete": [Keys(4_000, 4_499)], "insert": [Keys(1, 500)]}
# Each subscriber, 2,500 changes, 500 of them on keys the publisher changes too:
#   400 updates of rows the publisher updates (U conflicts), 25 deletes of rows it updates and 25 updates
#   of rows it deletes (D conflicts), 50 inserts of keys it inserts (I conflicts); and 1,750 updates,
#   150 deletes and 100 inserts of keys nobody else touches.
SUBS = {
    "bmy": {
        "update": [Keys(0, 399), Keys(4_000, 4_024), Keys(10_000, 11_749)],
        "delete": [Keys(400, 424), Keys(11_750, 11_899)],
        "insert": [Keys(1, 50), Keys(1_001, 1_100)],
    },
    "blite": {
        "update": [Keys(500, 899), Keys(4_100, 4_124), Keys(20_000, 21_749)],
        "delete": [Keys(900, 924), Keys(21_750, 21_899)],
        "insert": [Keys(101, 150), Keys(2_001, 2_100)],
    },
}


def count(changes: dict[str, list[Keys]]) -> int:
    return sum(k.count for keys in changes.values() for k in keys)


assert count(PUB) + sum(count(c) for c in SUBS.values()) == CHANGES


def existing(keys: Keys, run_: int) -> tuple[str, list]:
    """A set-based condition on the slots' keys: id % STRIDE = run + 1 within the slots' key range."""
    lo, hi = keys.first * STRIDE + run_ + 1, keys.last * STRIDE + run_ + 1
    return f"id % {STRIDE} = {(run_ + 1) % STRIDE} AND id BETWEEN ? AND ?", [lo, hi]


def new_keys(keys: Keys, run_: int) -> tuple[int, int]:
    base = 2 * ROWS + run_ * 10_000
    return base + keys.first, base + keys.last


def insert_sql(server, lo: int, hi: int, name: str, price: str) -> str:
    lo, hi = int(lo), int(hi)
    if server.dialect == "postgresql":
        return (
            "INSERT INTO items (id, name, price, at) "
            f"SELECT g, '{name}', {price}, TIMESTAMP '2024-06-01 12:00:00' FROM generate_series({lo}, {hi}) g"
        )
    if server.dialect == "mysql":  # the Sequence engine's seq_<from>_to_<to> tables
        return (
            f"INSERT INTO items (id, name, price, at) SELECT seq, '{name}', {price}, '2024-06-01 12:00:00' "
            f"FROM seq_{lo}_to_{hi}"
        )
    return (
        f"WITH RECURSIVE g(x) AS (SELECT {lo} UNION ALL SELECT x + 1 FROM g WHERE x < {hi}) "
        f"INSERT INTO items (id, name, price, at) SELECT x, '{name}', '{price}', '2024-06-01 12:00:00.000000' FROM g"
    )


def change(server, changes: dict[str, list[Keys]], run_: int, price: str) -> int:
    """Apply one node's change set with set-based statements; returns the number of rows changed."""
    name = f"{server.name} run {run_}"
    done = 0
    for keys in changes["update"]:
        where, params = existing(keys, run_)
        run_sql(server, f"UPDATE items SET name = '{name}', price = {price} WHERE {where}", params)
        done += keys.count
    for keys in changes["delete"]:
        where, params = existing(keys, run_)
        run_sql(server, f"DELETE FROM items WHERE {where}", params)
        done += keys.count
    for keys in changes["insert"]:
        run_sql(server, insert_sql(server, *new_keys(keys, run_), name, price))
        done += keys.count
    return done


def pending(server) -> int:
    return fetch_all(server, "SELECT COUNT(*) FROM RLOG_items")[0][0]


# --- the benchmark -----------------------------------------------------------------------------------------


def test_sync_of_10000_changed_rows_against_a_full_copy_of_the_subscribers(make_server, jobs_sync, spark, monkeypatch):
    pub = make_server("postgresql", "bpg")
    subs = {"bmy": make_server("mysql", "bmy"), "blite": make_server("sqlite", "blite")}
    started = time.perf_counter()
    run_sql(pub, "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(40), price numeric(12,2), at timestamp(6))")
    run_sql(
        pub,
        "INSERT INTO items SELECT g, 'item ' || g, (g % 100000) / 100.0, "
        "TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, ?) g",
        [ROWS],
    )
    run_sql(pub, "ANALYZE items")
    loaded = time.perf_counter() - started
    published, _ = run(
        "REPL_CREATE_SNAPSHOT_PUB ('bpg.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('bmy', 'bpg.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('blite', 'bpg.items', 2)"
    )
    run_sql(pub, "ANALYZE items")
    print(f"\n  loaded {ROWS} rows in {loaded:.1f} s; published and subscribed in {published:.1f} s")

    # 1. The full copy of both subscriber tables: the initial copy, then a re-copy of the filled tables
    #    (what re-initialising the subscribers instead of syncing them costs); then the MariaDB one again
    #    at 1,000 rows per commit. No subscriber has rows of its own origin yet.
    copies: dict[str, dict[str, float]] = {"initial copy": {}, "re-copy": {}}
    for what, copied in copies.items():
        for name in subs:
            elapsed, outcome = init(monkeypatch, subs[name], 50_000)
            assert outcome.details["rows"] == ROWS, outcome.details
            copied[name] = elapsed
            report(
                f"{what} PostgreSQL->{subs[name].dialect} (50000 rows per commit)",
                rows=ROWS,
                seconds=elapsed,
                rows_per_s=ROWS / elapsed,
                phases=str(JobRun.objects.get(pk=outcome.job_id).timings),
            )
        report(
            f"{what} of both subscriber tables",
            rows=2 * ROWS,
            seconds=sum(copied.values()),
            rows_per_s=2 * ROWS / sum(copied.values()),
        )
    elapsed, outcome = init(monkeypatch, subs["bmy"], 1_000)
    assert outcome.details["rows"] == ROWS, outcome.details
    report(
        "re-copy PostgreSQL->mysql (1000 rows per commit)",
        rows=ROWS,
        seconds=elapsed,
        rows_per_s=ROWS / elapsed,
        vs_50000_per_commit=elapsed / copies["re-copy"]["bmy"],
        phases=str(JobRun.objects.get(pk=outcome.job_id).timings),
    )
    assert_converged(pub, *subs.values())
    full = sum(copies["re-copy"].values())

    # 2. Syncs of 10,000 changed rows, 1,000 keys conflicting; each run on a fresh change set.
    syncs = []
    for run_ in range(SYNC_RUNS):
        made = change(pub, PUB, run_, "11.11")
        for name, server in subs.items():
            made += change(server, SUBS[name], run_, {"bmy": "22.22", "blite": "33.33"}[name])
        assert made == CHANGES
        assert {name: pending(server) for name, server in subs.items()} == {n: count(c) for n, c in SUBS.items()}
        time.sleep(1)  # let the write burst's background work (autovacuum, flushing) pass: time the sync
        elapsed, outcome = run("REPL_UPDATE_SNAPSHOT ('bpg.items', 2)")
        job = JobRun.objects.get(pk=outcome.job_id)
        summary = outcome.details
        assert summary["conflicts"] == CONFLICTS, summary
        assert ConflictBackup.objects.filter(job=job).count() == CONFLICTS
        for name in subs:
            assert summary["subscribers"][name]["pulled"] == count(SUBS[name]), summary
            assert summary["subscribers"][name]["waiting"] == 0, summary
        assert all(pending(server) == 0 for server in subs.values())
        checked = time.perf_counter()
        assert_converged(pub, *subs.values())
        checked = time.perf_counter() - checked
        syncs.append(elapsed)
        print(
            f"\n  sync run {run_}: {elapsed:.3f} s ({CHANGES / elapsed:.0f} rows/s), phases {job.timings}, "
            f"summary {summary['subscribers']}; replicas compared equal in {checked:.1f} s"
        )
    assert ConflictBackup.objects.count() == SYNC_RUNS * CONFLICTS
    counts = {fetch_all(server, "SELECT COUNT(*) FROM items")[0][0] for server in (pub, *subs.values())}
    # Per run 800 rows go (the 50 subscriber deletes of rows the publisher updated lose) and 700 keys are new.
    assert counts == {ROWS - SYNC_RUNS * (800 - 700)}, counts

    median = sorted(syncs)[len(syncs) // 2]
    report(
        "sync of 10000 changed rows, 10% conflicting, 1 publisher + 2 subscribers (median of 3)",
        rows=ROWS,
        changes=CHANGES,
        conflicts=CONFLICTS,
        seconds=median,
        rows_per_s=CHANGES / median,
        runs=", ".join(f"{s:.3f}" for s in syncs),
    )
    report(
        "full copy / sync",
        recopy_s=full,
        initial_copy_s=sum(copies["initial copy"].values()),
        sync_s=median,
        ratio=full / median,
        ratio_initial_copy=sum(copies["initial copy"].values()) / median,
    )


def test_bidir_initial_copy_and_recopy_against_a_full_refresh(make_server, jobs_sync, spark):
    rows = int(os.environ.get("BENCH_BIDIR_COPY_ROWS", "1000000"))
    pub, sub = make_server("postgresql", "cpg"), make_server("mysql", "cmy")
    run_sql(pub, "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(40), price numeric(12,2), at timestamp(6))")
    run_sql(
        pub,
        "INSERT INTO items SELECT g, 'item ' || g, (g % 100000) / 100.0, "
        "TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, ?) g",
        [rows],
    )
    run("REPL_CREATE_SNAPSHOT_PUB ('cpg.items', 2); REPL_CREATE_SNAPSHOT_SUB ('cmy', 'cpg.items', 2)")
    run_sql(pub, "ANALYZE items")
    run("create nonincremental snapshot cmy.items_full as 'select * from cpg.items'")
    refresh, outcome = run("update snapshot cmy.items_full")
    assert outcome.details["rows"] == rows
    initial, outcome = run("REPL_INIT_SNAPSHOT ('cmy', 'cpg.items', 2, 50000)")
    assert outcome.details["rows"] == rows, outcome.details
    recopy, outcome = run("REPL_INIT_SNAPSHOT ('cmy', 'cpg.items', 2, 50000)")
    assert outcome.details["rows"] == rows, outcome.details
    assert fetch_all(sub, "SELECT COUNT(*) FROM items") == [(rows,)]
    print(
        f"\n  {rows} rows: path {outcome.details.get('path')}, phases {JobRun.objects.get(pk=outcome.job_id).timings}"
    )
    print(f"BENCH bidir_initial_copy_1m: product={initial:.3f} peer={refresh:.3f} ratio={refresh / initial:.3f}")
    print(f"BENCH bidir_recopy_1m: product={recopy:.3f} peer={initial:.3f} ratio={initial / recopy:.3f}")

"""Transactional replication benchmark (run on demand: `make bench`). It prints figures and ratios
measured in the same run; it asserts correctness only (every transaction arrived, replicas equal).

A PostgreSQL publisher, a MariaDB subscriber. Small transactions: one row each (insert, or update of
an existing row), committed one by one.

- baseline: PostgreSQL's own rate for those transactions into an unpublished table of the same shape;
- capture: the same transactions into the published table (the triggers log them);
- apply throughput: REPL_SYNC of a backlog of those transactions, in transactions per second, and
  its ratio to the baseline;
- in-sync latency: the follower (what `manage.py replfollow` runs) applies while a writer commits
  transactions at a steady rate; for each one, the time from its commit to the moment it is visible on
  the subscriber (p50, p95, max).
"""

from __future__ import annotations

import os
import statistics
import threading
import time

import pytest

from replication_admin.core import connections
from replication_admin.transactional import sync as trx_sync
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import run, sql

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

TXNS = int(os.environ.get("BENCH_TXNS", "3000"))
LATENCY_TXNS = int(os.environ.get("BENCH_LATENCY_TXNS", "1000"))
RATE = float(os.environ.get("BENCH_RATE", "50"))  # transactions per second during the latency run


def report(name: str, **figures) -> None:
    text = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
    print(f"\nBENCH {name}: {text}")


def commit_each(server, table: str, first: int, count: int) -> float:
    """Insert `count` rows, one transaction each; returns the seconds taken."""
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        started = time.perf_counter()
        for n in range(first, first + count):
            cursor.execute(f"INSERT INTO {table} (id, v, amount) VALUES (?, ?, ?)", n, f"value {n}", f"{n}.25")
            conn.commit()
        return time.perf_counter() - started


def test_transactional_apply_throughput_and_in_sync_latency(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pg1")
    sub = make_server("mysql", "my2")
    for table in ("bench", "plain"):
        sql(pub, f"CREATE TABLE {table} (id integer PRIMARY KEY, v varchar(40), amount numeric(12, 2))")
    run(pub, "REPL_PUBLISH ('b', 'b.log'); REPL_PUB_ADD ('b', 'bench', 2, 0, null)")
    run(sub, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'b'); REPL_INIT_COPY ('pg1', 'b')")

    baseline = commit_each(pub, "plain", 1, TXNS)
    captured = commit_each(pub, "bench", 1, TXNS)
    started = time.perf_counter()
    outcome = run(sub, "REPL_SYNC ('pg1', 'b')")[0]
    applied = time.perf_counter() - started
    assert outcome.details["applied"] == TXNS
    report(
        "trx throughput",
        txns=TXNS,
        pg_insert_txns_per_s=TXNS / baseline,
        captured_txns_per_s=TXNS / captured,
        capture_cost=captured / baseline,
        apply_txns_per_s=TXNS / applied,
        apply_vs_pg_insert=(TXNS / applied) / (TXNS / baseline),
    )

    run(sub, "SYNC_REPL()")
    latencies: list[float] = []
    done = threading.Event()
    first = TXNS + 1

    def write_and_watch() -> None:
        seen: dict[int, float] = {}
        committed: dict[int, float] = {}

        def watch() -> None:
            with connections.connect(sub) as conn:
                cursor = conn.cursor()
                while len(seen) < LATENCY_TXNS and not done.is_set():
                    top = cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM bench WHERE id >= {first}").fetchone()[0]
                    now = time.perf_counter()
                    for n in range(first + len(seen), int(top) + 1):
                        seen[n] = now
                    time.sleep(0.002)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with connections.connect(pub, autocommit=False) as conn:
                cursor = conn.cursor()
                for n in range(first, first + LATENCY_TXNS):
                    cursor.execute("INSERT INTO bench (id, v, amount) VALUES (?, ?, ?)", n, "live", "1.00")
                    conn.commit()
                    committed[n] = time.perf_counter()
                    time.sleep(1.0 / RATE)
            deadline = time.perf_counter() + 30
            while len(seen) < LATENCY_TXNS and time.perf_counter() < deadline:
                time.sleep(0.05)
        finally:
            done.set()
            watcher.join()
        latencies.extend(seen[n] - committed[n] for n in committed if n in seen)

    writer = threading.Thread(target=write_and_watch)
    writer.start()
    trx_sync.follow_loop(done.is_set, interval=0.05)
    writer.join()
    assert len(latencies) == LATENCY_TXNS
    ordered = sorted(latencies)
    report(
        "trx in-sync latency",
        txns=LATENCY_TXNS,
        rate_per_s=RATE,
        p50_s=statistics.median(ordered),
        p95_s=ordered[int(len(ordered) * 0.95) - 1],
        max_s=ordered[-1],
    )
    assert same(pub, sub, "bench")["equal"]

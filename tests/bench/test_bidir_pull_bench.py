"""Pull benchmark (run on demand: `make bench`): a sync that pulls 20,000 changes of which 2,000
conflict, PostgreSQL publisher and MariaDB subscriber. It prints the sync's time, its pull phase and the
peak Python memory of the process running it (tracemalloc, in a separate run of the same size, since
tracing slows the run), with the default decisions and with a custom resolver decided on Spark. It
asserts correctness only (every change pulled, every conflict kept, replicas equal).

Run it at two commits to compare implementations: the figures are per commit, the machine's noise
shows in the spread of the runs."""

from __future__ import annotations

import os
import time
import tracemalloc

import pytest

from replication_admin.models import ConflictBackup, JobRun
from tests.bench.test_bidir_bench import report, run
from tests.bidir.test_bidir_sync import assert_converged
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.bench, pytest.mark.spark, pytest.mark.live_db]

CHANGES = int(os.environ.get("BENCH_PULL_CHANGES", "20000"))
CONFLICTS = CHANGES // 10
TIMED = 3  # per variant, then one traced run
VARIANTS = ["default decisions", "custom resolver"]
ROWS = max(int(os.environ.get("BENCH_PULL_ROWS", "200000")), len(VARIANTS) * (TIMED + 1) * CHANGES + 1000)


def test_a_pull_of_20000_changes_with_2000_conflicts(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "qpg")
    sub = make_server("mysql", "qmy")
    run_sql(pub, "CREATE TABLE items (id bigint PRIMARY KEY, name varchar(40), price numeric(12,2))")
    run_sql(pub, "INSERT INTO items SELECT g, 'item ' || g, (g % 1000) + 0.5 FROM generate_series(1, ?) g", [ROWS])
    run_sql(pub, "ANALYZE items")
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('qpg.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('qmy', 'qpg.items', 2);"
        "REPL_INIT_SNAPSHOT ('qmy', 'qpg.items', 2, 50000)"
    )
    # A first small sync warms the JVM's code paths the measured ones take.
    run_sql(sub, "UPDATE items SET name = 'warm' WHERE id > ?", [ROWS - 1000])
    run_sql(pub, "UPDATE items SET name = 'warm pub' WHERE id > ?", [ROWS - 100])
    run("REPL_UPDATE_SNAPSHOT ('qpg.items', 2)")
    slot = 0
    for variant in VARIANTS:
        if variant == "custom resolver":  # the cheaper version wins, whichever side it is on
            run(
                "REPL_ADD_SNAPSHOT_CR ('qpg.items', 'U', 'minprice', 10, 'custom', NULL, "
                "'CASE WHEN pub.price < new.price THEN 3 WHEN pub.price > new.price THEN 1 ELSE 0 END')"
            )
        figures: dict[str, float | str] = {}
        timed: list[tuple[float, float, float]] = []
        for traced in [False] * TIMED + [True]:
            lo, hi = slot * CHANGES + 1, (slot + 1) * CHANGES
            slot += 1
            run_sql(sub, "UPDATE items SET name = 'sub', price = 500.25 WHERE id BETWEEN ? AND ?", [lo, hi])
            # Half the conflicts cheaper on the publisher, half dearer.
            run_sql(
                pub, "UPDATE items SET name = 'pub', price = 1 WHERE id BETWEEN ? AND ?", [lo, lo + CONFLICTS // 2 - 1]
            )
            run_sql(
                pub,
                "UPDATE items SET name = 'pub', price = 999 WHERE id BETWEEN ? AND ?",
                [lo + CONFLICTS // 2, lo + CONFLICTS - 1],
            )
            time.sleep(1)
            if traced:
                tracemalloc.start()
            elapsed, outcome = run("REPL_UPDATE_SNAPSHOT ('qpg.items', 2)")
            if traced:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                figures["peak_python_mb"] = peak / 2**20
                figures["traced_s"] = elapsed
            job = JobRun.objects.get(pk=outcome.job_id)
            summary = outcome.details["subscribers"]["qmy"]
            assert summary["pulled"] == CHANGES and summary["conflicts"] == CONFLICTS, summary
            assert ConflictBackup.objects.filter(job=job).count() == CONFLICTS
            if not traced:
                timed.append((elapsed, job.timings.get("pull qmy", 0.0), job.timings.get("push qmy", 0.0)))
            print(f"\n  {variant}, {'traced' if traced else 'timed'}: {elapsed:.3f} s, phases {job.timings}")
        assert fetch_all(sub, "SELECT COUNT(*) FROM RLOG_items") == [(0,)]
        middle = sorted(timed)[len(timed) // 2]
        figures.update(sync_s=middle[0], pull_s=middle[1], push_s=middle[2])
        figures["runs"] = ", ".join(f"{t[0]:.2f}" for t in timed)
        report(f"sync pulling {CHANGES} changes, {CONFLICTS} conflicting ({variant})", rows=ROWS, **figures)
    assert_converged(pub, sub)

"""The cost of a scheduled validation of a 1,000,000-row table, copied transactionally or as an incremental
snapshot (run on demand: `make bench`).

A PostgreSQL publisher and a MariaDB subscriber hold BENCH_VALIDATE_ROWS rows (1,000,000) of one table, copied by
REPL_INIT_COPY; one row of the copy drifts. product = seconds of one validation job (one slice of the default 24,
compared on Spark, with both tables counted); peer = seconds of a compare of the whole table (what an on-demand
validation of SQL Server or SymmetricDS reads: every row of both sides), the product's own compare job. The 24
validations of a cycle find the drifted row in its slice (the last); a second line gives a whole cycle's seconds against the
one full compare."""

from __future__ import annotations

import os
import time

import pytest

from replication_admin.compare import actions
from replication_admin.compare.selectors import compare_result
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun, ReplSubscriber, Server, Snapshot, Validation
from replication_admin.statements import execute
from tests.transactional.test_trx_replication import run, sql

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

ROWS = int(os.environ.get("BENCH_VALIDATE_ROWS", "1000000"))
COMMAND = Actor.command()


def test_one_validation_of_a_million_row_table_against_a_full_compare_of_it(make_server, jobs_sync, spark):
    pub, sub = make_server("postgresql", "pub"), make_server("mysql", "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), amount numeric(12, 2), at timestamp)")
    sql(pub, "INSERT INTO items SELECT g, 'name ' || g, (g % 100000) / 100.0, "
             f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, {ROWS}) g")  # fmt: skip
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    drifted = ROWS - 17  # in the last slice: the cycle's other validations move on, that one finds it
    sql(sub, f"UPDATE items SET name = 'drifted' WHERE id = {drifted}")
    subscription = ReplSubscriber.objects.get(subscriber="sub")

    seconds = []
    for _ in range(24):
        started = time.perf_counter()
        (job,) = actions.do_validate(COMMAND, subscription, "items", sync=True)
        seconds.append(time.perf_counter() - started)
        assert JobRun.objects.get(pk=job.pk).state == JobRun.State.SUCCEEDED
    verdicts = list(Validation.objects.filter(subscription=subscription).order_by("at").values_list(
        "slice_index", "verdict", "drift"))  # fmt: skip
    assert verdicts == [(i, "equal", 0) for i in range(23)] + [(23, "drift", 1)], verdicts

    started = time.perf_counter()
    full = actions.do_start_compare(COMMAND, Server.objects.get(name="pub"), "items", Server.objects.get(name="sub"),
                                    "items")  # fmt: skip
    peer = time.perf_counter() - started
    result = compare_result(JobRun.objects.get(pk=full.pk))
    assert result is not None and result.different == 1 and result.left_count == ROWS
    one = sorted(seconds)[len(seconds) // 2]
    print(
        f"\nBENCH validate_{ROWS // 1000}k_one_slice_s: product={one:.2f} peer={peer:.2f} ratio={peer / one:.2f}"
        f"  (median of 24; a slice of {ROWS // 24} rows of each side)"
        f"\nBENCH validate_{ROWS // 1000}k_whole_cycle_s: product={sum(seconds):.2f} peer={peer:.2f} "
        f"ratio={peer / sum(seconds):.2f}  (24 validations, every row once)"
    )


def test_one_validation_of_a_million_row_snapshot_against_a_full_compare_of_it(make_server, jobs_sync, spark):
    """The same figure for an incremental snapshot (PostgreSQL source, MariaDB destination): product = the median
    of three validations of one slice each (a snapshot log, so a difference would be refreshed incrementally
    first); peer = the snapshot's compare with its source, every row."""
    source, _dest = make_server("postgresql", "src"), make_server("mysql", "dst")
    sql(source, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), amount numeric(12, 2), at timestamp)")
    sql(source, "INSERT INTO items SELECT g, 'name ' || g, (g % 100000) / 100.0, "
                f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, {ROWS}) g")  # fmt: skip
    for text in ("create snapshot log for items", "create snapshot dst.items from src.items"):
        assert all(o.ok for o in execute(COMMAND, text, context=Server.objects.get(name="src"), wait=True)), text
    snapshot = Snapshot.objects.get(name="dst.items")
    seconds = []
    for _ in range(3):
        started = time.perf_counter()
        job = actions.do_validate_snapshot(COMMAND, snapshot, sync=True)
        seconds.append(time.perf_counter() - started)
        assert Validation.objects.get(job=job.pk).verdict == "equal"
    started = time.perf_counter()
    full = actions.do_compare_snapshot(COMMAND, snapshot, sync=True)
    peer = time.perf_counter() - started
    result = compare_result(JobRun.objects.get(pk=full.pk))
    assert result is not None and result.equal and result.left_count == ROWS
    one = sorted(seconds)[1]
    print(
        f"\nBENCH validate_snapshot_{ROWS // 1000}k_one_slice_s: product={one:.2f} peer={peer:.2f} "
        f"ratio={peer / one:.2f}  (median of 3; a slice of {ROWS // 24} rows of each side)"
    )

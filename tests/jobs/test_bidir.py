"""Bi-directional snapshot replication across three nodes on live databases and a real Spark:
a PostgreSQL publisher, MariaDB and SQLite subscribers, driven through the statement language.

Replicas are compared with the compare job (counts, keys and a hash of every row, ROWGUID included)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from replication_admin.actions.audit import Actor
from replication_admin.actions.jobs import do_start_compare
from replication_admin.actions.statements import execute
from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from replication_admin.models import ConflictBackup, JobRun, SnapshotSubscription
from tests.tables import create_table, fetch_all, insert_rows
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=12, scale=2)),
]


def run(text: str) -> list:
    outcomes = execute(Actor.command(), text, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def same(left, right, table: str = "items") -> dict:
    job = do_start_compare(Actor.command(), left, table, right, table)
    job = JobRun.objects.get(pk=job.pk)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job.result


def assert_converged(pub, *subs) -> None:
    for sub in subs:
        result = same(pub, sub)
        assert result["equal"], (sub.name, result)


def rows(server, table: str = "items") -> dict:
    d = dialects.get(server.dialect)
    data = fetch_all(server, f"SELECT id, name, price, {d.quote('ROWGUID')} FROM {d.quote(table)} ORDER BY id")
    return {r[0]: (r[1], Decimal(str(r[2])) if r[2] is not None else None, r[3]) for r in data}


def sql(server, text: str, params=()) -> None:
    run_sql(server, text.replace('"', dialects.get(server.dialect).quote_char), params)


@pytest.fixture
def nodes(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pg1")
    sub_my = make_server("mysql", "my2")
    sub_lite = make_server("sqlite", "lite3")
    create_table(pub, "items", COLUMNS, ["id"])
    insert_rows(pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) + Decimal("0.5")) for i in range(1, 21)])
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2);"
        "REPL_SNP_SERVER ('my2', 'root', '');"
        "REPL_CREATE_SNAPSHOT_SUB (REPL_SERVER_NAME ('my2'), 'pg1.items', 2);"
        "REPL_INIT_SNAPSHOT (REPL_SERVER_NAME ('my2'), 'pg1.items', 2, 7);"
        "REPL_CREATE_SNAPSHOT_SUB ('lite3', 'pg1.items', 2);"
        "REPL_INIT_SNAPSHOT ('lite3', 'pg1.items', 2)"
    )
    return pub, sub_my, sub_lite


def test_initial_copy_creates_the_subscriber_tables_and_copies_every_row(nodes):
    pub, sub_my, sub_lite = nodes
    assert_converged(pub, sub_my, sub_lite)
    assert len(rows(sub_my)) == 20
    subscription = SnapshotSubscription.objects.get(server="my2")
    assert subscription.init_state == "done" and subscription.init_rows_done == 20
    assert subscription.init_rows_per_commit == 7


def test_changes_on_every_node_reach_every_other_node_and_never_echo(nodes):
    pub, sub_my, sub_lite = nodes
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 1', ["pub changed"])
    sql(pub, 'INSERT INTO "items" (id, name, price) VALUES (100, ?, 1.25)', ["from pub"])
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 2', ["my changed"])
    sql(sub_my, 'INSERT INTO "items" (id, name, price) VALUES (200, ?, 2.5)', ["from my"])
    sql(sub_my, 'DELETE FROM "items" WHERE id = 3')
    sql(sub_lite, 'UPDATE "items" SET price = 99.99 WHERE id = 4')
    sql(sub_lite, 'DELETE FROM "items" WHERE id = 5')
    outcome = run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")[0]
    assert outcome.details["subscribers"]["my2"]["pulled"] == 3
    assert outcome.details["subscribers"]["lite3"]["pulled"] == 2
    assert_converged(pub, sub_my, sub_lite)
    data = rows(pub)
    assert data[1][0] == "pub changed" and data[2][0] == "my changed" and data[4][1] == Decimal("99.99")
    assert 3 not in data and 5 not in data and data[100][0] == "from pub" and data[200][0] == "from my"
    # Origins survive replication: the MariaDB change carries my2's ROWGUID everywhere.
    assert data[2][2].startswith("my2@") and rows(sub_lite)[2][2] == data[2][2]
    assert ConflictBackup.objects.count() == 0
    # Nothing echoes: a second sync moves nothing.
    again = run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")[0].details["subscribers"]
    assert all(v["pulled"] == 0 and v["pushed"] == 0 for v in again.values()), again
    assert fetch_all(sub_my, "SELECT COUNT(*) FROM `RLOG_items`") == [(0,)]

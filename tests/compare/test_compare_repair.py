"""Compare values side by side and repair chosen keys, on live SQLite, PostgreSQL and MariaDB tables with a real
Spark: every kind of difference, hostile names, exactly the chosen keys repaired (checked by content), idempotent,
refused for a viewer and for a bi-directional subscriber's copy, unseen by an updateable subscriber's capture."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from replication_admin.compare.actions import do_compare_again, do_compare_snapshot, do_repair_keys, do_start_compare
from replication_admin.compare.key_repair import RepairRefused
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects, transactional_sql
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun, Snapshot, SnapshotPublication, SnapshotSubscription
from replication_admin.statements import execute as run_statements
from tests.tables import create_table, execute, fetch_all, insert_rows
from tests.transactional.test_trx_replication import run as trx_run
from tests.transactional.test_trx_replication import sql as trx_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

TABLE = 'ab "cd'
REGION = 're "gion'
QTY = 'q "ty'


def key_column(*servers) -> str:
    # MariaDB keeps names in utf8mb3: no emoji there.
    return "表" if any(s.dialect == "mysql" for s in servers) else "表😀"


def columns(key: str) -> list[tuple[str, LogicalType]]:
    return [
        (REGION, LogicalType("varchar", length=20)),
        (key, LogicalType("integer")),
        ("select", LogicalType("varchar", length=60)),
        (QTY, LogicalType("integer")),
        ("note", LogicalType("long_varchar")),
    ]


def source_rows() -> list[tuple]:
    return [(region, i, f"item {region} {i}", i * 10, f"note {i}") for region in ("n'o", "south") for i in range(1, 8)]


def rows_by_key(server, key: str) -> dict[tuple, tuple]:
    d = dialects.get(server.dialect)
    names = ", ".join(d.quote(c) for c, _ in columns(key))
    return {
        (r[0], int(r[1])): (r[2], int(r[3]), r[4]) for r in fetch_all(server, f"SELECT {names} FROM {d.quote(TABLE)}")
    }


def make_pair(make_server, left_dialect: str, right_dialect: str):
    left = make_server(left_dialect, "src")
    right = make_server(right_dialect, "dst")
    key = key_column(left, right)
    names = [c for c, _ in columns(key)]
    for server in (left, right):
        create_table(server, TABLE, columns(key), [REGION, key])
        insert_rows(server, TABLE, names, source_rows())
    d = dialects.get(right.dialect)
    where = f"{d.quote(REGION)} = ? AND {d.quote(key)} = ?"
    table = d.quote(TABLE)
    execute(right, f"UPDATE {table} SET {d.quote('select')} = 'changed' WHERE {where}", ["n'o", 1])  # value changed
    execute(right, f"DELETE FROM {table} WHERE {where}", ["n'o", 2])  # missing on the destination
    insert_rows(right, TABLE, names, [("south", 99, "extra", 0, None)])  # only on the destination
    ld = dialects.get(left.dialect)
    execute(left, f"UPDATE {ld.quote(TABLE)} SET note = NULL WHERE {ld.quote(REGION)} = ? AND {ld.quote(key)} = ?",
            ["n'o", 3])  # fmt: skip
    execute(right, f"UPDATE {table} SET note = '' WHERE {where}", ["n'o", 3])  # NULL on the source, '' here
    execute(right, f"UPDATE {table} SET {d.quote(QTY)} = -4 WHERE {where}", ["south", 4])  # changed, left alone
    execute(right, f"DELETE FROM {table} WHERE {where}", ["south", 5])  # missing, left alone
    return left, right, key


def compare(left, right) -> JobRun:
    job = do_start_compare(Actor.command(), left, TABLE, right, TABLE)
    job = JobRun.objects.get(pk=job.pk)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job


def listed(job: JobRun) -> dict[tuple, dict]:
    """The listed rows by (region, number) key."""
    region_and_number = lambda key: (key[REGION], int(next(v for n, v in key.items() if n != REGION)))  # noqa: E731
    return {region_and_number(row["key"]): row for row in job.result["rows"]}


@pytest.mark.parametrize(
    ("left_dialect", "right_dialect"), [("postgresql", "sqlite"), ("sqlite", "mysql"), ("mysql", "postgresql")]
)
def test_chosen_keys_are_repaired_from_the_source_as_it_is_now_and_the_others_still_differ(
    make_server, jobs_sync, spark, left_dialect, right_dialect
):
    left, right, key = make_pair(make_server, left_dialect, right_dialect)
    job = compare(left, right)
    assert job.target == 'src."ab ""cd" ↔ dst."ab ""cd"'
    rows = listed(job)
    assert list(rows) == [("n'o", 1), ("n'o", 2), ("n'o", 3), ("south", 4), ("south", 5), ("south", 99)]
    assert job.result["rows_total"] == 6
    assert (rows["n'o", 1]["kind"], rows["n'o", 1]["left"], rows["n'o", 1]["right"]) == (
        "different", {"select": "item n'o 1"}, {"select": "changed"}
    )  # fmt: skip
    assert (rows["n'o", 2]["kind"], rows["n'o", 2]["right"]) == ("missing_in_right", None)
    assert rows["n'o", 2]["left"] == {"select": "item n'o 2", QTY: "20", "note": "note 2"}
    assert (rows["south", 99]["kind"], rows["south", 99]["left"]) == ("missing_in_left", None)
    assert rows["south", 99]["right"] == {"select": "extra", QTY: "0", "note": None}
    assert (rows["n'o", 3]["left"], rows["n'o", 3]["right"]) == ({"note": None}, {"note": ""})
    assert (rows["south", 4]["left"], rows["south", 4]["right"]) == ({QTY: "40"}, {QTY: "-4"})

    # The source moves on after the compare: the repair writes what it holds now.
    ld = dialects.get(left.dialect)
    execute(left, f"UPDATE {ld.quote(TABLE)} SET {ld.quote('select')} = 'fresh 表' WHERE {ld.quote(key)} = 1 AND "
                  f"{ld.quote(REGION)} = 'n''o'")  # fmt: skip
    chosen = [i for i, row in enumerate(job.result["rows"]) if (row["key"][REGION], int(row["key"][key])) in
              {("n'o", 1), ("n'o", 2), ("n'o", 3), ("south", 99)}]  # fmt: skip
    before = rows_by_key(right, key)
    repair = do_repair_keys(Actor.command(), job, chosen)
    repair = JobRun.objects.get(pk=repair.pk)
    assert repair.state == JobRun.State.SUCCEEDED, repair.error + repair.log
    assert (repair.result["updated"], repair.result["inserted"], repair.result["deleted"]) == (2, 1, 1)

    source, dest = rows_by_key(left, key), rows_by_key(right, key)
    for k in [("n'o", 1), ("n'o", 2), ("n'o", 3)]:
        assert dest[k] == source[k], k
    assert dest["n'o", 1] == ("fresh 表", 10, "note 1")
    assert dest["n'o", 3][2] is None  # NULL again, not the empty string
    assert ("south", 99) not in dest
    # The keys not chosen are as they were.
    assert dest["south", 4] == before["south", 4] == ("item south 4", -4, "note 4")
    assert ("south", 5) not in dest
    assert {k: v for k, v in dest.items() if k not in {("n'o", 1), ("n'o", 2), ("n'o", 3)}} == {
        k: v for k, v in before.items() if k not in {("n'o", 1), ("n'o", 3), ("south", 99)}
    }

    again = JobRun.objects.get(pk=do_compare_again(Actor.command(), repair).pk)
    assert again.target == job.target
    assert list(listed(again)) == [("south", 4), ("south", 5)]

    # Run twice, nothing more changes.
    second = JobRun.objects.get(pk=do_repair_keys(Actor.command(), job, chosen).pk)
    assert second.state == JobRun.State.SUCCEEDED, second.error
    assert rows_by_key(right, key) == dest
    audit = AuditEntry.objects.filter(action="job.compare_repair", outcome="ok").first()
    assert audit is not None and len(audit.detail["keys"]) == 4 and ["south", "99"] in audit.detail["keys"]


def test_a_snapshots_compare_is_headed_with_both_tables_and_its_keys_are_repaired(make_server, jobs_sync, spark):
    source = make_server("sqlite", "demo")
    dest = make_server("postgresql", "pg_demo")
    create_table(source, "Orders", [("id", LogicalType("integer")), ("v", LogicalType("varchar", length=20))], ["id"])
    insert_rows(source, "Orders", ["id", "v"], [(i, f"v{i}") for i in range(1, 11)])
    outcomes = run_statements(Actor.command(), "create snapshot pg_demo.Orders from Orders", context=source, wait=True)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes]
    d = dialects.get(dest.dialect)
    execute(dest, f"UPDATE {d.quote('Orders')} SET v = 'bad' WHERE id IN (2, 3)")

    job = do_compare_snapshot(Actor.command(), Snapshot.objects.get(), sync=True)
    assert job.target == "demo.Orders ↔ pg_demo.Orders"
    assert [r["key"] for r in job.result["rows"]] == [{"id": "2"}, {"id": "3"}]
    repair = do_repair_keys(Actor.command(), job, [0], sync=True)
    assert repair.state == JobRun.State.SUCCEEDED, repair.error
    assert repair.result["destination"] == "destination of snapshot pg_demo.Orders"
    assert sorted(fetch_all(dest, 'SELECT id, v FROM "Orders" WHERE id IN (2, 3)')) == [(2, "v2"), (3, "bad")]
    again = do_compare_again(Actor.command(), repair, sync=True)
    assert [r["key"] for r in again.result["rows"]] == [{"id": "3"}]


def test_a_viewer_cannot_repair_and_the_refusal_is_audited(make_server, jobs_sync, spark, viewer_client):
    left, right, _key = make_pair(make_server, "sqlite", "sqlite")
    job = compare(left, right)
    address = reverse("jobs-compare-repair", args=[job.pk])
    assert viewer_client.get(address, {"row": ["0", "1"]}).status_code == 200  # the confirmation may be read
    response = viewer_client.post(address, {"rows": "0,1"})
    assert response.status_code == 403
    assert not JobRun.objects.filter(kind="compare_repair").exists()
    assert AuditEntry.objects.get(outcome="denied").action == "job.compare_repair"
    assert viewer_client.post(reverse("jobs-compare-again", args=[job.pk])).status_code == 403


def test_a_bidirectional_subscribers_copy_is_not_repaired_directly(make_server, jobs_sync, spark):
    left, right, _key = make_pair(make_server, "sqlite", "sqlite")
    SnapshotPublication.objects.create(item=f"src.{TABLE}", server=left, table=TABLE)
    SnapshotSubscription.objects.create(server=right.name, item=f"src.{TABLE}", init_state="done")
    job = compare(left, right)
    before = rows_by_key(right, _key)
    with pytest.raises(RepairRefused, match="bi-directional subscriber's copy"):
        do_repair_keys(Actor.command(), job, [0])
    assert rows_by_key(right, _key) == before
    refusal = AuditEntry.objects.get(action="job.compare_repair")
    assert refusal.outcome == "error" and "re-initialise" in refusal.detail["error"] and refusal.detail["keys"]


def test_repairing_an_updateable_subscribers_copy_is_not_pushed_back_as_its_own_change(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pub")
    sub = make_server("mysql", "my")
    trx_sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))",
            *[f"INSERT INTO items (id, name) VALUES ({i}, 'item {i}')" for i in range(1, 6)])  # fmt: skip
    trx_run(pub, "repl_publish ('shop', 'shop.log', 1); repl_pub_add ('shop', 'items', 2, 0, null)")
    trx_run(sub, "repl_server ('pub', 'pub'); repl_subscribe ('pub', 'shop'); repl_init_copy ('pub', 'shop')")
    # The copy drifts without replication seeing it (as after a restore): written in the replay context.
    d = dialects.get(sub.dialect)
    trx_sql(sub, *transactional_sql.replay_context_sql(d, True, None),
            "UPDATE items SET name = 'drifted' WHERE id IN (2, 3)", *transactional_sql.reset_context_sql(d))  # fmt: skip

    job = JobRun.objects.get(pk=do_start_compare(Actor.command(), pub, "items", sub, "items").pk)
    assert [r["key"] for r in job.result["rows"]] == [{"id": "2"}, {"id": "3"}]
    repair = do_repair_keys(Actor.command(), job, [0], sync=True)
    assert repair.state == JobRun.State.SUCCEEDED, repair.error
    assert repair.result["destination"] == "transactional subscriber's copy of pub/shop"
    assert fetch_all(sub, "SELECT id, name FROM items WHERE id IN (2, 3) ORDER BY id") == [
        (2, "item 2"),
        (3, "drifted"),
    ]

    # The repair is not the subscriber's own change: nothing goes back to the publisher.
    outcome = trx_run(sub, "repl_sync ('pub', 'shop')")[0]
    assert outcome.details["pushed"] == 0
    assert fetch_all(pub, "SELECT id, name FROM items WHERE id IN (2, 3) ORDER BY id") == [(2, "item 2"), (3, "item 3")]
    again = do_compare_again(Actor.command(), repair, sync=True)
    assert [r["key"] for r in again.result["rows"]] == [{"id": "3"}]


@pytest.mark.parametrize("dest_dialect", ["postgresql", "mysql", "sqlite"])
def test_keys_of_decimals_and_timestamps_are_matched_on_both_sides(make_server, jobs_sync, spark, dest_dialect):
    source = make_server("postgresql" if dest_dialect == "sqlite" else "sqlite", "src")
    dest = make_server(dest_dialect, "dst")
    key_columns = [("amount", LogicalType("numeric", precision=10, scale=2)), ("at", LogicalType("timestamp"))]
    table_columns = [*key_columns, ("v", LogicalType("varchar", length=10))]
    rows = [(Decimal("18.50"), datetime(2024, 2, 29, 23, 59, 59, 123456), "a"),
            (Decimal("-1.00"), datetime(2000, 1, 1), "b"), (Decimal("7.25"), datetime(1999, 12, 31, 1), "c")]  # fmt: skip
    for server in (source, dest):
        create_table(server, "ledger", table_columns, ["amount", "at"])
    insert_rows(source, "ledger", ["amount", "at", "v"], rows)
    insert_rows(
        dest, "ledger", ["amount", "at", "v"], [(*rows[0][:2], "changed"), (Decimal("3"), datetime(2001, 1, 1), "x")]
    )

    job = JobRun.objects.get(pk=do_start_compare(Actor.command(), source, "ledger", dest, "ledger").pk)
    assert job.result["rows_total"] == 4
    repair = do_repair_keys(Actor.command(), job, list(range(4)), sync=True)
    assert repair.state == JobRun.State.SUCCEEDED, repair.error
    assert (repair.result["updated"], repair.result["inserted"], repair.result["deleted"]) == (1, 2, 1)
    assert do_compare_again(Actor.command(), repair, sync=True).result["equal"] is True

"""ALTER TABLE on a published table reaches the subscribers: ADD, DROP and RENAME COLUMN and a widened
type, seen on every publisher dialect (an event trigger on PostgreSQL, a comparison on MariaDB and SQLite),
held for approval or applied at once, with rows flowing across the change and none lost."""

from __future__ import annotations

import random
import threading

import pyodbc
import pytest
from django.urls import reverse

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.core.introspection import require_table
from replication_admin.engine import dialects
from replication_admin.models import AuditEntry, ReplSubscriber, SchemaChange, Server, Snapshot
from replication_admin.statements import execute
from replication_admin.transactional import schema as trx_schema
from replication_admin.transactional.actions import do_approve_schema_change
from tests.bidir.test_bidir_sync import nodes as bidir_nodes  # noqa: F401 - the bi-directional fixture
from tests.bidir.test_bidir_sync import sql as bidir_sql
from tests.bidir.test_bidir_sync import sync as bidir_sync
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def run(text: str, context: Server | None = None) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def q(server: Server):
    return dialects.get(server.dialect).quote


def publish(source: Server, dest: Server, rows: int = 40) -> None:
    run_sql(source, f"CREATE TABLE {q(source)('stock')} (id integer PRIMARY KEY, name varchar(40), qty integer)")
    for i in range(1, rows + 1):
        run_sql(source, f"INSERT INTO {q(source)('stock')} (id, name, qty) VALUES (?, ?, ?)", [i, f"item {i}", i])
    run("REPL_PUBLISH ('s', 's.log'); REPL_PUB_ADD ('s', 'stock', 2, 0, null)", source)
    run(f"REPL_SERVER ('{source.name}', '1111'); REPL_SUBSCRIBE ('{source.name}', 's'); "
        f"REPL_INIT_COPY ('{source.name}', 's')", dest)  # fmt: skip


def content(server: Server, columns: list[str], table: str = "stock") -> list[tuple]:
    quote = q(server)
    rows = fetch_all(server, f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(table)} ORDER BY id")
    return [tuple(None if v is None else str(v) for v in row) for row in rows]


def columns_of(server: Server, table: str = "stock") -> list[str]:
    return [c.name for c in require_table(server, table).columns]


class Writers:
    """An application writing to the published table while it changes: inserts, and updates of every column it
    knows of (`columns` is changed by the test as the table is)."""

    def __init__(self, server: Server, first_id: int) -> None:
        self.server, self.next_id = server, first_id
        self.columns = {"qty": "qty", "note": None}
        self.stop = threading.Event()
        self.done = self.refused = 0
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        quote = q(self.server)
        rng = random.Random(7)
        with connections.connect(self.server) as conn:
            cursor = conn.cursor()
            while not self.stop.is_set():
                qty, note = self.columns["qty"], self.columns["note"]
                names = ["id", "name", qty] + ([note] if note else [])
                values = [self.next_id, f"new {self.next_id}", self.next_id] + ([f"n{self.next_id}"] if note else [])
                updates = f"{quote(qty)} = {quote(qty)} + 1" + (f", {quote(note)} = 'u'" if note else "")
                try:
                    cursor.execute(
                        f"INSERT INTO {quote('stock')} ({', '.join(quote(n) for n in names)}) "
                        f"VALUES ({', '.join('?' for _ in names)})",
                        values,
                    )
                    self.next_id += 1
                    cursor.execute(
                        f"UPDATE {quote('stock')} SET {updates} WHERE id = ?", [rng.randint(1, self.next_id)]
                    )
                    self.done += 1
                except pyodbc.Error:
                    # MariaDB: between a rename and the new capture triggers the old ones name a column that
                    # is gone, and the write is refused (docs/schema-changes.md).
                    self.refused += 1
                self.stop.wait(0.005)

    def __enter__(self) -> Writers:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


@pytest.mark.parametrize(
    ("source_dialect", "dest_dialect"),
    [("postgresql", "mysql"), ("pgwal", "mysql"), ("mysql", "postgresql"), ("sqlite", "postgresql")],
)
def test_columns_added_and_renamed_under_load_arrive_with_every_row(
    make_server, jobs_sync, spark, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    publish(source, dest)
    quote = q(source)
    with Writers(source, 1000) as writers:
        run("REPL_SYNC ('ssrc', 's')", dest)
        run_sql(source, f"ALTER TABLE {quote('stock')} ADD COLUMN {quote('note')} varchar(40)")
        writers.columns["note"] = "note"
        run("REPL_SYNC ('ssrc', 's')", dest)
        run_sql(source, f"ALTER TABLE {quote('stock')} RENAME COLUMN {quote('qty')} TO {quote('amount')}")
        writers.columns["qty"] = "amount"
        for _ in range(3):
            run("REPL_SYNC ('ssrc', 's')", dest)
    run("REPL_SYNC ('ssrc', 's')", dest)
    assert writers.done > 20
    assert columns_of(dest) == ["id", "name", "amount", "note"]
    wanted = ["id", "name", "amount", "note"]
    source_rows = content(source, wanted)
    assert len(source_rows) > 40
    assert any(r[3] is not None for r in source_rows)  # the new column carried values while it replicated
    assert content(dest, wanted) == source_rows
    changes = SchemaChange.objects.filter(server="ssrc", account="s").order_by("detected_at")
    texts = [c["text"] for change in changes for c in change.changes]
    assert "add column note varchar(40)" in texts
    assert "rename column qty to amount" in texts
    assert {c.state for c in changes} == {SchemaChange.State.APPLIED}


def test_a_held_change_waits_for_approval_and_shows_each_subscribers_ddl(make_server, jobs_sync, spark, editor_client):
    source, dest = make_server("postgresql", "ssrc"), make_server("mysql", "sdst")
    publish(source, dest, rows=3)
    run("REPL_PUB_SCHEMA_CHANGES ('s', 'approve')", source)
    run_sql(source, "INSERT INTO stock (id, name, qty) VALUES (10, 'before', 1)")
    run_sql(source, "ALTER TABLE stock ADD COLUMN note varchar(40) DEFAULT 'none'")
    run_sql(source, "INSERT INTO stock (id, name, qty, note) VALUES (11, 'after', 2, 'kept')")
    run("REPL_SYNC ('ssrc', 's')", dest)
    # The rows before the change arrived; the change and what follows it wait.
    assert [r[0] for r in content(dest, ["id"])] == ["1", "2", "3", "10"]
    assert "note" not in columns_of(dest)
    sub = ReplSubscriber.objects.get(server="ssrc", account="s", subscriber="sdst")
    change = SchemaChange.objects.get(server="ssrc", account="s", table="stock")
    assert change.state == SchemaChange.State.PENDING
    assert f"the schema change #{change.pk} of stock waits for approval" in sub.last_error
    assert trx_schema.subscriber_ddl(change, dest) == [
        "ALTER TABLE `stock` ADD COLUMN `note` varchar(40) DEFAULT 'none'"
    ]
    page = editor_client.get(reverse("trx-publications-detail", args=["ssrc", "s"])).content.decode()
    assert "pending approval" in page and "add column note varchar(40)" in page
    assert "ALTER TABLE `stock` ADD COLUMN `note` varchar(40) DEFAULT &#x27;none&#x27;" in page
    response = editor_client.post(reverse("trx-schema-change-approve", args=[change.pk]))
    assert response.status_code == 302
    assert AuditEntry.objects.filter(action="trx.schema_apply", detail__id=change.pk).exists()
    with pytest.raises(Exception, match="already applied"):
        do_approve_schema_change(Actor.command(), SchemaChange.objects.get(pk=change.pk))
    run("REPL_SYNC ('ssrc', 's')", dest)
    wanted = ["id", "name", "qty", "note"]
    assert content(dest, wanted) == content(source, wanted)
    assert content(dest, ["id", "note"])[-2:] == [("10", "none"), ("11", "kept")]
    assert ReplSubscriber.objects.get(pk=sub.pk).last_error == ""
    assert trx_schema.subscriber_ddl(SchemaChange.objects.get(pk=change.pk), dest) == []


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("postgresql", "sqlite"), ("mysql", "postgresql")])
def test_a_dropped_column_and_a_widened_type_follow(make_server, jobs_sync, spark, source_dialect, dest_dialect):
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    publish(source, dest, rows=3)
    quote = q(source)
    widen = {
        "postgresql": f"ALTER TABLE {quote('stock')} ALTER COLUMN {quote('name')} TYPE varchar(200)",
        "mysql": f"ALTER TABLE {quote('stock')} MODIFY COLUMN {quote('name')} varchar(200)",
    }[source_dialect]
    run_sql(source, f"ALTER TABLE {quote('stock')} DROP COLUMN {quote('qty')}")
    run_sql(source, widen)
    # MariaDB's old capture triggers name the dropped column: writes wait for the next look at the table.
    run("REPL_SYNC ('ssrc', 's')", dest)
    long_name = "x" * 150
    run_sql(source, f"INSERT INTO {quote('stock')} (id, name) VALUES (?, ?)", [50, long_name])
    run("REPL_SYNC ('ssrc', 's')", dest)
    assert columns_of(dest) == ["id", "name"]
    assert content(dest, ["id", "name"]) == content(source, ["id", "name"])
    assert content(dest, ["name"])[-1] == (long_name,)


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("mysql", "postgresql"), ("postgresql", "sqlite")])
def test_an_incremental_snapshot_follows_its_source_tables_changes(make_server, spark, source_dialect, dest_dialect):
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    quote = q(source)
    run_sql(source, f"CREATE TABLE {quote('stock')} (id integer PRIMARY KEY, name varchar(40), qty integer)")
    run_sql(source, f"INSERT INTO {quote('stock')} (id, name, qty) VALUES (1, 'a', 1), (2, 'b', 2)")
    run("create snapshot log for stock; create snapshot sdst.stock from stock", source)
    run_sql(source, f"ALTER TABLE {quote('stock')} ADD COLUMN {quote('note')} varchar(20)")
    run_sql(source, f"INSERT INTO {quote('stock')} (id, name, qty, note) VALUES (3, 'c', 3, 'n3')")
    run_sql(source, f"UPDATE {quote('stock')} SET {quote('note')} = 'n1' WHERE id = 1")
    run("update snapshot sdst.stock", source)
    run_sql(source, f"ALTER TABLE {quote('stock')} RENAME COLUMN {quote('qty')} TO {quote('amount')}")
    run_sql(source, f"UPDATE {quote('stock')} SET {quote('amount')} = 9 WHERE id = 2")
    run("update snapshot sdst.stock", source)
    wanted = ["id", "name", "amount", "note"]
    assert columns_of(dest) == wanted
    assert content(dest, wanted) == content(source, wanted) == [
        ("1", "a", "1", "n1"), ("2", "b", "9", None), ("3", "c", "3", "n3"),
    ]  # fmt: skip
    changes = SchemaChange.objects.filter(snapshot="sdst.stock").order_by("detected_at")
    assert [[c["text"] for c in change.changes] for change in changes] == [
        ["add column note varchar(20)"], ["rename column qty to amount"],
    ]  # fmt: skip
    assert AuditEntry.objects.filter(action="snapshot.schema_change", target="sdst.stock").count() == 2


def test_a_snapshot_of_chosen_columns_follows_a_rename_and_leaves_an_added_column_out(make_server, spark):
    source, dest = make_server("postgresql", "ssrc"), make_server("mysql", "sdst")
    run_sql(source, "CREATE TABLE stock (id integer PRIMARY KEY, name varchar(40), qty integer)")
    run_sql(source, "INSERT INTO stock (id, name, qty) VALUES (1, 'a', 1)")
    run("create snapshot log for stock; create snapshot sdst.stock from stock 'id, qty'", source)
    run_sql(source, "ALTER TABLE stock ADD COLUMN note varchar(20)")
    run_sql(source, "ALTER TABLE stock RENAME COLUMN qty TO amount")
    run_sql(source, "UPDATE stock SET amount = 5, note = 'x' WHERE id = 1")
    run("update snapshot sdst.stock", source)
    assert columns_of(dest) == ["id", "amount"]
    assert content(dest, ["id", "amount"]) == [("1", "5")]
    assert Snapshot.objects.get(name="sdst.stock").source_columns == '"id", "amount"'


def test_bidirectional_subscribers_follow_the_publishers_table_and_changes_flow_both_ways_after(
    bidir_nodes,  # noqa: F811
):
    pub, sub_my, sub_lite = bidir_nodes
    bidir_sql(pub, 'ALTER TABLE "items" ADD COLUMN note varchar(20)')
    bidir_sql(pub, 'ALTER TABLE "items" RENAME COLUMN name TO title')
    bidir_sql(pub, 'UPDATE "items" SET note = ?, title = ? WHERE id = 1', ["n1", "first"])
    bidir_sync()
    wanted = ["id", "title", "price", "note"]
    for copy in (sub_my, sub_lite):
        assert [c for c in columns_of(copy, "items") if c != "ROWGUID"] == wanted
        assert content(copy, wanted, "items") == content(pub, wanted, "items")
    # The subscribers' changes in the new shape come back.
    bidir_sql(sub_my, 'UPDATE "items" SET note = ? WHERE id = 2', ["from my"])
    bidir_sync()
    assert content(sub_lite, wanted, "items") == content(pub, wanted, "items")
    assert content(pub, ["note"], "items")[1] == ("from my",)
    change = SchemaChange.objects.get(kind=SchemaChange.Kind.BIDIR)
    assert [c["text"] for c in change.changes] == ["rename column name to title", "add column note varchar(20)"]


def test_a_mariadb_rename_waiting_for_approval_never_refuses_writers_and_converges_once_approved(
    make_server, jobs_sync, spark
):
    source, dest = make_server("mysql", "ssrc"), make_server("postgresql", "sdst")
    publish(source, dest, rows=3)
    run("REPL_PUB_SCHEMA_CHANGES ('s', 'approve')", source)
    run_sql(source, "ALTER TABLE stock RENAME COLUMN qty TO amount")
    run("REPL_SYNC ('ssrc', 's')", dest)  # sees the change: new capture triggers at once, the change held
    run_sql(source, "INSERT INTO stock (id, name, amount) VALUES (20, 'while held', 20)")
    run_sql(source, "UPDATE stock SET amount = 7 WHERE id = 1")
    run("REPL_SYNC ('ssrc', 's')", dest)
    change = SchemaChange.objects.get(server="ssrc", state=SchemaChange.State.PENDING)
    assert [c["text"] for c in change.changes] == ["rename column qty to amount"]
    assert columns_of(dest) == ["id", "name", "qty"]
    assert [r[0] for r in content(dest, ["id"])] == ["1", "2", "3", "20"]  # rows kept flowing meanwhile
    do_approve_schema_change(Actor.command(), change)
    run("REPL_SYNC ('ssrc', 's')", dest)
    wanted = ["id", "name", "amount"]
    assert columns_of(dest) == wanted
    assert content(dest, wanted) == content(source, wanted)
    assert content(dest, ["amount"])[0] == ("7",)


def test_an_updateable_subscriber_keeps_sending_its_changes_after_a_rename(make_server, jobs_sync, spark):
    """The MariaDB copy's push-back triggers name its columns: they are made anew with the copy's change."""
    source, dest = make_server("postgresql", "ssrc"), make_server("mysql", "sdst")
    run_sql(source, "CREATE TABLE stock (id integer PRIMARY KEY, name varchar(40), qty integer)")
    run_sql(source, "INSERT INTO stock (id, name, qty) VALUES (1, 'a', 1), (2, 'b', 2)")
    run("REPL_PUBLISH ('s', 's.log', 1); REPL_PUB_ADD ('s', 'stock', 2, 0, null)", source)
    run("REPL_SERVER ('ssrc', '1111'); REPL_SUBSCRIBE ('ssrc', 's'); REPL_INIT_COPY ('ssrc', 's')", dest)
    run_sql(source, "ALTER TABLE stock RENAME COLUMN qty TO amount")
    run("REPL_SYNC ('ssrc', 's')", dest)
    run_sql(dest, "UPDATE stock SET amount = 42 WHERE id = 2")  # refused by the old triggers, were they left
    run("REPL_SYNC ('ssrc', 's')", dest)
    wanted = ["id", "name", "amount"]
    assert content(source, wanted) == content(dest, wanted) == [("1", "a", "1"), ("2", "b", "42")]


# SQLite: the full refresh's swap keeps the NOT NULL (its staging table made from the destination's definition),
# which the copy's table text then loses (schema_changes).
@pytest.mark.parametrize("dest_dialect", ["mysql", "sqlite"])
def test_an_incremental_snapshot_follows_a_dropped_not_null_but_not_one_set_over_its_old_nulls(
    make_server, spark, dest_dialect
):
    source, dest = make_server("postgresql", "ssrc"), make_server(dest_dialect, "sdst")
    run_sql(source, "CREATE TABLE stock (id integer PRIMARY KEY, name varchar(40) NOT NULL, qty integer)")
    run_sql(source, "INSERT INTO stock (id, name, qty) VALUES (1, 'a', NULL), (2, 'b', 2)")
    run("create snapshot log for stock; create snapshot sdst.stock from stock", source)
    assert not require_table(dest, "stock").column("name").nullable
    # The NULL replaced, then NOT NULL set: the copy still holds the NULL until the refresh moves the row.
    run_sql(source, "UPDATE stock SET qty = 0 WHERE qty IS NULL")
    run_sql(source, "ALTER TABLE stock ALTER COLUMN qty SET NOT NULL")
    run_sql(source, "ALTER TABLE stock ALTER COLUMN name DROP NOT NULL")
    run_sql(source, "INSERT INTO stock VALUES (3, NULL, 3)")
    run("update snapshot sdst.stock", source)
    copy = require_table(dest, "stock")
    assert copy.column("name").nullable and copy.column("qty").nullable
    assert content(dest, ["id", "name", "qty"]) == content(source, ["id", "name", "qty"]) == [
        ("1", "a", "0"), ("2", "b", "2"), ("3", None, "3"),
    ]  # fmt: skip
    changes = SchemaChange.objects.filter(snapshot="sdst.stock")
    assert [c["text"] for change in changes for c in change.changes] == ["drop not null on name"]

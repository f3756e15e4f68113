"""Constraint DDL on published tables reaches the subscribers (Virtuoso's trepl_ddl): a UNIQUE constraint or
unique index added and dropped, and a FOREIGN KEY between two tables of the publication added and dropped, with
rows flowing across every change; a foreign key to a table outside the publication is not replicated, and a
UNIQUE the subscriber's rows break halts the subscription with one line naming it."""

from __future__ import annotations

import pyodbc
import pytest

from replication_admin.core.audit import Actor
from replication_admin.core.introspection import require_table, with_constraints
from replication_admin.core.schema_follow import bring_copy
from replication_admin.engine import dialects, schema_changes
from replication_admin.models import ReplSubscriber, SchemaChange, Server, TpItem
from replication_admin.statements import execute
from replication_admin.transactional import schema as trx_schema
from tests.fidelity.test_schema_changes import run
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def sync(dest: Server) -> None:
    run("REPL_SYNC ('ssrc', 's')", dest)


def publish(source: Server, dest: Server, tables: tuple[str, ...] = ("cats", "stock")) -> None:
    run_sql(source, "CREATE TABLE cats (id integer PRIMARY KEY, label varchar(20))")
    run_sql(source, "CREATE TABLE stock (id integer PRIMARY KEY, name varchar(40), cat integer)")
    run_sql(source, "INSERT INTO cats (id, label) VALUES (1, 'one'), (2, 'two')")
    for i in range(1, 11):
        run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (?, ?, ?)", [i, f"item {i}", 1 + i % 2])
    adds = "; ".join(f"REPL_PUB_ADD ('s', '{t}', 2, 0, null)" for t in tables)
    run(f"REPL_PUBLISH ('s', 's.log'); {adds}", source)
    run("REPL_SERVER ('ssrc', '1111'); REPL_SUBSCRIBE ('ssrc', 's'); REPL_INIT_COPY ('ssrc', 's')", dest)


def content(server: Server, table: str = "stock") -> list[tuple]:
    rows = fetch_all(server, f"SELECT * FROM {table} ORDER BY id")
    return [tuple(None if v is None else str(v) for v in row) for row in rows]


def uniques(server: Server, table: str = "stock") -> list[tuple[str, ...]]:
    info = with_constraints(server, require_table(server, table))
    return sorted(tuple(c.lower() for c in i.columns) for i in info.indexes if i.unique)


def foreign_keys(server: Server, table: str = "stock") -> list[tuple]:
    info = with_constraints(server, require_table(server, table))
    return [(f.columns, f.ref_table, f.ref_columns) for f in info.foreign_keys]


def texts(table: str = "stock") -> list[str]:
    changes = SchemaChange.objects.filter(server="ssrc", account="s", table=table).order_by("pk")
    return [c["text"] for change in changes for c in change.changes]


# How each publisher spells the trepl_ddl statements.
DDL = {
    "postgresql": {
        "add unique": "ALTER TABLE stock ADD CONSTRAINT stock_name_key UNIQUE (name)",
        "drop unique": "ALTER TABLE stock DROP CONSTRAINT stock_name_key",
        "add fk": "ALTER TABLE stock ADD CONSTRAINT stock_cat_fkey FOREIGN KEY (cat) REFERENCES cats (id)",
        "drop fk": "ALTER TABLE stock DROP CONSTRAINT stock_cat_fkey",
    },
    "mysql": {
        "add unique": "ALTER TABLE stock ADD CONSTRAINT stock_name_key UNIQUE (name)",
        "drop unique": "ALTER TABLE stock DROP INDEX stock_name_key",
        "add fk": "ALTER TABLE stock ADD CONSTRAINT stock_cat_fkey FOREIGN KEY (cat) REFERENCES cats (id)",
        "drop fk": "ALTER TABLE stock DROP FOREIGN KEY stock_cat_fkey",
    },
    # A unique index, not a constraint (the event trigger sees CREATE INDEX and DROP INDEX too).
    "postgresql-index": {
        "add unique": "CREATE UNIQUE INDEX stock_name_key ON stock (name)",
        "drop unique": "DROP INDEX stock_name_key",
        "add fk": "ALTER TABLE stock ADD CONSTRAINT stock_cat_fkey FOREIGN KEY (cat) REFERENCES cats (id)",
        "drop fk": "ALTER TABLE stock DROP CONSTRAINT stock_cat_fkey",
    },
}


@pytest.mark.parametrize(
    ("source_dialect", "spelling", "dest_dialect"),
    [
        ("postgresql", "postgresql", "mysql"),
        ("pgwal", "postgresql", "mysql"),
        ("postgresql-compare", "postgresql", "mysql"),
        ("mysql", "mysql", "postgresql"),
        ("postgresql", "postgresql-index", "sqlite"),
    ],
)
def test_unique_and_foreign_key_constraints_added_and_dropped_reach_the_subscriber_with_every_row(
    make_server, jobs_sync, spark, monkeypatch, source_dialect, spelling, dest_dialect
):
    compared = source_dialect == "postgresql-compare"
    if compared:
        # A role that may not create event triggers: the changes are seen by comparison, as on MariaDB.
        monkeypatch.setattr(trx_schema, "track", lambda *args: False)
        source_dialect = "postgresql"
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    publish(source, dest)
    ddl = DDL[spelling]
    assert uniques(dest) == [] and foreign_keys(dest) == []

    run_sql(source, ddl["add unique"])
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (11, 'after unique', 1)")
    sync(dest)
    assert uniques(dest) == [("name",)]
    assert content(dest) == content(source)

    run_sql(source, "INSERT INTO cats (id, label) VALUES (3, 'three')")
    run_sql(source, ddl["add fk"])
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (12, 'after fk', 3)")
    sync(dest)
    if dest_dialect == "sqlite":
        assert foreign_keys(dest) == []  # left out: SQLite cannot add a foreign key to a table
    else:
        assert foreign_keys(dest) == [(("cat",), "cats", ("id",))]
    assert content(dest) == content(source) and content(dest, "cats") == content(source, "cats")

    run_sql(source, ddl["drop fk"])
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (13, 'no category', 99)")
    sync(dest)
    assert foreign_keys(dest) == []
    assert content(dest) == content(source)

    run_sql(source, ddl["drop unique"])
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (14, 'item 1', 1)")  # a name taken before
    sync(dest)
    assert uniques(dest) == []
    assert content(dest) == content(source)
    assert [r[1] for r in content(dest)].count("item 1") == 2

    assert texts() == [
        "add unique stock_name_key (name)",
        "add foreign key stock_cat_fkey (cat) references cats (id)",
        "drop foreign key stock_cat_fkey (cat) references cats (id)",
        "drop unique stock_name_key (name)",
    ]
    changes = SchemaChange.objects.filter(server="ssrc")
    assert {c.state for c in changes} == {SchemaChange.State.APPLIED}
    assert {c.in_place for c in changes} == {spelling.startswith("postgresql") and not compared}
    assert ReplSubscriber.objects.get(server="ssrc", account="s", subscriber="sdst").halt_count is None


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "postgresql")])
def test_a_foreign_key_to_a_table_outside_the_publication_is_not_replicated_and_is_recorded_so(
    make_server, jobs_sync, spark, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    publish(source, dest, tables=("stock",))
    run_sql(source, "ALTER TABLE stock ADD CONSTRAINT stock_cat_fkey FOREIGN KEY (cat) REFERENCES cats (id)")
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (11, 'after fk', 2)")
    sync(dest)
    assert foreign_keys(dest) == []
    assert content(dest) == content(source)
    assert texts() == [
        "add foreign key stock_cat_fkey (cat) references cats (id) (not replicated: cats is not in the publication)"
    ]
    assert ReplSubscriber.objects.get(server="ssrc", account="s", subscriber="sdst").halt_count is None


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "sqlite")])
def test_a_unique_constraint_the_subscribers_rows_break_halts_it_with_one_line_naming_the_constraint(
    make_server, jobs_sync, spark, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    publish(source, dest)
    run_sql(dest, "UPDATE stock SET name = 'item 1' WHERE id = 2")  # the copy's own rows, not the publisher's
    run_sql(source, "ALTER TABLE stock ADD CONSTRAINT stock_name_key UNIQUE (name)")
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (11, 'after unique', 1)")
    execute(Actor.command(), "REPL_SYNC ('ssrc', 's')", context=dest, wait=True)
    sub = ReplSubscriber.objects.get(server="ssrc", account="s", subscriber="sdst")
    assert sub.halt_count is not None
    assert "sdst.stock cannot follow ssrc's change 'add unique stock_name_key (name)'" in sub.halt_error
    assert "\n" not in sub.halt_error
    assert uniques(dest) == []
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (12, 'after the halt', 1)")
    execute(Actor.command(), "REPL_SYNC ('ssrc', 's')", context=dest, wait=True)
    assert 12 not in [int(r[0]) for r in content(dest)]  # stopped at the change: nothing after it is applied
    # The copy's rows mended, the change goes through and the rows after it follow.
    run_sql(dest, "UPDATE stock SET name = 'item 2' WHERE id = 2")
    ReplSubscriber.objects.filter(pk=sub.pk).update(retry_at=None)
    sync(dest)
    assert uniques(dest) == [("name",)]
    assert content(dest) == content(source)


def test_a_unique_index_created_and_dropped_on_a_sqlite_publisher_reaches_a_postgresql_subscriber(
    make_server, jobs_sync, spark
):
    source, dest = make_server("sqlite", "ssrc"), make_server("postgresql", "sdst")
    publish(source, dest)
    run_sql(source, "CREATE UNIQUE INDEX stock_name_key ON stock (name)")
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (11, 'after unique', 1)")
    sync(dest)
    assert uniques(dest) == [("name",)]
    assert content(dest) == content(source)
    run_sql(source, "DROP INDEX stock_name_key")
    # Written before the drop is seen: logged before the change, it arrives after the copy's index is gone.
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (12, 'item 1', 1)")
    sync(dest)
    assert uniques(dest) == []
    assert content(dest) == content(source)
    assert texts() == ["add unique stock_name_key (name)", "drop unique stock_name_key (name)"]


def test_a_definition_stored_without_constraints_is_taken_as_the_starting_point_and_later_changes_replicate(
    make_server, jobs_sync, spark
):
    source, dest = make_server("mysql", "ssrc"), make_server("postgresql", "sdst")
    publish(source, dest, tables=("stock",))
    run_sql(source, "ALTER TABLE stock ADD CONSTRAINT stock_name_key UNIQUE (name)")
    sync(dest)  # the definition now stored names the constraint: made old again, as stored before they were followed
    item = TpItem.objects.get(server="ssrc", acct="s", type=2)
    SchemaChange.objects.all().delete()
    TpItem.objects.filter(pk=item.pk).update(definition=[r for r in item.definition if not isinstance(r, dict)])
    run_sql(dest, "ALTER TABLE stock DROP CONSTRAINT stock_name_key")
    sync(dest)
    assert not SchemaChange.objects.exists()  # unknown before: not a change, and not "all dropped"
    assert uniques(dest) == []
    assert isinstance(TpItem.objects.get(pk=item.pk).definition[-1], dict)
    run_sql(source, "ALTER TABLE stock DROP INDEX stock_name_key")
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (11, 'item 1', 1)")
    sync(dest)
    assert texts() == ["drop unique stock_name_key (name)"]
    assert content(dest) == content(source)


# How each publisher sets and drops a column's NOT NULL.
NOT_NULL = {
    "postgresql": ("ALTER TABLE stock ALTER COLUMN name SET NOT NULL", "ALTER TABLE stock ALTER COLUMN name DROP NOT NULL"),
    "mysql": ("ALTER TABLE stock MODIFY COLUMN name varchar(40) NOT NULL", "ALTER TABLE stock MODIFY COLUMN name varchar(40)"),
}  # fmt: skip


def name_nullable(server: Server) -> bool:
    return require_table(server, "stock").column("name").nullable


@pytest.mark.parametrize(
    ("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "postgresql"), ("postgresql", "sqlite")]
)
def test_a_not_null_set_and_dropped_on_the_publisher_reaches_the_subscriber_with_every_row(
    make_server, jobs_sync, spark, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    publish(source, dest, tables=("stock",))
    set_not_null, drop_not_null = NOT_NULL[source_dialect]
    assert name_nullable(dest)
    run_sql(source, set_not_null)
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (11, 'after not null', 1)")
    sync(dest)
    assert name_nullable(dest) is (dest_dialect == "sqlite")  # left out there: SQLite cannot alter a column
    assert content(dest) == content(source)
    if dest_dialect != "sqlite":
        run_sql(source, drop_not_null)
        run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (12, NULL, 1)")
        sync(dest)
        assert name_nullable(dest)
        assert content(dest) == content(source) and (("12", None, "1") in content(dest))
        assert texts() == ["set not null on name", "drop not null on name"]
    else:
        assert texts() == ["set not null on name"]
    assert {c.state for c in SchemaChange.objects.filter(server="ssrc")} == {SchemaChange.State.APPLIED}
    assert ReplSubscriber.objects.get(server="ssrc", account="s", subscriber="sdst").halt_count is None


def test_a_not_null_dropped_on_the_publisher_is_dropped_on_a_sqlite_copy_whose_table_text_is_edited(
    make_server, jobs_sync, spark
):
    source, dest = make_server("postgresql", "ssrc"), make_server("sqlite", "sdst")
    hostile = 'ab ""cd'  # as PostgreSQL writes it in quotes
    run_sql(source, f'CREATE TABLE stock (id integer PRIMARY KEY, "{hostile}" varchar(40) NOT NULL, qty integer)')
    run_sql(source, f"""INSERT INTO stock (id, "{hostile}", qty) VALUES (1, 'a', 1), (2, 'b', NULL)""")
    run("REPL_PUBLISH ('s', 's.log'); REPL_PUB_ADD ('s', 'stock', 2, 0, null)", source)
    run("REPL_SERVER ('ssrc', '1111'); REPL_SUBSCRIBE ('ssrc', 's'); REPL_INIT_COPY ('ssrc', 's')", dest)
    column = 'ab "cd'
    assert not require_table(dest, "stock").column(column).nullable
    run_sql(source, f'ALTER TABLE stock ALTER COLUMN "{hostile}" DROP NOT NULL')
    run_sql(source, f"""INSERT INTO stock (id, "{hostile}", qty) VALUES (3, NULL, 3)""")
    run_sql(source, f"""UPDATE stock SET "{hostile}" = NULL WHERE id = 1""")
    sync(dest)
    assert require_table(dest, "stock").column(column).nullable
    assert content(dest) == content(source) == [("1", None, "1"), ("2", "b", None), ("3", None, "3")]
    assert texts() == [f"drop not null on {column}"]
    assert ReplSubscriber.objects.get(server="ssrc", account="s", subscriber="sdst").halt_count is None
    # The table's text was edited in place: SQLite finds nothing wrong with the file, and the copy's own write of
    # a NULL (a connection of its own) is taken too.
    assert fetch_all(dest, "PRAGMA integrity_check") == [("ok",)]
    run_sql(dest, f'UPDATE stock SET "{hostile}" = NULL WHERE id = 2')
    assert fetch_all(dest, f'SELECT id FROM stock WHERE "{hostile}" IS NULL ORDER BY id') == [(1,), (2,), (3,)]
    assert fetch_all(dest, "SELECT count(*) FROM sqlite_master WHERE name = 'repladmin_schema_version'") == [(0,)]


def test_a_sqlite_snapshot_or_bidirectional_copy_brought_through_a_dropped_not_null_takes_nulls(make_server):
    # Snapshot and bi-directional copies follow outside a transaction (schema_follow.bring_copy, autocommit).
    copy = make_server("sqlite", "sdst")
    run_sql(copy, 'CREATE TABLE stock (id INTEGER PRIMARY KEY, "name" VARCHAR(40) NOT NULL, qty INTEGER NOT NULL)')
    run_sql(copy, "INSERT INTO stock VALUES (1, 'a', 1)")
    pg = dialects.get("postgresql")
    before = [["id", "integer", 0, 1, None, 1], ["name", "character varying(40)", 0, 0, None, 2],
              ["qty", "integer", 0, 0, None, 3]]  # fmt: skip
    after = [before[0], ["name", "character varying(40)", 1, 0, None, 2], before[2]]
    found = schema_changes.between(pg, "stock", before, after)
    ddl = bring_copy(copy, "stock", found)
    assert ddl[0] == "PRAGMA writable_schema = ON" and bring_copy(copy, "stock", found) == []  # once only
    run_sql(copy, "INSERT INTO stock VALUES (2, NULL, 2)")
    with pytest.raises(pyodbc.Error, match="NOT NULL"):
        run_sql(copy, "INSERT INTO stock VALUES (3, 'c', NULL)")  # the other column keeps its NOT NULL
    assert fetch_all(copy, "SELECT id, name FROM stock ORDER BY id") == [(1, "a"), (2, None)]
    assert fetch_all(copy, "PRAGMA integrity_check") == [("ok",)]


def test_a_not_null_the_subscribers_rows_break_halts_it_with_one_line_and_goes_through_once_they_are_mended(
    make_server, jobs_sync, spark
):
    source, dest = make_server("mysql", "ssrc"), make_server("postgresql", "sdst")
    publish(source, dest, tables=("stock",))
    run_sql(dest, "UPDATE stock SET name = NULL WHERE id = 2")  # the copy's own change, not the publisher's
    run_sql(source, NOT_NULL["mysql"][0])
    run_sql(source, "INSERT INTO stock (id, name, cat) VALUES (11, 'after not null', 1)")
    execute(Actor.command(), "REPL_SYNC ('ssrc', 's')", context=dest, wait=True)
    sub = ReplSubscriber.objects.get(server="ssrc", account="s", subscriber="sdst")
    assert sub.halt_count is not None
    assert "sdst.stock cannot follow ssrc's change 'set not null on name'" in sub.halt_error
    assert "\n" not in sub.halt_error and name_nullable(dest)
    run_sql(dest, "UPDATE stock SET name = 'item 2' WHERE id = 2")
    ReplSubscriber.objects.filter(pk=sub.pk).update(retry_at=None)
    sync(dest)
    assert not name_nullable(dest)
    assert content(dest) == content(source)

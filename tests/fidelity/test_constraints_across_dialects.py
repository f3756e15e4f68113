"""Created copies keep NOT NULL, portable defaults, unique constraints and secondary indexes, translated to
the destination's dialect, in transactional, bidir and snapshot replication; what cannot be translated is
named and left out."""

from __future__ import annotations

import pyodbc
import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.core.introspection import require_table, with_constraints
from replication_admin.engine import dialects
from replication_admin.engine.schema import Default, TableInfo
from replication_admin.models import AuditEntry, JobRun, Server
from replication_admin.statements import execute
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

SOURCE_DDL = {
    "postgresql": [
        'CREATE SEQUENCE "s"',
        'CREATE TABLE "stock" (id integer PRIMARY KEY, sku varchar(20) NOT NULL, qty integer NOT NULL DEFAULT 0, '
        "label varchar(40) DEFAULT 'it''s new', active boolean DEFAULT true, created timestamp DEFAULT now(), "
        "note text, seq integer DEFAULT nextval('s'), CONSTRAINT stock_sku UNIQUE (sku))",
        'CREATE INDEX stock_label_qty ON "stock" (label, qty)',
        'CREATE INDEX stock_lower ON "stock" (lower(label))',
    ],
    "mysql": [
        "CREATE TABLE stock (id int PRIMARY KEY, sku varchar(20) NOT NULL, qty int NOT NULL DEFAULT 0, "
        "label varchar(40) DEFAULT 'it''s new', active tinyint(1) DEFAULT 1, "
        "created datetime(6) DEFAULT CURRENT_TIMESTAMP(6), note text, seq int DEFAULT (uuid_short() % 1000), "
        "UNIQUE KEY stock_sku (sku), KEY stock_label_qty (label, qty))",
    ],
    "sqlite": [
        "CREATE TABLE stock (id INTEGER PRIMARY KEY, sku VARCHAR(20) NOT NULL UNIQUE, qty INTEGER NOT NULL DEFAULT 0, "
        "label VARCHAR(40) DEFAULT 'it''s new', active BOOLEAN DEFAULT 1, created TIMESTAMP DEFAULT CURRENT_TIMESTAMP, "
        "note TEXT, seq INTEGER DEFAULT (abs(random()) % 1000))",
        "CREATE INDEX stock_label_qty ON stock (label, qty)",
        "CREATE INDEX stock_lower ON stock (lower(label))",
    ],
}
NOT_COPIED = {
    "postgresql": ["column seq: the default nextval('s'::regclass) is not portable", "index stock_lower"],
    "mysql": ["column seq: the default", "is not portable"],
    "sqlite": ["column seq: the default abs(random()) % 1000 is not portable", "index stock_lower"],
}
PAIRS = [("postgresql", "mysql"), ("mysql", "sqlite"), ("sqlite", "postgresql")]


def run(text: str, context: Server | None = None) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def make_source(server: Server) -> TableInfo:
    for statement in SOURCE_DDL[server.dialect]:
        run_sql(server, statement)
    q = dialects.get(server.dialect).quote
    run_sql(server, f"INSERT INTO {q('stock')} ({q('id')}, {q('sku')}, {q('qty')}) VALUES (1, 'A-1', 5)")
    return with_constraints(server, require_table(server, "stock"))


def assert_kept(source: TableInfo, dest: Server) -> None:
    copy = with_constraints(dest, require_table(dest, "stock"))
    nullable = {c.name: c.nullable for c in copy.columns}
    assert (nullable["id"], nullable["sku"], nullable["qty"], nullable["label"]) == (False, False, False, True)
    defaults = {c.name: c.default for c in copy.columns}
    assert defaults["qty"] == Default("number", "0")
    assert defaults["label"] == Default("text", "it's new")
    assert defaults["active"] == Default("boolean", "true")
    assert defaults["created"] == Default("now")
    assert defaults["note"] is None and defaults["seq"] is None
    assert sorted((i.columns, i.unique) for i in copy.indexes) == [(("label", "qty"), False), (("sku",), True)]
    assert copy.untranslated == ()
    # The copy behaves as the source: defaults fill a short insert, the unique constraint holds.
    q = dialects.get(dest.dialect).quote
    run_sql(dest, f"INSERT INTO {q('stock')} ({q('id')}, {q('sku')}) VALUES (100, 'new')")
    row = fetch_all(dest, f"SELECT qty, label, active, created FROM {q('stock')} WHERE id = 100")[0]
    assert (int(row[0]), row[1], str(row[2]).lower() in {"1", "true"}, row[3] is not None) == (
        0,
        "it's new",
        True,
        True,
    )
    with pytest.raises(pyodbc.Error):
        run_sql(dest, f"INSERT INTO {q('stock')} ({q('id')}, {q('sku')}) VALUES (101, 'new')")
    source_names = {c.name for c in source.columns}
    assert {c.name for c in copy.columns} - source_names <= {"ROWGUID"}


def assert_named(text: str, dialect: str) -> None:
    for part in NOT_COPIED[dialect]:
        assert part in text, (part, text)


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), PAIRS)
def test_a_transactional_subscriber_keeps_constraints_and_indexes(
    make_server, jobs_sync, spark, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "csrc"), make_server(dest_dialect, "cdst")
    info = make_source(source)
    assert_named(" ".join(info.untranslated), source_dialect)
    run("REPL_PUBLISH ('c', 'c.log'); REPL_PUB_ADD ('c', 'stock', 2, 0, null)", source)
    run("REPL_SERVER ('csrc', '1111'); REPL_SUBSCRIBE ('csrc', 'c'); REPL_INIT_COPY ('csrc', 'c')", dest)
    assert_kept(info, dest)
    job = JobRun.objects.filter(kind="trx_init").latest("pk")
    assert_named(job.log, source_dialect)


def test_a_subscriber_table_created_by_the_sync_keeps_them_too(make_server, jobs_sync, spark):
    """A table added to the publication after the initial copy comes from its creating entry ('C')."""
    source, dest = make_server("postgresql", "csrc"), make_server("mysql", "cdst")
    info = make_source(source)
    run("REPL_PUBLISH ('c', 'c.log')", source)
    run("REPL_SERVER ('csrc', '1111'); REPL_SUBSCRIBE ('csrc', 'c'); REPL_INIT_COPY ('csrc', 'c')", dest)
    run("REPL_PUB_ADD ('c', 'stock', 2, 0, null)", source)
    run("REPL_SYNC ('csrc', 'c')", dest)
    assert_kept(info, dest)


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), PAIRS)
def test_a_snapshot_destination_keeps_constraints_and_indexes(make_server, spark, source_dialect, dest_dialect):
    source, dest = make_server(source_dialect, "csrc"), make_server(dest_dialect, "cdst")
    info = make_source(source)
    run("create snapshot log for stock; create snapshot cdst.stock from stock", source)
    assert_kept(info, dest)
    event = AuditEntry.objects.filter(action="snapshot.create").latest("pk")
    assert_named(" ".join(event.detail["not_copied"]), source_dialect)


def test_a_bidir_subscriber_keeps_constraints_and_indexes(make_server, jobs_sync, spark):
    source, dest = make_server("mysql", "csrc"), make_server("postgresql", "cdst")
    info = make_source(source)
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('csrc.stock', 2); REPL_CREATE_SNAPSHOT_SUB ('cdst', 'csrc.stock', 2);"
        "REPL_INIT_SNAPSHOT ('cdst', 'csrc.stock', 2)"
    )
    assert_kept(info, dest)


def test_a_snapshot_of_some_columns_keeps_the_indexes_over_them_alone(make_server, spark):
    source, dest = make_server("postgresql", "csrc"), make_server("sqlite", "cdst")
    make_source(source)
    run("create snapshot log for stock; create snapshot cdst.stock from stock 'id, sku, qty'", source)
    copy = with_constraints(dest, require_table(dest, "stock"))
    assert [c.name for c in copy.columns] == ["id", "sku", "qty"]
    assert [(i.columns, i.unique) for i in copy.indexes] == [(("sku",), True)]


def swap_skus(server: Server) -> None:
    """Rows 1 and 2 swap their unique values in one transaction (through a third value), then row 3 takes the
    value row 1 gave up in the transaction after it."""
    q = dialects.get(server.dialect).quote
    stock, sku, key = q("stock"), q("sku"), q("id")
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        cursor.execute(f"UPDATE {stock} SET {sku} = 'tmp' WHERE {key} = 1")
        cursor.execute(f"UPDATE {stock} SET {sku} = 'A-1' WHERE {key} = 2")
        cursor.execute(f"UPDATE {stock} SET {sku} = 'A-2' WHERE {key} = 1")
        conn.commit()
    run_sql(server, f"UPDATE {stock} SET {sku} = 'A-9' WHERE {key} = 1")
    run_sql(server, f"UPDATE {stock} SET {sku} = 'A-2' WHERE {key} = 3")
    # A new row first written with a free value takes, later, the value another row gave up in between.
    run_sql(server, f"INSERT INTO {stock} ({key}, {sku}, {q('qty')}) VALUES (4, 'N-4', 1)")
    run_sql(server, f"UPDATE {stock} SET {sku} = 'Q-1' WHERE {key} = 1")
    run_sql(server, f"UPDATE {stock} SET {sku} = 'A-9' WHERE {key} = 4")


def skus(server: Server) -> list[tuple]:
    q = dialects.get(server.dialect).quote
    return [(int(i), s) for i, s in fetch_all(server, f"SELECT id, {q('sku')} FROM {q('stock')} ORDER BY id")]


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "sqlite")])
def test_unique_values_moved_between_rows_replicate_transactionally(
    make_server, jobs_sync, spark, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "csrc"), make_server(dest_dialect, "cdst")
    make_source(source)
    q = dialects.get(source.dialect).quote
    run_sql(source, f"INSERT INTO {q('stock')} ({q('id')}, {q('sku')}, {q('qty')}) VALUES (2, 'A-2', 1), (3, 'A-3', 1)")
    run("REPL_PUBLISH ('c', 'c.log'); REPL_PUB_ADD ('c', 'stock', 2, 0, null)", source)
    run("REPL_SERVER ('csrc', '1111'); REPL_SUBSCRIBE ('csrc', 'c'); REPL_INIT_COPY ('csrc', 'c')", dest)
    swap_skus(source)
    run("REPL_SYNC ('csrc', 'c')", dest)
    assert skus(dest) == skus(source) == [(1, "Q-1"), (2, "A-1"), (3, "A-2"), (4, "A-9")]


def test_unique_values_moved_between_rows_replicate_by_snapshot(make_server, spark):
    source, dest = make_server("postgresql", "csrc"), make_server("mysql", "cdst")
    make_source(source)
    q = dialects.get(source.dialect).quote
    run_sql(source, f"INSERT INTO {q('stock')} ({q('id')}, {q('sku')}, {q('qty')}) VALUES (2, 'A-2', 1), (3, 'A-3', 1)")
    run("create snapshot log for stock; create snapshot cdst.stock from stock", source)
    swap_skus(source)
    run("update snapshot cdst.stock")
    assert skus(dest) == skus(source) == [(1, "Q-1"), (2, "A-1"), (3, "A-2"), (4, "A-9")]

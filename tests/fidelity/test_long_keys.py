"""Text keys longer than MariaDB can index whole (PostgreSQL `text` and `varchar(6000)` keys of 800 and 5,000
characters, 4-byte UTF-8 among them) arrive on a MariaDB copy in snapshot, bi-directional and transactional
replication, through the initial copy and through later inserts, updates and deletes: nothing skipped."""

from __future__ import annotations

import hashlib

import pyodbc
import pytest

from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import lookup_table, require_table, with_constraints
from replication_admin.core.shapes import ensure_copy
from replication_admin.engine import dialects
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType
from replication_admin.models import Server
from replication_admin.statements import execute
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

# Two keys share their first 799 characters: a prefix index alone would take them for one.
LONG_800 = "k" * 799 + "1"
TWIN_800 = "k" * 799 + "2"
EMOJI_800 = "表😀" * 400
LONG_5000 = "x" * 4999 + "5"
EMOJI_5000 = "😀" * 4999 + "表"
SHORT = ["a", "b", "表😀"]
FIRST_KEYS = [*SHORT, LONG_800, TWIN_800, EMOJI_800, LONG_5000, EMOJI_5000]
NEW_KEYS = ["n" * 799 + "3", "😀" * 4998 + "新", "c"]

TABLES = {
    "items": "CREATE TABLE items (sku text PRIMARY KEY, qty integer, note text)",
    "stock": "CREATE TABLE stock (region integer, sku varchar(6000), qty integer, note text, PRIMARY KEY (region, sku))",
}
COLUMNS = {"items": ["sku", "qty", "note"], "stock": ["region", "sku", "qty", "note"]}


def run(text: str, context: Server | None = None) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def insert(server: Server, keys: list[str], qty: int) -> None:
    for i, key in enumerate(keys):
        run_sql(server, "INSERT INTO items (sku, qty, note) VALUES (?, ?, ?)", [key, qty + i, f"note {len(key)}"])
        run_sql(server, "INSERT INTO stock (region, sku, qty, note) VALUES (?, ?, ?, ?)", [i % 2, key, qty, "n"])


def content(server: Server, table: str) -> tuple[int, str]:
    """(rows, hash of the sorted rows) of the published columns."""
    q = dialects.get(server.dialect).quote
    rows = fetch_all(server, f"SELECT {', '.join(q(c) for c in COLUMNS[table])} FROM {q(table)}")
    text = sorted(repr(tuple(str(v) if v is not None else None for v in row)) for row in rows)
    return len(rows), hashlib.sha256("\n".join(text).encode()).hexdigest()


def assert_equal(source: Server, dest: Server, rows: int) -> None:
    for table in TABLES:
        assert content(dest, table) == content(source, table)
        assert content(dest, table)[0] == rows


def setup_source(source: Server) -> None:
    for ddl in TABLES.values():
        run_sql(source, ddl)
    insert(source, FIRST_KEYS, 1)


def change(server: Server) -> None:
    """New long keys, an update of a non-key column of long-key rows, deletes of long-key rows."""
    insert(server, NEW_KEYS, 100)
    for key in (LONG_800, EMOJI_5000):
        run_sql(server, "UPDATE items SET qty = qty + 1000, note = 'changed' WHERE sku = ?", [key])
        run_sql(server, "UPDATE stock SET qty = 7, note = 'changed' WHERE sku = ?", [key])
    for key in (TWIN_800, LONG_5000):
        run_sql(server, "DELETE FROM items WHERE sku = ?", [key])
        run_sql(server, "DELETE FROM stock WHERE sku = ?", [key])


ROWS_AFTER = len(FIRST_KEYS) + len(NEW_KEYS) - 2


def test_mariadb_copy_keeps_keys_longer_than_an_index_as_its_key(make_server):
    """The copy's key is held whole by a unique hash (a key differing only past the index prefix is another
    row; the same key twice is refused) and reads back as the copy's primary key, so the copy is accepted
    as it is by the next subscription."""
    source, dest = make_server("postgresql"), make_server("mysql")
    setup_source(source)
    for table, key in (("items", ["sku"]), ("stock", ["region", "sku"])):
        published = with_constraints(source, require_table(source, table))
        copy = ensure_copy(dest, table, published)
        assert [k.name for k in copy.primary_key] == key
        assert with_constraints(dest, copy).indexes == ()
        assert [k.name for k in ensure_copy(dest, table, published).primary_key] == key
    run_sql(dest, "INSERT INTO items (sku, qty) VALUES (?, 1), (?, 2)", [LONG_800, TWIN_800])
    with pytest.raises(pyodbc.IntegrityError, match="Duplicate entry"):
        run_sql(dest, "INSERT INTO items (sku, qty) VALUES (?, 3)", [LONG_800])
    assert fetch_all(dest, "SELECT qty FROM items WHERE sku = ?", [TWIN_800]) == [(2,)]


def test_mariadb_keys_that_fit_an_index_stay_primary_keys_and_impossible_ones_are_refused(make_server):
    mysql = dialects.get("mysql")
    assert mysql.key_constraints_sql([("`sku`", LogicalType("varchar", length=768))]) == ["PRIMARY KEY (`sku`)"]
    assert mysql.key_constraints_sql([("`sku`", LogicalType("varchar", length=769))]) == [
        "UNIQUE KEY `PRIMARY_HASH` (`sku`) USING HASH",
        "KEY `PRIMARY_PREFIX` (`sku`(768))",
    ]
    uuids = [Column(name=f"u{i}", declared="uuid", logical=LogicalType("uuid"), pk_position=i + 1) for i in range(22)]
    wide = TableInfo(
        name="wide", columns=(*uuids, Column(name="v", declared="text", logical=LogicalType("long_varchar")))
    )
    dest = make_server("mysql", "mywide")
    with pytest.raises(
        ReplicationError,
        match=r"^cannot create 'wide' on mywide: the key \(`u0`, .*`u21`\) takes more "
        r"than the 3,072 bytes MariaDB can index$",
    ):
        ensure_copy(dest, "wide", wide)
    assert lookup_table(dest, "wide") is None


def test_long_text_keys_arrive_on_mariadb_in_transactional_replication(make_server, jobs_sync, spark):
    source, dest = make_server("postgresql", "lksrc"), make_server("mysql", "lkdst")
    setup_source(source)
    run(
        "REPL_PUBLISH ('lk', 'lk.log'); REPL_PUB_ADD ('lk', 'items', 2, 0, null); "
        "REPL_PUB_ADD ('lk', 'stock', 2, 0, null)",
        source,
    )
    run("REPL_SERVER ('lksrc', '1111'); REPL_SUBSCRIBE ('lksrc', 'lk'); REPL_INIT_COPY ('lksrc', 'lk')", dest)
    assert_equal(source, dest, len(FIRST_KEYS))
    change(source)
    assert run("REPL_SYNC ('lksrc', 'lk')", dest)[0].details["skipped"] == 0
    assert_equal(source, dest, ROWS_AFTER)


def test_long_text_keys_arrive_on_mariadb_in_bidir_replication(make_server, jobs_sync, spark):
    source, dest = make_server("postgresql", "lkbsrc"), make_server("mysql", "lkbdst")
    setup_source(source)
    for table in TABLES:
        run(
            f"REPL_CREATE_SNAPSHOT_PUB ('lkbsrc.{table}', 2); REPL_CREATE_SNAPSHOT_SUB ('lkbdst', 'lkbsrc.{table}', 2);"
            f"REPL_INIT_SNAPSHOT ('lkbdst', 'lkbsrc.{table}', 2)"
        )
    assert_equal(source, dest, len(FIRST_KEYS))
    change(source)
    # The subscriber's own changes of long-key rows travel back.
    run_sql(dest, "INSERT INTO items (sku, qty, note) VALUES (?, 5, 'sub')", ["s" * 900])
    run_sql(dest, "INSERT INTO stock (region, sku, qty, note) VALUES (1, ?, 5, 'sub')", ["s" * 900])
    run_sql(dest, "UPDATE items SET note = 'sub' WHERE sku = ?", [EMOJI_800])
    run_sql(dest, "UPDATE stock SET note = 'sub' WHERE sku = ?", [EMOJI_800])
    for table in TABLES:
        run(f"REPL_UPDATE_SNAPSHOT ('lkbsrc.{table}', 2)")
    assert_equal(source, dest, ROWS_AFTER + 1)
    assert fetch_all(source, "SELECT note FROM items WHERE sku = ?", [EMOJI_800]) == [("sub",)]


def test_long_text_keys_arrive_on_mariadb_in_snapshot_replication(make_server, spark, settings):
    source, dest = make_server("postgresql", "lkssrc"), make_server("mysql", "lksdst")
    setup_source(source)
    for table in TABLES:
        run(f"create snapshot log for {table}; create snapshot lksdst.{table} from {table}", source)
    assert_equal(source, dest, len(FIRST_KEYS))
    change(source)  # a small window, applied without Spark
    run("update snapshot lksdst.items; update snapshot lksdst.stock")
    assert_equal(source, dest, ROWS_AFTER)
    settings.REFRESH_SMALL_WINDOW = 0  # every window through Spark
    for key in NEW_KEYS:
        run_sql(source, "UPDATE items SET note = 'again' WHERE sku = ?", [key])
        run_sql(source, "UPDATE stock SET note = 'again' WHERE sku = ?", [key])
    run_sql(source, "DELETE FROM items WHERE sku = ?", [EMOJI_800])
    run_sql(source, "DELETE FROM stock WHERE sku = ?", [EMOJI_800])
    run("update snapshot lksdst.items; update snapshot lksdst.stock")
    assert_equal(source, dest, ROWS_AFTER - 1)
    insert(source, ["f" * 1000], 500)
    settings.NATIVE_LOAD = True  # the full refresh's staging copy filled by LOAD DATA instead of JDBC
    run("update snapshot lksdst.items as nonincremental; update snapshot lksdst.stock as nonincremental")
    assert_equal(source, dest, ROWS_AFTER)

"""Capture of published tables into a publication's log, live on PostgreSQL, MariaDB and SQLite:
row images, commit order, rollbacks, wraparound of levels."""

from __future__ import annotations

import dataclasses
import threading
import time
from decimal import Decimal

import pyodbc
import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects, levels
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.dialects.mysql import EarlierLog
from replication_admin.models import ReplAccount
from replication_admin.servers.actions import do_register_server
from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import lookups as trx_lookups
from tests.conftest import server_data

DIALECTS = ["postgresql", "mysql", "sqlite"]
# "pgwal": PostgreSQL capturing from the WAL (a cluster of the suite's with wal_level = logical).
CAPTURES = ["postgresql", "pgwal", "mysql", "sqlite"]

ITEMS_DDL = {
    "postgresql": "CREATE TABLE items (id integer PRIMARY KEY, name varchar(50), price numeric(10, 2), "
    "seen timestamp, payload bytea)",
    "mysql": "CREATE TABLE items (id int PRIMARY KEY, name varchar(50), price decimal(10, 2), "
    "seen datetime(6), payload longblob)",
    "sqlite": "CREATE TABLE items (id integer PRIMARY KEY, name varchar(50), price numeric(10, 2), "
    "seen timestamp, payload blob)",
}
ITEMS_DDL["pgwal"] = ITEMS_DDL["postgresql"]


def base(dialect: str) -> str:
    return "postgresql" if dialect == "pgwal" else dialect


def execute(server, *statements, params=()):
    with connections.connect(server) as conn:
        for text in statements:
            conn.cursor().execute(text, *params) if params else conn.cursor().execute(text)


def published(make_server, dialect: str, account: str = "tbl"):
    server = make_server(dialect)
    execute(server, ITEMS_DDL[dialect], "CREATE TABLE other (id integer PRIMARY KEY)")
    wal = dialect == "pgwal"
    if wal:  # the publication's row says how it captures (do_publish writes it)
        ReplAccount.objects.create(server=server.name, account=account, capture=ReplAccount.Capture.WAL)
    trx_capture.create_log(server, account, wal=wal)
    trx_capture.add_capture(server, account, trx_lookups.describe(server, "items"))
    return server


def committed(server, statement: str) -> None:
    """Run one autocommitted statement, then let a reader look at the log (as a sync does)."""
    execute(server, statement)
    trx_capture.publisher_count(server, "tbl")


def transactions(server, account: str = "tbl"):
    count = trx_capture.publisher_count(server, account)
    return trx_capture.read_transactions(server, account, 0, count)


@pytest.mark.parametrize("dialect", CAPTURES)
def test_each_change_is_logged_with_its_row_images_in_its_own_transaction(make_server, dialect):
    server = published(make_server, dialect)
    committed(
        server,
        "INSERT INTO items (id, name, price, seen) VALUES (1, 'a''b \"c', 12.34, '2026-11-22 10:11:12.123456')",
    )
    committed(server, "UPDATE items SET price = 99.99 WHERE id = 1")
    committed(server, "DELETE FROM items WHERE id = 1")
    txns = transactions(server)
    assert [t.level for t in txns] == [1, 2, 3]
    assert [[e.op for e in t.entries] for t in txns] == [["I"], ["U"], ["D"]]
    assert all(t.origin == server.name for t in txns)
    table = trx_lookups.describe(server, "items")
    inserted = sql.row_values(txns[0].entries[0].new, table, base(dialect))
    assert inserted[:3] == [1, "a'b \"c", "12.34"]
    assert inserted[3].startswith("2026-11-22 10:11:12.123")
    assert sql.row_values(txns[1].entries[0].old, table, base(dialect))[2] == "12.34"
    assert Decimal(sql.row_values(txns[1].entries[0].new, table, base(dialect))[2]) == Decimal("99.99")
    assert sql.key_values(txns[2].entries[0].old, table, base(dialect)) == [1]
    assert txns[2].entries[0].new is None


@pytest.mark.parametrize("dialect", CAPTURES)
def test_a_transaction_of_several_statements_is_one_level_and_binary_survives(make_server, dialect):
    server = published(make_server, dialect)
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        for i in range(1, 4):
            cursor.execute("INSERT INTO items (id, name, payload) VALUES (?, ?, ?)", i, f"n{i}", bytes([0, i, 255]))
        cursor.execute("UPDATE items SET name = 'changed' WHERE id = 2")
        cursor.execute("INSERT INTO other (id) VALUES (1)")  # not published: not logged
        conn.commit()
    txns = transactions(server)
    assert len(txns) == 1 and txns[0].count == 1
    assert [e.op for e in txns[0].entries] == ["I", "I", "I", "U"]
    table = trx_lookups.describe(server, "items")
    assert sql.row_values(txns[0].entries[1].new, table, base(dialect))[4] == bytes([0, 2, 255])


@pytest.mark.parametrize("dialect", ["postgresql", "pgwal", "mysql"])
def test_a_transaction_that_began_first_and_commits_last_gets_the_later_level(make_server, dialect):
    """Readers number committed transactions: PostgreSQL's in the order of their last entry, MariaDB's in the
    order of their commits. The transaction that logged first but changed a row after the other committed it is
    numbered last."""
    server = published(make_server, dialect)
    first = connections.open_connection(server, autocommit=False)
    second = connections.open_connection(server, autocommit=False)
    try:
        first.cursor().execute("INSERT INTO items (id, name) VALUES (1, 'began first')")
        second.cursor().execute("INSERT INTO items (id, name) VALUES (2, 'began second')")
        second.commit()
        first.cursor().execute("UPDATE items SET name = 'committed last' WHERE id = 2")
        first.commit()
    finally:
        first.close()
        second.close()
    txns = transactions(server)
    assert [t.level for t in txns] == [1, 2]
    table = trx_lookups.describe(server, "items")
    assert [sql.key_values(e.new, table, base(dialect)) for e in txns[0].entries] == [[2]]
    assert [e.op for e in txns[1].entries][-1] == "U"


def test_on_postgresql_a_writer_changes_no_row_that_another_writer_changes(make_server):
    server = published(make_server, "postgresql")
    counter = 'SELECT xmin::text, "N" FROM "RTSEQ_tbl"'
    with connections.connect(server) as conn:
        before = tuple(conn.cursor().execute(counter).fetchone())
    writers = [connections.open_connection(server, autocommit=False) for _ in range(3)]
    try:
        for n, writer in enumerate(writers, start=1):  # all three under way at once, none waiting
            writer.cursor().execute("INSERT INTO items (id, name) VALUES (?, ?)", n, f"w{n}")
            writer.cursor().execute("INSERT INTO items (id, name) VALUES (?, ?)", 10 + n, f"w{n}")
        for writer in reversed(writers):
            writer.commit()
    finally:
        for writer in writers:
            writer.close()
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        assert tuple(cursor.execute(counter).fetchone()) == before  # the counter row is the readers' alone
        assert tuple(cursor.execute('SELECT COUNT(*), COUNT("N") FROM "RTTX_tbl"').fetchone()) == (3, 0)
    # The reader numbers them, one transaction each. They changed no common row, so any order replays them right;
    # committed before the same read, they go in the order of their last change.
    txns = transactions(server)
    assert [sorted(e.new["id"] for e in t.entries) for t in txns] == [[1, 11], [2, 12], [3, 13]]


def test_a_postgresql_log_without_its_numbering_function_gets_it_at_the_first_read(make_server):
    server = published(make_server, "postgresql")
    execute(server, 'DROP FUNCTION "RTTX_tbl_sequence"()')  # as a log made by an earlier version has none
    committed(server, "INSERT INTO items (id, name) VALUES (1, 'a')")
    committed(server, "INSERT INTO items (id, name) VALUES (2, 'b')")
    assert [[e.new["id"] for e in t.entries] for t in transactions(server)] == [[1], [2]]


@pytest.mark.parametrize("dialect", ["postgresql", "pgwal", "mysql"])
def test_replaying_the_log_in_order_gives_the_table_under_concurrent_writers_and_readers(make_server, dialect):
    """Four writers update, insert and delete overlapping rows while a reader keeps numbering; replaying every
    transaction in its number's order must give exactly the table's content."""
    server = published(make_server, dialect)
    stop = threading.Event()
    errors: list[BaseException] = []

    upsert = {
        "postgresql": "INSERT INTO items (id, name) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name",
        "mysql": "INSERT INTO items (id, name) VALUES (?, ?) ON DUPLICATE KEY UPDATE name = VALUES(name)",
    }[base(dialect)]

    def writer(w: int) -> None:
        try:
            with connections.connect(server, autocommit=False) as conn:
                cursor = conn.cursor()
                for i in range(120):
                    key = (i * 7 + w * 3) % 12
                    try:
                        if i % 5 == 4:
                            cursor.execute("DELETE FROM items WHERE id = ?", key)
                        else:
                            cursor.execute(upsert, key, f"w{w}-{i}")
                        cursor.execute("UPDATE items SET price = ? WHERE id = ?", i, (key + 1) % 12)
                        conn.commit()
                    except pyodbc.Error as exc:  # a deadlock victim is rolled back whole: nothing to replay
                        conn.rollback()
                        if "deadlock" not in str(exc).lower():
                            raise
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        while not stop.is_set():
            trx_capture.publisher_count(server, "tbl")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    numbering = threading.Thread(target=reader)
    numbering.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    numbering.join()
    assert not errors, errors[0]
    replica: dict[int, tuple] = {}
    txns = transactions(server)
    assert [t.count for t in txns] == list(range(1, len(txns) + 1))
    for txn in txns:
        for entry in txn.entries:
            if entry.op == "D":
                replica.pop(int(entry.old["id"]), None)
            else:
                replica[int(entry.new["id"])] = (entry.new["name"], entry.new["price"])
    with connections.connect(server) as conn:
        rows = conn.cursor().execute("SELECT id, name, price FROM items").fetchall()
    table = {int(r[0]): (r[1], r[2]) for r in rows}
    assert len(table) > 0
    assert {k: (v[0], None if v[1] is None else Decimal(str(v[1]))) for k, v in replica.items()} == {
        k: (v[0], None if v[1] is None else Decimal(str(v[1]))) for k, v in table.items()
    }


@pytest.mark.parametrize("dialect", CAPTURES)
def test_a_bulk_insert_and_delete_log_every_row_in_one_transaction_and_an_empty_one_nothing(make_server, dialect):
    server = published(make_server, dialect)
    with connections.connect(server) as conn:
        conn.cursor().executemany("INSERT INTO other (id) VALUES (?)", [(i,) for i in range(1, 501)])
    committed(server, "INSERT INTO items (id, name) SELECT id, 'bulk' FROM other")
    committed(server, "DELETE FROM items WHERE id > 250")
    committed(server, "DELETE FROM items WHERE id < 0")  # changes nothing: no transaction
    txns = transactions(server)
    assert [t.count for t in txns] == [1, 2]
    assert [e.op for e in txns[0].entries] == ["I"] * 500
    assert sorted(int(e.new["id"]) for e in txns[0].entries) == list(range(1, 501))
    assert len({e.change_id for e in txns[0].entries}) == 500  # a pushed change is named by it
    assert [e.op for e in txns[1].entries] == ["D"] * 250
    assert sorted(int(e.old["id"]) for e in txns[1].entries) == list(range(251, 501))


def test_on_mariadb_writers_of_one_publication_log_at_once_and_are_numbered_as_they_commit(make_server):
    server = published(make_server, "mysql")
    writers = [connections.open_connection(server, autocommit=False) for _ in range(3)]
    try:
        for n, writer in enumerate(writers, start=1):
            cursor = writer.cursor()
            # A writer that had to wait for another's lock would fail here rather than wait (the least MariaDB
            # allows is a second): all three hold logged changes at once.
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            cursor.execute("INSERT INTO items (id, name) VALUES (?, ?)", n, f"w{n}")
            cursor.execute("INSERT INTO items (id, name) VALUES (?, ?)", 10 + n, f"w{n}")
        with connections.connect(server) as conn:  # nothing committed: nothing to number, and no reader waits
            assert trx_capture.publisher_count(server, "tbl") == 0
            assert tuple(conn.cursor().execute("SELECT COUNT(*) FROM `RTTX_tbl`").fetchone()) == (0,)
        for writer in (writers[1], writers[2], writers[0]):  # each commit read before the next
            writer.commit()
            trx_capture.publisher_count(server, "tbl")
    finally:
        for writer in writers:
            writer.close()
    txns = transactions(server)
    assert [sorted(e.new["id"] for e in t.entries) for t in txns] == [[2, 12], [3, 13], [1, 11]]
    assert [t.count for t in txns] == [1, 2, 3]
    assert transactions(server) == txns  # numbered once: a second read numbers nothing again


def test_on_mariadb_transactions_committed_between_two_reads_keep_their_commit_order(make_server):
    server = published(make_server, "mysql")
    first = connections.open_connection(server, autocommit=False)
    try:
        first.cursor().execute("INSERT INTO items (id, name) VALUES (1, 'first')")
        committed(server, "INSERT INTO items (id, name) VALUES (2, 'second')")  # a read numbers it alone
        first.commit()
    finally:
        first.close()
    committed(server, "INSERT INTO items (id, name) VALUES (3, 'third')")
    assert [[e.new["id"] for e in t.entries] for t in transactions(server)] == [[2], [1], [3]]


def test_purging_a_mariadb_log_leaves_no_history_of_the_purged_entries(make_server):
    server = published(make_server, "mysql")
    for i in (1, 2, 3):
        committed(server, f"INSERT INTO items (id, name) VALUES ({i}, 'x')")
    assert trx_capture.purge_log(server, "tbl", 2) == 2
    with connections.connect(server) as conn:
        kept = conn.cursor().execute("SELECT COUNT(*) FROM `RTLOG_tbl` FOR SYSTEM_TIME ALL").fetchone()[0]
    assert kept == 1  # the third transaction's entry, no history rows
    assert [[e.new["id"] for e in t.entries] for t in transactions(server)] == [[3]]


def test_a_purge_empties_the_mariadb_transaction_registry_only_when_asked_and_no_other_table_needs_it(
    make_server, settings
):
    """The server registers each captured transaction in mysql.transaction_registry and never deletes the rows.
    With REPLADMIN_MARIADB_REGISTRY_TRUNCATE a purge empties it, but not while a table that is not a log is
    versioned by transaction (its time travel reads the registry)."""
    server = published(make_server, "mysql")
    registered = (
        "SELECT COUNT(*) FROM mysql.transaction_registry r WHERE r.transaction_id IN "
        "(SELECT l.TXID FROM `RTLOG_tbl` FOR SYSTEM_TIME ALL l)"
    )

    def ours() -> int:
        with connections.connect(server) as conn:
            return int(conn.cursor().execute(registered).fetchone()[0])

    for i in (1, 2, 3):
        committed(server, f"INSERT INTO items (id, name) VALUES ({i}, 'x')")
    settings.MARIADB_REGISTRY_TRUNCATE = False
    assert trx_capture.purge_log(server, "tbl", 1) == 1
    assert ours() == 2  # off by default: the registry keeps the rows
    execute(
        server,
        "CREATE TABLE audited (id integer PRIMARY KEY, s bigint unsigned GENERATED ALWAYS AS ROW START, "
        "e bigint unsigned GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME (s, e)) WITH SYSTEM VERSIONING",
    )
    settings.MARIADB_REGISTRY_TRUNCATE = True
    assert trx_capture.purge_log(server, "tbl", 2) == 1
    assert ours() == 1  # another table versioned by transaction: kept
    execute(server, "DROP TABLE audited")
    committed(server, "INSERT INTO items (id, name) VALUES (4, 'x')")
    assert trx_capture.purge_log(server, "tbl", 3) == 1
    assert ours() == 0
    assert [[e.new["id"] for e in t.entries] for t in transactions(server)] == [[4]]


def test_a_mariadb_log_made_before_versioning_keeps_its_writers_numbering(make_server):
    """A log made by an earlier version (RTLOG's TXID a plain column) goes on working as it was made: its
    writers number at their first change, one at a time, and readers close the current number."""
    server = make_server("mysql")
    execute(server, ITEMS_DDL["mysql"])
    earlier = EarlierLog()
    table = trx_lookups.describe(server, "items")
    with connections.connect(server) as conn:
        for statement in [*sql.log_ddl(earlier, "tbl"), *sql.text_table_ddl(earlier)]:
            conn.cursor().execute(statement)
        for statement in sql.text_capture_objects(earlier, "tbl", server.name).create:
            conn.cursor().execute(statement)
    trx_capture.add_capture(server, "tbl", table)  # a table added later gets the log's kind of triggers
    with connections.connect(server, autocommit=False) as conn:
        for i in (1, 2):
            conn.cursor().execute(f"INSERT INTO items (id, name) VALUES ({i}, 'x')")
            conn.commit()
    trx_capture.append_entry(server, "tbl", "T", "", '{"stmt": "p (?)", "args": [7]}')
    committed(server, "UPDATE items SET name = 'y' WHERE id = 1")
    txns = transactions(server)
    assert [[e.op for e in t.entries] for t in txns] == [["I", "I"], ["T"], ["U"]]
    assert [t.count for t in txns] == [1, 2, 3]
    with connections.connect(server) as conn:
        assert conn.cursor().execute("SELECT COUNT(*) FROM `RTTX_tbl` WHERE `TXID` <> `N`").fetchone()[0] == 0
    assert trx_capture.purge_log(server, "tbl", 2) == 2
    assert [t.count for t in transactions(server)] == [3]


@pytest.mark.parametrize("dialect", CAPTURES)
def test_a_rolled_back_transaction_leaves_no_gap(make_server, dialect):
    server = published(make_server, dialect)
    with connections.connect(server, autocommit=False) as conn:
        conn.cursor().execute("INSERT INTO items (id, name) VALUES (1, 'never')")
        conn.rollback()
    committed(server, "INSERT INTO items (id, name) VALUES (2, 'kept')")
    txns = transactions(server)
    assert [t.count for t in txns] == [1]
    assert [e.new["id"] for e in txns[0].entries] == [2]


@pytest.mark.parametrize("dialect", CAPTURES)
def test_levels_wrap_from_0x7fffffff_to_1(make_server, dialect):
    server = published(make_server, dialect)
    d = dialects.get(base(dialect))
    names = sql.log_names(d, "tbl")
    start = levels.REPL_WRAPAROUND - 2
    execute(server, f"UPDATE {d.qualify(names.seq, connections.table_schema(server))} SET {d.quote('N')} = {start}")
    for i in range(4):
        committed(server, f"INSERT INTO items (id, name) VALUES ({i}, 'w')")
    txns = trx_capture.read_transactions(server, "tbl", start, trx_capture.publisher_count(server, "tbl"))
    assert [t.level for t in txns] == [0x7FFFFFFE, 0x7FFFFFFF, 1, 2]
    assert [t.count for t in txns] == [start + 1, start + 2, start + 3, start + 4]


@pytest.mark.parametrize("dialect", CAPTURES)
def test_repl_text_rows_and_console_entries_are_logged_in_order(make_server, dialect):
    server = published(make_server, dialect)
    d = dialects.get(base(dialect))
    text_insert = f"INSERT INTO {d.quote('REPL_TEXT')} ({d.quote('ACCOUNT')}, {d.quote('STMT')}, {d.quote('ARGS')}) "
    committed(server, text_insert + "VALUES ('tbl', 'wl_hit_repl (?, ?)', '[\"1.2.3.4\", \"bob\"]')")
    committed(server, text_insert + "VALUES ('another', 'ignored (?)', '[1]')")
    trx_capture.append_entry(server, "tbl", "T", "", '{"stmt": "p (?)", "args": [7]}')
    txns = transactions(server)
    assert [(t.entries[0].op, t.entries[0].new) for t in txns] == [
        ("T", {"stmt": "wl_hit_repl (?, ?)", "args": ["1.2.3.4", "bob"]}),
        ("T", {"stmt": "p (?)", "args": [7]}),
    ]


def test_on_sqlite_back_to_back_transactions_with_no_read_between_share_a_level_in_order(make_server):
    server = published(make_server, "sqlite")
    with connections.connect(server, autocommit=False) as conn:
        for i in (1, 2, 3):
            conn.cursor().execute(f"INSERT INTO items (id, name) VALUES ({i}, 'x')")
            conn.commit()
    trx_capture.publisher_count(server, "tbl")
    committed(server, "UPDATE items SET name = 'after a read' WHERE id = 1")
    txns = transactions(server)
    assert [[(e.op, e.new["id"]) for e in t.entries] for t in txns] == [[("I", 1), ("I", 2), ("I", 3)], [("U", 1)]]


def test_on_mariadb_back_to_back_transactions_of_one_connection_are_levels_of_their_own(make_server):
    server = published(make_server, "mysql")
    with connections.connect(server, autocommit=False) as conn:
        for i in (1, 2, 3):
            conn.cursor().execute(f"INSERT INTO items (id, name) VALUES ({i}, 'x')")
            conn.commit()
    txns = transactions(server)
    assert [[(e.op, e.new["id"]) for e in t.entries] for t in txns] == [[("I", 1)], [("I", 2)], [("I", 3)]]


def test_a_mariadb_statement_that_fails_takes_back_its_entries_and_the_transaction_is_still_logged(make_server):
    """The first entries of a transaction may come from a statement that fails and is taken back (with its
    RTTX row); the entries its later statements log still make one transaction."""
    server = published(make_server, "mysql")
    committed(server, "INSERT INTO items (id, name) VALUES (5, 'taken')")
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        with pytest.raises(pyodbc.Error):
            cursor.execute("INSERT INTO items (id, name) VALUES (4, 'undone'), (5, 'duplicate')")
        cursor.execute("INSERT INTO items (id, name) VALUES (6, 'kept')")
        conn.commit()
    txns = transactions(server)
    assert [[e.new["id"] for e in t.entries] for t in txns] == [[5], [6]]


def test_a_window_of_the_log_is_read_on_its_indexes_not_by_scanning_the_log(make_server):
    """A sync reads the entries of its window by looking its transactions up (on N, then TXID), whatever
    the size of the log; with the bounds as parameters PostgreSQL's generic plan scanned the whole log."""
    server = published(make_server, "postgresql")
    d = dialects.get("postgresql")
    names = sql.log_names(d, "tbl")
    tx, log = d.qualify(names.tx), d.qualify(names.log)
    execute(
        server,
        f"ALTER TABLE {tx} DISABLE TRIGGER USER",  # numbered here, not one commit-time update per row
        f'INSERT INTO {tx} ("TXID", "N", "ORIGIN") SELECT g * 3, g, \'x\' FROM generate_series(1, 200000) g',
        f"ALTER TABLE {tx} ENABLE TRIGGER USER",
        f'INSERT INTO {log} ("TXID", "TBL", "OP", "NEW") SELECT g * 3, \'items\', \'I\', \'{{"id": 1}}\' '
        "FROM generate_series(1, 200000) g",
        f"ANALYZE {tx}",
        f"ANALYZE {log}",
    )
    query = sql.entries_sql(d, "tbl", 100_000, 100_500)
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        cursor.execute("SET plan_cache_mode = force_generic_plan")  # as a long-lived prepared statement
        plan = "\n".join(r[0] for r in cursor.execute("EXPLAIN " + query).fetchall())
        entries = cursor.execute(query).fetchall()
    assert "Seq Scan" not in plan, plan
    assert [r[0] for r in entries] == list(range(100_001, 100_501))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_bounded_read_of_a_backlog_keeps_whole_transactions_in_order_and_reads_only_its_part(make_server, dialect):
    """A bounded read is the unbounded one cut after its last whole transaction; the server looks up only
    about the part's entries (MariaDB sorted the whole backlog's entries for each part)."""
    server = published(make_server, dialect)
    execute(server, "INSERT INTO other (id) VALUES (1), (2), (3), (4), (5)")
    for n in range(1, 41):  # 40 transactions of 1 to 5 rows
        committed(server, f"INSERT INTO items (id, name) SELECT id + {n * 10}, 'x' FROM other WHERE id <= {n % 5 + 1}")
    count = trx_capture.publisher_count(server, "tbl")
    whole = [
        (t.count, [e.new["id"] for e in t.entries]) for t in trx_capture.read_transactions(server, "tbl", 0, count)
    ]
    assert len(whole) == 40
    entries = [row[0] for row in trx_capture.read_window(server, "tbl", 0, count)]  # a statement's rows: one entry
    for after, max_rows in ((0, 7), (3, 1), (10, 40), (35, 1000)):
        read = trx_capture.read_transactions(server, "tbl", after, count, max_rows=max_rows)
        expected, rows = [], 0
        for t in (t for t in whole if t[0] > after):
            if expected and rows + entries.count(t[0]) > max_rows:
                break
            expected.append(t)
            rows += entries.count(t[0])
        assert [(t.count, [e.new["id"] for e in t.entries]) for t in read] == expected
    if dialect == "mysql":
        with connections.connect(server) as conn:
            cursor = conn.cursor()
            d = dialects.get("mysql")
            bound = cursor.execute(sql.entries_bound_sql(d, "tbl", 0, count, 10)).fetchone()[0]
            cursor.execute("FLUSH STATUS")
            rows = cursor.execute(sql.entries_sql(d, "tbl", 0, int(bound), limit=10)).fetchall()
            examined = cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'").fetchall()
        assert len(rows) == 10
        assert sum(int(v) for _k, v in examined) < 60, examined  # not the backlog's 120 entries and 40 numbers


# --- capture from the WAL (PostgreSQL, wal_level = logical) ------------------------------------------------------


def wal_objects(server) -> tuple:
    """(user triggers on items, items' replica identity, slots, publications) on the publisher."""
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        triggers = cursor.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'items'::regclass AND NOT tgisinternal"
        ).fetchone()[0]
        identity = cursor.execute("SELECT relreplident FROM pg_class WHERE oid = 'items'::regclass").fetchone()[0]
        slots = cursor.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"
        ).fetchone()[0]
        publications = cursor.execute("SELECT count(*) FROM pg_publication").fetchone()[0]
    return triggers, identity, slots, publications


def test_capture_from_the_wal_fires_no_trigger_and_dropping_the_log_frees_its_slot(make_server):
    server = published(make_server, "pgwal")
    assert wal_objects(server) == (0, "f", 1, 1)  # full old rows in the WAL, one slot, one publication
    committed(server, "INSERT INTO items (id, name) VALUES (1, 'a')")
    assert [[e.new["name"] for e in t.entries] for t in transactions(server)] == [["a"]]
    trx_capture.drop_capture(server, "tbl", "items")
    trx_capture.drop_log(server, "tbl")
    assert wal_objects(server) == (0, "d", 0, 0)


def test_a_reader_stopped_between_storing_and_advancing_the_slot_stores_nothing_twice(make_server, monkeypatch):
    """The slot moves only after the log committed; a reader that dies in between leaves the slot behind the
    log, and the next reader recognises what is stored by its position."""
    server = published(make_server, "pgwal")
    for i in range(1, 4):
        committed(server, f"INSERT INTO items (id, name) VALUES ({i}, 'n{i}')")
    execute(server, "UPDATE items SET name = 'changed' WHERE id = 2")
    with monkeypatch.context() as patched:  # the advance fails as if the reader died right before it
        patched.setattr(trx_capture.wal_capture, "advance_sql", lambda: "SELECT 1 / 0")
        with pytest.raises(pyodbc.Error):
            trx_capture.publisher_count(server, "tbl")
    execute(server, "DELETE FROM items WHERE id = 3")
    txns = transactions(server)
    assert [t.count for t in txns] == [1, 2, 3, 4, 5]
    assert [[(e.op, (e.new or e.old)["id"]) for e in t.entries] for t in txns] == [
        [("I", 1)],
        [("I", 2)],
        [("I", 3)],
        [("U", 2)],
        [("D", 3)],
    ]


def test_the_replay_context_travels_in_the_wal_not_logged_or_with_its_origin(make_server):
    server = published(make_server, "pgwal")
    d = dialects.get("postgresql")
    for nolog, origin, key in ((True, None, 1), (False, "sub9", 2), (False, None, 3)):
        with connections.connect(server, autocommit=False) as conn:
            cursor = conn.cursor()
            for statement in sql.replay_context_sql(d, nolog, origin, connections.table_schema(server)):
                cursor.execute(statement)
            cursor.execute("INSERT INTO items (id, name) VALUES (?, 'x')", key)
            conn.commit()
    txns = transactions(server)
    assert [(t.origin, [e.new["id"] for e in t.entries]) for t in txns] == [("sub9", [2]), (server.name, [3])]


def test_an_unchanged_toasted_value_is_in_the_new_image(make_server):
    server = published(make_server, "pgwal")
    big = "".join(f"{i:06d}" for i in range(40_000))  # 240 kB: stored out of line
    execute(server, "INSERT INTO items (id, name, payload) VALUES (1, 'a', ?)", params=(big.encode(),))
    committed(server, "UPDATE items SET name = 'b' WHERE id = 1")
    update = transactions(server)[-1].entries[0]
    table = trx_lookups.describe(server, "items")
    assert sql.row_values(update.new, table, "postgresql")[4] == big.encode()
    assert update.new["name"] == "b" and update.old["name"] == "a"


def pumped(stream, count: int) -> None:
    """Pump until the stream has stored `count` transactions (they arrive as their commits flush)."""
    deadline = time.monotonic() + 120  # a guard against hanging, generous for a busy machine
    while stream.count < count:
        assert time.monotonic() < deadline, "the stream never delivered"
        stream.pump()


def test_a_stream_stores_changes_as_they_commit_and_readers_meanwhile_take_its_count(make_server):
    server = published(make_server, "pgwal")
    committed(server, "INSERT INTO items (id, name) VALUES (1, 'before')")
    stream = trx_capture.WalStream(server, "tbl")
    try:
        execute(server, "INSERT INTO items (id, name) VALUES (2, 'streamed')")
        execute(server, "UPDATE items SET name = 'twice' WHERE id = 2")
        pumped(stream, 3)
        execute(server, "INSERT INTO items (id, name) VALUES (3, 'not pumped yet')")
        # The slot is the stream's: a sync's reader takes what the stream stored, without waiting for the lock.
        assert trx_capture.publisher_count(server, "tbl") == 3
    finally:
        stream.close()
    # Closed, the slot is the readers' again: what the stream had not confirmed is read, nothing twice.
    txns = transactions(server)
    assert [[(e.op, e.new["name"]) for e in t.entries] for t in txns] == [
        [("I", "before")],
        [("I", "streamed")],
        [("U", "twice")],
        [("I", "not pumped yet")],
    ]


def test_a_stream_that_stored_but_never_confirmed_leaves_nothing_doubled(make_server, monkeypatch):
    server = published(make_server, "pgwal")
    stream = trx_capture.WalStream(server, "tbl")
    try:
        monkeypatch.setattr(stream.stream, "send_feedback", lambda **kwargs: None)  # dies before confirming
        for i in range(1, 4):
            execute(server, f"INSERT INTO items (id, name) VALUES ({i}, 'x')")
        pumped(stream, 3)
    finally:
        stream.close()
    again = trx_capture.WalStream(server, "tbl")  # starts from the slot's confirmed position: all three again
    try:
        execute(server, "INSERT INTO items (id, name) VALUES (4, 'x')")
        pumped(again, 4)
    finally:
        again.close()
    assert [[e.new["id"] for e in t.entries] for t in transactions(server)] == [[1], [2], [3], [4]]


def test_a_role_without_replication_is_told_why_the_wal_cannot_be_used(make_server):
    server = make_server("pgwal")
    assert trx_capture.wal_unavailable(server) is None
    role = f"plain_{server.database[-6:]}"
    execute(server, f'CREATE ROLE "{role}" LOGIN')
    try:
        data = dataclasses.replace(server_data("pgwal", "norep", server.database), user=role)
        plain = do_register_server(Actor.command(), data)
        assert trx_capture.wal_unavailable(plain) == (
            f"the role {role} may not create replication slots (it needs REPLICATION)"
        )
        assert "wal_level is replica" in trx_capture.wal_unavailable(make_server("postgresql"))
    finally:
        execute(server, f'DROP ROLE "{role}"')


def test_a_second_stream_of_a_streamed_publication_is_refused_at_once_and_the_first_keeps_storing(make_server):
    server = published(make_server, "pgwal")
    first = trx_capture.WalStream(server, "tbl")
    try:
        with pytest.raises(trx_lookups.TrxError, match="is being read elsewhere"):
            trx_capture.WalStream(server, "tbl")  # another follower's: it tries again later, it does not wait
        execute(server, "INSERT INTO items (id, name) VALUES (1, 'x')")
        pumped(first, 1)
    finally:
        first.close()
    assert [[e.new["id"] for e in t.entries] for t in transactions(server)] == [[1]]

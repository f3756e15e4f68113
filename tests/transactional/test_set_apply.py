"""The set-based apply (a run of row images sent as one JSON array the subscriber expands) writes exactly the rows
the value-by-value apply writes, across the type matrix and dialect pairs, and ends a window right whatever order
its changes came in."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from decimal import Decimal

import pytest

from replication_admin.core import connections
from replication_admin.core.introspection import lookup_table
from replication_admin.core.transactions import with_retries
from replication_admin.engine import dialects
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.types import LogicalType
from replication_admin.models import Server
from replication_admin.transactional import apply
from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import lookups as trx_lookups
from replication_admin.transactional.apply import Target, replay
from tests.fidelity.typed_rows import BIG, HIGH, LOW, ROWS, create_typed, differences, expected, insert_typed, stored
from tests.tables import create_table, fetch_all
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.live_db]

PAIRS = [
    ("postgresql", "postgresql"),
    ("postgresql", "mysql"),
    ("mysql", "postgresql"),
    ("sqlite", "postgresql"),
    ("postgresql", "sqlite"),
    ("mysql", "sqlite"),
]


def published(make_server, dialect: str, table: str = "typed") -> Server:
    source = make_server(dialect)
    create_typed(source, table)
    trx_capture.create_log(source, "tbl")
    trx_capture.add_capture(source, "tbl", trx_lookups.describe(source, table))
    return source


def the_log(source: Server) -> list[sql.Transaction]:
    count = trx_capture.publisher_count(source, "tbl")
    return trx_capture.read_transactions(source, "tbl", 0, count)


def replayed(source: Server, dest: Server, txns: list[sql.Transaction]) -> int:
    """The transactions replayed on `dest` in one transaction; how many statements wrote rows."""
    target = Target(dest, source.name, "tbl", source_dialect=source.dialect)
    return with_retries(dest, lambda cursor: replay(cursor, target, txns))


def value_by_value(monkeypatch) -> contextlib.AbstractContextManager:
    """The apply as it is where no column can go set-based."""
    patch = monkeypatch.context()
    context = patch.__enter__()
    context.setattr(sql, "images_upsert_sql", lambda *args: None)
    context.setattr(sql, "images_delete_sql", lambda *args: None)
    return contextlib.closing(type("undo", (), {"close": lambda self: patch.__exit__(None, None, None)})())


def raw_rows(server: Server, table: str = "typed") -> list[tuple]:
    """The rows exactly as stored (SQLite: with their storage classes, read by sqlite3)."""
    d = dialects.get(server.dialect)
    select = f"SELECT * FROM {d.quote(table)} ORDER BY 1"
    if server.dialect == "sqlite":
        with contextlib.closing(sqlite3.connect(server.database)) as conn:
            return [tuple(r) for r in conn.execute(select).fetchall()]
    return [tuple(r) for r in fetch_all(server, select)]


def changed(row: tuple, new_id: int) -> tuple:
    return (new_id, *row[1:])


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), PAIRS)
def test_the_set_based_apply_writes_exactly_the_rows_the_value_by_value_apply_writes(
    make_server, monkeypatch, source_dialect, dest_dialect
):
    source = published(make_server, source_dialect)
    insert_typed(source, [*ROWS, changed(LOW, 12), changed(HIGH, 13), BIG])
    q = dialects.get(source.dialect).quote
    run_sql(source, f"DELETE FROM {q('typed')} WHERE {q('id')} = 1")
    run_sql(source, f"UPDATE {q('typed')} SET {q('id')} = 22 WHERE {q('id')} = 2")  # a key change
    insert_typed(source, [LOW])  # the old key again
    txns = the_log(source)
    set_based, by_value = make_server(dest_dialect), make_server(dest_dialect)
    for dest in (set_based, by_value):
        create_typed(dest)
    replayed(source, set_based, txns)
    with value_by_value(monkeypatch):
        replayed(source, by_value, txns)
    assert raw_rows(set_based) == raw_rows(by_value)
    final = [LOW, changed(LOW, 22), HIGH, changed(LOW, 12), changed(HIGH, 13), BIG]
    assert differences(expected(final), stored(set_based)) == []


SIMPLE = {
    "postgresql": "CREATE TABLE w (id integer PRIMARY KEY, v varchar(20))",
    "mysql": "CREATE TABLE w (id int PRIMARY KEY, v varchar(20))",
    "sqlite": "CREATE TABLE w (id integer PRIMARY KEY, v varchar(20))",
}


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), PAIRS)
def test_a_window_with_duplicates_key_changes_and_deletes_after_inserts_ends_as_the_publisher(
    make_server, source_dialect, dest_dialect
):
    source = make_server(source_dialect)
    run_sql(source, SIMPLE[source_dialect])
    trx_capture.create_log(source, "tbl")
    trx_capture.add_capture(source, "tbl", trx_lookups.describe(source, "w"))
    for i in range(1, 11):
        run_sql(source, "INSERT INTO w (id, v) VALUES (?, ?)", [i, f"v{i}"])
    run_sql(source, "UPDATE w SET v = 'twice' WHERE id = 5")
    run_sql(source, "UPDATE w SET v = 'thrice' WHERE id = 5")
    run_sql(source, "UPDATE w SET id = 30 WHERE id = 3")  # a key change
    run_sql(source, "DELETE FROM w WHERE id = 7")  # a delete after its insert
    run_sql(source, "INSERT INTO w (id, v) VALUES (7, 'again')")  # and its key written again
    run_sql(source, "UPDATE w SET id = 3 WHERE id = 4")  # the old key of the change taken by another row
    run_sql(source, "DELETE FROM w WHERE id IN (8, 9)")
    run_sql(source, "INSERT INTO w (id, v) VALUES (8, 'back')")
    dest = make_server(dest_dialect)
    run_sql(dest, SIMPLE[dest_dialect])
    replayed(source, dest, the_log(source))
    assert raw_rows(dest, "w") == [(int(i), v) for i, v in raw_rows(source, "w")]


def test_a_thousand_row_window_is_written_by_a_handful_of_statements(make_server):
    source = published(make_server, "postgresql")
    rows = [changed(LOW, n) for n in range(100, 1100)]  # (HIGH's 20 kB of bytes would fill 4 Mi characters)
    insert_typed(source, rows)
    dest = make_server("postgresql")
    create_typed(dest)
    statements = replayed(source, dest, the_log(source))
    assert statements <= 3
    assert len(raw_rows(dest)) == 1000
    assert differences(expected(rows), stored(dest)) == []


def logged_w(make_server, dialect: str = "postgresql") -> Server:
    """A publisher of table w (SIMPLE) with its log."""
    source = make_server(dialect)
    run_sql(source, SIMPLE[dialect])
    trx_capture.create_log(source, "tbl")
    trx_capture.add_capture(source, "tbl", trx_lookups.describe(source, "w"))
    return source


@pytest.mark.parametrize("dest_dialect", ["postgresql", "mysql", "sqlite"])
def test_transactions_that_insert_update_and_delete_go_in_two_statements_per_batch_and_end_as_the_publisher(
    make_server, dest_dialect
):
    source = logged_w(make_server)
    for i in range(1, 101):  # each: an insert, an update of it, a delete of an older row
        run_sql(
            source,
            f"BEGIN; INSERT INTO w (id, v) VALUES ({i}, 'new'); UPDATE w SET v = 'changed {i}' WHERE id = {i}; "
            f"DELETE FROM w WHERE id = {i - 10}; COMMIT",
        )
    run_sql(source, "DELETE FROM w WHERE id = 100")
    run_sql(source, "INSERT INTO w (id, v) VALUES (100, 'back')")  # a key written again after its delete
    run_sql(source, "UPDATE w SET id = 200 WHERE id = 99")  # a key change
    dest = make_server(dest_dialect)
    run_sql(dest, SIMPLE[dest_dialect])
    statements = replayed(source, dest, the_log(source))
    assert raw_rows(dest, "w") == [(int(i), v) for i, v in raw_rows(source, "w")]
    assert len(raw_rows(dest, "w")) == 10
    # The 100 transactions' writes, then their deletes; the delete of 100 and the write after it; the key change.
    assert statements <= 6


UNIQUE_V = {
    "postgresql": "CREATE TABLE w (id integer PRIMARY KEY, v varchar(20) UNIQUE)",
    "mysql": "CREATE TABLE w (id int PRIMARY KEY, v varchar(20) UNIQUE)",
    "sqlite": "CREATE TABLE w (id integer PRIMARY KEY, v varchar(20) UNIQUE)",
}


@pytest.mark.parametrize("dest_dialect", ["postgresql", "mysql", "sqlite"])
def test_a_delete_stays_in_its_place_where_a_later_write_takes_its_value_of_another_unique_index(
    make_server, dest_dialect
):
    source = make_server("postgresql")
    run_sql(source, UNIQUE_V["postgresql"])
    run_sql(source, "INSERT INTO w (id, v) VALUES (1, 'taken')")
    trx_capture.create_log(source, "tbl")
    trx_capture.add_capture(source, "tbl", trx_lookups.describe(source, "w"))
    dest = make_server(dest_dialect)
    run_sql(dest, UNIQUE_V[dest_dialect])
    run_sql(dest, "INSERT INTO w (id, v) VALUES (1, 'taken')")
    run_sql(source, "INSERT INTO w (id, v) VALUES (2, 'other')")
    run_sql(source, "DELETE FROM w WHERE id = 1")  # after a write of the table: held back only without v's index
    run_sql(source, "INSERT INTO w (id, v) VALUES (3, 'taken')")  # needs row 1's value free
    replayed(source, dest, the_log(source))
    assert raw_rows(dest, "w") == [(2, "other"), (3, "taken")]


def test_a_window_over_the_parameter_size_is_sent_in_parts_that_end_as_the_publisher(make_server, monkeypatch):
    monkeypatch.setattr(apply, "PARAMETER_CHARS", 300)
    source = make_server("postgresql")
    run_sql(source, SIMPLE["postgresql"])
    trx_capture.create_log(source, "tbl")
    trx_capture.add_capture(source, "tbl", trx_lookups.describe(source, "w"))
    run_sql(source, "INSERT INTO w SELECT g, 'v' || g FROM generate_series(1, 40) g")
    run_sql(source, "UPDATE w SET v = 'last' WHERE id < 20")
    run_sql(source, "INSERT INTO w SELECT g, 'w' || g FROM generate_series(41, 60) g")
    dest = make_server("postgresql")
    run_sql(dest, SIMPLE["postgresql"])
    assert replayed(source, dest, the_log(source)) > 3
    assert raw_rows(dest, "w") == raw_rows(source, "w")


def test_a_batch_is_cut_between_whole_transactions_by_rows_and_bytes(make_server):
    source = make_server("postgresql")
    run_sql(source, SIMPLE["postgresql"])
    trx_capture.create_log(source, "tbl")
    trx_capture.add_capture(source, "tbl", trx_lookups.describe(source, "w"))
    for i in range(1, 11):
        run_sql(source, "INSERT INTO w (id, v) VALUES (?, ?)", [i, f"v{i}"])
    count = trx_capture.publisher_count(source, "tbl")
    assert [t.count for t in trx_capture.read_transactions(source, "tbl", 0, count, max_rows=3)] == [1, 2, 3]
    assert [t.count for t in trx_capture.read_transactions(source, "tbl", 0, count, max_bytes=1)] == [1]
    assert len(trx_capture.read_transactions(source, "tbl", 0, count, max_rows=100)) == 10


def test_windows_bounded_by_rows_and_bytes_are_read_in_parts_and_cover_the_log_once_in_order(make_server, monkeypatch):
    monkeypatch.setattr(trx_capture, "FIRST_READ_ROWS", 3)  # parts of a few entries: every window takes several
    source = logged_w(make_server)
    for i in range(1, 31):
        run_sql(source, "INSERT INTO w (id, v) VALUES (?, ?)", [i, "x" * (i % 7)])
    run_sql(source, "INSERT INTO w SELECT g, 'bulk' FROM generate_series(100, 119) g")  # over the bytes alone
    for i in range(31, 41):
        run_sql(source, "UPDATE w SET v = 'again' WHERE id IN (?, ?)", [i - 30, i - 29])
    count = trx_capture.publisher_count(source, "tbl")
    # What each window must hold: whole transactions, in order, within 8 entries and 300 characters of images,
    # the first one whatever its size.
    raw = fetch_all(source, sql.entries_sql(dialects.get("postgresql"), "tbl", 0, count))
    sizes: dict[int, list[int]] = {}
    for row in raw:
        sizes.setdefault(int(row[0]), []).append(len(row[6] or "") + len(row[7] or ""))
    expected: list[list[int]] = []
    for n, entries in sizes.items():
        window = expected[-1] if expected else None
        if (
            window
            and len(window)
            and sum(len(sizes[m]) for m in window) + len(entries) <= 8
            and (sum(sum(sizes[m]) for m in window) + sum(entries) <= 300)
        ):
            window.append(n)
        else:
            expected.append([n])
    windows, after = [], 0
    while after < count:
        window = trx_capture.read_transactions(source, "tbl", after, count, max_rows=8, max_bytes=300)
        windows.append([t.count for t in window])
        after = window[-1].count
    assert windows == expected
    [bulk] = [n for n, entries in sizes.items() if sum(entries) > 300]  # over the bytes alone: its own window
    assert [bulk] in windows and max(len(w) for w in windows) == 8
    everything = trx_capture.read_transactions(source, "tbl", 0, count)
    assert [t.count for t in everything] == [n for w in windows for n in w] == sorted(sizes)


# Values as the publishers' captures log them (PostgreSQL's row_to_json and WAL text, MariaDB's JSON_OBJECT, SQLite's
# json_object), and odd ones: the set-based statement must store what RowCodec's decoding, bound, stores.
LOGGED = [
    ("integer", ["12", "-2147483648", "1.9", "-1.9", "1E+2", "true"]),
    ("bigint", ["-9223372036854775808", "9223372036854775807"]),
    ("double", ["1.0000000000000002", "-2.2250738585072014e-308", "1E+10", "0.1", "12"]),
    ("real", ["0.1", "3.4028234663852886e38", "1"]),
    ("numeric", ["18.00", "1E+2", "-0.000001", "12", "1.0000005", '"3.25"']),
    ("boolean", ["true", "false", "1", "0", "2", '"t"', '"yes"', '" True "', '"no"', "0.0", "0.5"]),
    ("date", ['"2024-02-29"', '"2024-02-29T00:00:00"', '" 1999-12-31 "']),
    ("time", ['"12:34:56"', '"12:34:56.1234567"', '"00:00:00.5"', '"23:59:59.999999"']),
    (
        "timestamp",
        [
            '"2024-02-29T23:59:59.999999"',
            '"2024-06-30 22:30:00.123456+02"',
            '"2024-06-30T22:30:00+02:00"',
            '"2024-01-01 00:00:00Z"',
            '"2024-01-01"',
            '"2024-06-30 22:30:00-0530"',
            '"2024-12-31T23:30:00-01:00"',
        ],
    ),
    ("timestamptz", ['"2024-06-30T22:30:00.123456+02:00"', '"2024-01-01 00:00:00"', '"2024-01-01T00:00:00Z"']),
    ("varchar", ['"it\'s \\"q\\" \\\\ ✓ 表😀"', "12", "1.50", "true", '""', '"a\\u0000b"']),
    ("long_varchar", ['"表😀\\n\\t end"', "false"]),
    ("long_varbinary", ['"\\\\x00ff"', '"00FF"', '"\\\\x"', '""', '"0A0B"']),
    ("json", ['"{\\"a\\": [1, 2.5]}"', '"\\"just a string\\""']),
    ("uuid", ['"f47ac10b-58cc-4372-a567-0e02b2c3d479"']),
]
# PostgreSQL text holds no NUL: both ways refuse it there.
NO_NUL = {"postgresql"}
# A hostile column name each can hold (MariaDB: no emoji; SQLite's JSON paths: no double quote).
HOSTILE = {"postgresql": 'ab "cd 表😀', "mysql": 'ab "cd 表', "sqlite": "表😀 a.b"}


# SQLite has no unhex(): its binary columns are written value by value (tests/engine/test_set_apply_sql.py).
VALUE_BY_VALUE = {("sqlite", "long_varbinary")}


@pytest.mark.parametrize(
    ("dest_dialect", "kind", "values"),
    [
        pytest.param(dest, kind, values, id=f"{kind}-{dest}")
        for kind, values in LOGGED
        for dest in ("postgresql", "mysql", "sqlite")
        if (dest, kind) not in VALUE_BY_VALUE
    ],
)
def test_each_family_is_stored_from_json_as_the_value_by_value_apply_stores_it(make_server, dest_dialect, kind, values):
    dest = make_server(dest_dialect)
    d = dialects.get(dest_dialect)
    if dest_dialect in NO_NUL or not d.json_text_holds_nul:  # (the apply sends a run with a NUL value by value)
        values = [v for v in values if "u0000" not in v]
    logical = LogicalType(kind, length=40 if kind == "varchar" else None, precision=20 if kind == "numeric" else None,
                          scale=6 if kind == "numeric" else None)  # fmt: skip
    for name in ("by_value", "set_based"):
        create_table(dest, name, [("id", LogicalType("integer")), (HOSTILE[dest_dialect], logical)], ["id"])
    key = json.dumps(HOSTILE[dest_dialect])
    images = [json.loads(f'{{"id": {n}, {key}: {v}}}', parse_float=Decimal) for n, v in enumerate(values, 1)]
    by_value, set_based = lookup_table(dest, "by_value"), lookup_table(dest, "set_based")
    assert by_value is not None and set_based is not None
    upsert = sql.images_upsert_sql(d, set_based, sql.image_names(set_based, images[0]))
    assert upsert is not None, f"{d.label} would write {kind} value by value"
    codec = sql.RowCodec.of(by_value, dest_dialect)
    with connections.connect(dest, autocommit=False) as conn:
        cursor = conn.cursor()
        for image in images:
            cursor.execute(sql.upsert_sql(d, by_value, 1), codec.row(image))
        cursor.execute(upsert, [sql.images_parameter(images)])
        conn.commit()
    assert raw_rows(dest, "set_based") == raw_rows(dest, "by_value")


def test_a_text_with_nul_reaches_a_sqlite_subscriber_whole(make_server):
    source = make_server("mysql")
    run_sql(source, SIMPLE["mysql"])
    trx_capture.create_log(source, "tbl")
    trx_capture.add_capture(source, "tbl", trx_lookups.describe(source, "w"))
    run_sql(source, "INSERT INTO w (id, v) VALUES (1, ?), (2, 'plain')", ["a\x00b"])
    dest = make_server("sqlite")
    run_sql(dest, SIMPLE["sqlite"])
    replayed(source, dest, the_log(source))
    assert raw_rows(dest, "w") == [(1, "a\x00b"), (2, "plain")]


# A statement inserting rows lo..hi of w, in each publisher's dialect.
BULK = {
    "mysql": "INSERT INTO w (id, v) SELECT seq, CONCAT('{p}', seq) FROM seq_{lo}_to_{hi}",
    "postgresql": "INSERT INTO w (id, v) SELECT g, '{p}' || g FROM generate_series({lo}, {hi}) g",
    "sqlite": (
        "INSERT INTO w (id, v) WITH RECURSIVE g(n) AS (SELECT {lo} UNION ALL SELECT n + 1 FROM g WHERE n < {hi}) "
        "SELECT n, '{p}' || n FROM g"
    ),
}
PUBLISHERS = ["mysql", "postgresql", "sqlite"]


def backlog_of_runs(make_server, dialect: str) -> Server:
    """A publisher of w (SIMPLE) whose log holds bulk transactions (runs sent as text: joined by MariaDB's server,
    joined from their entries or a statement's list of rows elsewhere), small ones, key changes, deletes after
    inserts and keys written again, in one log."""
    source = logged_w(make_server, dialect)

    def bulk(lo: int, hi: int, prefix: str = "v") -> str:
        return BULK[dialect].format(lo=lo, hi=hi, p=prefix)

    def transaction(*statements: tuple[str, list]) -> None:
        with connections.connect(source, autocommit=False) as conn:
            for statement, args in statements:
                conn.cursor().execute(statement, *args)
            conn.commit()
        trx_capture.publisher_count(source, "tbl")  # SQLite's writer ends its transaction's number when read

    transaction((bulk(1, 300), []))
    transaction(("UPDATE w SET v = 'small' WHERE id = 1", []))
    transaction(("DELETE FROM w WHERE id BETWEEN 101 AND 200", []))  # a run of deletes
    transaction(
        (bulk(1001, 1100), []),  # a run of inserts
        ("UPDATE w SET v = 'changed' WHERE id BETWEEN 1001 AND 1005", []),  # updates: decoded
        ("DELETE FROM w WHERE id BETWEEN 1050 AND 1100", []),  # deletes after inserts of the same transaction
        (bulk(1090, 1200), []),  # and keys written again after their delete
        ("UPDATE w SET id = 5000 WHERE id = 2", []),  # a key change
        ("INSERT INTO w (id, v) VALUES (2, 'the old key again')", []),
    )
    for i in range(3000, 3005):
        transaction(("INSERT INTO w (id, v) VALUES (?, 'one row')", [i]))
    # A run of one-row statements in one transaction.
    transaction(*[("INSERT INTO w (id, v) VALUES (?, 'many statements')", [i]) for i in range(4000, 4100)])
    transaction(("DELETE FROM w WHERE id BETWEEN 201 AND 300", []))
    transaction((bulk(250, 400, "again "), []))
    return source


@pytest.mark.parametrize("source_dialect", PUBLISHERS)
def test_a_window_read_in_runs_holds_what_a_read_entry_by_entry_holds(make_server, source_dialect):
    source = backlog_of_runs(make_server, source_dialect)
    count = trx_capture.publisher_count(source, "tbl")
    assert count == 12
    for bounds in ((None, None), (150, None), (10_000, 3_000), (1, 1)):
        after, kinds = 0, []
        while after < count:
            packed = trx_capture.read_for_apply(source, "tbl", after, count, *bounds)
            plain = trx_capture.read_transactions(source, "tbl", after, count, *bounds)
            assert [(t.count, t.origin, t.at, t.entries) for t in packed] == [
                (t.count, t.origin, t.at, t.entries) for t in plain
            ]
            # In runs where a transaction of the window has a run worth sending as text, else entry by entry.
            runs = any(len(t.entries) >= sql.TEXT_RUN_ROWS for t in plain)
            kinds += [isinstance(t, sql.PackedTransaction) == runs for t in packed]
            after = packed[-1].count
        assert all(kinds)
    packed = trx_capture.read_for_apply(source, "tbl", 0, count)
    assert [e.seq for e in packed[3].entries_of(("U",))] == [e.seq for e in plain_entries(source, 4) if e.op == "U"]
    assert [e.change_id for e in packed[3].entries] == [e.change_id for e in plain_entries(source, 4)]


def plain_entries(source: Server, count: int) -> list[sql.Entry]:
    return trx_capture.read_transactions(source, "tbl", count - 1, count)[0].entries


@pytest.mark.parametrize(
    ("source_dialect", "dest_dialect"),
    [("mysql", "mysql"), ("mysql", "postgresql"), ("postgresql", "postgresql"), ("postgresql", "mysql"),
     ("sqlite", "postgresql"), ("postgresql", "sqlite")],
)  # fmt: skip
def test_a_backlog_read_in_runs_ends_as_the_publisher_in_few_statements(make_server, source_dialect, dest_dialect):
    source = backlog_of_runs(make_server, source_dialect)
    count = trx_capture.publisher_count(source, "tbl")
    dest = make_server(dest_dialect)
    run_sql(dest, SIMPLE[dest_dialect])
    statements, after = 0, 0
    while after < count:
        window = trx_capture.read_for_apply(source, "tbl", after, count, 400, None)
        statements += replayed(source, dest, window)
        after = window[-1].count
    assert raw_rows(dest, "w") == [(int(i), v) for i, v in raw_rows(source, "w")]
    # A value per run of inserts or deletes: far fewer statements than entries, though no delete is held back
    # behind a run sent as text.
    assert statements <= 25


@pytest.mark.parametrize("source_dialect", ["mysql", "postgresql"])
def test_a_run_over_the_parameter_size_is_sent_in_parts_that_end_as_the_publisher(
    make_server, monkeypatch, source_dialect
):
    monkeypatch.setattr(apply, "PARAMETER_CHARS", 1000)
    monkeypatch.setattr(apply, "IMAGES_PER_STATEMENT", 70)
    source = backlog_of_runs(make_server, source_dialect)
    count = trx_capture.publisher_count(source, "tbl")
    dest = make_server("mysql")
    run_sql(dest, SIMPLE["mysql"])
    assert replayed(source, dest, trx_capture.read_for_apply(source, "tbl", 0, count)) > 25
    assert raw_rows(dest, "w") == raw_rows(source, "w")

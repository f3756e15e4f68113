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
from replication_admin.core.transactions import with_retries
from replication_admin.engine import dialects
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.compare import family_of
from replication_admin.engine.dialects import ImageColumn
from replication_admin.engine.types import LogicalType
from replication_admin.models import Server
from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import lookups as trx_lookups
from replication_admin.transactional.apply import Target, replay
from tests.fidelity.typed_rows import BIG, HIGH, LOW, ROWS, create_typed, differences, expected, insert_typed, stored
from tests.tables import execute as run_sql
from tests.tables import fetch_all

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
    rows = [changed(HIGH, n) for n in range(100, 1100)]
    insert_typed(source, rows)
    dest = make_server("postgresql")
    create_typed(dest)
    statements = replayed(source, dest, the_log(source))
    assert statements <= 3
    assert len(raw_rows(dest)) == 1000
    assert differences(expected(rows), stored(dest)) == []


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


# Values as the publishers' captures log them (PostgreSQL's row_to_json and WAL text, MariaDB's JSON_OBJECT, SQLite's
# json_object), and odd ones: each must come out of the server's expression as RowCodec's decoding, bound, stores it.
LOGGED = [
    ("integer", "bigint", ["12", "-9223372036854775808", "1.9", "-1.9", "1E+2", True]),
    ("double", "double precision", ["1.0000000000000002", "-2.2250738585072014e-308", '"NaN"', '"Infinity"', "1E+10"]),
    ("real", "real", ["0.1", "3.4028234663852886e38", "1"]),
    ("numeric", "numeric(20,6)", ["18.00", "1E+2", "-0.000001", '"NaN"', "12", "1.0000005"]),
    ("boolean", "boolean", ["true", "false", "1", "0", "2", '"t"', '"yes"', '" True "', '"no"', "0.0", "0.5"]),
    ("date", "date", ['"2024-02-29"', '"2024-02-29T00:00:00"', '" 0001-01-01 "', '"infinity"']),
    ("time", "time", ['"12:34:56"', '"12:34:56.1234567"', '"00:00:00.5"', '"23:59:59.999999"']),
    (
        "timestamp",
        "timestamp without time zone",
        [
            '"2024-02-29T23:59:59.999999"',
            '"2024-06-30 22:30:00.123456+02"',
            '"2024-06-30T22:30:00+02:00"',
            '"2024-01-01 00:00:00Z"',
            '"2024-01-01"',
            '"infinity"',
            '"2024-06-30 22:30:00-0530"',
        ],
    ),
    (
        "timestamptz",
        "timestamp with time zone",
        [
            '"2024-06-30T22:30:00.123456+02:00"',
            '"2024-01-01 00:00:00"',
            '"2024-01-01T00:00:00Z"',
        ],
    ),
    ("varchar", "character varying(40)", ['"it\'s \\"q\\" \\\\ ✓ 表😀"', "12", "1.50", "true", '""']),
    ("long_varbinary", "bytea", ['"\\\\x00ff"', '"00FF"', '"\\\\x"', '""', '"0a 0b"']),
    ("json", "jsonb", ['"{\\"a\\": [1, 2.5]}"', '"\\"just a string\\""']),
    ("uuid", "uuid", ['"F47AC10B-58CC-4372-A567-0E02B2C3D479"']),
]


@pytest.mark.parametrize(("kind", "declared", "values"), LOGGED, ids=[k for k, _, _ in LOGGED])
def test_each_family_reads_from_json_on_postgresql_as_rowcodec_decodes_it(make_server, kind, declared, values):
    server = make_server("postgresql")
    d = dialects.get("postgresql")
    logical = LogicalType(kind)
    column = ImageColumn("c", 'ab "cd', family_of(logical), kind, declared)
    expression = d._image_value(column)
    assert expression is not None
    images = [json.loads('{"ab \\"cd": ' + (v if isinstance(v, str) else json.dumps(v)) + "}", parse_float=Decimal)
              for v in values]  # fmt: skip
    decode = sql.RowCodec.of(
        sql.TableInfo("t", (sql.Column('ab "cd', declared, logical, pk_position=1),)), "postgresql"
    ).row
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        got = cursor.execute(
            f"SELECT CAST({expression} AS text) FROM jsonb_array_elements(CAST(? AS jsonb)) WITH ORDINALITY AS e(v, o) "
            "ORDER BY e.o",
            [sql.images_parameter(images)],
        ).fetchall()
        for image, (server_side,) in zip(images, got, strict=True):
            (bound,) = cursor.execute(f"SELECT CAST(CAST(? AS {declared}) AS text)", decode(image)).fetchone()
            assert server_side == bound, image

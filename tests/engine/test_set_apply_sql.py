"""The set-based apply's statements (engine.transactional_sql.images_*_sql and the dialects' images_*_sql): one JSON
array parameter, hostile names quoted, and None where a column cannot be decoded exactly on the server."""

from __future__ import annotations

import json
from decimal import Decimal

from replication_admin.engine import dialects
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

PG = dialects.get("postgresql")


def table(*columns: tuple[str, str, str], key: tuple[str, ...] = ("id",)) -> TableInfo:
    return TableInfo(
        name='ab "cd',
        schema="public",
        columns=tuple(
            Column(name, declared, LogicalType(kind), pk_position=key.index(name) + 1 if name in key else 0)
            for name, kind, declared in columns
        ),
    )


WIDE = table(
    ("id", "bigint", "bigint"),
    ("表😀", "varchar", "character varying(40)"),
    ("amount", "numeric", "numeric(14,2)"),
    ("at", "timestamptz", "timestamp with time zone"),
    ("seen", "timestamp", "timestamp without time zone"),
    ("ok", "boolean", "boolean"),
    ("raw", "long_varbinary", "bytea"),
)


def test_a_postgresql_upsert_reads_one_json_array_and_keeps_each_keys_last_image():
    statement = sql.images_upsert_sql(PG, WIDE, sql.image_names(WIDE, {c.name: 1 for c in WIDE.columns}))
    assert statement is not None
    assert statement.count("?") == 1
    assert 'INSERT INTO "public"."ab ""cd" ("id", "表😀", "amount", "at", "seen", "ok", "raw")' in statement
    assert "jsonb_array_elements(CAST(? AS jsonb)) WITH ORDINALITY" in statement
    assert "DISTINCT ON (c0)" in statement and "ORDER BY c0, e.o DESC" in statement
    assert "(e.v ->> '表😀')" in statement
    assert 'ON CONFLICT ("id") DO UPDATE SET "表😀" = excluded."表😀"' in statement
    # A varchar is assigned, not cast: a value too long is an error, as a bound one is.
    assert "AS character varying(40))" not in statement


def test_images_are_found_by_their_own_spelling_of_a_column():
    names = sql.image_names(WIDE, {"ID": 1, "表😀": "x", "AMOUNT": 1, "at": None, "seen": None, "ok": 1, "raw": ""})
    assert names[:3] == ("ID", "表😀", "AMOUNT")
    statement = sql.images_delete_sql(PG, WIDE, ("ID",))
    assert statement is not None and "(e.v ->> 'ID')" in statement and statement.count("?") == 1
    assert 'WHERE t."id" = k.k0' in statement


def test_a_column_of_a_type_of_its_own_or_a_dialect_without_the_statements_goes_value_by_value():
    other = table(("id", "integer", "integer"), ("tags", "other", "integer[]"))
    assert sql.images_upsert_sql(PG, other, ("id", "tags")) is None
    assert sql.images_upsert_sql(dialects.get("mysql"), other, ("id", "tags")) is None
    blob = table(("id", "integer", "INTEGER"), ("b", "long_varbinary", "BLOB"))
    assert sql.images_upsert_sql(dialects.get("sqlite"), blob, ("id", "b")) is None  # SQLite 3.40: no unhex()
    quoted = table(("id", "integer", "INTEGER"), ('a "b', "varchar", "TEXT"))
    assert sql.images_upsert_sql(dialects.get("sqlite"), quoted, ("id", 'a "b')) is None  # no path spells it
    assert sql.images_delete_sql(dialects.get("sqlite"), quoted, ("id",)) is not None
    assert sql.images_upsert_sql(dialects.get("oracle"), quoted, ("id", 'a "b')) is None  # no live server


def test_the_parameter_keeps_decimals_exact_and_text_as_it_is():
    text = sql.images_parameter([{"id": 1, "amount": Decimal("12345678901234567890.123456"), "v": 'a"\\表😀'}])
    assert json.loads(text) == [{"id": 1, "amount": "12345678901234567890.123456", "v": 'a"\\表😀'}]


def test_a_window_is_cut_between_whole_transactions():
    rows = [(n, None, None, n, "t", "I", "x" * 10, None) for n in (1, 1, 2, 2, 3)]
    assert sql.bounded_window(rows, 3, None, False) == (rows[:2], False)
    assert sql.bounded_window(rows, None, 35, False) == (rows[:2], False)
    assert sql.bounded_window(rows, 1, None, False) == (rows[:2], False)  # the first transaction, whole
    assert sql.bounded_window(rows[:2], 1, None, True) == (rows[:2], True)  # read it again without the limit
    assert sql.bounded_window(rows, 10, None, False) == (rows, False)

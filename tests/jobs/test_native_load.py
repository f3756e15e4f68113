"""The native bulk path of staging writes (COPY into PostgreSQL, LOAD DATA into MariaDB), on a real Spark and
the live servers: values arrive exactly, and a load the server would alter fails whole."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest
from pyspark.sql import types as T

from jobs.native_load import NativeLoadError, native_write
from replication_admin.core.spark import endpoint
from tests.tables import execute, fetch_all

ROWS = [
    (1, "plain", Decimal("12.34"), datetime(2026, 1, 2, 3, 4, 5, 6), True, bytes([0, 1, 255])),
    (2, "", None, None, False, b""),
    (3, None, Decimal("-0.01"), datetime(1999, 12, 31, 23, 59, 59, 999999), None, None),
    (4, 'a,b "q" \\ back\nline 表😀 NULL', Decimal("0"), datetime(2000, 1, 1), True, bytes(range(256))),
]
SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField('ab "cd', T.StringType()),
        T.StructField("amount", T.StringType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("flag", T.BooleanType()),
        T.StructField("data", T.BinaryType()),
    ]
)
DDL = {
    "postgresql": 'CREATE TABLE "st 表" (id bigint, "ab ""cd" text, amount numeric(12, 2), at timestamp(6), '
    "flag boolean, data bytea)",
    "mysql": 'CREATE TABLE `st 表` (id bigint, `ab "cd` text, amount decimal(12, 2), at datetime(6), '
    "flag tinyint, data longblob)",
}


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_every_value_arrives_exactly_through_the_bulk_loader(make_server, spark, settings, dialect):
    settings.NATIVE_LOAD = True
    server = make_server(dialect)
    execute(server, DDL[dialect])
    target = endpoint(server)
    assert target.native is not None
    df = spark.createDataFrame(ROWS, SCHEMA).repartition(3)
    table = '"st 表"' if dialect == "postgresql" else "`st 表`"
    assert native_write(df, target.native, table, 2) == len(ROWS)
    got = fetch_all(server, f"SELECT * FROM {table} ORDER BY id")
    # Booleans read back as 1/0 (psqlODBC gives '1'), bytes as bytes.
    normal = [
        tuple(bytes(v) if isinstance(v, memoryview | bytearray) else int(v) if c == 4 and v is not None else v
              for c, v in enumerate(row))
        for row in got
    ]  # fmt: skip
    expected = [
        (i, text, None if amount is None else Decimal(amount), at, None if flag is None else int(flag), data)
        for i, text, amount, at, flag, data in ROWS
    ]
    assert normal == expected


def test_a_load_mariadb_would_alter_fails_and_leaves_no_row(make_server, spark, settings):
    settings.NATIVE_LOAD = True
    server = make_server("mysql")
    execute(server, "CREATE TABLE narrow (id bigint, v varchar(3))")
    df = spark.createDataFrame([(1, "abc"), (2, "too long")], "id long, v string").coalesce(1)
    with pytest.raises(Exception, match=r"LOAD DATA took \d+ of 2 rows: Data truncated for column 'v'") as failure:
        native_write(df, endpoint(server).native, "narrow", 1)
    assert NativeLoadError.__name__ in str(failure.value)
    assert fetch_all(server, "SELECT count(*) FROM narrow") == [(0,)]

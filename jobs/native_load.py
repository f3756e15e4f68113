"""Staging writes on the destination's native bulk path, one load per Spark partition.

Spark still reads the source and shapes the rows (partitions, type conversions); instead of the JDBC
writer's batched INSERTs, each partition's rows reach Python as Arrow batches, become CSV (pyarrow's
writer, in C++) and go to the destination in one bulk statement in one transaction:

- PostgreSQL: `COPY … FROM STDIN (FORMAT csv)` through psycopg, streamed batch by batch;
- MariaDB / MySQL: `LOAD DATA LOCAL INFILE` through PyMySQL, from a file of the partition's rows (the
  protocol sends a file the client names). LOCAL turns conversion errors into warnings, so a load with a
  warning fails the task: nothing is truncated or coerced silently.

Values leave Spark in text forms both servers parse exactly: timestamps as 'yyyy-MM-dd HH:mm:ss.SSSSSS'
(the session is UTC), decimals as their text (to_destination already), booleans as 1/0 for MariaDB, bytes
as hex ('\\x…' for PostgreSQL's bytea, UNHEX() on MariaDB). A NULL is an unquoted empty field for
PostgreSQL and an unquoted NULL for MariaDB; every string is quoted, so an empty string stays one.

A partition that fails rolls back and Spark runs it again. SQLite keeps the JDBC writer: one writer at a
time, in one transaction, is already what it can take.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replication_admin.engine import dialects

COPY, LOAD_DATA = "copy", "load_data"  # Dialect.bulk_loader
TIMESTAMP_TEXT = "yyyy-MM-dd HH:mm:ss.SSSSSS"


@dataclass(frozen=True)
class NativeAddress:
    """How a task reaches the destination with the dialect's own driver (the JDBC endpoint's server)."""

    dialect: str
    host: str
    port: int
    database: str
    user: str
    password: str


class NativeLoadError(RuntimeError):
    """The destination refused or altered rows of a bulk load."""


def csv_ready(df: DataFrame, loader: str, has_boolean: bool) -> tuple[DataFrame, tuple[bool, ...]]:
    """The rows in the text forms the destination's CSV loader takes, and which columns carry bytes (hex)."""
    columns, binary = [], []
    for field in df.schema.fields:
        c = F.col(f"`{field.name}`")
        kind = field.dataType
        if isinstance(kind, T.TimestampType | T.TimestampNTZType):
            c = F.date_format(c, TIMESTAMP_TEXT)
        elif isinstance(kind, T.BooleanType) and not has_boolean:
            c = c.cast("int")
        elif isinstance(kind, T.BinaryType):
            c = F.concat(F.lit("\\x"), F.lower(F.hex(c))) if loader == COPY else F.hex(c)
        columns.append(c.alias(field.name))
        binary.append(isinstance(kind, T.BinaryType))
    return df.select(*columns), tuple(binary)


def _csv(batch: Any, null: str) -> bytes:
    import pyarrow.csv as pacsv  # noqa: PLC0415 - imported where the task runs

    options = pacsv.WriteOptions(include_header=False, quoting_style="needed", null_string=null)
    sink = io.BytesIO()
    pacsv.write_csv(batch, sink, options)
    return sink.getvalue()


# The bulk-load statements are the dialect's (Dialect.stream_load_sql, the native streams' too). A file load
# names its file, which a task only makes where it runs: the statement names this placeholder instead, and the
# task puts its file's path in its place.
FILE_PLACEHOLDER = "repladmin-load-file.csv"


def load_statement(d: dialects.Dialect, table_sql: str, columns: Sequence[str], binary: Sequence[bool]) -> str:
    """The dialect's bulk load into `columns` of a staging table, from the session's input or from the file
    FILE_PLACEHOLDER stands for (see with_file)."""
    return d.stream_load_sql(table_sql, columns, binary, FILE_PLACEHOLDER)


def with_file(statement: str, path: str) -> str:
    """A file load's statement naming the file at `path` (a temporary file's: no quote in it)."""
    if "'" in path or "\\" in path:
        raise NativeLoadError(f"cannot name {path!r} in a LOAD DATA statement")
    return statement.replace(f"'{FILE_PLACEHOLDER}'", f"'{path}'")


# What runs on the executors references no module of the project (it is sent by value, see native_write):
# the statements are made on the driver.


def load_postgresql(address: NativeAddress, statement: str, batches: Iterator[Any]) -> int:
    import psycopg  # noqa: PLC0415 - imported where the task runs

    rows = 0
    with psycopg.connect(
        host=address.host,
        port=address.port,
        dbname=address.database,
        user=address.user,
        password=address.password,
        options="-c TimeZone=UTC",
    ) as conn:
        with conn.cursor() as cursor, cursor.copy(statement) as copy:
            for batch in batches:
                copy.write(_csv(batch, ""))
                rows += batch.num_rows
        conn.commit()
    return rows


def load_mysql(address: NativeAddress, statement: str, batches: Iterator[Any]) -> int:
    import pymysql  # noqa: PLC0415 - imported where the task runs

    rows = 0
    handle, path = tempfile.mkstemp(prefix="repladmin-load-", suffix=".csv")
    try:
        with os.fdopen(handle, "wb") as out:
            for batch in batches:
                out.write(_csv(batch, "NULL"))
                rows += batch.num_rows
        if not rows:
            return 0
        conn = pymysql.connect(
            host=address.host,
            port=address.port,
            user=address.user,
            password=address.password,
            database=address.database,
            local_infile=True,
            charset="utf8mb4",
            autocommit=False,
            init_command="SET time_zone = '+00:00'",
        )
        try:
            with conn.cursor() as cursor:
                loaded = cursor.execute(with_file(statement, path))
                cursor.execute("SHOW WARNINGS LIMIT 1")
                warnings = cursor.fetchall()
                if warnings or loaded != rows:
                    conn.rollback()
                    said = f": {warnings[0][2]}" if warnings else ""
                    raise NativeLoadError(f"LOAD DATA took {loaded} of {rows} rows{said}")
            conn.commit()
        finally:
            conn.close()
    finally:
        os.unlink(path)
    return rows


def _load_partition(load: Callable[[NativeAddress, str, Iterator[Any]], int], address: NativeAddress,
                    statement: str, batches: Iterator[Any]) -> Iterator[Any]:  # fmt: skip
    import pyarrow as pa  # noqa: PLC0415 - imported where the task runs

    yield pa.RecordBatch.from_pydict({"rows": [load(address, statement, batches)]})


def native_write(df: DataFrame, address: NativeAddress, table_sql: str, writers: int) -> int:
    """Append `df` into the staging table `table_sql` with at most `writers` partitions loading at once;
    returns the rows written."""
    from pyspark import cloudpickle  # noqa: PLC0415

    d = dialects.get(address.dialect)
    if d.bulk_loader not in (COPY, LOAD_DATA):
        raise ValueError(f"no bulk loader for {d.label}")
    ready, binary = csv_ready(df, d.bulk_loader, d.has_boolean)
    load = load_postgresql if d.bulk_loader == COPY else load_mysql
    statement = load_statement(d, table_sql, df.columns, binary)
    # Sent by value: the executors' Python workers need pyarrow and the drivers, not this project on their path.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    task = functools.partial(_load_partition, load, address, statement)
    counts = ready.coalesce(max(writers, 1)).mapInArrow(task, "rows long").collect()
    return sum(int(r["rows"]) for r in counts)

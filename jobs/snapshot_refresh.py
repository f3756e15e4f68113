"""Snapshot refresh on Spark: move rows from the source into a staging table on the destination.

Only staging tables are written here (append into tables the console created); the destination
itself is changed afterwards in one transaction by the control plane (replication_admin.refresh).

- full: the snapshot query, read (partitioned on an integer key when there is one), converted to the
  destination's storage formats, appended to the staging table;
- incremental: the snapshot log window joined to the current source rows, minus the log rows the
  replay log says were applied, split into batches at SNAPTIME boundaries, appended to staging.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from jobs.compare import normalise_time_text
from jobs.jdbc import DEFAULT_PARALLELISM, Parallelism, jdbc_options, read_by_key_range, read_query, read_split
from jobs.native_load import NativeAddress, native_write
from jobs.progress import StageProgress
from replication_admin.engine import dialects
from replication_admin.engine.compare import family_of
from replication_admin.engine.dialects import JdbcEndpoint
from replication_admin.engine.refresh_sql import Moved

BATCH_ROWS = 50_000
SQLITE_TS = "yyyy-MM-dd HH:mm:ss.SSSSSS"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Endpoint:
    dialect: str
    jdbc: JdbcEndpoint
    native: NativeAddress | None = None  # writes go through the dialect's bulk loader (jobs.native_load)


def as_timestamp(c: Column, read_as: str) -> Column:
    # ANSI casts: a value that is not a timestamp fails the job instead of arriving as NULL.
    return c if read_as == "TIMESTAMP" else F.trim(c).cast("timestamp")


def text_timestamps(dialect: str) -> bool:
    """True when the dialect stores timestamps as text (written in SQLITE_TS form)."""
    return dialects.get(dialect).text_timestamps


def snaptime_type(dialect: str) -> str:
    """The Spark type a SNAPTIME column of the dialect is read as."""
    return dialects.get(dialect).snaptime_read_type


def snaptime_out(c: Column, dest_dialect: str) -> Column:
    """A SNAPTIME timestamp in the form the destination stores."""
    return F.date_format(c, SQLITE_TS) if text_timestamps(dest_dialect) else c


def to_destination(c: Column, moved: Moved, read_as: str, dest_dialect: str) -> Column:
    """One value in the form the destination stores (see docs/design-notes.md, SQLite storage)."""
    family = family_of(moved.logical)
    if text_timestamps(dest_dialect):
        if family == "timestamp":
            return F.date_format(as_timestamp(c, read_as), SQLITE_TS)
        if family == "date":
            return F.date_format(c if read_as == "DATE" else F.trim(c).cast("date"), "yyyy-MM-dd")
        if family == "time":
            return normalise_time_text(c.cast("string"))
        if family == "boolean":
            return c.cast("int")
        if family == "decimal":
            return c.cast("string")
        return c
    if family == "timestamp":
        return as_timestamp(c, read_as)
    if family == "date":
        return c if read_as == "DATE" else F.trim(c).cast("date")
    if family == "boolean":
        return c.cast("boolean")
    if family == "decimal":
        return c.cast("string")
    if family == "integer" and read_as != "BIGINT":
        return c.cast("bigint")
    return c


def write_staging(df: DataFrame, endpoint: Endpoint, table_sql: str, parallelism: Parallelism | None = None) -> None:
    """Append into a staging table the console created (Spark never creates or truncates tables).

    At most `parallelism.connections` partitions write at once (coalesce merges partitions without a
    shuffle and never adds any); a single-writer database gets one writer, in one transaction."""
    write_rows(df, endpoint, table_sql, parallelism)


def write_rows(df: DataFrame, endpoint: Endpoint, table_sql: str, parallelism: Parallelism | None = None) -> int | None:
    """write_staging; returns the rows written when the writer counted them (the native bulk path does)."""
    if endpoint.native is not None:
        return native_write(df, endpoint.native, table_sql, (parallelism or DEFAULT_PARALLELISM).connections)
    if dialects.get(endpoint.dialect).single_writer:
        df = df.coalesce(1)  # one writer at a time, one transaction
        options = {"batchsize": "5000", "isolationLevel": "SERIALIZABLE"}
    else:
        df = df.coalesce(max((parallelism or DEFAULT_PARALLELISM).connections, 1))
        options = {"batchsize": "20000", "isolationLevel": "READ_COMMITTED"}
    writer = df.write.format("jdbc").mode("append").option("dbtable", table_sql)
    for key, value in {**jdbc_options(endpoint.jdbc), **options}.items():
        writer = writer.option(key, value)
    writer.save()
    return None


def write_counted(
    df: DataFrame,
    endpoint: Endpoint,
    table_sql: str,
    name: str,
    spark: SparkSession | None = None,
    progress: Progress | None = None,
    parallelism: Parallelism | None = None,
) -> int:
    """write_staging, returning the number of rows written, counted as they stream through (no second
    pass); with `spark` and `progress`, the write's task progress is reported while it runs.

    The staging table must be empty before the write (the control plane creates it for this write)."""
    observation = Observation(name)
    out = df if endpoint.native is not None else df.observe(observation, F.count(F.lit(1)).alias("rows"))
    if spark is not None:
        with StageProgress(spark, progress or (lambda d, t: None)):
            written = write_rows(out, endpoint, table_sql, parallelism)
    else:
        written = write_rows(out, endpoint, table_sql, parallelism)
    if written is not None:
        return written
    return counted_rows(observation.get, lambda: staged_rows(df.sparkSession, endpoint, table_sql))


def counted_rows(observed: Mapping[str, Any], count_staged: Callable[[], int]) -> int:
    """The rows a write counted as they streamed through, or else the rows in its staging table.

    Spark Connect reads a write command's observed metrics without waiting for the listener that fills
    them in: when that listener is late (a busy service, a write over in moments, as an empty table's
    is) the observation comes back without its value. The staging table, empty before the write and
    written by nothing else, then holds exactly the rows written."""
    rows = observed.get("rows")
    return int(rows) if rows is not None else count_staged()


def staged_rows(spark: SparkSession, endpoint: Endpoint, table_sql: str) -> int:
    """The number of rows in a staging table (one COUNT(*) on the destination)."""
    row = read_query(spark, endpoint.jdbc, f"SELECT COUNT(*) AS n FROM {table_sql}", "n BIGINT").collect()[0]
    return int(row["n"])


@dataclass(frozen=True)
class FullCopy:
    source: Endpoint
    select_sql: str  # engine.refresh.noninc_select
    custom_schema: str
    partition_alias: str | None
    moved: tuple[Moved, ...]
    read_types: dict[str, str]  # alias -> Spark type it is read as
    dest: Endpoint
    staging_sql: str  # the quoted staging table name
    staging_columns: tuple[str, ...]  # column names of the staging table, in `moved` order
    parallelism: Parallelism = DEFAULT_PARALLELISM
    row_number: str | None = None  # a staging column taking increasing row numbers (a bi-directional copy's)


ROW_NUMBER_BITS = 31  # the SQLite ODBC driver returns 32-bit integers from MAX()


def row_number_bits(partitions: int) -> tuple[int, int]:
    """(bits for the partition, bits for the row's place in it) of a row number below 2**31."""
    partition_bits = max(partitions - 1, 0).bit_length()
    return partition_bits, ROW_NUMBER_BITS - partition_bits


def full_copy(spark: SparkSession, plan: FullCopy, progress: Progress | None = None) -> int:
    """Read the snapshot query and append its rows, in destination formats, to the staging table; with
    `row_number`, each row numbered (increasing, not contiguous).

    Returns the number of rows written, counted as they stream through (no second pass)."""
    read = read_by_key_range(
        spark, plan.source.jdbc, plan.select_sql, plan.custom_schema, plan.partition_alias, plan.parallelism
    )
    out = [
        to_destination(F.col(m.alias), m, plan.read_types[m.alias], plan.dest.dialect).alias(name)
        for m, name in zip(plan.moved, plan.staging_columns, strict=True)
    ]
    if plan.row_number is not None:
        # Increasing row numbers below 2**31: the read partition in the top bits (as few as the read's
        # partition count needs), the row's place in its partition below (2**29 rows each for 4 partitions).
        # The read is not shuffled, so spark_partition_id() is the read partition.
        _, place_bits = row_number_bits(read.partitions)
        partition = F.spark_partition_id().cast("long")
        place = F.monotonically_increasing_id() - F.shiftleft(partition, 33)
        out.insert(0, (F.shiftleft(partition, place_bits) + place).alias(plan.row_number))
    return write_counted(read.df.select(*out), plan.dest, plan.staging_sql, "full_copy", spark, progress,
                         plan.parallelism)  # fmt: skip


@dataclass(frozen=True)
class IncrementLoad:
    source: Endpoint
    window_sql: str  # engine.refresh.log_window_select
    window_schema: str
    moved: tuple[Moved, ...]
    read_types: dict[str, str]
    dest: Endpoint
    rplog_sql: str  # engine.refresh.rplog_select, on the destination
    staging_sql: str
    window_rows: int = 0  # the log window's row count, as the control plane counted it
    split_alias: str | None = None  # an integer key alias of the window to split its read on
    parallelism: Parallelism = DEFAULT_PARALLELISM


@dataclass(frozen=True)
class Batch:
    number: int
    rows: int
    first_snaptime: datetime  # UTC, naive
    last_snaptime: datetime


def plan_batches(counts: Sequence[tuple[object, int]], batch_rows: int = BATCH_ROWS) -> list[tuple[object, int]]:
    """(snaptime, rows) in SNAPTIME order -> (snaptime, batch): batches of about `batch_rows` rows that
    never split one SNAPTIME (all log rows of one source transaction commit together)."""
    assigned: list[tuple[object, int]] = []
    batch, in_batch = 0, 0
    for snaptime, rows in counts:
        if in_batch and in_batch + rows > batch_rows:
            batch, in_batch = batch + 1, 0
        assigned.append((snaptime, batch))
        in_batch += rows
    return assigned


def load_increment(spark: SparkSession, plan: IncrementLoad, progress: Progress | None = None) -> list[Batch]:
    """Stage the not-yet-applied log rows with the current source values; return the batches."""
    window = read_split(
        spark,
        plan.source.jdbc,
        plan.window_sql,
        plan.window_schema,
        plan.split_alias,
        plan.window_rows,
        plan.parallelism,
    ).df
    window = window.withColumn(
        "snaptime",
        as_timestamp(F.col("snaptime"), snaptime_type(plan.source.dialect)),
    )
    applied = read_query(spark, plan.dest.jdbc, plan.rplog_sql, "rowguid STRING")
    pending = window.join(applied, on="rowguid", how="left_anti").persist()
    try:
        counts = pending.groupBy("snaptime").count().orderBy("snaptime").collect()
        if not counts:
            return []
        assigned = plan_batches([(row["snaptime"], int(row["count"])) for row in counts])
        batches_df = spark.createDataFrame(assigned, "snaptime timestamp, batch int")
        staged = pending.join(F.broadcast(batches_df), on="snaptime")
        op = F.when(F.col("present") == 1, F.lit("U")).otherwise(F.lit("D"))
        out = staged.select(
            op.alias("op"),
            F.col("batch"),
            *[
                to_destination(F.col(m.alias), m, plan.read_types[m.alias], plan.dest.dialect).alias(m.alias)
                for m in plan.moved
            ],
            F.col("rowguid"),
            snaptime_out(F.col("snaptime"), plan.dest.dialect).alias("snaptime"),
        )
        with StageProgress(spark, progress or (lambda d, t: None)):
            write_staging(out, plan.dest, plan.staging_sql, plan.parallelism)
        totals: dict[int, list[Any]] = {}
        for (snaptime, batch), (_, rows) in zip(
            assigned, [(r["snaptime"], int(r["count"])) for r in counts], strict=True
        ):
            entry = totals.setdefault(batch, [0, snaptime, snaptime])
            entry[0] += rows
            entry[2] = snaptime
        return [Batch(number=b, rows=v[0], first_snaptime=v[1], last_snaptime=v[2]) for b, v in sorted(totals.items())]
    finally:
        pending.unpersist()

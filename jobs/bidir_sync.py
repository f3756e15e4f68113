"""Bi-directional snapshot replication on Spark: the initial copy, and the PULL / PUSH halves of a sync.

Only work tables are written here (BSIC_, BSIN_, BSAP_, BSPS_, created by the console); the replicated
tables themselves change afterwards in one transaction per apply, run by the control plane
(replication_admin.bidir), which also records the replay log in that transaction.

PULL: a subscriber's pending changes (its log joined to its rows), minus those the publisher's replay
log lists, are staged by key on the publisher and read back joined to the publisher's rows. Each change
is classified as the reference says: an insert whose key exists, an update whose row is gone (a delete
conflict) or whose ROWGUID is not the one the subscriber changed (an update conflict), a delete of a
missing or changed row (a delete conflict). Changes without conflict are staged for the apply as they
are; conflicting ones are returned, typed, to be decided by the resolver chain (jobs.resolve).

PUSH: the publisher's changes of the window that did not come from the subscriber, minus those the
subscriber's replay log lists, are staged on the subscriber for its apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.jdbc import read_partitioned, read_query
from jobs.snapshot_refresh import (
    Endpoint,
    as_timestamp,
    snaptime_out,
    snaptime_type,
    to_destination,
    write_counted,
    write_staging,
)
from replication_admin.engine.refresh_sql import Moved

Progress = Callable[[int, int], None]


def _snaptime(df: DataFrame, dialect: str) -> DataFrame:
    return df.withColumn("snaptime", as_timestamp(F.col("snaptime"), snaptime_type(dialect)))


def _snaptime_out(dest_dialect: str) -> Column:
    return snaptime_out(F.col("snaptime"), dest_dialect)


def _values_out(
    moved: tuple[Moved, ...], read_types: dict[str, str], dest_dialect: str, prefix: str = ""
) -> list[Column]:
    return [to_destination(F.col(prefix + m.alias), m, read_types[m.alias], dest_dialect).alias(m.alias) for m in moved]


def _typed(
    moved: tuple[Moved, ...], read_types: dict[str, str], types: dict[str, str], prefix: str, out: str
) -> list[Column]:
    """Values cast to the types resolvers compare them as (decimals as decimals, SQLite text as time)."""
    columns = []
    for m in moved:
        c = F.col(prefix + m.alias)
        target = types[m.alias]
        if target == "timestamp" and read_types[m.alias] == "STRING":
            c = F.trim(c).cast("timestamp")
        elif target == "date" and read_types[m.alias] == "STRING":
            c = F.trim(c).cast("date")
        elif target.startswith("decimal") or target in {"bigint", "double", "boolean"}:
            c = c.cast(target)
        columns.append(c.alias(out + m.alias))
    return columns


# --- initial copy ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InitCopy:
    source: Endpoint
    select_sql: str
    custom_schema: str
    partition_alias: str | None
    moved: tuple[Moved, ...]
    read_types: dict[str, str]
    dest: Endpoint
    staging_sql: str


def stage_copy(spark: SparkSession, plan: InitCopy, progress: Progress | None = None) -> int:
    """The publisher's rows, numbered (rn: increasing, not contiguous), staged on the subscriber."""
    df = read_partitioned(spark, plan.source.jdbc, plan.select_sql, plan.custom_schema, plan.partition_alias)
    # read_partitioned reads at most MAX_PARTITIONS (8) partitions: the partition fits the top 3 bits.
    # Increasing row numbers below 2**31 (the SQLite ODBC driver returns 32-bit integers from MAX()):
    # the partition in the top 3 bits, the row's place in its partition (up to 268 million) below.
    partition = F.spark_partition_id().cast("long")
    place = F.monotonically_increasing_id() - F.shiftleft(partition, 33)
    out = df.select(
        (F.shiftleft(partition, 28) + place).alias("rn"), *_values_out(plan.moved, plan.read_types, plan.dest.dialect)
    )
    return write_counted(out, plan.dest, plan.staging_sql, "init_copy", spark, progress)


# --- pull ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PullPlan:
    sub: Endpoint
    pub: Endpoint
    changes_sql: str  # engine.bidir.pull_select on the subscriber
    changes_schema: str
    replayed_sql: str  # engine.bidir.rplog_guids_select on the publisher
    keys_staging_sql: str  # BSIN_ on the publisher
    pub_rows_sql: str  # engine.bidir.publisher_rows_select
    pub_rows_schema: str
    apply_staging_sql: str  # BSAP_ on the publisher
    keys: tuple[Moved, ...]
    values: tuple[Moved, ...]
    sub_read_types: dict[str, str]
    pub_read_types: dict[str, str]
    resolver_types: dict[str, str]  # alias -> Spark type resolvers see


@dataclass
class PullResult:
    replayed: list[str] = field(default_factory=list)  # change ids the publisher already has
    staged: list[str] = field(default_factory=list)  # change ids staged for the apply, conflicts or not
    conflicts: list[dict[str, Any]] = field(
        default_factory=list
    )  # typed rows: k*, op, change_id, old_guid, snaptime, p*, n*
    applied_without_conflict: int = 0
    keys: dict[str, tuple[Any, ...]] = field(
        default_factory=dict
    )  # change id -> (op, conflict type or None, key values)


def pull_changes(spark: SparkSession, plan: PullPlan) -> PullResult:
    result = PullResult()
    changes = _snaptime(read_query(spark, plan.sub.jdbc, plan.changes_sql, plan.changes_schema), plan.sub.dialect)
    applied = read_query(spark, plan.pub.jdbc, plan.replayed_sql, "change_id STRING")
    changes = changes.persist()
    try:
        result.replayed = [r["change_id"] for r in changes.join(applied, "change_id", "left_semi").collect()]
        pending = changes.join(applied, "change_id", "left_anti").persist()
        try:
            return _pull_pending(spark, plan, pending, result)
        finally:
            pending.unpersist()
    finally:
        changes.unpersist()


def _pull_pending(spark: SparkSession, plan: PullPlan, pending: DataFrame, result: PullResult) -> PullResult:
    key_aliases = [k.alias for k in plan.keys]
    keys_out = _values_out(plan.keys, plan.sub_read_types, plan.pub.dialect)
    staged_keys = pending.select(*keys_out, "change_id")
    rows = staged_keys.count()
    if rows == 0:
        return result
    write_staging(staged_keys, plan.pub, plan.keys_staging_sql)
    pub_rows = read_query(spark, plan.pub.jdbc, plan.pub_rows_sql, plan.pub_rows_schema).drop(*key_aliases)
    joined = pending.join(pub_rows, "change_id")

    guid = next(v.alias for v in plan.values if v.dest.upper() == "ROWGUID")
    op = F.when(F.col("op").isin("I", "U") & (F.col("present") == 0), F.lit("D")).otherwise(F.col("op"))
    pub_here = F.col("pub_present") == 1
    same_version = pub_here & F.col("p" + guid).eqNullSafe(F.col("old_guid"))
    # The publisher already has this very version (its replay-log row was purged before the
    # subscriber's log row was consumed): nothing to apply, nothing to decide.
    already = pub_here & (F.col("p" + guid) == F.col("change_id")) & F.col("eff_op").isin("I", "U")
    conflict = (
        F.when(already, F.lit(None).cast("string"))
        .when((F.col("eff_op") == "I") & pub_here, F.lit("I"))
        .when((F.col("eff_op") == "U") & ~pub_here, F.lit("D"))
        .when((F.col("eff_op") == "U") & ~same_version, F.lit("U"))
        .when((F.col("eff_op") == "D") & ~pub_here & F.col("old_guid").isNotNull(), F.lit("D"))
        .when((F.col("eff_op") == "D") & pub_here & ~same_version, F.lit("D"))
    )
    action = (
        F.when(already, F.lit("N"))
        .when(F.col("eff_op").isin("I", "U"), F.lit("W"))
        .when(pub_here, F.lit("D"))
        .otherwise(F.lit("N"))  # a delete of a row the publisher never had
    )
    classified = joined.withColumn("eff_op", op).withColumn("conflict", conflict).persist()
    try:
        staged = classified.select("change_id", "eff_op", "conflict", *key_aliases).collect()
        result.staged = [r["change_id"] for r in staged]
        result.keys = {r["change_id"]: (r["eff_op"], r["conflict"], tuple(r[k] for k in key_aliases)) for r in staged}
        clean = classified.where(F.col("conflict").isNull())
        out = clean.select(
            *keys_out,
            action.alias("action"),
            F.col("pub_present").alias("exp_present"),
            F.col("p" + guid).alias("exp_guid"),
            F.col("change_id"),
            _snaptime_out(plan.pub.dialect).alias("snaptime"),
            *_values_out(plan.values, plan.sub_read_types, plan.pub.dialect),
        )
        result.applied_without_conflict = write_counted(out, plan.pub, plan.apply_staging_sql, "pull_clean")
        typed = classified.where(F.col("conflict").isNotNull()).select(
            "conflict",
            "eff_op",
            "change_id",
            "old_guid",
            "snaptime",
            "pub_present",
            *_typed(plan.keys, plan.sub_read_types, plan.resolver_types, "", "n"),
            *_typed(plan.values, plan.sub_read_types, plan.resolver_types, "", "n"),
            *_typed(plan.values, plan.pub_read_types, plan.resolver_types, "p", "p"),
        )
        result.conflicts = [r.asDict() for r in typed.collect()]
    finally:
        classified.unpersist()
    return result


# --- push ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushPlan:
    pub: Endpoint
    sub: Endpoint
    changes_sql: str  # engine.bidir.push_select on the publisher
    changes_schema: str
    replayed_sql: str  # engine.bidir.rplog_guids_select on the subscriber
    apply_staging_sql: str  # BSPS_ on the subscriber
    keys: tuple[Moved, ...]
    values: tuple[Moved, ...]
    pub_read_types: dict[str, str]


@dataclass
class PushResult:
    staged: int = 0
    newest: datetime | None = None  # the newest SNAPTIME of the window (naive UTC) or None


def push_changes(spark: SparkSession, plan: PushPlan) -> PushResult:
    changes = _snaptime(read_query(spark, plan.pub.jdbc, plan.changes_sql, plan.changes_schema), plan.pub.dialect)
    applied = read_query(spark, plan.sub.jdbc, plan.replayed_sql, "change_id STRING")
    changes = changes.persist()
    try:
        newest = changes.agg(F.max("snaptime").alias("t")).collect()[0]["t"]
        pending = changes.join(applied, "change_id", "left_anti")
        out = pending.select(
            *_values_out(plan.keys, plan.pub_read_types, plan.sub.dialect),
            F.when(F.col("present") == 1, F.lit("W")).otherwise(F.lit("D")).alias("action"),
            F.lit(None).cast("int").alias("exp_present"),
            F.lit(None).cast("string").alias("exp_guid"),
            F.col("change_id"),
            _snaptime_out(plan.sub.dialect).alias("snaptime"),
            *_values_out(plan.values, plan.pub_read_types, plan.sub.dialect),
        )
        return PushResult(staged=write_counted(out, plan.sub, plan.apply_staging_sql, "push"), newest=newest)
    finally:
        changes.unpersist()

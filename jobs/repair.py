"""Repairing a snapshot on Spark: stage exactly the rows where the destination differs from its source.

The source query's rows and the destination's are canonicalised and hashed as the compare job does;
keys missing or different on the destination are staged with the source's values ('U'), keys only on
the destination are staged for deletion ('D'). The control plane then applies the staging table in one
destination transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.compare import canonical_value, row_hash
from jobs.jdbc import Parallelism, read_partitioned
from jobs.progress import StageProgress
from jobs.snapshot_refresh import Endpoint, snaptime_out, to_destination, write_staging
from replication_admin.engine.compare import ComparePlan, Side
from replication_admin.engine.refresh_sql import Moved


def _with_canonical(df: DataFrame, side: Side, prefix: str) -> DataFrame:
    keys = [c for c in side.columns if c.alias.startswith("k")]
    values = [canonical_value(c) for c in side.columns if not c.alias.startswith("k")]
    return df.select(
        *[F.col(c.alias).alias(f"{prefix}{c.alias}") for c in side.columns],
        *[canonical_value(k).alias(f"{prefix}_c{k.alias}") for k in keys],
        row_hash(values).alias(f"{prefix}_h"),
    )


def stage_repair(
    spark: SparkSession,
    plan: ComparePlan,
    moved: tuple[Moved, ...],
    source: Endpoint,
    dest: Endpoint,
    staging_sql: str,
    progress: Callable[[int, int], None] | None = None,
    parallelism: Parallelism | None = None,
) -> dict[str, int]:
    left = read_partitioned(
        spark, source.jdbc, plan.left.select_sql(), plan.left.custom_schema(), plan.left.partition_alias, parallelism
    )
    right = read_partitioned(
        spark, dest.jdbc, plan.right.select_sql(), plan.right.custom_schema(), plan.right.partition_alias, parallelism
    )
    lc, rc = _with_canonical(left, plan.left, "l_"), _with_canonical(right, plan.right, "r_")
    keys = [c.alias for c in plan.left.columns if c.alias.startswith("k")]
    joined = lc.join(rc, on=[F.col(f"l__c{k}") == F.col(f"r__c{k}") for k in keys], how="full_outer")
    in_left, in_right = F.col(f"l__c{keys[0]}").isNotNull(), F.col(f"r__c{keys[0]}").isNotNull()
    upsert = in_left & (~in_right | (F.col("l__h") != F.col("r__h")))
    delete = in_right & ~in_left
    read_left = {c.alias: c.read_type for c in plan.left.columns}
    read_right = {c.alias: c.read_type for c in plan.right.columns}
    now = F.current_timestamp()
    snaptime = snaptime_out(now, dest.dialect)
    columns = []
    for m in moved:
        from_left = to_destination(F.col(f"l_{m.alias}"), m, read_left[m.alias], dest.dialect)
        if m.is_key:
            from_right = to_destination(F.col(f"r_{m.alias}"), m, read_right[m.alias], dest.dialect)
            columns.append(F.when(in_left, from_left).otherwise(from_right).alias(m.alias))
        else:
            columns.append(F.when(in_left, from_left).alias(m.alias))
    staged = (
        joined.filter(upsert | delete)
        .select(
            F.when(in_left, F.lit("U")).otherwise(F.lit("D")).alias("op"),
            F.lit(0).alias("batch"),
            *columns,
            F.expr("uuid()").alias("rowguid"),
            snaptime.alias("snaptime"),
        )
        .persist()
    )
    try:
        counts = {row["op"]: int(row["count"]) for row in staged.groupBy("op").count().collect()}
        if counts:
            with StageProgress(spark, progress or (lambda d, t: None)):
                write_staging(staged, dest, staging_sql, parallelism)
    finally:
        staged.unpersist()
    return {"upserts": counts.get("U", 0), "deletes": counts.get("D", 0)}

"""Bi-directional snapshot replication on Spark: the initial copy, and the PULL / PUSH halves of a sync.

Only work tables are written here (BSIC_, BSIN_, BSAP_, BSPS_, created by the console); the replicated
tables themselves change afterwards in one transaction per apply, run by the control plane
(replication_admin.bidir), which also records the replay log in that transaction.

PULL: a subscriber's pending changes (its log joined to its rows), minus those the publisher's replay
log lists, are staged by key on the publisher and read back joined to the publisher's rows. Each change
is classified as the reference says: an insert whose key exists, an update whose row is gone (a delete
conflict) or whose ROWGUID is not the one the subscriber changed (an update conflict), a delete of a
missing or changed row (a delete conflict). Changes without conflict are staged for the apply as they
are; conflicting ones are decided here by the resolver chain (jobs.resolve) and handed to the control
plane chunk by chunk, for their backups. What the pull read is staged too, for the clean-up after the
apply: on the publisher, the ids of the changes it already had (BSCN_; with those of BSIN_, its replay
log forgets them), and on the subscriber, every change read with its keys (BSPL_, its log consumes
them). Only counts, the conflict types and the decided conflicts come back to Python.

PUSH: the publisher's changes of the window that did not come from the subscriber, minus those the
subscriber's replay log lists, are staged on the subscriber for its apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.jdbc import DEFAULT_PARALLELISM, Parallelism, read_query, read_split
from jobs.resolve import column_type, decide_frame
from jobs.snapshot_refresh import (
    Endpoint,
    as_timestamp,
    snaptime_out,
    snaptime_type,
    to_destination,
    write_counted,
    write_staging,
)
from replication_admin.engine.bidir_sql import ROWGUID_COLUMN
from replication_admin.engine.refresh_sql import Moved
from replication_admin.engine.resolvers import (
    CONFLICTED_FIELD,
    ResolverColumn,
    ResolverSpec,
    spark_type,
    to_json_value,
)

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


# --- pull ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PullPlan:
    sub: Endpoint
    pub: Endpoint
    changes_sql: str  # engine.bidir.pull_select on the subscriber
    changes_schema: str
    replayed_sql: str  # engine.bidir.rplog_guids_select on the publisher
    keys_staging_sql: str  # BSIN_ on the publisher: the pending changes, whole
    pub_rows_sql: str  # engine.bidir.publisher_rows_select
    pub_rows_schema: str
    apply_staging_sql: str  # BSAP_ on the publisher
    consumed_staging_sql: str  # BSCN_ on the publisher: the ids of the changes it had already applied
    sub_stage: Endpoint  # the subscriber, writable (`sub` reads read-only)
    pulled_staging_sql: str  # BSPL_ on the subscriber: every change read, with its type and keys
    keys: tuple[Moved, ...]
    values: tuple[Moved, ...]
    sub_read_types: dict[str, str]
    pub_read_types: dict[str, str]
    resolver_types: dict[str, str]  # alias -> Spark type resolvers see
    pub_moved: tuple[Moved, ...] = ()  # the publisher's layout (keys, then values): names the rows' columns
    chain: tuple[ResolverSpec, ...] = ()  # the item's resolvers, every type
    changes_rows: int = 0  # the subscriber's log rows, as counted before the pull
    split_alias: str | None = None  # an integer key alias to split the change reads on
    parallelism: Parallelism = DEFAULT_PARALLELISM


@dataclass
class PullResult:
    replayed: int = 0  # changes the publisher already has
    staged: int = 0  # changes staged for the apply, conflicts or not
    conflicts: int = 0  # decided and handed to `on_conflicts`
    applied_without_conflict: int = 0


# Decided conflicts are handed to the control plane in chunks of this many: the driver holds one chunk.
CONFLICT_CHUNK = 1_000

# (typed conflict row: conflict, eff_op, change_id, old_guid, snaptime, pub_present, n*, p*;
#  its decision: decide_rows' input and output merged: key, type, pub, new, old, decision, resolver ...)
DecidedConflicts = Callable[[list[tuple[dict[str, Any], dict[str, Any]]]], None]


def _changes_and_replayed(
    spark: SparkSession, plan: PullPlan | PushPlan, source: Endpoint, dest: Endpoint
) -> tuple[DataFrame, int, DataFrame]:
    """The window's changes read from `source` (split when large; cached: the caller unpersists them), how
    many, and the change ids `dest`'s replay log already lists.

    The changes are computed into the cache here, once: the log keeps changing while a sync reads it, and a
    frame used twice in one plan before its cache is filled can be read twice, at different moments (two
    stages computing the same partition at once). Both uses would then disagree about which changes
    were read, and a change made in between could be taken for one already applied."""
    changes = read_split(
        spark,
        source.jdbc,
        plan.changes_sql,
        plan.changes_schema,
        plan.split_alias,
        plan.changes_rows,
        plan.parallelism,
    ).df
    applied = read_query(spark, dest.jdbc, plan.replayed_sql, "change_id STRING")
    cached = _snaptime(changes, source.dialect).persist()
    return cached, cached.count(), applied


def pull_changes(spark: SparkSession, plan: PullPlan, on_conflicts: DecidedConflicts | None = None) -> PullResult:
    """Stage the subscriber's pending changes on the publisher; conflicts are decided here, on Spark, by
    the plan's resolver chain, and handed to `on_conflicts` chunk by chunk with their decisions."""
    result = PullResult()
    changes, read, applied = _changes_and_replayed(spark, plan, plan.sub, plan.pub)
    try:
        pending = changes.join(applied, "change_id", "left_anti").persist()
        try:
            result.staged = pending.count()  # into the cache, once (the replay log is read once too)
            # What is not pending was replayed: taken from the cached `pending`, so the two never overlap.
            # Usually none: an earlier sync applied them, then stopped before its clean-up.
            replayed = changes.join(pending, "change_id", "left_anti")
            result.replayed = read - result.staged
            if result.replayed:
                write_staging(replayed.select("change_id"), plan.pub, plan.consumed_staging_sql)
            _pull_pending(
                spark,
                plan,
                pending,
                _pulled(plan, replayed, F.lit("R"), F.lit(0)),
                result,
                on_conflicts or (lambda chunk: None),
            )
            return result
        finally:
            pending.unpersist()
    finally:
        changes.unpersist()


def _pulled(plan: PullPlan, df: DataFrame, op: Column, taken: Column) -> DataFrame:
    """Rows of the subscriber's BSPL_ work table."""
    return df.select(
        *_values_out(plan.keys, plan.sub_read_types, plan.sub_stage.dialect),
        F.col("change_id"),
        op.alias("op"),
        taken.alias("taken"),
    )


def _pull_pending(
    spark: SparkSession,
    plan: PullPlan,
    pending: DataFrame,
    replayed: DataFrame,
    result: PullResult,
    on_conflicts: DecidedConflicts,
) -> None:
    """Classify, stage and decide the pending changes; stage what was read, `replayed` too, on the
    subscriber (written after every read of the subscriber is computed: a single-writer subscriber has
    one connection at a time)."""
    key_aliases = [k.alias for k in plan.keys]
    keys_out = _values_out(plan.keys, plan.sub_read_types, plan.pub.dialect)
    # Each change is staged whole: the apply decides it again, under its locks, if the row moves meanwhile.
    staged_keys = pending.select(
        *keys_out,
        "change_id",
        "op",
        "old_guid",
        _snaptime_out(plan.pub.dialect).alias("snaptime"),
        "present",
        *_values_out(plan.values, plan.sub_read_types, plan.pub.dialect),
    )
    rows = result.staged
    if rows == 0:
        write_staging(replayed, plan.sub_stage, plan.pulled_staging_sql, plan.parallelism)
        return
    write_staging(staged_keys, plan.pub, plan.keys_staging_sql, plan.parallelism)
    pub_rows = read_split(
        spark, plan.pub.jdbc, plan.pub_rows_sql, plan.pub_rows_schema, plan.split_alias, rows, plan.parallelism
    ).df.drop(*key_aliases)
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
        # The conflict types present (at most three rows): the chain is compiled for these only.
        types = {
            r["conflict"]
            for r in classified.where(F.col("conflict").isNotNull()).select("conflict").distinct().collect()
        }
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
        result.applied_without_conflict = write_counted(
            out, plan.pub, plan.apply_staging_sql, "pull_clean", parallelism=plan.parallelism
        )
        if types:
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
            result.conflicts = _decide_conflicts(plan, typed, types, on_conflicts)
        # Conflicts start as not taken; the control plane marks those decided "subscriber wins".
        taken = F.when(F.col("conflict").isNull(), F.lit(1)).otherwise(F.lit(0))
        pulled = replayed.unionByName(_pulled(plan, classified, F.col("eff_op"), taken))
        write_staging(pulled, plan.sub_stage, plan.pulled_staging_sql, plan.parallelism)
    finally:
        classified.unpersist()


def _resolver_columns(plan: PullPlan) -> list[ResolverColumn]:
    return [ResolverColumn(m.dest, spark_type(m.logical), m.is_key) for m in plan.pub_moved]


def _decide_conflicts(plan: PullPlan, typed: DataFrame, types: set[str], on_conflicts: DecidedConflicts) -> int:
    """Decide the typed conflicts on Spark (the same chain evaluation as the dry run's, on this DataFrame)
    and hand them, with their decisions, to `on_conflicts` chunk by chunk."""
    columns = _resolver_columns(plan)
    guid = next(m.alias for m in plan.pub_moved if m.dest.upper() == "ROWGUID")
    null = F.lit(None)
    deleting = F.col("eff_op") == "D"
    pub_here = F.col("pub_present") == 1
    inputs: list[Column] = [
        F.col("change_id").alias("key"),
        F.col("conflict").alias("ctype"),
        pub_here.alias("pub_exists"),
    ]
    for i, m in enumerate(plan.pub_moved):  # the publisher's row: its key is the incoming one
        value = F.col("n" + m.alias) if m.is_key else F.col("p" + m.alias)
        inputs.append(F.when(pub_here, value).otherwise(null).cast(column_type(columns[i])).alias(f"p{i}"))
    for i, m in enumerate(plan.pub_moved):  # the incoming row: only its key for a delete
        value = F.col("n" + m.alias) if m.is_key else F.when(~deleting, F.col("n" + m.alias))
        inputs.append(value.cast(column_type(columns[i])).alias(f"n{i}"))
    for i, m in enumerate(plan.pub_moved):  # the old row: its ROWGUID only
        value = F.col("old_guid") if m.alias == guid else null
        inputs.append(value.cast(column_type(columns[i])).alias(f"o{i}"))
    # A bi-directional conflict is a whole row's: conflict.columns is empty.
    inputs.append(F.array().cast("array<string>").alias(CONFLICTED_FIELD))
    frame = typed.select("*", *inputs)
    decided, decider = decide_frame(frame, plan.chain, columns, types)
    row_columns = typed.columns
    out = decided.select(*row_columns, *[c for c in decider.outputs if c not in row_columns]).persist()
    try:
        try:
            total = out.count()  # computes every decision once; a failing resolver is named here
        except Exception as exc:
            raise decider.explain(exc) from None
        chunk: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for r in out.toLocalIterator():
            row = {name: r[name] for name in row_columns}
            conflict = _conflict_input(plan, row)
            chunk.append((row, {**conflict, **decider.decision_of(r, conflict)}))
            if len(chunk) >= CONFLICT_CHUNK:
                on_conflicts(chunk)
                chunk = []
        if chunk:
            on_conflicts(chunk)
        return total
    finally:
        out.unpersist()


def _conflict_input(plan: PullPlan, c: dict[str, Any]) -> dict[str, Any]:
    """A typed conflict row as decide_rows' input (the rows as the conflict inbox keeps them, in JSON)."""
    incoming = {m.dest: to_json_value(c["n" + m.alias]) for m in plan.pub_moved}
    if c["eff_op"] == "D":
        incoming = {m.dest: incoming[m.dest] for m in plan.pub_moved if m.is_key}
    published = None
    if c["pub_present"] == 1:
        published = {m.dest: to_json_value(c["n" + m.alias]) for m in plan.pub_moved if m.is_key}
        published.update({m.dest: to_json_value(c["p" + m.alias]) for m in plan.pub_moved if not m.is_key})
    return {
        "key": c["change_id"],
        "type": c["conflict"],
        "pub": published,
        "new": incoming,
        "old": {ROWGUID_COLUMN: c["old_guid"]},
    }


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
    changes_rows: int = 0  # the publisher's changes of the window, as counted before the push
    split_alias: str | None = None  # an integer key alias to split the change read on
    parallelism: Parallelism = DEFAULT_PARALLELISM


@dataclass
class PushResult:
    staged: int = 0
    newest: datetime | None = None  # the newest SNAPTIME of the window (naive UTC) or None


def push_changes(spark: SparkSession, plan: PushPlan) -> PushResult:
    changes, _, applied = _changes_and_replayed(spark, plan, plan.pub, plan.sub)
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
        staged = write_counted(out, plan.sub, plan.apply_staging_sql, "push", parallelism=plan.parallelism)
        return PushResult(staged=staged, newest=newest)
    finally:
        changes.unpersist()

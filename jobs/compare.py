"""Compare two tables by primary key on Spark.

extract: read each side through a safe-aliased SELECT (jobs.jdbc);
transform: canonicalise every value to dialect-independent text and hash the non-key values of a row;
load: both sides grouped by canonical key give rows missing on either side, rows that differ and duplicate keys.
The result is a plain dict stored on the JobRun; it is also the oracle the replication tests use. Besides the
counts it keeps the first ROW_LIMIT differing keys, in key order, with both sides' canonical values of the columns
that differ (every compared column of a row missing on one side), each value cut at VALUE_LIMIT characters, so a
huge difference stays a bounded result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from jobs.jdbc import Parallelism, read_partitioned
from replication_admin.engine.compare import ComparePlan, Side, SideColumn
from replication_admin.engine.dialects import JdbcEndpoint

ROW_LIMIT = 200
VALUE_LIMIT = 1000  # characters of one value kept in the result; longer ones keep their length
FIELD_SEPARATOR = "\x1f"

Progress = Callable[[int, int, str], None]


def _normalise_decimal_text(text: Column) -> Column:
    """'+007.500' -> '7.5', '-0.00' -> '0', '18.0' -> '18'; exponent forms go through decimal(38, 10)."""
    trimmed = F.trim(text)
    plain = F.when(trimmed.rlike(r"^[+-]?[0-9]+(\.[0-9]*)?$"), trimmed).otherwise(
        trimmed.try_cast("decimal(38,10)").cast("string")
    )
    out = F.regexp_replace(plain, r"^\+", "")
    out = F.regexp_replace(out, r"^(-?)0+([0-9])", "$1$2")
    out = F.when(out.contains("."), F.regexp_replace(F.regexp_replace(out, r"0+$", ""), r"\.$", "")).otherwise(out)
    out = F.when(out == "-0", F.lit("0")).otherwise(out)
    return F.when(text.isNull(), F.lit(None)).otherwise(F.coalesce(out, trimmed))


def normalise_time_text(text: Column) -> Column:
    whole = F.substring_index(text, ".", 1)
    fraction = F.when(F.instr(text, ".") > 0, F.substring_index(text, ".", -1)).otherwise(F.lit(""))
    return F.concat(whole, F.lit("."), F.rpad(fraction, 6, "0"))


def canonical_value(col: SideColumn) -> Column:
    """Dialect-independent text for one value, NULL kept as NULL."""
    c = F.col(col.alias)
    family, read_as = col.family, col.read_type
    if family == "integer":
        return c.cast("string") if read_as == "BIGINT" else _normalise_decimal_text(c.cast("string"))
    if family in {"decimal", "float"}:
        return _normalise_decimal_text(c.cast("string"))
    if family == "boolean":
        return c.cast("int").cast("string")
    if family == "timestamp":
        ts = c if read_as == "TIMESTAMP" else F.trim(c).try_cast("timestamp")
        return F.coalesce(F.date_format(ts, "yyyy-MM-dd HH:mm:ss.SSSSSS"), c.cast("string"))
    if family == "date":
        day = c if read_as == "DATE" else F.trim(c).try_cast("date")
        return F.coalesce(F.date_format(day, "yyyy-MM-dd"), c.cast("string"))
    if family == "time":
        return normalise_time_text(c.cast("string"))
    if family == "binary":
        return F.lower(F.hex(c)) if read_as == "BINARY" else c.cast("string")
    return c.cast("string")


def row_hash(value_columns: list[Column]) -> Column:
    """sha256 over length-prefixed values: NULL, '' and 'a|b' vs 'a','b' all hash differently."""
    if not value_columns:
        return F.lit("")
    parts = [
        F.coalesce(F.concat(F.lit("v"), F.length(v).cast("string"), F.lit(":"), v), F.lit("n")) for v in value_columns
    ]
    return F.sha2(F.concat_ws(FIELD_SEPARATOR, *parts), 256)


def stored_key(col: SideColumn) -> Column:
    """A key value as its side stores it, as text (binary as hex): what a repair matches that side's row with."""
    c = F.col(col.alias)
    return F.lower(F.hex(c)) if col.family == "binary" and col.read_type == "BINARY" else c.cast("string")


def canonical_frame(df: DataFrame, side: Side) -> DataFrame:
    """DataFrame of (k0.., v0.., h, sk0..): canonical keys, canonical values, the row hash and the keys as stored."""
    keys = [c for c in side.columns if c.alias in side.key_aliases]
    canon = [canonical_value(c).alias(c.alias) for c in side.columns]
    frame = df.select(*canon, *[stored_key(c).alias(f"s{c.alias}") for c in keys])
    values = [F.col(a) for a in side.value_aliases]
    return frame.withColumn("h", row_hash(values))


def stored_value(value: Any) -> Any:
    """A canonical value as the result keeps it: None (NULL) and text up to VALUE_LIMIT characters; a longer text
    becomes {"text": its first VALUE_LIMIT characters, "length": its length}."""
    if value is None or len(value) <= VALUE_LIMIT:
        return value
    return {"text": value[:VALUE_LIMIT], "length": len(value)}


def _sort_key(side_column: SideColumn, key: Column) -> Column:
    """The order differing rows are listed in: numbers as numbers, everything else as its canonical text."""
    if side_column.family in {"integer", "decimal", "float"}:
        return key.try_cast("decimal(38,10)")
    return key


def _tagged(frame: DataFrame, keys: list[str], carried: list[str], side: str) -> DataFrame:
    """(k0.., n_l, n_r, l, r): each row counted on its side, its values, hash and stored keys in its side's struct
    (the other side's struct a typed NULL, so both sides union by name)."""
    row = F.struct(*[F.col(c) for c in carried])
    nothing = F.when(F.lit(False), row)
    return frame.select(
        *keys,
        F.lit(1 if side == "l" else 0).alias("n_l"),
        F.lit(1 if side == "r" else 0).alias("n_r"),
        (row if side == "l" else nothing).alias("l"),
        (row if side == "r" else nothing).alias("r"),
    )


def compare_frames(left: DataFrame, right: DataFrame, plan: ComparePlan, row_limit: int = ROW_LIMIT) -> dict[str, Any]:
    """Both sides grouped by canonical key in one shuffle: per key how many rows each side has and one row of
    each. The counts are one Spark job; listing the differing keys is a second one, only when there are some.

    A union and a group-by rather than a cached full outer join: the join's sort and its cached plan cost
    seconds even on a few rows, and the group-by counts duplicate keys in the same pass."""
    keys = list(plan.left.key_aliases)
    values = list(plan.left.value_aliases)
    carried = [*values, "h", *[f"s{k}" for k in keys]]
    grouped = (
        _tagged(left, keys, carried, "l")
        .unionByName(_tagged(right, keys, carried, "r"))
        .groupBy(*keys)
        .agg(
            F.sum("n_l").alias("n_l"),
            F.sum("n_r").alias("n_r"),
            F.max("l").alias("l"),  # one row per side and key (the only one, unless a side repeats the key)
            F.max("r").alias("r"),
        )
    )
    in_left = F.col("n_l") > 0
    in_right = F.col("n_r") > 0
    differs = in_left & in_right & (F.col("l.h") != F.col("r.h"))
    totals = grouped.agg(
        F.coalesce(F.sum("n_l"), F.lit(0)).alias("left_count"),
        F.coalesce(F.sum("n_r"), F.lit(0)).alias("right_count"),
        F.count(F.when(in_left & ~in_right, 1)).alias("missing_in_right"),
        F.count(F.when(in_right & ~in_left, 1)).alias("missing_in_left"),
        F.count(F.when(differs, 1)).alias("different"),
        # Duplicate keys on the right (a destination without a primary key) would hide as equal rows.
        F.count(F.when(F.col("n_r") > 1, 1)).alias("duplicate_keys_right"),
    ).collect()[0]
    result: dict[str, Any] = {name: int(totals[name]) for name in totals.asDict()}
    found = result["missing_in_right"] + result["missing_in_left"] + result["different"]
    key_columns = [c for c in plan.left.columns if c.alias in keys]
    order = [_sort_key(c, F.col(c.alias)) for c in key_columns]
    listed = grouped.filter(differs | (in_left != in_right)).orderBy(*order).limit(row_limit).collect() if found else []
    result["rows"] = [_listed_row(row, plan, keys, values) for row in listed]
    result["rows_total"] = found
    result["equal"] = (
        found == 0 and result["duplicate_keys_right"] == 0 and result["left_count"] == result["right_count"]
    )
    result.update(plan.describe())
    return result


def _listed_row(row: Row, plan: ComparePlan, keys: list[str], values: list[str]) -> dict[str, Any]:
    """One differing key: its kind, its key (canonical text), the columns shown and each side's values of them."""
    left, right = row["l"], row["r"]
    key = {name: row[k] for name, k in zip(plan.key_columns, keys, strict=True)}
    if left is not None and right is not None:
        kind = "different"
        shown = [(n, v) for n, v in zip(plan.compared_columns, values, strict=True) if left[v] != right[v]]
    else:
        kind = "missing_in_right" if left is not None else "missing_in_left"
        shown = list(zip(plan.compared_columns, values, strict=True))
    return {
        "kind": kind,
        "key": key,
        # Each side's key as it stores it (a decimal may be 18.50 on one side and 18.5 on the other).
        "left_key": [left[f"s{k}"] for k in keys] if left is not None else None,
        "right_key": [right[f"s{k}"] for k in keys] if right is not None else None,
        "columns": [name for name, _ in shown],
        "left": {name: stored_value(left[v]) for name, v in shown} if left is not None else None,
        "right": {name: stored_value(right[v]) for name, v in shown} if right is not None else None,
    }


def run(
    spark: SparkSession,
    plan: ComparePlan,
    left_endpoint: JdbcEndpoint,
    right_endpoint: JdbcEndpoint,
    progress: Progress | None = None,
    parallelism: Parallelism | None = None,
) -> dict[str, Any]:
    report = progress or (lambda done, total, message: None)
    report(0, 3, "reading both tables")
    left_raw = read_partitioned(
        spark, left_endpoint, plan.left.select_sql(), plan.left.custom_schema(), plan.left.partition_alias, parallelism
    )
    right_raw = read_partitioned(
        spark,
        right_endpoint,
        plan.right.select_sql(),
        plan.right.custom_schema(),
        plan.right.partition_alias,
        parallelism,
    )
    left = canonical_frame(left_raw, plan.left)
    right = canonical_frame(right_raw, plan.right)
    report(1, 3, "joining by primary key")
    result = compare_frames(left, right, plan)
    report(3, 3, "compared {left_count} and {right_count} rows".format(**result))
    return result

"""Deciding conflicts with resolver chains, on Spark.

The sync job and the resolver editor's dry run decide with the same `decide_frame`, so a dry run decides
exactly as a sync would: the sync on the DataFrame of the conflicts it classified (they never leave
Spark to be decided), the dry run (`decide_rows`) on one built from recorded conflicts. The conflicts are
one DataFrame (key, ctype, pub_exists, then the publisher's, the incoming and the old row as columns
p<i>, n<i>, o<i> typed like the table's columns); every resolver of the conflict's type is a Spark
column expression evaluated only while the resolvers before it were undecided, and the decisions are
read back with the rows. Spark is only asked again when that read fails, to name the resolver whose
expression failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replication_admin.engine.resolvers import (
    CONFLICTED_FIELD,
    CR_TYPES,
    DEFAULT_DECISION,
    TYPE_NAMES,
    VALID_CODES,
    ResolverColumn,
    ResolverError,
    ResolverSpec,
    compile_assignments,
    compile_expression,
    decimal_precision,
    find_column,
    from_json_value,
    to_json_value,
    type_family,
)

_ALIAS = re.compile(r"\b([pno])(\d+)\b")


@dataclass(frozen=True)
class _Step:
    """One resolver of the chain, as the columns it adds to the DataFrame."""

    spec: ResolverSpec
    index: int  # its position in the evaluated chain (the decider's number)
    code_sql: str
    assignments: dict[int, str]  # column index -> compiled expression


def _label(spec: ResolverSpec) -> str:
    return f"resolver {spec.name}" + (f" (id {spec.id})" if spec.id is not None else "")


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _data_type(spark_type_name: str) -> T.DataType:
    family = type_family(spark_type_name)
    if family == "decimal":
        precision, scale = decimal_precision(spark_type_name)
        return T.DecimalType(precision, scale)
    simple: dict[str, T.DataType] = {
        "bigint": T.LongType(),
        "double": T.DoubleType(),
        "string": T.StringType(),
        "boolean": T.BooleanType(),
        "date": T.DateType(),
        "timestamp": T.TimestampType(),
        "binary": T.BinaryType(),
    }
    if family not in simple:
        raise ResolverError(f"unknown Spark type {spark_type_name!r}")
    return simple[family]


def _value(row: dict[str, Any] | None, column: ResolverColumn) -> Any:
    if not row:
        return None
    if column.name in row:
        return from_json_value(row[column.name], column.spark_type)
    folded = [k for k in row if isinstance(k, str) and k.lower() == column.name.lower()]
    return from_json_value(row[folded[0]], column.spark_type) if len(folded) == 1 else None


def _first_line(exc: BaseException, columns: Sequence[ResolverColumn]) -> str:
    """The first line of a Spark error, with the column aliases written back as pub./new./old. names."""
    get_message = getattr(exc, "getMessage", None)  # Spark's errors carry their message there
    text = (get_message and get_message()) or str(exc)
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), type(exc).__name__)
    qualifiers = {"p": "pub", "n": "new", "o": "old"}

    def name(match: re.Match[str]) -> str:
        index = int(match.group(2))
        if index >= len(columns):
            return str(match.group(0))
        return f"{qualifiers[match.group(1)]}.{columns[index].name}"

    return _ALIAS.sub(name, line)[:500]


def _compile_chain(
    chain: Sequence[ResolverSpec], columns: Sequence[ResolverColumn], types: set[str]
) -> dict[str, list[_Step]]:
    """{type: [steps in order]} for the types that occur, sorted by (CR_ORDER, CR_ID)."""
    ordered = sorted(chain, key=lambda s: (s.order, s.id is None, s.id or 0))
    steps: dict[str, list[_Step]] = {t: [] for t in CR_TYPES}
    count = 0
    for spec in ordered:
        if spec.cr_type not in types:
            continue
        try:
            code_sql = compile_expression(spec.expression, columns)
            assignments = compile_assignments(spec.assignments or {}, columns)
        except ResolverError as exc:
            raise ResolverError(f"{_label(spec)}: {exc}") from None
        steps[spec.cr_type].append(_Step(spec, count, code_sql, assignments))
        count += 1
    return steps


def _rows(
    conflicts: list[dict[str, Any]], columns: Sequence[ResolverColumn]
) -> tuple[list[tuple[Any, ...]], list[str]]:
    rows: list[tuple[Any, ...]] = []
    keys: list[str] = []
    for position, conflict in enumerate(conflicts):
        ctype = conflict.get("type")
        if ctype not in CR_TYPES:
            raise ResolverError(f"conflict #{position + 1} has type {ctype!r}; expected I, U or D")
        key = json.dumps(conflict.get("key"), sort_keys=True, default=str)
        pub, new, old = conflict.get("pub"), conflict.get("new"), conflict.get("old") or {}
        try:
            values = (
                [_value(pub, c) for c in columns]
                + [_value(new, c) for c in columns]
                + [_value(old, c) for c in columns]
            )
        except ResolverError as exc:
            raise ResolverError(f"conflict {key}: {exc}") from None
        rows.append((key, ctype, pub is not None, *values, [str(c) for c in conflict.get("columns") or []]))
        keys.append(key)
    return rows, keys


def conflict_schema(columns: Sequence[ResolverColumn]) -> T.StructType:
    """The columns a DataFrame of conflicts has for `decide_frame`: key, ctype, pub_exists, then the
    publisher's, the incoming and the old row's values (p<i>, n<i>, o<i>) typed like the table's columns."""
    fields = [
        T.StructField("key", T.StringType(), False),
        T.StructField("ctype", T.StringType(), False),
        T.StructField("pub_exists", T.BooleanType(), False),
    ]
    for prefix in ("p", "n", "o"):
        fields += [T.StructField(f"{prefix}{i}", _data_type(c.spark_type), True) for i, c in enumerate(columns)]
    fields.append(T.StructField(CONFLICTED_FIELD, T.ArrayType(T.StringType()), True))  # conflict.columns
    return T.StructType(fields)


def column_type(column: ResolverColumn) -> T.DataType:
    """The Spark type resolvers see a column's values as."""
    return _data_type(column.spark_type)


@dataclass
class Decider:
    """The resolver chain compiled over a DataFrame of conflicts: the columns its decisions are read from
    (`outputs`), and what turns one such row into a decision (`decision_of`)."""

    columns: list[ResolverColumn]
    steps: dict[str, list[_Step]]
    by_index: dict[int, _Step]
    assigned: list[tuple[int, int, str]]  # (resolver index, column index, output column)
    stages: list[tuple[DataFrame, list[tuple[str, str]]]]
    outputs: list[str]

    def explain(self, exc: BaseException) -> ResolverError:
        """The error to report when computing the decisions failed in Spark (names the failing resolver)."""
        return _explain_failure(self.stages, exc, self.columns)

    def decision_of(self, r: Any, conflict: dict[str, Any]) -> dict[str, Any]:
        """One decided row (with the `outputs` columns) -> decide_rows' result for `conflict`."""
        notes = []
        for step in self.steps[conflict["type"]]:
            g = step.index
            if r[f"b{g}"]:
                shown = "NULL" if r[f"s{g}"] is None else r[f"s{g}"]
                valid = ", ".join(str(c) for c in VALID_CODES[conflict["type"]])
                notes.append(
                    f"{_label(step.spec)} returned {shown}, which is not a code of {_a(TYPE_NAMES[conflict['type']])} "
                    f"resolver ({valid}); counted as 0"
                )
        g = r["decider"]
        deciding = self.by_index.get(g) if g is not None and g >= 0 else None
        final = None
        if conflict["type"] != "D" and conflict.get("new") is not None:
            final = dict(conflict["new"])
            if r["decision"] == 2 and deciding is not None:
                for index, j, name in self.assigned:
                    if index == g:
                        existing = find_column([ResolverColumn(k, "", False) for k in final], self.columns[j].name)
                        final[existing.name if existing else self.columns[j].name] = to_json_value(r[name])
        return {
            "key": conflict.get("key"),
            "decision": int(r["decision"]),
            "resolver_id": deciding.spec.id if deciding else None,
            "resolver": deciding.spec.name if deciding else "default",
            "final": final,
            "note": "; ".join(notes),
        }


def decide_rows(
    spark: SparkSession,
    conflicts: list[dict[str, Any]],
    chain: Sequence[ResolverSpec],
    columns: Sequence[ResolverColumn],
) -> list[dict[str, Any]]:
    """Decide each conflict with the resolver chain of its type.

    Input: [{"key": any, "type": "I"|"U"|"D", "pub": {col: json} | None, "new": {col: json} | None,
    "old": {"ROWGUID": str | None, ...}}]. Output, in input order: [{"key", "decision", "resolver_id",
    "resolver" (name, or "default"), "final" (the incoming row, with the deciding resolver's assignments
    applied when the decision is 2; None for deletes), "note"}]."""
    if not conflicts:
        return []
    columns = list(columns)
    if not columns:
        raise ResolverError("the table's columns are unknown")
    rows, keys = _rows(conflicts, columns)
    types = {row[1] for row in rows}
    df = spark.createDataFrame(rows, conflict_schema(columns))
    decided, decider = decide_frame(df, chain, columns, types)
    try:
        collected = decided.select(*decider.outputs).collect()
    except Exception as exc:
        raise decider.explain(exc) from None

    if [r["key"] for r in collected] != keys:  # collect keeps the input order; be sure of it
        by_key: dict[str, list[Row]] = {}
        for r in collected:
            by_key.setdefault(r["key"], []).append(r)
        collected = [by_key[k].pop(0) for k in keys]
    return [decider.decision_of(r, conflict) for conflict, r in zip(conflicts, collected, strict=True)]


def decide_frame(
    df: DataFrame, chain: Sequence[ResolverSpec], columns: Sequence[ResolverColumn], types: set[str]
) -> tuple[DataFrame, Decider]:
    """Add the decision columns to a DataFrame of conflicts (`conflict_schema` columns, any others kept)
    whose types are among `types`; resolvers of other types are not compiled."""
    columns = list(columns)
    steps = _compile_chain(chain, columns, types)
    by_index = {step.index: step for type_steps in steps.values() for step in type_steps}

    # Stages of columns, each column labelled with what it computes (kept to name a failing one).
    # Stage k evaluates the k-th resolver of every type's chain; chains of different types are independent.
    stages: list[tuple[DataFrame, list[tuple[str, str]]]] = []

    def add(labelled: list[tuple[str, str, Column]]) -> None:
        nonlocal df
        if not labelled:
            return
        # Reading the schema analyses the plan: on Spark Connect nothing is analysed before that.
        try:
            added = df.withColumns({name: column for _, name, column in labelled})
            added.schema  # noqa: B018
        except Exception as exc:  # analysis errors: unknown function, type mismatch ...
            for label, name, column in labelled:
                try:
                    df.withColumns({name: column}).schema  # noqa: B018
                except Exception as own:
                    raise ResolverError(f"{label} cannot be evaluated: {_first_line(own, columns)}") from None
            raise ResolverError(f"the resolvers cannot be evaluated: {_first_line(exc, columns)}") from None
        df = added
        stages.append((df, [(label, name) for label, name, _ in labelled]))

    numeric = (T.NumericType, T.StringType, T.NullType)
    depth = max((len(s) for s in steps.values()), default=0)
    for k in range(depth):
        current = [(ctype, type_steps[k], type_steps[k - 1] if k else None) for ctype, type_steps in steps.items()
                   if k < len(type_steps)]  # fmt: skip
        evaluate = []
        for ctype, step, previous in current:
            g = step.index
            if previous is None:
                undecided = F.col("ctype") == F.lit(ctype)
            else:
                undecided = F.col(f"u{previous.index}") & (F.col(f"c{previous.index}") == F.lit(0))
            evaluate.append((_label(step.spec), f"u{g}", undecided))
            evaluate.append((_label(step.spec), f"x{g}", F.when(undecided, F.expr(step.code_sql))))
        add(evaluate)
        check = []
        for ctype, step, _ in current:
            g = step.index
            valid = ", ".join(str(c) for c in VALID_CODES[ctype])
            result_type = df.schema[f"x{g}"].dataType
            if not isinstance(result_type, numeric):
                raise ResolverError(
                    f"{_label(step.spec)} returns {result_type.simpleString()}, not a code; it must return a "
                    f"number ({valid} for {TYPE_NAMES[ctype]} conflicts)"
                )
            number = F.expr(f"TRY_CAST(x{g} AS DOUBLE)")
            is_valid = F.coalesce(number.isin(*VALID_CODES[ctype]), F.lit(False))
            check.append(
                (_label(step.spec), f"c{g}", F.when(F.col(f"u{g}") & is_valid, number.cast("int")).otherwise(0))
            )
            check.append((_label(step.spec), f"b{g}", F.col(f"u{g}") & ~is_valid))
            bad = F.when(F.col(f"u{g}") & ~is_valid, F.col(f"x{g}").cast("string"))
            check.append((_label(step.spec), f"s{g}", bad))
        add(check)

    decision = F.lit(None).cast("int")
    decider = F.lit(-1)
    for ctype in CR_TYPES:
        if ctype not in types:
            continue
        type_decision = F.lit(DEFAULT_DECISION[ctype])
        type_decider = F.lit(-1)
        for step in reversed(steps[ctype]):
            decided = F.col(f"c{step.index}") != F.lit(0)
            type_decision = F.when(decided, F.col(f"c{step.index}")).otherwise(type_decision)
            type_decider = F.when(decided, F.lit(step.index)).otherwise(type_decider)
        decision = F.when(F.col("ctype") == F.lit(ctype), type_decision).otherwise(decision)
        decider = F.when(F.col("ctype") == F.lit(ctype), type_decider).otherwise(decider)
    add([("the decision", "decision", decision), ("the decision", "decider", decider)])

    assigned: list[tuple[int, int, str]] = []  # (resolver index, column index, output column)
    assignments = []
    for step in by_index.values():
        for j, sql in step.assignments.items():
            name = f"a{step.index}_{j}"
            chosen = (F.col("decider") == F.lit(step.index)) & (F.col("decision") == F.lit(2))
            value = F.when(chosen, F.expr(sql).cast(_data_type(columns[j].spark_type)))
            assignments.append((f"the assignment to {columns[j].name} of {_label(step.spec)}", name, value))
            assigned.append((step.index, j, name))
    add(assignments)

    outputs = ["key", "decision", "decider"]
    for g in by_index:
        outputs += [f"b{g}", f"s{g}"]
    outputs += [name for _, _, name in assigned]
    return df, Decider(columns, steps, by_index, assigned, stages, outputs)


def _explain_failure(
    stages: list[tuple[DataFrame, list[tuple[str, str]]]], exc: BaseException, columns: Sequence[ResolverColumn]
) -> ResolverError:
    """Find the first column that fails to compute, in evaluation order (this only runs on error)."""
    for stage_df, labelled in stages:
        for label, name in labelled:
            try:
                stage_df.select(name).collect()
            except Exception as column_exc:
                return ResolverError(f"{label} failed in Spark: {_first_line(column_exc, columns)}")
    return ResolverError(f"deciding conflicts failed in Spark: {_first_line(exc, columns)}")

"""Planning a table comparison by primary key (pure; the Spark side lives in jobs/compare.py).

Two tables on any pair of dialects are compared by reading, from each side, the key columns and the
non-key columns they share, turning every value into a canonical string that does not depend on the
dialect (so PostgreSQL `numeric(10,2)` 18.00, MariaDB `decimal` 18.00 and a SQLite REAL 18.0 all
become "18"), and hashing the canonical non-key values of each row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from replication_admin.engine.dialects import Dialect
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

# Canonical families: how a value of a logical kind is turned into comparable text.
FAMILY_BY_KIND = {
    "smallint": "integer",
    "integer": "integer",
    "bigint": "integer",
    "numeric": "decimal",
    "real": "float",
    "double": "float",
    "boolean": "boolean",
    "date": "date",
    "time": "time",
    "timestamp": "timestamp",
    "timestamptz": "timestamp",  # instants, compared in UTC
    "varchar": "text",
    "nvarchar": "text",
    "long_varchar": "text",
    "long_nvarchar": "text",
    "other": "text",
    "varbinary": "binary",
    "long_varbinary": "binary",
    "json": "json",  # text everywhere, but sent as text in row images (a dialect may embed documents)
    "uuid": "text",
}

# The Spark type each family is read as (JDBC customSchema). Decimals and SQLite's textual
# dates are read as strings so no precision is lost on the way in.
SPARK_READ_TYPE = {
    "integer": "BIGINT",
    "decimal": "STRING",
    "float": "DOUBLE",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "time": "STRING",
    "timestamp": "TIMESTAMP",
    "text": "STRING",
    "json": "STRING",
    "binary": "BINARY",
}


class ComparePlanError(ValueError):
    """The two tables cannot be compared (no primary key, key missing on the other side...)."""


def family_of(logical: LogicalType) -> str:
    return FAMILY_BY_KIND[logical.kind]


def read_type(dialect: Dialect, logical: LogicalType) -> str:
    family = family_of(logical)
    if dialect.text_timestamps and family in {"date", "timestamp"}:
        return "STRING"  # stored as ISO text; parsed in Spark
    return SPARK_READ_TYPE[family]


@dataclass(frozen=True)
class SideColumn:
    alias: str  # safe name used inside Spark (k0, k1, v0 ...)
    column: Column
    family: str
    read_type: str


@dataclass(frozen=True)
class Side:
    dialect: Dialect
    table: TableInfo
    columns: tuple[SideColumn, ...]
    query: str | None = None  # compare the rows of a query (a snapshot's source) instead of a table
    # Only these rows: a subscription's row filter, a key slice (KeySlice.condition) of a validation's sample, or both.
    where: str | None = None

    def source_sql(self) -> str:
        """What the side reads its rows from: its table, or its query as the derived table `q`."""
        if self.query is not None:
            return f"({self.query}) q"
        return self.dialect.qualify(self.table.name, self.table.schema)

    def select_sql(self) -> str:
        """SELECT of the compared columns under safe aliases, usable as a JDBC `dbtable` subquery."""
        prefix = "q." if self.query is not None else ""
        items = ", ".join(f"{prefix}{self.dialect.quote(c.column.name)} AS {c.alias}" for c in self.columns)
        where = f" WHERE {self.where}" if self.where else ""
        return f"SELECT {items} FROM {self.source_sql()}{where}"

    @property
    def slice_column(self) -> SideColumn | None:
        """The key column a table is sliced on (its first, when its values are integers), else none."""
        first = self.columns[0] if self.columns and self.columns[0].alias == "k0" else None
        return first if first is not None and first.read_type == "BIGINT" and first.family == "integer" else None

    def custom_schema(self) -> str:
        return ", ".join(f"{c.alias} {c.read_type}" for c in self.columns)

    @property
    def key_aliases(self) -> tuple[str, ...]:
        return tuple(c.alias for c in self.columns if c.alias.startswith("k"))

    @property
    def partition_alias(self) -> str | None:
        """The key to split a JDBC read on: a single integer key column, else none."""
        keys = [c for c in self.columns if c.alias.startswith("k")]
        return keys[0].alias if len(keys) == 1 and keys[0].read_type == "BIGINT" else None

    @property
    def value_aliases(self) -> tuple[str, ...]:
        return tuple(c.alias for c in self.columns if c.alias.startswith("v"))


@dataclass(frozen=True)
class ComparePlan:
    left: Side
    right: Side
    key_columns: tuple[str, ...]
    compared_columns: tuple[str, ...]
    only_left: tuple[str, ...] = field(default_factory=tuple)
    only_right: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> dict[str, list[str] | dict[str, str]]:
        return {
            "key_columns": list(self.key_columns),
            "compared_columns": list(self.compared_columns),
            "only_left_columns": list(self.only_left),
            "only_right_columns": list(self.only_right),
            # How each listed value is written (binary values are hex text).
            "families": {c.column.name: c.family for c in self.left.columns},
        }


@dataclass(frozen=True)
class KeySlice:
    """Slice `index` of `count` of a table's rows by its first key column's integer values: [low, high), the first
    slice open below and the last open above (rows beyond the publisher's bounds, which only a subscriber has, fall
    in them). Bounds are integers, written into the SQL as such: nothing of a row's text is."""

    index: int
    count: int
    low: int | None
    high: int | None

    @classmethod
    def of(cls, index: int, count: int, smallest: int | None, largest: int | None) -> KeySlice:
        """Equal widths over [smallest, largest] (the publisher's bounds); an empty table is one open slice."""
        if smallest is None or largest is None or count <= 1:
            return cls(0, 1, None, None)
        index = index % count
        width = max(1, -(-(largest - smallest + 1) // count))
        low = smallest + index * width
        return cls(index, count, low if index > 0 else None, low + width if index < count - 1 else None)

    def condition(self, dialect: Dialect, column: str) -> str | None:
        name = dialect.quote(column)
        parts = [f"{name} >= {int(self.low)}"] if self.low is not None else []
        parts += [f"{name} < {int(self.high)}"] if self.high is not None else []
        return " AND ".join(parts) or None

    def describe(self) -> str:
        if self.count == 1:
            return "the whole table"
        low = "" if self.low is None else f"{self.low} ≤ "
        high = "" if self.high is None else f" < {self.high}"
        return f"slice {self.index + 1} of {self.count} ({low}key{high})"


def _both(first: str | None, second: str | None) -> str | None:
    return f"({first}) AND ({second})" if first and second else first or second


def sliced(plan: ComparePlan, key_slice: KeySlice) -> ComparePlan:
    """The same compare over one slice of the rows (both sides read only that slice, by their key's index)."""
    column = plan.left.slice_column
    if column is None or key_slice.count == 1:
        return plan
    right_column = plan.right.columns[0]
    left = replace(plan.left, where=_both(plan.left.where, key_slice.condition(plan.left.dialect, column.column.name)))
    right_where = key_slice.condition(plan.right.dialect, right_column.column.name)
    right = replace(plan.right, where=_both(plan.right.where, right_where))
    return replace(plan, left=left, right=right)


def _pair_family(left: Column, right: Column) -> str:
    """Both sides must canonicalise a column the same way; when kinds disagree, fall back sensibly."""
    lf, rf = family_of(left.logical), family_of(right.logical)
    if lf == rf:
        return lf
    numeric = {"integer", "decimal", "float"}
    if lf in numeric and rf in numeric:
        return "float" if "float" in (lf, rf) else "decimal"
    if {lf, rf} <= {"boolean", "integer"}:
        return "integer"
    return "text"


def _side_column(dialect: Dialect, alias: str, column: Column, family: str) -> SideColumn:
    natural = family_of(column.logical)
    if family == natural:
        rtype = read_type(dialect, column.logical)
    elif family == "integer" and natural == "boolean":
        rtype = "BIGINT"
    elif family in {"decimal", "text"}:
        rtype = "STRING"
    else:
        rtype = SPARK_READ_TYPE[family]
    return SideColumn(alias=alias, column=column, family=family, read_type=rtype)


def plan_compare(
    left_dialect: Dialect,
    left: TableInfo,
    right_dialect: Dialect,
    right: TableInfo,
    left_query: str | None = None,
) -> ComparePlan:
    """Match `right` to `left` by `left`'s primary key. With `left_query`, the left rows are that query's
    (whose output columns `left` describes), e.g. a snapshot's source query."""
    keys = left.primary_key
    if not keys:
        raise ComparePlanError(f"table {left.name!r} has no primary key; rows cannot be matched")
    left_cols: list[SideColumn] = []
    right_cols: list[SideColumn] = []
    for i, key in enumerate(keys):
        other = right.column(key.name)
        if other is None:
            raise ComparePlanError(f"key column {key.name!r} of {left.name!r} is missing in {right.name!r}")
        family = _pair_family(key, other)
        left_cols.append(_side_column(left_dialect, f"k{i}", key, family))
        right_cols.append(_side_column(right_dialect, f"k{i}", other, family))

    compared: list[str] = []
    only_left: list[str] = []
    matched_right: set[str] = {c.column.name for c in right_cols}
    for col in left.non_key_columns:
        other = right.column(col.name)
        if other is None or other.name in matched_right:
            only_left.append(col.name)
            continue
        matched_right.add(other.name)
        alias = f"v{len(compared)}"
        family = _pair_family(col, other)
        left_cols.append(_side_column(left_dialect, alias, col, family))
        right_cols.append(_side_column(right_dialect, alias, other, family))
        compared.append(col.name)
    only_right = [c.name for c in right.columns if c.name not in matched_right]
    return ComparePlan(
        left=Side(left_dialect, left, tuple(left_cols), query=left_query),
        right=Side(right_dialect, right, tuple(right_cols)),
        key_columns=tuple(k.name for k in keys),
        compared_columns=tuple(compared),
        only_left=tuple(only_left),
        only_right=tuple(only_right),
    )

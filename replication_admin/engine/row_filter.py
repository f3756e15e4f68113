"""Row filters and column lists of a transactional subscription's table (pure: sqlglot only).

A filter is a WHERE over the publisher's columns, written in the publisher's dialect (the initial copy, a reload, a
validation and a repair read the publisher's rows through it, so the publisher's server evaluates it there). The
apply evaluates the same condition on each row image it replays, here, with SQL's three-valued logic: a row is in the
subscriber's copy when the condition is true for it, not when it is false or unknown (NULL). So an update whose new
image leaves the filter deletes the row from the copy and one that enters it inserts it, as PostgreSQL's row filters
do. The expressions a filter may use are the ones that mean the same in every dialect and on the images' values:
comparisons, AND / OR / NOT, IN over values, BETWEEN, LIKE, IS [NOT] NULL, over columns and constants; anything else
is refused when the filter is set, in one line.

A column list names the columns besides the key the copy receives; the key always goes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from replication_admin.engine import dialects
from replication_admin.engine.compare import family_of
from replication_admin.engine.queries import QueryError, check_column_list, check_condition, sqlglot_dialect
from replication_admin.engine.schema import TableInfo
from replication_admin.engine.values import canonical_value

NUMERIC = {"integer", "decimal", "float"}
SUPPORTED = "comparisons, AND / OR / NOT, IN (values), BETWEEN, LIKE and IS [NOT] NULL over the table's columns"


class FilterError(ValueError):
    """A row filter or column list that cannot be used (the message names what)."""


@dataclass(frozen=True)
class FilterSpec:
    """What a subscription stores for one table: the condition (empty: every row) and the column list (empty: all)."""

    condition: str = ""
    columns: tuple[str, ...] = ()
    # The publisher's columns the condition names, with their value families (the apply compares images by them
    # without describing the publisher), and the key columns (a column list keeps them).
    families: tuple[tuple[str, str], ...] = ()
    keys: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.condition or self.columns)

    def as_json(self) -> dict[str, Any]:
        return {
            "condition": self.condition, "columns": list(self.columns),
            "families": dict(self.families), "keys": list(self.keys),
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> FilterSpec:
        data = data or {}
        return cls(
            str(data.get("condition") or ""),
            tuple(str(c) for c in data.get("columns") or ()),
            tuple((str(k), str(v)) for k, v in dict(data.get("families") or {}).items()),
            tuple(str(k) for k in data.get("keys") or ()),
        )

    @classmethod
    def for_table(cls, stored: Mapping[str, Any] | None, table: str) -> FilterSpec:
        """`table`'s spec among a subscription's (ReplSubscriber.row_filters); none: every row and column."""
        return cls.from_json((stored or {}).get(table))

    def describe(self) -> str:
        parts = [f"WHERE {self.condition}"] if self.condition else []
        if self.columns:
            parts.append("columns " + ", ".join(self.columns))
        return "; ".join(parts) or "every row and column"


def checked_spec(table: TableInfo, dialect: str, condition: str, columns: str) -> FilterSpec:
    """The spec of `condition` (a WHERE fragment in `dialect`) and `columns` ('a, "b c"') over the publisher's
    `table`, regenerated with quoted names; FilterError names what is wrong."""
    condition, columns = condition.strip(), columns.strip()
    try:
        text = check_condition(condition, dialect, table) if condition else ""
        chosen = check_column_list(columns, table) if columns else ()
    except QueryError as exc:
        raise FilterError(str(exc)) from None
    names = tuple(dict.fromkeys(c.name for c in chosen if not c.pk_position))
    if columns and not names:
        raise FilterError("the column list names only key columns; the key always goes, so leave the list empty")
    families = tuple((c.name, family_of(c.logical)) for c in table.columns)
    spec = FilterSpec(text, names, families, tuple(c.name for c in table.primary_key))
    if text:
        RowFilter(spec, dialect, table.name)  # refuses what the apply could not evaluate
    return spec


def restricted(table: TableInfo, spec: FilterSpec) -> TableInfo:
    """`table` with only its key and the spec's columns (and the indexes over them)."""
    if not spec.columns:
        return table
    kept = {n.lower() for n in spec.columns}
    columns = tuple(c for c in table.columns if c.pk_position or c.name.lower() in kept)
    names = {c.name for c in columns}
    indexes = tuple(i for i in table.indexes if all(c in names for c in i.columns))
    return TableInfo(table.name, columns, table.schema, indexes, table.untranslated)


Value = tuple[Any, str]  # a value and its family ("" for a constant, which takes the other side's)


class RowFilter:
    """A spec compiled for the apply: `matches(image)` and `project(image)` over row images (column -> value)."""

    def __init__(self, spec: FilterSpec, dialect: str, table: str = "") -> None:
        self.spec = spec
        self.table = table
        self._families = {name.lower(): (name, family) for name, family in spec.families}
        self._test: Callable[[Mapping[str, Any]], bool | None] | None = None
        d = dialects.get(dialect)
        self._fold, self._like_flags = d.text_compare_ignores_case, re.S | (re.I if d.like_ignores_case else 0)
        if spec.condition:
            try:
                tree = sqlglot.parse_one(f"SELECT 1 WHERE {spec.condition}", read=sqlglot_dialect(dialect))
            except sqlglot.errors.ParseError as exc:
                raise FilterError(f"the row filter does not parse: {str(exc).splitlines()[0]}") from None
            where = tree.args.get("where")
            if where is None:
                raise FilterError("the row filter must be one boolean expression")
            self._test = self._boolean(where.this)
        self._kept = {c.lower() for c in spec.columns} | {k.lower() for k in spec.keys}

    @property
    def kept(self) -> set[str]:
        """The columns (lower case) a copy with a column list holds: the key and the listed ones."""
        return self._kept

    # --- the apply's side --------------------------------------------------------------------------------
    def matches(self, image: Mapping[str, Any]) -> bool:
        return self._test is None or self._test(image) is True

    def project(self, image: dict[str, Any]) -> dict[str, Any]:
        if not self.spec.columns:
            return image
        return {k: v for k, v in image.items() if k.lower() in self._kept}

    # --- compiling -----------------------------------------------------------------------------------------
    def _column(self, node: exp.Column) -> tuple[str, str]:
        found = self._families.get(node.name.lower())
        if found is None:
            raise FilterError(f"the row filter refers to {node.name!r}, which is not a column of {self.table!r}")
        return found

    def _value(self, node: exp.Expr) -> Callable[[Mapping[str, Any]], Value]:
        if isinstance(node, exp.Paren):
            return self._value(node.this)
        if isinstance(node, exp.Column):
            name, family = self._column(node)
            lowered = name.lower()

            def read(image: Mapping[str, Any]) -> Value:
                if name in image:
                    return image[name], family
                for key, value in image.items():  # MariaDB and SQLite images fold the case of names
                    if key.lower() == lowered:
                        return value, family
                return None, family

            return read
        if isinstance(node, exp.Null):
            return lambda image: (None, "")
        if isinstance(node, exp.Boolean):
            constant: Value = (bool(node.this), "boolean")
            return lambda image: constant
        if isinstance(node, exp.Literal):
            literal: Value = (node.this if node.is_string else Decimal(node.this), "" if node.is_string else "decimal")
            return lambda image: literal
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            negative: Value = (-Decimal(node.this.this), "decimal")
            return lambda image: negative
        raise FilterError(f"the row filter cannot use {node.sql()!r}: it may use {SUPPORTED}")

    def _boolean(self, node: exp.Expr) -> Callable[[Mapping[str, Any]], bool | None]:
        if isinstance(node, exp.Paren):
            return self._boolean(node.this)
        if isinstance(node, exp.And | exp.Or):
            left, right = self._boolean(node.this), self._boolean(node.expression)
            if isinstance(node, exp.And):
                return lambda image: _and(left(image), right(image))
            return lambda image: _or(left(image), right(image))
        if isinstance(node, exp.Not):
            inner = self._boolean(node.this)
            return lambda image: None if (v := inner(image)) is None else not v
        if isinstance(node, exp.Is):
            value = self._value(node.this)
            if not isinstance(node.expression, exp.Null):
                raise FilterError(f"the row filter cannot use {node.sql()!r}: IS takes NULL only")
            if node.args.get("negate"):
                return lambda image: value(image)[0] is not None
            return lambda image: value(image)[0] is None
        compare = _COMPARISONS.get(type(node))
        if compare is not None:
            a, b = self._value(node.this), self._value(node.expression)
            fold = self._fold
            return lambda image: _compare(a(image), b(image), compare, fold)
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            v, low, high = self._value(node.this), self._value(node.args["low"]), self._value(node.args["high"])
            fold = self._fold
            return lambda image: _and(
                _compare(v(image), low(image), lambda x, y: x >= y, fold),
                _compare(v(image), high(image), lambda x, y: x <= y, fold),
            )
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
                raise FilterError(f"the row filter cannot use {node.sql()!r}: IN takes a list of values")
            v = self._value(node.this)
            options = [self._value(o) for o in node.expressions]
            fold = self._fold
            return lambda image: _or_all(_compare(v(image), o(image), lambda x, y: x == y, fold) for o in options)
        if isinstance(node, exp.Like):
            v, pattern = self._value(node.this), node.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string):
                raise FilterError("the row filter's LIKE takes a quoted pattern")
            regex, negate = re.compile(_like_regex(pattern.this), self._like_flags), bool(node.args.get("negate"))
            return lambda image: None if (x := v(image)[0]) is None else bool(regex.fullmatch(str(x))) != negate
        if isinstance(node, exp.Column):
            value = self._value(node)
            return lambda image: _truth(value(image))
        raise FilterError(f"the row filter cannot use {node.sql()!r}: it may use {SUPPORTED}")


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _or_all(values: Any) -> bool | None:
    result: bool | None = False
    for v in values:
        result = _or(result, v)
        if result is True:
            return True
    return result


def _truth(value: Value) -> bool | None:
    v = value[0]
    if v is None:
        return None
    return v in (True, 1, "1", "t", "true") or (isinstance(v, int | float | Decimal) and v != 0)


_COMPARISONS: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: lambda x, y: x == y,
    exp.NEQ: lambda x, y: x != y,
    exp.GT: lambda x, y: x > y,
    exp.GTE: lambda x, y: x >= y,
    exp.LT: lambda x, y: x < y,
    exp.LTE: lambda x, y: x <= y,
}


def _compare(a: Value, b: Value, op: Callable[[Any, Any], bool], fold: bool = False) -> bool | None:
    (x, xf), (y, yf) = a, b
    if x is None or y is None:
        return None
    family = xf or yf
    if xf and yf and xf != yf and not ({xf, yf} <= NUMERIC | {"boolean"}):
        family = "text"
    left, right = canonical_value(x, family), canonical_value(y, family)
    if type(left) is not type(right):
        left, right = str(left), str(right)
    if fold and isinstance(left, str) and isinstance(right, str):  # MariaDB's collations: case, trailing spaces
        left, right = left.casefold().rstrip(" "), right.casefold().rstrip(" ")
    try:
        return op(left, right)
    except TypeError:
        return None


def _like_regex(pattern: str) -> str:
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return "".join(out)


def compile_filters(stored: Mapping[str, Any], dialect: str) -> dict[str, RowFilter]:
    """A subscription's stored filters (ReplSubscriber.row_filters) compiled, by table (the active ones only)."""
    specs = {name: FilterSpec.from_json(data) for name, data in stored.items()}
    return {name: RowFilter(spec, dialect, name) for name, spec in specs.items() if spec.active}

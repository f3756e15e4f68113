"""Conflict resolvers as Spark SQL expressions (no I/O, no Django here).

A resolver of SYS_SNAPSHOT_CR / SYS_REPL_CR is an expression over three rows of the published table:
`pub.<col>` (the publisher's current row), `new.<col>` (the incoming, subscriber's row) and `old.<col>`
(the row before the change; a bi-directional snapshot knows only `old.ROWGUID`). It returns the code of
Virtuoso's resolver procedures: 0 undecided, 1 subscriber wins, 2 subscriber wins and the origin becomes
the publisher (the resolver's assignments, column -> expression, are applied to the incoming row), 3
publisher wins, 4 held for a person (the `manual` class), 5 ignore. Names that need quoting use Spark's
backticks: pub.`ab "cd`.

An expression is parsed with sqlglot (Spark dialect) and accepted only if it is one scalar expression
made of allow-listed, deterministic functions over known columns. What Spark evaluates is regenerated
from the checked tree with the columns renamed to `p<i>`, `n<i>`, `o<i>` (the column's position), so
neither the admin's raw text nor a table's column names ever reach Spark's parser.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.schema import MappingSchema
from sqlglot.tokens import Token, TokenType

from replication_admin.engine.queries import plain_description
from replication_admin.engine.types import BINARY_KINDS, INTEGER_KINDS, LogicalType

MAX_LENGTH = 4000
ROWGUID = "ROWGUID"
CODE_NAMES = {
    0: "undecided",
    1: "subscriber wins",
    2: "subscriber wins, origin changes to the publisher",
    3: "publisher wins",
    4: "held for a person to decide",
    5: "ignore",
}
QUALIFIERS = {"pub": "p", "new": "n", "old": "o"}
# `conflict.columns`: the columns both sides changed, as an array of names (empty unless the table's conflicts are
# decided by column); a resolver may look at them (array_contains(conflict.columns, 'price')).
CONFLICT_COLUMNS = ("conflict", -1)
CONFLICTED_FIELD = "conflicted"  # its column in the DataFrame of conflicts
NUMERIC_TYPES = ("bigint", "double", "decimal")
ORDERABLE_TYPES = (*NUMERIC_TYPES, "string", "date", "timestamp")


# --- conflict types and resolver classes: the one definition everything else reads ----------------------


@dataclass(frozen=True)
class ConflictType:
    """A kind of conflict (SYS_SNAPSHOT_CR.CR_TYPE / SYS_REPL_CR.CR_TYPE)."""

    code: str  # I, U or D
    label: str  # insert, update, delete
    valid_codes: tuple[int, ...]  # what its resolvers may return
    default_decision: int  # what happens when no resolver decides


# Virtuoso: 2 only for I and U, 5 only for D; when no resolver decides, I and U -> publisher wins, D -> ignore.
# 4, reserved there, holds the conflict for a person (the `manual` class: EDB's pending conflicts, SymmetricDS's
# MANUAL resolution).
HELD = 4
CONFLICT_TYPES: dict[str, ConflictType] = {
    t.code: t
    for t in (
        ConflictType("I", "insert", (0, 1, 2, 3, HELD), 3),
        ConflictType("U", "update", (0, 1, 2, 3, HELD), 3),
        ConflictType("D", "delete", (0, 1, 3, HELD, 5), 5),
    )
}
CR_TYPES = tuple(CONFLICT_TYPES)
TYPE_NAMES = {t.code: t.label for t in CONFLICT_TYPES.values()}
VALID_CODES: dict[str, tuple[int, ...]] = {t.code: t.valid_codes for t in CONFLICT_TYPES.values()}
DEFAULT_DECISION = {t.code: t.default_decision for t in CONFLICT_TYPES.values()}


def default_rules_text() -> str:
    """The default rule, in words, from the registry above: what every page that mentions it says (the wizard,
    the inbox, the resolvers page), so none can state another. E.g. "inserts and updates: publisher wins (3);
    deletes: ignore (5)"."""
    by_decision: dict[int, list[str]] = {}
    for t in CONFLICT_TYPES.values():
        by_decision.setdefault(t.default_decision, []).append(f"{t.label}s")
    return "; ".join(
        f"{' and '.join(labels)}: {CODE_NAMES[decision]} ({decision})" for decision, labels in by_decision.items()
    )


@dataclass(frozen=True)
class ColumnTypes:
    """The columns a resolver class can work on: Spark type families (empty: any type)."""

    kind: str  # how messages call them: numeric, orderable, any
    families: tuple[str, ...] = ()

    def fits(self, spark_type_name: str) -> bool:
        return not self.families or type_family(spark_type_name) in self.families


NUMERIC = ColumnTypes("numeric", NUMERIC_TYPES)
ORDERABLE = ColumnTypes("orderable", ORDERABLE_TYPES)
ANY_TYPE = ColumnTypes("any", ())


@dataclass(frozen=True)
class Target:
    """The column a resolver class works on, as written in resolver expressions."""

    name: str
    pub: str  # pub.<column>
    new: str  # new.<column>
    old: str  # old.<column>


@dataclass(frozen=True)
class ResolverClass:
    """A resolver class of REPL_ADD_SNAPSHOT_CR / REPL_ADD_CR: what it fits and the resolver it generates."""

    name: str  # CR_CLASS
    label: str  # short, e.g. "publisher wins", "min of a column"
    description: str  # what it does, e.g. "the publisher's row wins"
    # (expression, assignments) it generates; gets the column when `column` is set, else None
    decide: Callable[[Target | None], tuple[str, dict[str, str]]]
    conflict_types: tuple[str, ...] = CR_TYPES
    column: ColumnTypes | None = None  # None: works on no column
    needs_old_row: bool = False  # True: transactional only (a bi-directional snapshot knows only old.ROWGUID)
    written: bool = False  # True: the admin writes the expression (custom)

    @property
    def needs_column(self) -> bool:
        return self.column is not None

    def fits_type(self, cr_type: str) -> bool:
        return cr_type in self.conflict_types

    def fits_publication(self, transactional: bool) -> bool:
        return transactional or not self.needs_old_row


Decide = Callable[[Target | None], tuple[str, dict[str, str]]]


def _on_column(decide: Callable[[Target], tuple[str, dict[str, str]]]) -> Decide:
    """The decide function of a class with a column (ResolverClass.decide gets the column when `column` is set)."""

    def on(column: Target | None) -> tuple[str, dict[str, str]]:
        assert column is not None, "a resolver class with a column is given its column"
        return decide(column)

    return on


def _register(*classes: ResolverClass) -> dict[str, ResolverClass]:
    return {c.name: c for c in classes}


CUSTOM = "custom"
# Declaration order is the order forms offer them in.
RESOLVER_CLASSES: dict[str, ResolverClass] = _register(
    ResolverClass("pub_wins", "publisher wins", "the publisher's row wins", lambda _: ("3", {})),
    ResolverClass("sub_wins", "subscriber wins", "the subscriber's row wins", lambda _: ("1", {})),
    ResolverClass(
        "min", "min of a column", "the row with the smaller value of a column wins",
        _on_column(lambda c: (f"CASE WHEN {c.pub} < {c.new} THEN 3 WHEN {c.pub} > {c.new} THEN 1 ELSE 0 END", {})),
        conflict_types=("I", "U"), column=ORDERABLE,
    ),
    ResolverClass(
        "max", "max of a column", "the row with the larger value of a column wins",
        _on_column(lambda c: (f"CASE WHEN {c.pub} > {c.new} THEN 3 WHEN {c.pub} < {c.new} THEN 1 ELSE 0 END", {})),
        conflict_types=("I", "U"), column=ORDERABLE,
    ),
    ResolverClass(
        "ave", "ave of a column", "the column becomes the average of both rows",
        _on_column(lambda c: ("2", {c.name: f"({c.pub} + {c.new}) / 2"})),
        conflict_types=("I", "U"), column=NUMERIC,
    ),
    ResolverClass(
        "add", "add of a column", "the subscriber's change of a column is added to the publisher's value",
        _on_column(lambda c: ("2", {c.name: f"{c.pub} + ({c.new} - {c.old})"})),
        conflict_types=("I", "U"), column=NUMERIC, needs_old_row=True,
    ),
    ResolverClass(
        "manual", "held for a person", "both sides keep their version until a person picks one in the conflict inbox",
        lambda _: (str(HELD), {}),
    ),
    ResolverClass(CUSTOM, "custom", "your own expression", lambda _: ("0", {}), written=True),
)  # fmt: skip


def resolver_classes(transactional: bool | None = None) -> list[ResolverClass]:
    """The registered classes in declaration order; with `transactional`, those fitting that publication kind."""
    return [c for c in RESOLVER_CLASSES.values() if transactional is None or c.fits_publication(transactional)]


def class_names(transactional: bool | None = None) -> tuple[str, ...]:
    return tuple(c.name for c in resolver_classes(transactional))


def resolver_class(name: str) -> ResolverClass:
    """The registered class `name` (case-insensitive), or a ResolverError naming the classes."""
    name = (name or "").strip().lower()
    found = RESOLVER_CLASSES.get(name)
    if found is None:
        raise ResolverError(f"unknown resolver class {name!r}; the classes are {', '.join(RESOLVER_CLASSES)}")
    return found


def join_words(words: Sequence[str], last: str = "or") -> str:
    """'a', 'a or b', 'a, b or c'."""
    return f" {last} ".join(filter(None, (", ".join(words[:-1]), words[-1]))) if words else ""


def conflict_types_text(labels: bool = True, quote: str = "") -> str:
    """'I (insert), U (update) or D (delete)'; without labels 'I, U or D' (quote="'": "'I', 'U' or 'D'")."""
    return join_words(
        [f"{quote}{t.code}{quote}" + (f" ({t.label})" if labels else "") for t in CONFLICT_TYPES.values()]
    )


def check_conflict_type(cr_type: str) -> str:
    if cr_type not in CONFLICT_TYPES:
        raise ResolverError(f"resolver type must be {conflict_types_text()}, not {cr_type!r}")
    return cr_type


# sqlglot node classes a resolver expression may contain.
_ALLOWED_NODES: tuple[type[exp.Expression], ...] = (
    # values and names
    exp.Literal, exp.Null, exp.Boolean, exp.HexString, exp.Column, exp.Identifier, exp.Paren,
    exp.DataType, exp.DataTypeParam,
    # arithmetic
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv, exp.Neg, exp.DPipe,
    # comparison and logic
    exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ,
    exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.And, exp.Or, exp.Not,
    # conditionals
    exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Least, exp.Greatest,
    # scalar functions
    exp.Abs, exp.Round, exp.Floor, exp.Ceil, exp.Lower, exp.Upper, exp.Length, exp.Substring,
    exp.Concat, exp.Trim, exp.Cast, exp.TryCast,
    # over conflict.columns
    exp.ArrayContains, exp.ArraySize,
)  # fmt: skip

_ALLOWED_FUNCTIONS_TEXT = (
    "CASE, IF/IIF, COALESCE/NVL, NULLIF, LEAST, GREATEST, ABS, ROUND, FLOOR, CEIL, LOWER, UPPER, LENGTH, "
    "SUBSTRING/SUBSTR, CONCAT, TRIM, CAST/TRY_CAST, ARRAY_CONTAINS and SIZE (of conflict.columns)"
)

_CAST_TYPES = {
    exp.DataType.Type.BIGINT: "BIGINT",
    exp.DataType.Type.INT: "INT",
    exp.DataType.Type.SMALLINT: "SMALLINT",
    exp.DataType.Type.TINYINT: "TINYINT",
    exp.DataType.Type.DOUBLE: "DOUBLE",
    exp.DataType.Type.FLOAT: "FLOAT",
    exp.DataType.Type.DECIMAL: "DECIMAL",
    exp.DataType.Type.TEXT: "STRING",
    exp.DataType.Type.VARCHAR: "STRING",
    exp.DataType.Type.CHAR: "STRING",
    exp.DataType.Type.BOOLEAN: "BOOLEAN",
    exp.DataType.Type.DATE: "DATE",
    exp.DataType.Type.TIMESTAMP: "TIMESTAMP",
    exp.DataType.Type.TIMESTAMPTZ: "TIMESTAMP",
    exp.DataType.Type.TIMESTAMPNTZ: "TIMESTAMP_NTZ",
    exp.DataType.Type.BINARY: "BINARY",
    exp.DataType.Type.VARBINARY: "BINARY",
}

# Functions that would make a decision depend on when or where it runs.
_NONDETERMINISTIC_NODES = ("Rand", "Randn", "Uuid", "CurrentTimestamp", "CurrentDate", "CurrentTime",
                           "CurrentDatetime", "CurrentUser", "CurrentSchema", "CurrentCatalog",
                           "UnixSeconds", "TimeToUnix", "Shuffle")  # fmt: skip
_NONDETERMINISTIC_NAMES = frozenset(
    {"NOW", "RAND", "RANDN", "RANDOM", "UUID", "SHUFFLE", "CURRENT_TIMESTAMP", "CURRENT_DATE", "LOCALTIMESTAMP",
     "UNIX_TIMESTAMP", "MONOTONICALLY_INCREASING_ID", "SPARK_PARTITION_ID", "INPUT_FILE_NAME", "CURRENT_USER",
     "USER", "SESSION_USER"}
)  # fmt: skip

_SUFFIX = re.compile(r"^[A-Za-z0-9_]{1,40}$")
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DECIMAL_TYPE = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


@dataclass(frozen=True)
class ResolverColumn:
    name: str
    spark_type: str  # bigint, double, decimal(p,s), string, boolean, date, timestamp, binary
    is_key: bool


@dataclass(frozen=True)
class ResolverSpec:
    id: int | None  # None: an unsaved resolver (a dry run's proposal)
    name: str  # CR_PROC
    cr_type: str  # I, U or D
    order: int  # CR_ORDER
    expression: str
    assignments: dict[str, str]


class ResolverError(ValueError):
    """A resolver expression or definition that cannot be used; the message says exactly why."""


# --- types --------------------------------------------------------------------------------------------


def spark_type(logical: LogicalType) -> str:
    """The Spark SQL type a column of this logical type has while resolvers are evaluated."""
    kind = logical.kind
    if kind in INTEGER_KINDS:
        return "bigint"
    if kind in ("real", "double"):
        return "double"
    if kind == "numeric":
        precision = logical.precision
        if precision is None or precision > 38 or precision < 1:
            return "decimal(38,10)"
        scale = max(0, min(logical.scale or 0, precision))
        return f"decimal({precision},{scale})"
    if kind in ("boolean", "date", "timestamp"):
        return kind
    if kind == "timestamptz":
        return "timestamp"  # Spark's timestamps are instants
    if kind in BINARY_KINDS:
        return "binary"
    return "string"


def type_family(spark_type_name: str) -> str:
    """'decimal(10,2)' -> 'decimal'; the other type names are their own family."""
    return "decimal" if spark_type_name.startswith("decimal") else spark_type_name


def decimal_precision(spark_type_name: str) -> tuple[int, int]:
    match = _DECIMAL_TYPE.match(spark_type_name.replace(" ", ""))
    if not match:
        raise ResolverError(f"{spark_type_name!r} is not a decimal(p,s) type")
    return int(match.group(1)), int(match.group(2))


# --- parsing and checking -----------------------------------------------------------------------------


def _at(line: int | None, col: int | None) -> str:
    return f" (line {line}, column {col})" if line and col else ""


def _pos(text: str, start: int) -> str:
    """' (line l, column c)' of the character at offset `start`."""
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return _at(line, col)


def _node_at(node: exp.Expr, text: str) -> str:
    """Where a node starts in the text, when sqlglot kept positions for it (identifiers have them)."""
    starts = [
        candidate.meta["start"]
        for candidate in (node, *node.find_all(exp.Identifier))
        if isinstance(candidate.meta.get("start"), int)
    ]
    return _pos(text, min(starts)) if starts else ""


def _token_at(tokens: Sequence[Token], name: str, text: str) -> str:
    """Where the first call of function `name` is in the text."""
    for token, following in itertools.pairwise(tokens):
        if token.text.upper() == name.upper() and following.token_type == TokenType.L_PAREN:
            return _pos(text, token.start)
    return ""


_DOUBLE_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


def _tokenize(expression: str, what: str) -> list[Token]:
    try:
        return list(sqlglot.tokenize(expression, read="spark"))
    except TokenError as exc:
        detail = str(exc).splitlines()[0] if str(exc) else "unreadable text"
        quotes = {"'": "'", '"': '"', "`": "`"}
        for quote in quotes:
            if _unbalanced(expression, quote):
                raise ResolverError(f"the {what} has an unbalanced {quote} quote ({detail})") from None
        raise ResolverError(f"the {what} cannot be read: {detail}") from None


def _unbalanced(text: str, quote: str) -> bool:
    """True when `quote` opens a quoted part that never closes (backslash escapes skipped in strings)."""
    inside: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if inside is not None:
            if ch == "\\" and inside != "`":
                i += 2
                continue
            if ch == inside:
                inside = None
        elif ch in ("'", '"', "`"):
            inside = ch
        i += 1
    return inside == quote


def _parse(expression: str, what: str) -> tuple[exp.Expr, list[Token]]:
    if not isinstance(expression, str):
        raise ResolverError(f"the {what} must be text, not {type(expression).__name__}")
    if not expression.strip():
        raise ResolverError(f"the {what} is empty")
    if len(expression) > MAX_LENGTH:
        raise ResolverError(f"the {what} is {len(expression)} characters long; at most {MAX_LENGTH} are allowed")
    if "\x00" in expression:
        raise ResolverError(f"the {what} contains a NUL character")
    tokens = _tokenize(expression, what)
    for index, token in enumerate(tokens):
        previous = tokens[index - 1] if index else None
        previous_name = tokens[index - 2].text if index >= 2 else "pub"
        if token.token_type == TokenType.SEMICOLON:
            raise ResolverError(f"the {what} must be one expression: ';' is not allowed{_pos(expression, token.start)}")
        if token.token_type == TokenType.STRING and expression[token.start : token.start + 1] == '"':
            if previous is not None and previous.token_type == TokenType.DOT:
                quoted = _DOUBLE_QUOTED.match(expression, token.start)
                name = quoted.group(1).replace('""', '"') if quoted else token.text
                raise ResolverError(
                    f"the {what} quotes a column name with double quotes{_pos(expression, token.start)}: Spark SQL "
                    f"reads double-quoted text as a string, not a name; quote names with backticks, e.g. "
                    f"{previous_name}.{_identifier(name).sql('spark')}"
                )
            raise ResolverError(
                f'the {what} has a double-quoted string "{token.text}"{_pos(expression, token.start)}: write text in '
                "single quotes ('...') and quote column names with backticks (pub.`name`)"
            )
        if token.token_type in (TokenType.PARAMETER, TokenType.PLACEHOLDER) or token.text.startswith("${"):
            raise ResolverError(f"the {what} may not use parameters ({token.text}){_pos(expression, token.start)}")
    try:
        trees = [t for t in sqlglot.parse(expression, read="spark") if t is not None]
    except ParseError as exc:
        error = exc.errors[0] if exc.errors else {}
        description = plain_description(error.get("description") or str(exc).splitlines()[0])
        near = error.get("highlight")
        near_text = f" near {near!r}" if near else ""
        raise ResolverError(
            f"the {what} is not a valid Spark SQL expression: {description}{near_text}"
            f"{_at(error.get('line'), error.get('col'))}"
        ) from None
    except TokenError as exc:
        raise ResolverError(f"the {what} cannot be read: {str(exc).splitlines()[0]}") from None
    if len(trees) != 1:
        raise ResolverError(f"the {what} must be exactly one expression, not {len(trees)}")
    return trees[0], tokens


def _describe(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return f"{node.name.upper()}()"
    if isinstance(node, exp.Func):
        return f"{node.sql_name()}()"
    return type(node).__name__.upper()


def _short(node: exp.Expr, limit: int = 60) -> str:
    text = node.sql("spark", comments=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def find_column(columns: Sequence[ResolverColumn], name: str) -> ResolverColumn | None:
    """Exact match first, then the only case-insensitive match (Spark's names are case-insensitive)."""
    for column in columns:
        if column.name == name:
            return column
    folded = [c for c in columns if c.name.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _is_rowguid(name: str) -> bool:
    return name.upper() == ROWGUID


def _identifier(name: str) -> exp.Identifier:
    """A name as an identifier, backtick-quoted unless it is a plain word Spark reads as a name."""
    plain = False
    if _PLAIN_NAME.match(name):
        try:
            tokens = sqlglot.tokenize(name, read="spark")
            plain = len(tokens) == 1 and tokens[0].token_type == TokenType.VAR and tokens[0].text == name
        except TokenError:
            plain = False
    return exp.Identifier(this=name, quoted=not plain)


def column_ref(qualifier: str, name: str) -> str:
    """`pub.price`, `new.`ab "cd``: a column reference as written in a resolver expression."""
    return exp.Column(this=_identifier(name), table=exp.Identifier(this=qualifier, quoted=False)).sql("spark")


def _check_column(
    node: exp.Column, columns: Sequence[ResolverColumn], cr_type: str | None, what: str, text: str
) -> tuple[str, int]:
    """(qualifier, index of the column) of a column reference, or a ResolverError saying what is wrong."""
    where = _node_at(node, text)
    if isinstance(node.this, exp.Star):
        raise ResolverError(f"the {what} may not use {node.sql('spark')}{where}: name the columns one by one")
    parts = [p.name for p in node.parts]
    written = node.sql("spark")
    if len(parts) == 1:
        raise ResolverError(
            f"the {what} refers to {written}{where} without saying which row: write pub.{written} (the "
            f"publisher's row), new.{written} (the incoming row) or old.{written} (the row before the change)"
        )
    if len(parts) > 2:
        raise ResolverError(
            f"the {what} refers to {written}{where}, which is not a column reference: write pub.<column>, "
            "new.<column> or old.<column>"
        )
    qualifier, name = parts[0].lower(), parts[1]
    if qualifier == CONFLICT_COLUMNS[0]:
        if name.lower() != "columns":
            raise ResolverError(
                f"the {what} refers to {written}{where}: the conflict has only conflict.columns (the columns both "
                "sides changed)"
            )
        return CONFLICT_COLUMNS
    if qualifier not in QUALIFIERS:
        raise ResolverError(
            f"the {what} refers to {written}{where}: {parts[0]!r} is not a row; use pub (the publisher's row), "
            "new (the incoming row) or old (the row before the change)"
        )
    column = find_column(columns, name)
    if column is None:
        known = ", ".join(c.name for c in columns)
        ambiguous = [c.name for c in columns if c.name.lower() == name.lower()]
        if len(ambiguous) > 1:
            raise ResolverError(
                f"the {what} refers to {written}{where}, which matches several columns ({', '.join(ambiguous)}); "
                "write the exact name in backticks"
            )
        raise ResolverError(f"the {what} refers to unknown column {name!r} in {written}{where}; the table has: {known}")
    if cr_type == "D" and qualifier == "new" and not column.is_key and not _is_rowguid(column.name):
        raise ResolverError(
            f"the {what} refers to {written}{where}, but a delete carries only the primary key and ROWGUID of "
            "the incoming row; use pub.<column> for the publisher's values"
        )
    return qualifier, columns.index(column)


def _check_node(node: exp.Expr, tokens: Sequence[Token], text: str, what: str) -> None:
    """Refuse any node that is not part of a deterministic scalar expression over allowed functions."""
    if isinstance(node, exp.Query | exp.Subquery | exp.Exists):
        raise ResolverError(f"the {what} may not contain a query (SELECT, subquery or EXISTS){_node_at(node, text)}")
    if isinstance(node, exp.DML | exp.DDL | exp.Command | exp.Drop | exp.Create | exp.Alter | exp.Transaction):
        raise ResolverError(f"the {what} must be an expression, not a {type(node).__name__.upper()} statement")
    if isinstance(node, exp.Star):
        raise ResolverError(f"the {what} may not use *: name the columns one by one")
    if isinstance(node, exp.Window):
        raise ResolverError(f"the {what} may not use window functions (OVER ...){_node_at(node, text)}")
    if isinstance(node, exp.Lambda | exp.JSONExtract | exp.Kwarg):
        raise ResolverError(f"the {what} may not use lambda functions (->){_node_at(node, text)}")
    if isinstance(node, exp.AggFunc):
        name = _describe(node)
        hint = ""
        if isinstance(node, exp.Min | exp.Max):
            hint = f"; to compare values use {'LEAST' if isinstance(node, exp.Min) else 'GREATEST'}(a, b)"
        raise ResolverError(
            f"the {what} may not call the aggregate function {name}{_token_at(tokens, name[:-2], text)}: "
            f"a resolver sees one conflicting row{hint}"
        )
    if isinstance(node, exp.Parameter | exp.Placeholder):
        raise ResolverError(f"the {what} may not use parameters ({node.sql('spark')})")
    if isinstance(node, exp.Dot):
        right = node.expression
        if isinstance(right, exp.Literal | exp.Concat) and right.find(exp.Literal) is not None:
            raise ResolverError(
                f"the {what} quotes a name with double quotes or single quotes after a dot "
                f"({node.sql('spark')}): quote column names with backticks, e.g. pub.`name`"
            )
        raise ResolverError(f"the {what} has {node.sql('spark')}, which is not a column reference")
    if type(node).__name__ in _NONDETERMINISTIC_NODES or (
        isinstance(node, exp.Anonymous) and node.name.upper() in _NONDETERMINISTIC_NAMES
    ):
        name = _describe(node)
        raise ResolverError(
            f"the {what} may not call {name}{_token_at(tokens, name[:-2], text)}: it is not deterministic, and a "
            "resolver must decide the same way every time it runs"
        )
    if isinstance(node, exp.Func) and not isinstance(node, _ALLOWED_NODES):
        name = _describe(node)
        raise ResolverError(
            f"the {what} may not call {name}{_token_at(tokens, name[:-2], text)}: allowed functions are "
            f"{_ALLOWED_FUNCTIONS_TEXT}, with arithmetic, comparisons, AND/OR/NOT, IS NULL, IN (values), "
            "BETWEEN and LIKE"
        )
    if not isinstance(node, _ALLOWED_NODES):
        raise ResolverError(
            f"the {what} may not use {_short(node)} ({type(node).__name__}){_node_at(node, text)}: only "
            f"values, columns, arithmetic, comparisons, AND/OR/NOT and {_ALLOWED_FUNCTIONS_TEXT}"
        )
    if isinstance(node, exp.Cast | exp.TryCast):
        target = node.to
        if not isinstance(target, exp.DataType) or target.this not in _CAST_TYPES or target.args.get("nested"):
            raise ResolverError(
                f"the {what} casts to {target.sql('spark') if target else '?'}, which is not allowed; cast to "
                "BIGINT, INT, DOUBLE, DECIMAL(p,s), STRING, BOOLEAN, DATE, TIMESTAMP or BINARY"
            )
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise ResolverError(f"the {what} may only use IN with a list of values{_node_at(node, text)}")
        for item in node.expressions:
            if item.find(exp.Column) is not None:
                raise ResolverError(
                    f"the {what} may only use IN with a list of literal values, not {item.sql('spark')}"
                )


def _check(
    expression: str, columns: Sequence[ResolverColumn], cr_type: str | None, what: str
) -> tuple[exp.Expr, list[tuple[exp.Column, str, int]]]:
    """The checked tree and its column references (node, qualifier, column index)."""
    if not columns:
        raise ResolverError("the table's columns are unknown")
    tree, tokens = _parse(expression, what)
    refs: list[tuple[exp.Column, str, int]] = []
    for node in tree.walk():
        if isinstance(node, exp.Column):
            qualifier, index = _check_column(node, columns, cr_type, what, expression)
            refs.append((node, qualifier, index))
            continue
        if isinstance(node, exp.Identifier) and isinstance(node.parent, exp.Column):
            continue
        _check_node(node, tokens, expression, what)
    return tree, refs


def _check_type(cr_type: str) -> str:
    return check_conflict_type(cr_type)


def _results(tree: exp.Expr) -> Iterable[exp.Expr]:
    """The expressions whose value the whole expression returns (the branches of CASE / IF)."""
    if isinstance(tree, exp.Paren):
        yield from _results(tree.this)
    elif isinstance(tree, exp.Case):
        for branch in tree.args.get("ifs") or []:
            yield from _results(branch.args["true"])
        if tree.args.get("default") is not None:
            yield from _results(tree.args["default"])
    elif isinstance(tree, exp.If):
        yield from _results(tree.args["true"])
        if tree.args.get("false") is not None:
            yield from _results(tree.args["false"])
    else:
        yield tree


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _check_codes(tree: exp.Expr, cr_type: str, what: str) -> None:
    valid = VALID_CODES[cr_type]
    valid_text = ", ".join(f"{c} {CODE_NAMES[c]}" for c in valid)
    if isinstance(tree, exp.Predicate | exp.Connector | exp.Not | exp.Boolean):
        raise ResolverError(
            f"the {what} is a condition (true/false), but a resolver returns a code ({valid_text}); "
            "e.g. CASE WHEN <condition> THEN 3 ELSE 0 END"
        )
    for result in _results(tree):
        value = result
        negative = False
        if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
            value, negative = value.this, True
        if not isinstance(value, exp.Literal):
            continue
        if value.is_string:
            raise ResolverError(f"the {what} returns the text {value.sql('spark')}; a resolver returns a number")
        try:
            number = Decimal(value.this) * (-1 if negative else 1)
        except InvalidOperation:
            continue
        if number != number.to_integral_value() or int(number) not in valid:
            shown = ("-" if negative else "") + value.this
            raise ResolverError(
                f"the {what} returns {shown}, which is not a code of {_a(TYPE_NAMES[cr_type])} resolver "
                f"(valid: {valid_text})"
            )


def _rename(tree: exp.Expr, refs: list[tuple[exp.Column, str, int]], make: Callable[[str, int], exp.Expr]) -> exp.Expr:
    """The tree with each checked column reference replaced by make(qualifier, index)."""
    replacements = {id(node): make(qualifier, index) for node, qualifier, index in refs}

    def replace(node: exp.Expr) -> exp.Expr:
        return replacements.get(id(node), node)

    return tree.transform(replace, copy=False)


def _normalise(tree: exp.Expr, refs: list[tuple[exp.Column, str, int]], columns: Sequence[ResolverColumn]) -> str:
    def canonical(qualifier: str, index: int) -> exp.Column:
        if (qualifier, index) == CONFLICT_COLUMNS:
            return exp.Column(this=exp.Identifier(this="columns", quoted=False), table=exp.Identifier(this=qualifier))
        return exp.Column(this=_identifier(columns[index].name), table=exp.Identifier(this=qualifier, quoted=False))

    return _rename(tree, refs, canonical).sql("spark", comments=False)


_INTEGER_RESULTS = {"TINYINT", "SMALLINT", "INT", "BIGINT", "NULL", "UNKNOWN"}
_RESULT_WORDS = {"STRING": "text", "VARCHAR": "text", "CHAR": "text", "TEXT": "text", "DATE": "a date",
                 "TIMESTAMP": "a timestamp", "TIMESTAMPTZ": "a timestamp", "TIMESTAMPNTZ": "a timestamp",
                 "TIMESTAMPLTZ": "a timestamp", "DATETIME": "a timestamp", "BOOLEAN": "true/false",
                 "BINARY": "bytes", "DOUBLE": "a number with decimals", "FLOAT": "a number with decimals"}  # fmt: skip


def _check_result_type(normalised: str, columns: Sequence[ResolverColumn], cr_type: str, what: str) -> None:
    """A resolver returns an integer code: an expression whose value is text, a date, a decimal ... (a
    column, a function of it, a CASE branch) is refused, as a literal of those is (_check_codes)."""
    types = {c.name: c.spark_type for c in columns}
    tables: dict[str, object] = {q: types for q in ("pub", "new", "old")}
    tables["conflict"] = {"columns": "ARRAY<STRING>"}
    schema = MappingSchema(tables, dialect="spark")
    try:
        select = f"SELECT {normalised} FROM pub, new, old, conflict"
        tree = annotate_types(sqlglot.parse_one(select, read="spark"), schema=schema)
        result = cast(exp.Select, tree).selects[0].type
    except Exception:  # inference is a help; Spark still checks the expression when it runs
        return
    if result is None:
        return
    name = result.this.name
    if name in _INTEGER_RESULTS or (name == "DECIMAL" and _decimal_scale(result) == 0):
        return
    word = _RESULT_WORDS.get(name, "a number with decimals" if name == "DECIMAL" else name.lower())
    valid_text = ", ".join(f"{c} {CODE_NAMES[c]}" for c in VALID_CODES[cr_type])
    raise ResolverError(
        f"the {what} returns {word} ({_short(sqlglot.parse_one(normalised, read='spark'))}); "
        f"a resolver returns an integer code ({valid_text})"
    )


def _decimal_scale(data_type: exp.DataType) -> int | None:
    params = [p for p in data_type.expressions if p.name.isdigit()]
    return int(params[1].name) if len(params) > 1 else None


def validate_expression(expression: str, columns: Sequence[ResolverColumn], cr_type: str) -> str:
    """Check a resolver expression and return its normalised text, or raise ResolverError."""
    _check_type(cr_type)
    tree, refs = _check(expression, columns, cr_type, "resolver expression")
    _check_codes(tree, cr_type, "resolver expression")
    normalised = _normalise(tree, refs, columns)
    _check_result_type(normalised, columns, cr_type, "resolver expression")
    return normalised


def validate_assignments(
    assignments: dict[str, str], columns: Sequence[ResolverColumn], cr_type: str
) -> dict[str, str]:
    """Check the column assignments applied when the resolver returns 2; {exact column name: normalised}."""
    _check_type(cr_type)
    if assignments is None:
        return {}
    if not isinstance(assignments, dict):
        raise ResolverError("assignments must be a mapping of column name to expression")
    if assignments and cr_type == "D":
        raise ResolverError("a delete resolver cannot assign columns (code 2 is not valid for deletes)")
    checked: dict[str, str] = {}
    for name, value in assignments.items():
        if not isinstance(name, str) or not name:
            raise ResolverError("an assignment needs a column name")
        column = find_column(columns, name)
        if column is None:
            known = ", ".join(c.name for c in columns if not c.is_key and not _is_rowguid(c.name))
            raise ResolverError(f"cannot assign unknown column {name!r}; the columns that can be assigned: {known}")
        if column.is_key:
            raise ResolverError(f"cannot assign {column.name!r}: it is part of the primary key")
        if _is_rowguid(column.name):
            raise ResolverError(f"cannot assign {column.name!r}: the ROWGUID is set by replication")
        if column.name in checked:
            raise ResolverError(f"column {column.name!r} is assigned twice")
        tree, refs = _check(value, columns, cr_type, f"assignment to {column.name}")
        checked[column.name] = _normalise(tree, refs, columns)
    return checked


def compile_expression(expression: str, columns: Sequence[ResolverColumn]) -> str:
    """Spark SQL for a checked expression, regenerated from its tree, with pub.X / new.X / old.X renamed to
    p<i> / n<i> / o<i> (i = the position of X in `columns`)."""
    tree, refs = _check(expression, columns, None, "resolver expression")

    def alias(qualifier: str, index: int) -> exp.Column:
        if (qualifier, index) == CONFLICT_COLUMNS:
            return exp.Column(this=exp.Identifier(this=CONFLICTED_FIELD, quoted=False))
        return exp.Column(this=exp.Identifier(this=f"{QUALIFIERS[qualifier]}{index}", quoted=False))

    return _rename(tree, refs, alias).sql("spark", comments=False)


def compile_assignments(assignments: dict[str, str], columns: Sequence[ResolverColumn]) -> dict[int, str]:
    """{column index: compiled expression} for a resolver's assignments."""
    compiled: dict[int, str] = {}
    for name, value in (assignments or {}).items():
        column = find_column(columns, name)
        if column is None:
            raise ResolverError(f"cannot assign unknown column {name!r}")
        compiled[columns.index(column)] = compile_expression(value, columns)
    return compiled


# --- generated resolvers -----------------------------------------------------------------------------


def generated_resolver(
    cls: str,
    cr_type: str,
    column: str | None,
    columns: Sequence[ResolverColumn],
    transactional: bool = False,
) -> tuple[str, dict[str, str]]:
    """(expression, assignments) of one of the registered resolver classes (custom: undecided, 0)."""
    _check_type(cr_type)
    spec = resolver_class(cls)
    cls = spec.name
    if not spec.fits_publication(transactional):
        raise ResolverError(f"the {cls} class is for transactional publications only (it needs the old row)")
    if not spec.fits_type(cr_type):
        fits = join_words([TYPE_NAMES[t] for t in spec.conflict_types], "and")
        raise ResolverError(f"the {cls} class applies to {fits} conflicts only, not to {TYPE_NAMES[cr_type]}s")
    target = None
    if spec.column is not None:
        if not column:
            raise ResolverError(f"the {cls} class needs a column")
        found = find_column(columns, column)
        if found is None:
            known = ", ".join(c.name for c in columns if not c.is_key and not _is_rowguid(c.name))
            raise ResolverError(f"the table has no column {column!r}; {cls} can work on: {known}")
        if found.is_key:
            raise ResolverError(f"the {cls} class cannot work on {found.name!r}: it is part of the primary key")
        if _is_rowguid(found.name):
            raise ResolverError(f"the {cls} class cannot work on {found.name!r}")
        if not spec.column.fits(found.spark_type):
            raise ResolverError(
                f"the {cls} class needs {_a(spec.column.kind)} column; {found.name!r} is {found.spark_type}"
            )
        target = Target(found.name, *(column_ref(q, found.name) for q in ("pub", "new", "old")))
    expression, assignments = spec.decide(target)
    return (
        validate_expression(expression, columns, cr_type),
        validate_assignments(assignments, columns, cr_type),
    )


def resolver_proc_name(table: str, cr_type: str, suffix: str) -> str:
    """CR_PROC of a new resolver: `<table>_cr_<type>_<suffix>`."""
    _check_type(cr_type)
    if not table or not table.strip():
        raise ResolverError("a resolver needs a table")
    if not isinstance(suffix, str) or not _SUFFIX.match(suffix):
        raise ResolverError(f"the resolver suffix must be 1-40 letters, digits or underscores, not {suffix!r}")
    return f"{table.strip()}_cr_{cr_type}_{suffix}"


# --- values ------------------------------------------------------------------------------------------

# What to_json_value gives: JSON scalars, and binary as {"hex": ...}.
JsonValue = None | bool | int | float | str | dict[str, str]


def to_json_value(value: object) -> JsonValue:
    """A value read from a row (or collected from Spark) as it is kept in JSON."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return {"hex": bytes(value).hex()}
    return str(value)


def _bad(value: object, spark_type_name: str, reason: str = "") -> ResolverError:
    return ResolverError(f"cannot read {value!r} as {spark_type_name}{': ' + reason if reason else ''}")


def _to_decimal(value: object, spark_type_name: str) -> Decimal:
    if isinstance(value, bool):
        raise _bad(value, spark_type_name)
    try:
        number = (
            value
            if isinstance(value, Decimal)
            else Decimal(repr(value) if isinstance(value, float) else str(value).strip())
        )
    except InvalidOperation:
        raise _bad(value, spark_type_name) from None
    if not number.is_finite():
        raise _bad(value, spark_type_name, "not a finite number")
    return number


def _to_datetime(value: object, spark_type_name: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        result = value
    elif isinstance(value, dt.date):
        result = dt.datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        try:
            result = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise _bad(value, spark_type_name) from None
    if result.tzinfo is not None:
        result = result.astimezone(dt.UTC).replace(tzinfo=None)
    return result


def from_json_value(value: Any, spark_type_name: str) -> Any:
    """A JSON value as the Python value Spark's createDataFrame accepts for `spark_type_name`."""
    if value is None:
        return None
    family = type_family(spark_type_name)
    if family == "bigint":
        number = _to_decimal(value, spark_type_name)
        if number != number.to_integral_value():
            raise _bad(value, spark_type_name, "not a whole number")
        result = int(number)
        if not -(2**63) <= result < 2**63:
            raise _bad(value, spark_type_name, "out of range")
        return result
    if family == "double":
        if isinstance(value, bool):
            raise _bad(value, spark_type_name)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise _bad(value, spark_type_name) from None
    if family == "decimal":
        precision, scale = decimal_precision(spark_type_name)
        number = _to_decimal(value, spark_type_name).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        if len(number.as_tuple().digits) > precision and number != 0:
            raise _bad(value, spark_type_name, f"more than {precision} digits")
        return number
    if family == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float | Decimal):
            return bool(value)
        text = str(value).strip().lower()
        if text in ("1", "t", "true", "y", "yes", "on"):
            return True
        if text in ("0", "f", "false", "n", "no", "off"):
            return False
        raise _bad(value, spark_type_name)
    if family == "date":
        if isinstance(value, dt.datetime):
            return value.date()
        if isinstance(value, dt.date):
            return value
        try:
            return dt.date.fromisoformat(str(value).strip()[:10])
        except ValueError:
            raise _bad(value, spark_type_name) from None
    if family == "timestamp":
        return _to_datetime(value, spark_type_name)
    if family == "binary":
        if isinstance(value, dict) and "hex" in value:
            try:
                return bytearray(bytes.fromhex(str(value["hex"])))
            except ValueError:
                raise _bad(value, spark_type_name, "not hexadecimal") from None
        if isinstance(value, bytes | bytearray | memoryview):
            return bytearray(bytes(value))
        if isinstance(value, str):
            return bytearray(value.encode("utf-8"))
        raise _bad(value, spark_type_name)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict) and set(value) == {"hex"}:
        return str(value["hex"])
    return str(to_json_value(value))

"""Checking the SQL fragments admins write (snapshot queries, conditions, column lists) before use.

A fragment is parsed with sqlglot in the dialect of the server it will run on and accepted only if it
is one read-only SELECT: no `;`, no DML or DDL anywhere in the tree, no SELECT INTO or FOR UPDATE, and
only allow-listed functions. What runs is regenerated from the checked tree, never the raw text, and
the console runs it in a read-only transaction as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from replication_admin.engine import dialects
from replication_admin.engine.schema import Column, TableInfo


def sqlglot_dialect(dialect: str) -> str:
    """The sqlglot dialect a registered dialect's SQL is read and written as (its Dialect says)."""
    return dialects.get(dialect).sqlglot_dialect


# sqlglot expression classes of functions a read-only snapshot query may call.
ALLOWED_FUNCTIONS = frozenset(
    {
        # aggregates
        "Count", "Sum", "Avg", "Min", "Max", "GroupConcat", "StringAgg", "ArrayAgg",
        # scalar
        "Abs", "Ceil", "Floor", "Round", "Mod", "Pow", "Sqrt", "Exp", "Ln", "Log", "Sign",
        "Coalesce", "Nullif", "If", "Greatest", "Least", "Cast", "TryCast",
        "Upper", "Lower", "Length", "Substring", "Trim", "Concat", "ConcatWs", "Replace", "Left", "Right",
        "Pad", "StrPosition", "Initcap", "Reverse",
        "CurrentDate", "CurrentTimestamp", "CurrentTime", "DateAdd", "DateSub", "DateDiff", "DateTrunc",
        "Extract", "Year", "Month", "Day", "StrToTime", "TimeToStr", "TsOrDsToDate", "Date", "TimeStrToTime",
        "DateStrToDate", "UnixToTime", "TimeToUnix", "Hex", "Unhex", "MD5", "SHA", "SHA2",
        "Case", "Between", "In", "Is", "Like", "ILike", "Not",
    }
)  # fmt: skip

# Functions that can take unbounded time or memory whatever the table's size (a fragment runs on every row and
# on production servers): refused by name, with the reason. They are not on the allow-list either.
RESOURCE_HEAVY = frozenset(
    {
        "repeat", "space", "sleep", "pg_sleep", "pg_sleep_for", "pg_sleep_until", "benchmark", "generate_series",
        "explodinggenerateseries", "randomblob", "zeroblob", "random", "rand", "randn", "uuid", "gen_random_uuid",
        "crypt", "gen_salt", "dbms_lock.sleep", "get_lock", "wait_for_executed_gtid_set", "master_pos_wait",
    }
)  # fmt: skip
# lpad / rpad build a string of the given length: allowed with a literal length up to this.
MAX_PAD_LENGTH = 1000

_FORBIDDEN = (exp.DML, exp.DDL, exp.Command, exp.Into, exp.Lock, exp.Pragma, exp.Set, exp.Transaction,
              exp.Copy, exp.LoadData, exp.Use, exp.Grant, exp.Create, exp.Drop, exp.Alter)  # fmt: skip


class QueryError(ValueError):
    """A query or condition that is not one read-only SELECT over allowed functions."""


@dataclass(frozen=True)
class CheckedQuery:
    sql: str  # regenerated from the checked tree, in the source dialect, without server qualifiers
    server: str | None  # the server the tables are on, when the query names one
    tables: tuple[str, ...]  # base tables read


# The words people write for the expressions a sqlglot message names by class ("Required keyword: 'expression'
# missing for <class 'sqlglot.expressions.core.LT'>" is "< is missing an operand").
_OPERATORS = {
    "LT": "<", "GT": ">", "EQ": "=", "NEQ": "<>", "LTE": "<=", "GTE": ">=", "Like": "LIKE", "ILike": "ILIKE",
    "Between": "BETWEEN … AND …", "Not": "NOT", "And": "AND", "Or": "OR", "In": "IN", "Is": "IS", "Add": "+",
    "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "Neg": "-", "Paren": "( … )", "Case": "CASE", "Cast": "CAST",
}  # fmt: skip
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]*?(\w+)'>")
_WHERE = re.compile(r"\.?\s*Line \d+, Col: \d+\.?\s*$")


def plain_description(description: str) -> str:
    """sqlglot's description of a parse error with its class names put in SQL's words."""
    missing = _MISSING.search(description)
    if missing is None:
        return description
    return f"{_OPERATORS.get(missing.group(1), missing.group(1).upper())} is missing an operand"


def plain_parse_error(exc: ParseError | TokenError) -> str:
    """What is wrong with a statement sqlglot could not read, in SQL's words: no library class names, no line and
    column of the text the product wrapped around the user's (the nearest token instead)."""
    if isinstance(exc, TokenError):  # its message quotes the whole text, the product's wrapping included
        return "it cannot be split into SQL words (a quote left open?)"
    first = str(exc).splitlines()[0] if str(exc) else "it cannot be read"
    errors = getattr(exc, "errors", None) or [{}]
    near = str(errors[0].get("highlight") or "").strip()
    message = plain_description(_WHERE.sub("", first).rstrip("."))
    return message + (f" (near {near!r})" if near and near not in message else "")


def _parse(text: str, dialect: str, what: str) -> list[exp.Expr]:
    if not text or not text.strip():
        raise QueryError(f"the {what} is empty")
    try:
        trees = [t for t in sqlglot.parse(text, read=sqlglot_dialect(dialect)) if t is not None]
    except (ParseError, TokenError) as exc:
        raise QueryError(f"the {what} is not valid SQL: {plain_parse_error(exc)}") from None
    return trees


def _check_tree(tree: exp.Expr, what: str) -> None:
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN):
            kind = type(node).__name__.upper()
            if isinstance(node, exp.Into):
                kind = "SELECT INTO"
            elif isinstance(node, exp.Lock):
                kind = "FOR UPDATE / FOR SHARE"
            raise QueryError(f"the {what} may only read: {kind} is not allowed")
        if isinstance(node, exp.Func) and not isinstance(node, exp.Connector | exp.Binary | exp.Predicate | exp.Unary):
            name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
            if name.lower() in RESOURCE_HEAVY or type(node).__name__.lower() in RESOURCE_HEAVY:
                shown = name.lower().removeprefix("exploding_")
                raise QueryError(
                    f"the {what} calls {shown}(), which can take unbounded time or memory; "
                    "resource-heavy functions are not allowed"
                )
            if type(node).__name__ not in ALLOWED_FUNCTIONS:
                raise QueryError(f"the {what} calls {name}(), which is not on the list of allowed functions")
            if isinstance(node, exp.Pad):
                _check_pad(node, what)


def _check_pad(node: exp.Pad, what: str) -> None:
    length = node.args.get("expression")
    name = "lpad" if node.args.get("is_left") else "rpad"
    if not isinstance(length, exp.Literal) or length.is_string or not length.this.isdigit():
        raise QueryError(f"the {what} calls {name}() with a computed length; only a literal length is allowed")
    if int(length.this) > MAX_PAD_LENGTH:
        raise QueryError(
            f"the {what} calls {name}() with length {length.this}, over the limit of {MAX_PAD_LENGTH} (resource-heavy)"
        )


def check_query(text: str, dialect: str, servers: frozenset[str] = frozenset()) -> CheckedQuery:
    """One read-only SELECT. Tables may be qualified by a registered server (`demo.Orders`)."""
    trees = _parse(text, dialect, "query")
    if len(trees) != 1:
        raise QueryError(f"the query must be one statement, found {len(trees)} (no ';' inside)")
    tree = trees[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise QueryError(f"the query must be a SELECT, found {tree.key.upper()}")
    _check_tree(tree, "query")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    named_servers: set[str] = set()
    tables: list[str] = []
    for table in tree.find_all(exp.Table):
        if table.name in ctes and not table.db:
            continue
        if table.catalog:
            raise QueryError(f"table {table.sql()} has too many name parts (use server.table)")
        if table.db:
            if table.db not in servers:
                raise QueryError(f"{table.db!r} in {table.sql()} is not a registered server")
            named_servers.add(table.db)
            table.set("db", None)
        tables.append(table.name)
    if len(named_servers) > 1:
        raise QueryError(f"the query reads from several servers ({', '.join(sorted(named_servers))}); use one")
    if not tables:
        raise QueryError("the query reads no table")
    return CheckedQuery(
        sql=tree.sql(dialect=sqlglot_dialect(dialect)),
        server=next(iter(named_servers), None),
        tables=tuple(dict.fromkeys(tables)),
    )


def check_condition(text: str, dialect: str, table: TableInfo, alias: str | None = None) -> str:
    """A scalar condition over the columns of `table`; returned regenerated, columns qualified by `alias`."""
    trees = _parse(f"SELECT 1 FROM t WHERE {text}", dialect, "condition")
    if len(trees) != 1:
        raise QueryError("the condition must be one boolean expression (no ';')")
    if isinstance(trees[0], exp.SetOperation):
        raise QueryError("the condition must be a boolean expression over the table's columns, not a query (no UNION)")
    if not isinstance(trees[0], exp.Select) or trees[0].args.get("where") is None:
        raise QueryError("the condition must be one boolean expression")
    select = trees[0]
    if any(k in select.args and select.args[k] for k in ("group", "having", "order", "limit", "joins")):
        raise QueryError("the condition must be one boolean expression, not a clause")
    condition: exp.Expr = select.args["where"].this
    _check_tree(condition, "condition")
    if any(isinstance(n, exp.Select | exp.Subquery) for n in condition.walk()):
        raise QueryError("the condition must be a scalar condition on the source table (no subqueries)")
    for column in condition.find_all(exp.Column):
        if column.table and column.table != table.name:
            raise QueryError(f"the condition refers to {column.sql()}, which is not a column of {table.name!r}")
        found = table.column(column.name)
        if found is None:
            raise QueryError(f"the condition refers to {column.name!r}, which is not a column of {table.name!r}")
        column.set("this", exp.to_identifier(found.name, quoted=True))
        column.set("table", exp.to_identifier(alias) if alias else None)
    return condition.sql(dialect=sqlglot_dialect(dialect))


_SPLIT = re.compile(r'\s*("(?:[^"]|"")*"|`(?:[^`]|``)*`|[^,]+)\s*(?:,|$)')


def check_column_list(text: str, table: TableInfo) -> tuple[Column, ...]:
    """'OrderID, "Ship Name"' -> the named columns of `table` (names only; no expressions)."""
    columns: list[Column] = []
    rest = text.strip()
    if not rest:
        raise QueryError("the column list is empty")
    pos = 0
    while pos < len(rest):
        match = _SPLIT.match(rest, pos)
        if not match or match.end() == pos:
            raise QueryError(f"cannot read the column list at {rest[pos:]!r}")
        raw = match.group(1).strip()
        pos = match.end()
        if raw[0] in '"`':
            name = raw[1:-1].replace(raw[0] * 2, raw[0])
        elif re.fullmatch(r"[^\W\d]\w*", raw):
            name = raw
        else:
            raise QueryError(f"{raw!r} in the column list is not a column name (expressions are not allowed)")
        column = table.column(name)
        if column is None:
            raise QueryError(f"{name!r} in the column list is not a column of {table.name!r}")
        if column in columns:
            raise QueryError(f"{name!r} is named twice in the column list")
        columns.append(column)
    return tuple(columns)

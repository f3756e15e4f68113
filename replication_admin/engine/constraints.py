"""What a copy of a table keeps besides its columns and key: NOT NULL, defaults, unique constraints and
secondary indexes, read in one dialect and written in another (pure; introspection runs the SQL).

Defaults are carried when they mean the same everywhere: numbers, texts, booleans, the current time and
date. Anything else (a sequence, a function, an expression) and indexes over expressions or with a
WHERE are listed in `TableInfo.untranslated`, logged by the job that creates the copy and left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from replication_admin.engine.dialects import Dialect
from replication_admin.engine.objects import bounded_name
from replication_admin.engine.schema import Column, Default, ForeignKey, Index, TableInfo
from replication_admin.engine.types import INTEGER_KINDS, LogicalType

_CAST = re.compile(r"^(.*?)(?:::[A-Za-z_][\w .\"\[\]()]*)+$", re.S)
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_NOW = {"now()", "current_timestamp", "localtimestamp", "transaction_timestamp()", "statement_timestamp()"}
_TODAY = {"current_date", "curdate()", "current_date()"}
NUMERIC_KINDS = INTEGER_KINDS | {"numeric", "real", "double"}


def _unwrap(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def parse_default(text: str | None, logical: LogicalType, d: Dialect) -> tuple[Default | None, str | None]:
    """A catalog's default expression (in dialect `d`) as a portable Default (None: no default or NULL), or
    the reason it cannot be carried."""
    if text is None:
        return None, None
    raw = _unwrap(text)
    if raw.upper() == "NULL" or raw == "":
        return None, None
    for kind in ("now", "today"):  # the dialect's own spelling (SQLite's is an expression)
        if raw.lower() == _unwrap(d.render_default(Default(kind), logical)).lower():
            return Default("today" if logical.kind == "date" else kind), None
    cast = _CAST.match(raw)
    if cast and not raw.startswith("nextval("):
        raw = _unwrap(cast.group(1))
    lowered = re.sub(r"\(\d\)$", "()", raw.lower())  # current_timestamp(6) -> current_timestamp()
    if lowered in _NOW or lowered.rstrip("()") in _NOW or lowered in {"current_timestamp()", "now(6)"}:
        return Default("today" if logical.kind == "date" else "now"), None
    if lowered in _TODAY:
        return Default("today"), None
    if lowered in {"true", "false"}:
        return Default("boolean", lowered), None
    if raw.startswith("'") and raw.endswith("'") and len(raw) >= 2 and "'" not in raw[1:-1].replace("''", ""):
        value = raw[1:-1].replace("''", "'")
        if logical.kind == "boolean" and value.lower() in {"t", "f", "true", "false", "1", "0"}:
            return Default("boolean", "true" if value.lower() in {"t", "true", "1"} else "false"), None
        if logical.kind in NUMERIC_KINDS and _NUMBER.match(value.strip()):
            return Default("number", value.strip()), None
        return Default("text", value), None
    if _NUMBER.match(raw):
        if logical.kind == "boolean" and raw in {"0", "1"}:
            return Default("boolean", "true" if raw == "1" else "false"), None
        return Default("number", raw), None
    return None, f"the default {text.strip()} is not portable"


def index_name(index: Index, source: str, copy: str, d: Dialect) -> str:
    """The source's index name on a copy of the same name; prefixed by the copy's name otherwise (index names
    are per schema in PostgreSQL and SQLite). SQLite's own names for constraint indexes are not usable."""
    if index.name.lower().startswith("sqlite_"):
        return bounded_name(f"{copy}_{'_'.join(index.columns)}_{'key' if index.unique else 'idx'}", d.max_identifier)
    if copy == source:
        return bounded_name(index.name, d.max_identifier)
    return bounded_name(f"{copy}_{index.name}", d.max_identifier)


def restricted(table: TableInfo, names: Sequence[str]) -> TableInfo:
    """`table` with only the columns `names` (in that order), and the indexes over them alone."""
    by_name = {c.name: c for c in table.columns}
    columns = tuple(by_name[n] for n in names if n in by_name)
    kept = {c.name for c in columns}
    indexes = tuple(i for i in table.indexes if set(i.columns) <= kept)
    return replace(table, columns=columns, indexes=indexes)


def copy_table_ddl(d: Dialect, name: str, schema: str, table: TableInfo) -> list[str]:
    """CREATE TABLE for a copy of `table` named `name`: its columns, primary key, NOT NULLs and defaults,
    then one CREATE [UNIQUE] INDEX per index (the untranslated ones are in `table.untranslated`)."""
    key = [k.name for k in table.primary_key]
    key_types = dict(zip(key, d.render_key_types([k.logical for k in table.primary_key]), strict=True))
    cols = []
    for c in table.columns:
        ddl = f"{d.quote(c.name)} {key_types.get(c.name) or d.render_type(c.logical)}"
        if c.default is not None:
            ddl += f" DEFAULT {d.render_default(c.default, c.logical)}"
        if c.name in key_types or not c.nullable:
            ddl += " NOT NULL"
        cols.append(ddl)
    if key:
        cols += d.key_constraints_sql([(d.quote(k.name), k.logical) for k in table.primary_key])
    statements = [f"CREATE TABLE {d.qualify(name, schema)} ({', '.join(cols)}){d.create_table_options}"]
    for index in table.indexes:
        columns = [c for c in (table.column(n) for n in index.columns) if c is not None]
        parts = d.index_columns_sql([(c.name, c.logical) for c in columns], index.unique)
        unique = "UNIQUE " if index.unique else ""
        statements.append(
            f"CREATE {unique}INDEX {d.quote(index_name(index, table.name, name, d))} "
            f"ON {d.qualify(name, schema)} ({', '.join(parts)})"
        )
    return statements


def with_column_constraints(column: Column, default_text: str | None, d: Dialect) -> tuple[Column, str | None]:
    default, problem = parse_default(default_text, column.logical, d)
    return replace(column, default=default), (f"column {column.name}: {problem}" if problem else None)


# PostgreSQL's pg_constraint.confdeltype codes; MariaDB and SQLite give the words. RESTRICT is NO ACTION here:
# MariaDB reports its default so, and neither is deferred on a copy (the two differ only when deferred).
_ON_DELETE = {"a": "NO ACTION", "r": "NO ACTION", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


def on_delete_word(value: object) -> str:
    text = str(value or "").strip()
    word = _ON_DELETE.get(text, text.upper() or "NO ACTION")
    return "NO ACTION" if word == "RESTRICT" else word


def foreign_keys_from_rows(table: str, rows: Sequence[Sequence[object]]) -> tuple[ForeignKey, ...]:
    """Rows of Dialect.foreign_keys_sql as foreign keys, by name. SQLite keeps no name (a number): the key gets
    PostgreSQL's usual one. A referenced column given as NULL (SQLite: the referenced table's key) is left out of
    `ref_columns` (empty: its key)."""
    grouped: dict[str, list[Sequence[object]]] = {}
    for row in rows:
        grouped.setdefault(str(row[0]), []).append(row)
    out = []
    for name, group in grouped.items():
        columns = tuple(str(r[2]) for r in group)
        if name.isdigit():
            name = bounded_name(f"{table}_{'_'.join(columns)}_fkey", 63)
        ref_columns = tuple(str(r[4]) for r in group if r[4] is not None)
        out.append(ForeignKey(name, columns, str(group[0][3]), ref_columns, on_delete_word(group[0][5])))
    return tuple(sorted(out, key=lambda f: f.name))

"""Tables as they are on a registered server, found the way a DBA names them."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any

import pyodbc

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.engine import constraints, dialects
from replication_admin.engine.objects import is_internal_table
from replication_admin.engine.schema import Index, TableInfo
from replication_admin.models import Server


def split_tables(names: list[str]) -> tuple[list[str], list[str]]:
    """(the user's tables, the product's own) among `names` (engine.objects.is_internal_table), each sorted."""
    user = sorted((n for n in names if not is_internal_table(n)), key=str.lower)
    internal = sorted((n for n in names if is_internal_table(n)), key=str.lower)
    return user, internal


def source_tables(server: Server) -> list[str]:
    """The tables of `server` a user may pick as a source (or compare, or publish): its own tables, never the
    product's logs and work tables. Every table picker lists these."""
    return split_tables(connections.list_tables(server))[0]


COUNT_BOUND = 100_000  # a table the dialect cannot estimate is counted up to this many rows, no further
COUNTED_TABLES = 200  # and no more than this many tables are counted for one page


@dataclass(frozen=True)
class TableSize:
    """A table's rows and bytes (table and indexes) as the server page shows them: None when not known."""

    rows: int | None
    bytes: int | None
    estimated: bool  # the catalog's estimate, not a count
    at_least: bool = False  # counting stopped at COUNT_BOUND

    @property
    def rows_text(self) -> str:
        if self.rows is None:
            return ""
        text = f"{self.rows:,}"
        return f"≥ {text}" if self.at_least else f"≈ {text}" if self.estimated else text


def table_sizes(server: Server, conn: pyodbc.Connection, names: list[str]) -> dict[str, TableSize]:
    """The rows and bytes of the tables `names` on `server` (on its open connection `conn`), as cheaply as its
    dialect can tell (Dialect.table_sizes_sql): catalog estimates, else a count bounded by COUNT_BOUND. A table
    the catalog does not answer for is left out; a server whose catalog cannot be read gives counts alone."""
    d = dialects.get(server.dialect)
    cursor = conn.cursor()
    known: dict[str, tuple[int | None, int | None]] = {}
    with contextlib.suppress(pyodbc.Error):  # e.g. a SQLite built without dbstat
        known = {row[0]: (row[1], row[2]) for row in cursor.execute(*d.table_sizes_sql(server.schema)).fetchall()}
    sizes = {}
    counted = 0
    for name in names:
        rows, size = known.get(name, (None, None))
        estimated = d.row_counts_are_estimates and rows is not None
        at_least = False
        if rows is None and counted < COUNTED_TABLES:
            counted += 1
            with contextlib.suppress(pyodbc.Error):
                rows = int(cursor.execute(d.count_rows_sql(server.schema, name, COUNT_BOUND)).fetchone()[0])
                at_least = rows >= COUNT_BOUND
        sizes[name] = TableSize(
            None if rows is None else int(rows), None if size is None else int(size), estimated, at_least
        )
    return sizes


def lookup_table(server: Server, name: str) -> TableInfo | None:
    """The table as it is on the server: the exact name first (one catalog query), then a unique
    case-insensitive match among all tables. A name the server's dialect cannot hold names no table (and is
    never sent: MariaDB's catalog would fail comparing it)."""
    if dialects.get(server.dialect).name_problem(name):
        return None
    with connections.connect(server, readonly=True) as conn:
        try:
            return connections.describe_table(server, name, conn=conn)
        except connections.TableNotFound:
            pass
        sql, params = dialects.get(server.dialect).tables_sql(server.schema)
        tables = [row[0] for row in conn.cursor().execute(sql, params).fetchall()]
        folded = [t for t in tables if t.lower() == name.lower()]
        return connections.describe_table(server, folded[0], conn=conn) if len(folded) == 1 else None


def find_table(server: Server, name: str) -> str | None:
    """The table's real name on the server, or None."""
    info = lookup_table(server, name)
    return info.name if info is not None else None


def require_table(server: Server, name: str) -> TableInfo:
    info = lookup_table(server, name)
    if info is None:
        problem = dialects.get(server.dialect).name_problem(name)
        reason = f" ({problem.split(': ')[0]})" if problem else ""
        raise ReplicationError(f"table {name!r} does not exist on server {server.name!r}{reason}")
    return info


def with_constraints(server: Server, info: TableInfo, conn: pyodbc.Connection | None = None) -> TableInfo:
    """`info` with its column defaults, unique constraints and secondary indexes read from the server (on
    `conn` when given: inside its transaction), and what a copy could not carry of them listed
    (engine.constraints)."""
    d = dialects.get(server.dialect)
    with contextlib.nullcontext(conn) if conn is not None else connections.connect(server, readonly=True) as open_conn:
        cursor = open_conn.cursor()
        defaults = dict(cursor.execute(*d.defaults_sql(server.schema, info.name)).fetchall())
        index_rows = cursor.execute(*d.indexes_sql(server.schema, info.name)).fetchall()
        fk_query = d.foreign_keys_sql(server.schema, info.name)
        fk_rows = cursor.execute(*fk_query).fetchall() if fk_query is not None else []
        definition_query = d.definition_sql(server.schema, info.name)
        definition = cursor.execute(*definition_query).fetchone() if definition_query is not None else None
    untranslated: list[str] = []
    columns = []
    for column in info.columns:
        column, problem = constraints.with_column_constraints(column, defaults.get(column.name), d)
        columns.append(column)
        if problem:
            untranslated.append(problem)
    grouped: dict[str, list[Any]] = {}
    for row in index_rows:
        grouped.setdefault(row[0], []).append(row)
    indexes = []
    for name, rows in grouped.items():
        if any(r[3] is None or int(r[4] or 0) for r in rows):
            untranslated.append(f"index {name}: over an expression or with a WHERE clause")
            continue
        indexes.append(Index(name=name, columns=tuple(r[3] for r in rows), unique=bool(int(rows[0][1]))))
    return replace(
        info, columns=tuple(columns), indexes=tuple(indexes), untranslated=tuple(untranslated),
        foreign_keys=constraints.foreign_keys_from_rows(info.name, fk_rows),
        definition=str(definition[0] or "") if definition else "",
    )  # fmt: skip

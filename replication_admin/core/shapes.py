"""What a copy reads and where it writes: a source's query, its output columns and types, and how they map
onto the destination table (control plane; snapshots and transactional initial copies use it)."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any, cast

from sqlglot import exp, parse_one
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import lookup_table, require_table, with_constraints
from replication_admin.core.transactions import run_with_undo
from replication_admin.engine import dialects
from replication_admin.engine.constraints import copy_table_ddl, restricted
from replication_admin.engine.queries import (
    QueryError,
    check_column_list,
    check_condition,
    check_query,
    sqlglot_dialect,
)
from replication_admin.engine.refresh_sql import Moved, create_table_ddl
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType
from replication_admin.models import Server


def _logical_from_description(desc: tuple[Any, ...]) -> LogicalType:
    _name, kind, _display, size, precision, scale, _null = desc
    if kind is bool:
        return LogicalType("boolean")
    if kind is int:
        return LogicalType("smallint" if (precision or 0) <= 5 else "integer" if (precision or 0) <= 10 else "bigint")
    if kind is decimal.Decimal:
        return LogicalType("numeric", precision=min(precision or 38, 38), scale=scale or 0)
    if kind is float:
        return LogicalType("double")
    if kind is dt.datetime:
        return LogicalType("timestamp")
    if kind is dt.date:
        return LogicalType("date")
    if kind is dt.time:
        return LogicalType("time")
    if kind in (bytes, bytearray):
        return LogicalType("varbinary", length=size) if size and size <= 8000 else LogicalType("long_varbinary")
    if size and 0 < size <= 4000:
        return LogicalType("varchar", length=size)
    return LogicalType("long_varchar")


@dataclass(frozen=True)
class SourceShape:
    """The rows a snapshot reads: SQL in the source dialect and its output columns."""

    server: Server
    sql: str
    output: tuple[tuple[str, LogicalType], ...]
    key: tuple[str, ...]  # output columns that identify a row (the source table's primary key)
    table: TableInfo | None = None  # the single source table, when there is one
    condition_sql: str | None = None  # incremental: the condition with columns qualified by `s`

    def as_table(self, name: str) -> TableInfo:
        """The query's output described as a table (its key as primary key), for comparing."""
        columns = tuple(
            Column(name=n, declared=str(t), logical=t, pk_position=(self.key.index(n) + 1) if n in self.key else 0)
            for n, t in self.output
        )
        return TableInfo(name=name, columns=columns)


_SQLGLOT_TYPE = {
    "long_varchar": "TEXT", "long_nvarchar": "TEXT", "other": "TEXT", "long_varbinary": "BLOB",
    "varbinary": "VARBINARY", "double": "DOUBLE", "real": "FLOAT",
}  # fmt: skip

_FROM_SQLGLOT = {
    "TINYINT": LogicalType("smallint"), "SMALLINT": LogicalType("smallint"), "INT": LogicalType("integer"),
    "BIGINT": LogicalType("bigint"), "DOUBLE": LogicalType("double"), "FLOAT": LogicalType("double"),
    "BOOLEAN": LogicalType("boolean"), "DATE": LogicalType("date"), "DATETIME": LogicalType("timestamp"),
    "TIMESTAMP": LogicalType("timestamp"), "TIME": LogicalType("time"), "TEXT": LogicalType("long_varchar"),
    "BLOB": LogicalType("long_varbinary"), "VARBINARY": LogicalType("long_varbinary"),
}  # fmt: skip


def _sqlglot_type(logical: LogicalType) -> str:
    if logical.kind == "numeric":
        return f"DECIMAL({logical.precision or 38}, {logical.scale or 0})"
    if logical.kind in {"varchar", "nvarchar"}:
        return f"VARCHAR({logical.length})" if logical.length else "TEXT"
    return _SQLGLOT_TYPE.get(logical.kind, logical.kind.upper())


def annotated_types(sql: str, dialect: str, tables: list[TableInfo]) -> dict[str, LogicalType]:
    """Types of a query's output columns inferred from its tables' columns (COUNT -> bigint, SUM of a
    decimal -> decimal ...), for drivers that report expressions only as text (SQLite)."""

    read = sqlglot_dialect(dialect)
    try:
        schema = MappingSchema(
            {t.name: {c.name: _sqlglot_type(c.logical) for c in t.columns} for t in tables}, dialect=read
        )
        tree = cast(  # qualify gives back the SELECT it was given, typed as any expression
            exp.Query,
            annotate_types(
                qualify(parse_one(sql, read=read), schema=schema, dialect=read), schema=schema, dialect=read
            ),
        )
    except Exception:  # inference is a nicety; the driver's description stands in
        return {}
    types: dict[str, LogicalType] = {}
    for projection in tree.selects:
        if projection.type is None:
            continue  # nothing inferred: the driver's description stands
        kind = projection.type.this.name
        if kind == "DECIMAL":
            params = [int(p.name) for p in projection.type.expressions if p.name.isdigit()]
            # Sums outgrow their column's precision: keep the scale, allow 38 digits.
            types[projection.alias_or_name.lower()] = LogicalType(
                "numeric", precision=38, scale=params[1] if len(params) > 1 else 10
            )
        elif kind == "VARCHAR":
            params = [int(p.name) for p in projection.type.expressions if p.name.isdigit()]
            types[projection.alias_or_name.lower()] = (
                LogicalType("varchar", length=params[0]) if params else LogicalType("long_varchar")
            )
        elif kind in _FROM_SQLGLOT:
            types[projection.alias_or_name.lower()] = _FROM_SQLGLOT[kind]
    return types


def describe_query(
    server: Server, sql: str, table: TableInfo | None, inferred: dict[str, LogicalType] | None = None
) -> tuple[tuple[str, LogicalType], ...]:
    with connections.connect(server, readonly=True) as conn:
        cursor = conn.cursor().execute(f"SELECT * FROM ({sql}) q WHERE 1 = 0")
        description = cursor.description
    names = [d[0] for d in description]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ReplicationError(f"the query returns the column name(s) {', '.join(sorted(duplicates))} more than once")
    output = []
    for desc in description:
        column = table.column(desc[0]) if table is not None else None
        if column is not None:
            output.append((desc[0], column.logical))
        elif inferred and desc[0].lower() in inferred and dialects.get(server.dialect).dynamic_types:
            output.append((desc[0], inferred[desc[0].lower()]))
        else:
            output.append((desc[0], _logical_from_description(desc)))
    return tuple(output)


def noninc_shape(source: Server, query: str, servers: frozenset[str]) -> SourceShape:
    try:
        checked = check_query(query, source.dialect, servers)
    except QueryError as exc:
        raise ReplicationError(str(exc)) from None
    if checked.server is not None and checked.server != source.name:
        raise ReplicationError(f"the query reads from {checked.server!r} but runs on {source.name!r}")
    table = require_table(source, checked.tables[0]) if len(checked.tables) == 1 else None
    try:
        inferred = annotated_types(checked.sql, source.dialect, [table] if table is not None else [])
        output = describe_query(source, checked.sql, table, inferred)
    except connections.ConnectionFailed:
        raise
    except Exception as exc:  # the database's own complaint about the query
        raise ReplicationError(f"the query fails on {source.name}: {connections.driver_message(exc)}") from None
    key: tuple[str, ...] = ()
    if table is not None and table.primary_key:
        names = {n.lower(): n for n, _ in output}
        if all(k.name.lower() in names for k in table.primary_key):
            key = tuple(names[k.name.lower()] for k in table.primary_key)
    return SourceShape(server=source, sql=checked.sql, output=output, key=key, table=table)


def inc_shape(source: Server, table: TableInfo, columns: str | None, condition: str | None) -> SourceShape:
    d = dialects.get(source.dialect)
    keys = table.primary_key
    if not keys:
        raise ReplicationError(f"table {table.name!r} has no primary key; an incremental snapshot needs one")
    try:
        chosen = check_column_list(columns, table) if columns else table.columns
        condition_for_select = check_condition(condition, source.dialect, table) if condition else None
        condition_sql = check_condition(condition, source.dialect, table, alias="s") if condition else None
    except QueryError as exc:
        raise ReplicationError(str(exc)) from None
    selected = list(keys) + [c for c in chosen if not c.pk_position]
    sql = f"SELECT {', '.join(d.quote(c.name) for c in selected)} FROM {d.qualify(table.name, table.schema)}"
    if condition_for_select:
        sql += f" WHERE {condition_for_select}"
    return SourceShape(
        server=source,
        sql=sql,
        output=tuple((c.name, c.logical) for c in selected),
        key=tuple(k.name for k in keys),
        table=table,
        condition_sql=condition_sql,
    )


def moved_columns(shape: SourceShape, dest: TableInfo) -> tuple[Moved, ...]:
    """Pair each source output column with its destination column (by name, then case-insensitively)."""
    moved: list[Moved] = []
    keys = [n for n, _ in shape.output if n in shape.key]
    values = [n for n, _ in shape.output if n not in shape.key]
    for alias_prefix, names in (("k", keys), ("v", values)):
        for i, name in enumerate(names):
            column = dest.column(name)
            if column is None:
                raise ReplicationError(f"destination {dest.name!r} has no column {name!r} (the source returns it)")
            moved.append(Moved(alias=f"{alias_prefix}{i}", dest=column.name, source=name, logical=column.logical))
    return tuple(moved)


def destination_ddl(shape: SourceShape, dest_server: Server, table: str) -> tuple[list[str], tuple[str, ...]]:
    """CREATE TABLE (and its indexes) for a missing destination: columns mapped through the type mapping
    table; a single source table's NOT NULLs, defaults, unique constraints and indexes over the columns the
    snapshot takes. Also what of them could not be carried."""

    d = dialects.get(dest_server.dialect)
    schema = connections.table_schema(dest_server)
    try:
        if shape.table is None:
            return [create_table_ddl(d, table, schema, shape.output, shape.key)], ()
    except ValueError as exc:  # a key the destination cannot hold in any form
        raise ReplicationError(f"cannot create {table!r} on {dest_server.name}: {exc}") from None
    source = with_constraints(shape.server, shape.table)
    columns = []
    for name, logical in shape.output:
        column = source.column(name)
        pk_position = shape.key.index(name) + 1 if name in shape.key else 0
        if column is None:
            columns.append(Column(name=name, declared=str(logical), logical=logical, pk_position=pk_position))
        else:
            columns.append(replace(column, name=name, logical=logical, pk_position=pk_position))
    kept = restricted(replace(source, columns=tuple(columns)), [n for n, _ in shape.output])
    try:
        return copy_table_ddl(d, table, schema, kept), source.untranslated
    except ValueError as exc:
        raise ReplicationError(f"cannot create {table!r} on {dest_server.name}: {exc}") from None


def check_destination(shape: SourceShape, dest: TableInfo) -> None:
    """An existing destination must hold every column the source returns (and more than the key)."""
    moved_columns(shape, dest)
    if len(dest.columns) <= len(shape.key):
        raise ReplicationError(
            f"destination {dest.name!r} has {len(dest.columns)} column(s); it needs more than the "
            f"{len(shape.key)} primary key part(s) of the source"
        )


def ensure_copy(
    server: Server,
    name: str,
    source: TableInfo,
    optional: Collection[str] = (),
    log: Callable[[str], None] | None = None,
) -> TableInfo:
    """A subscriber's copy of `source` on `server`: created with the source's columns, primary key, NOT
    NULLs, defaults and indexes when missing (what could not be carried is told to `log`); when present, it
    must have every column of the source (but the `optional` ones, which the replication adds itself) and
    the same primary key, or nothing is replicated into it."""
    existing = lookup_table(server, name)
    if existing is None:
        d = dialects.get(server.dialect)
        try:
            ddl = copy_table_ddl(d, name, connections.table_schema(server), source)
        except ValueError as exc:
            raise ReplicationError(f"cannot create {name!r} on {server.name}: {exc}") from None
        run_with_undo(server, ddl, [f"DROP TABLE IF EXISTS {d.qualify(name, connections.table_schema(server))}"])
        if log is not None:
            for item in source.untranslated:
                log(f"{server.name}.{name}: not copied: {item}")
        created = lookup_table(server, name)
        assert created is not None
        return created
    missing = [c.name for c in source.columns if existing.column(c.name) is None and c.name not in optional]
    if missing:
        raise ReplicationError(
            f"{server.name}.{existing.name} exists but lacks the publisher's column(s) {', '.join(missing)}"
        )
    if [k.name.lower() for k in existing.primary_key] != [k.name.lower() for k in source.primary_key]:
        raise ReplicationError(f"{server.name}.{existing.name} exists with another primary key than the publisher's")
    return existing

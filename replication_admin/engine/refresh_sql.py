"""SQL for refreshing snapshots (pure): what Spark reads, the staging tables it writes, and the one
destination transaction that applies a staging table and records the replay log.

Every column crosses Spark under a safe alias (k0.. keys, v0.. values), so hostile names never reach
Spark's own quoting. The destination is only ever changed by the statements built here, each batch
in one transaction together with its RPLOG rows, so a re-run after any failure applies nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from replication_admin.engine.compare import family_of, read_type
from replication_admin.engine.dialects import Dialect
from replication_admin.engine.schema import TableInfo
from replication_admin.engine.snapshot_log import (
    DMLTYPE,
    ROWGUID,
    TIMESTAMP,
    bounded_name,
    rlog_key,
    rlog_name,
)
from replication_admin.engine.types import LogicalType

OP = LogicalType("varchar", length=1)
BATCH = LogicalType("integer")


@dataclass(frozen=True)
class Moved:
    """One destination column and where its values come from."""

    alias: str  # k0.. / v0..
    dest: str  # destination column name
    source: str  # source column (or query output) name
    logical: LogicalType  # the destination's logical type

    @property
    def is_key(self) -> bool:
        return self.alias.startswith("k")


def timestamp_text(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def timestamp_literal(d: Dialect, value: datetime) -> str:
    return d.timestamp_literal(timestamp_text(value))


def staging_name(d: Dialect, dest_table: str, kind: str = "RSTG") -> str:
    """A per-destination work table: RSTG_ (staging), RSWP_ (the old copy during a swap)."""
    return bounded_name(f"{kind}_{dest_table}", d.max_identifier)


def noninc_select(d: Dialect, query_sql: str, moved: Sequence[Moved]) -> str:
    items = ", ".join(f"q.{d.quote(m.source)} AS {m.alias}" for m in moved)
    return f"SELECT {items} FROM ({query_sql}) q"


def custom_schema(d: Dialect, moved: Sequence[Moved], source_types: dict[str, LogicalType]) -> str:
    """JDBC customSchema: each alias read with the Spark type of its source column's family."""
    return ", ".join(f"{m.alias} {read_type(d, source_types[m.source])}" for m in moved)


def log_window_select(
    d: Dialect, source: TableInfo, moved: Sequence[Moved], condition_sql: str | None, since: datetime
) -> str:
    """The log rows of the window joined to the current source rows (Virtuoso re-reads the row)."""
    keys = [m for m in moved if m.is_key]
    values = [m for m in moved if not m.is_key]
    src = d.qualify(source.name, source.schema)
    rlog = d.qualify(rlog_name(source.name), source.schema)
    join = " AND ".join(f"s.{d.quote(k.source)} = r.{d.quote(rlog_key(k.source))}" for k in keys)
    present = f"CASE WHEN s.{d.quote(keys[0].source)} IS NULL THEN 0"
    present += f" WHEN ({condition_sql}) THEN 1 ELSE 0 END" if condition_sql else " ELSE 1 END"
    items = [f"r.{d.quote(rlog_key(k.source))} AS {k.alias}" for k in keys]
    items += [f"s.{d.quote(v.source)} AS {v.alias}" for v in values]
    items += [
        f"r.{d.quote('SNAPTIME')} AS snaptime",
        f"r.{d.quote('DMLTYPE')} AS dmltype",
        f"r.{d.quote('RLOG_ROWGUID')} AS rowguid",
        f"{present} AS present",
    ]
    return (
        f"SELECT {', '.join(items)} FROM {rlog} r LEFT JOIN {src} s ON {join} "
        f"WHERE r.{d.quote('SNAPTIME')} >= {timestamp_literal(d, since)}"
    )


def log_window_schema(d: Dialect, moved: Sequence[Moved], source: TableInfo) -> str:
    parts = []
    for m in moved:
        column = source.column(m.source)
        assert column is not None
        parts.append(f"{m.alias} {read_type(d, column.logical)}")
    parts += [f"snaptime {d.snaptime_read_type}", "dmltype STRING", "rowguid STRING", "present INT"]
    return ", ".join(parts)


def max_snaptime_select(d: Dialect, source: TableInfo) -> str:
    return f"SELECT MAX({d.quote('SNAPTIME')}) AS snaptime FROM {d.qualify(rlog_name(source.name), source.schema)}"


def rplog_select(d: Dialect, rplog: str, schema: str, target: str, since: datetime) -> str:
    return (
        f"SELECT {d.quote('RLOG_ROWGUID')} AS rowguid FROM {d.qualify(rplog, schema)} "
        f"WHERE {d.quote('TARGET')} = {d.literal(target)} AND {d.quote('SNAPTIME')} >= {timestamp_literal(d, since)}"
    )


def increment_staging_ddl(d: Dialect, name: str, schema: str, moved: Sequence[Moved]) -> str:
    cols = [f"op {d.render_type(OP)} NOT NULL", f"batch {d.render_type(BATCH)} NOT NULL"]
    cols += [f"{m.alias} {d.render_type(m.logical)}" for m in moved]
    cols += [f"rowguid {d.render_type(ROWGUID)} NOT NULL", f"snaptime {d.render_type(TIMESTAMP)} NOT NULL"]
    return f"CREATE TABLE {d.qualify(name, schema)} ({', '.join(cols)})"


def apply_increment_sql(
    d: Dialect,
    dest: str,
    schema: str,
    staging: str,
    rplog: str | None,
    target: str,
    moved: Sequence[Moved],
    batch: int,
) -> list[str]:
    """One batch: delete every staged key, insert the rows still present, record the replayed log rows.

    Delete-then-insert makes an insert of an existing row an update and an update of a missing row an
    insert, as the reference asks; the RPLOG rows commit in the same transaction (`rplog` None: a
    repair, which replays no log rows)."""
    keys = [m for m in moved if m.is_key]
    dst = d.qualify(dest, schema)
    stg = d.qualify(staging, schema)
    rpl = d.qualify(rplog or "", schema) if rplog else ""
    on = " AND ".join(f"t.{d.quote(k.dest)} = s.{k.alias}" for k in keys)
    left = ", ".join(d.quote(k.dest) for k in keys)
    right = ", ".join(k.alias for k in keys)
    delete = d.delete_joined_sql(
        dst, stg, on, f"s.batch = {batch}", left, right, f"batch = {batch}", condition_first=True
    )
    columns = ", ".join(d.quote(m.dest) for m in moved)
    aliases = ", ".join(m.alias for m in moved)
    insert = f"INSERT INTO {dst} ({columns}) SELECT {aliases} FROM {stg} WHERE batch = {batch} AND op = 'U'"
    rp_cols = f"{d.quote('TARGET')}, {d.quote('RLOG_ROWGUID')}, {d.quote('SNAPTIME')}"
    rp_select = f"SELECT {d.literal(target)}, rowguid, snaptime FROM {stg} WHERE batch = {batch}"
    if rplog is None:
        return [delete, insert]
    return [delete, insert, d.insert_ignore_sql(rpl, f"({rp_cols}) {rp_select}")]


def create_table_ddl(
    d: Dialect, name: str, schema: str, columns: Sequence[tuple[str, LogicalType]], key: Sequence[str]
) -> str:
    key_types = dict(zip(key, d.render_key_types([t for c, t in columns if c in key]), strict=True))
    cols = [
        f"{d.quote(c)} {key_types[c]} NOT NULL" if c in key else f"{d.quote(c)} {d.render_type(t)}" for c, t in columns
    ]
    if key:
        types = dict(columns)
        cols += d.key_constraints_sql([(d.quote(k), types[k]) for k in key])
    return f"CREATE TABLE {d.qualify(name, schema)} ({', '.join(cols)}){d.create_table_options}"


def swap_sql(d: Dialect, dest: str, schema: str, staging: str, old: str) -> list[str]:
    """Put the filled staging table in the destination's place (readers see old or new, never a mix)."""
    return d.swap_tables_sql(dest, schema, staging, old)


def replace_content_sql(
    d: Dialect, dest: str, schema: str, staging: str, moved: Sequence[Moved], staging_columns: Sequence[str]
) -> list[str]:
    """The slower way for destinations a swap would break (triggers, foreign keys, views)."""
    columns = ", ".join(d.quote(m.dest) for m in moved)
    sources = ", ".join(d.quote(c) for c in staging_columns)
    return [
        f"DELETE FROM {d.qualify(dest, schema)}",
        f"INSERT INTO {d.qualify(dest, schema)} ({columns}) SELECT {sources} FROM {d.qualify(staging, schema)}",
    ]


def structural_copy_sql(d: Dialect, dest: str, schema: str, staging: str) -> str | None:
    """A staging table shaped exactly like the destination (None: build it from introspection)."""
    return d.copy_structure_sql(dest, schema, staging)


def dependents_sql(d: Dialect, table: str, schema: str) -> tuple[str, list[str]]:
    """Count of objects a rename swap would break: triggers, incoming foreign keys, views."""
    return d.dependents_sql(table, schema)


__all__ = [
    "DMLTYPE",
    "OP",
    "ROWGUID",
    "TIMESTAMP",
    "Moved",
    "apply_increment_sql",
    "create_table_ddl",
    "custom_schema",
    "dependents_sql",
    "increment_staging_ddl",
    "log_window_schema",
    "log_window_select",
    "max_snaptime_select",
    "noninc_select",
    "replace_content_sql",
    "rplog_select",
    "staging_name",
    "swap_sql",
    "timestamp_literal",
    "timestamp_text",
]


def log_guids_select(d: Dialect, source: TableInfo, since: datetime) -> str:
    """The ids of log rows of the window: a full refresh reflects them, so it lists them as replayed."""
    return (
        f"SELECT {d.quote('RLOG_ROWGUID')} AS rowguid, {d.quote('SNAPTIME')} AS snaptime "
        f"FROM {d.qualify(rlog_name(source.name), source.schema)} "
        f"WHERE {d.quote('SNAPTIME')} >= {timestamp_literal(d, since)}"
    )


def guid_staging_ddl(d: Dialect, name: str, schema: str) -> str:
    return (
        f"CREATE TABLE {d.qualify(name, schema)} (rowguid {d.render_type(ROWGUID)} NOT NULL, "
        f"snaptime {d.render_type(TIMESTAMP)} NOT NULL)"
    )


def prefill_rplog_sql(d: Dialect, rplog: str, schema: str, staging: str, target: str) -> str:
    columns = f"{d.quote('TARGET')}, {d.quote('RLOG_ROWGUID')}, {d.quote('SNAPTIME')}"
    select = f"SELECT {d.literal(target)}, rowguid, snaptime FROM {d.qualify(staging, schema)}"
    return d.insert_ignore_sql(d.qualify_plain(rplog, schema), f"({columns}) {select}")


# --- small increments, applied by the control plane ---------------------------------------------------------

MAX_PARAMETERS = 30_000  # below SQLite's 32,766 and the ODBC drivers' limits


def rows_per_statement(width: int) -> int:
    return max(1, min(1000, MAX_PARAMETERS // max(width, 1)))


def delete_keys_sql(d: Dialect, dest: str, schema: str, keys: Sequence[str], rows: int) -> str:
    if len(keys) == 1:
        # A plain IN list: every dialect turns it into key lookups (MariaDB may scan for a row IN).
        return f"DELETE FROM {d.qualify(dest, schema)} WHERE {d.quote(keys[0])} IN ({', '.join(['?'] * rows)})"
    placeholder = "(" + ", ".join("?" for _ in keys) + ")"
    columns = ", ".join(d.quote(k) for k in keys)
    return f"DELETE FROM {d.qualify(dest, schema)} WHERE ({columns}) IN ({', '.join([placeholder] * rows)})"


def insert_rows_sql(d: Dialect, dest: str, schema: str, columns: Sequence[str], rows: int) -> str:
    placeholder = "(" + ", ".join("?" for _ in columns) + ")"
    names = ", ".join(d.quote(c) for c in columns)
    return f"INSERT INTO {d.qualify(dest, schema)} ({names}) VALUES {', '.join([placeholder] * rows)}"


def insert_rplog_sql(d: Dialect, rplog: str, schema: str, rows: int) -> str:
    columns = f"{d.quote('TARGET')}, {d.quote('RLOG_ROWGUID')}, {d.quote('SNAPTIME')}"
    values = ", ".join(["(?, ?, ?)"] * rows)
    return d.insert_ignore_sql(d.qualify_plain(rplog, schema), f"({columns}) VALUES {values}")


def window_count_sql(d: Dialect, source: TableInfo, since: datetime) -> str:
    return (
        f"SELECT COUNT(*) FROM {d.qualify(rlog_name(source.name), source.schema)} "
        f"WHERE {d.quote('SNAPTIME')} >= {timestamp_literal(d, since)}"
    )


def log_rows_select(d: Dialect, source: TableInfo, keys: Sequence[Moved], since: datetime) -> str:
    """The log rows of the window alone (keys, SNAPTIME, DMLTYPE, RLOG_ROWGUID), without the source."""
    items = [d.quote(rlog_key(k.source)) for k in keys] + [d.quote(c) for c in ("SNAPTIME", "DMLTYPE", "RLOG_ROWGUID")]
    return (
        f"SELECT {', '.join(items)} FROM {d.qualify(rlog_name(source.name), source.schema)} "
        f"WHERE {d.quote('SNAPTIME')} >= {timestamp_literal(d, since)}"
    )


def source_rows_select(
    d: Dialect, source: TableInfo, moved: Sequence[Moved], condition_sql: str | None, rows: int
) -> str:
    """The current source rows of `rows` keys (bound as parameters), and whether each still matches."""
    keys = [m for m in moved if m.is_key]
    items = []
    for m in moved:
        column = source.column(m.source)
        items.append(d.read_value_sql(f"s.{d.quote(m.source)}", family_of((column or m).logical)))
    items.append(f"CASE WHEN ({condition_sql}) THEN 1 ELSE 0 END" if condition_sql else "1")
    if len(keys) == 1:
        where = f"s.{d.quote(keys[0].source)} IN ({', '.join(['?'] * rows)})"
    else:
        tuple_ = "(" + ", ".join("?" for _ in keys) + ")"
        where = f"({', '.join(f's.{d.quote(k.source)}' for k in keys)}) IN ({', '.join([tuple_] * rows)})"
    return f"SELECT {', '.join(items)} FROM {d.qualify(source.name, source.schema)} s WHERE {where}"

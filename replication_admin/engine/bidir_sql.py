"""Bi-directional snapshot replication (pure SQL generation; no I/O here).

Objects, as in "Objects created by bi-directional snapshot replication":

- a `ROWGUID` column on the published table and on every subscriber's copy. Its value is
  `<origin>@<uuid>`: the server that made the row's current version, and a fresh id. A BEFORE trigger
  (PostgreSQL, MariaDB) or an AFTER trigger that rewrites the row (SQLite) gives every insert without a
  ROWGUID, and every update that leaves it unchanged, a new `<this server>@<uuid>`. Replication writes
  rows with the ROWGUID of the version it replays, so the version keeps its origin across servers.
- an updateable snapshot log `RLOG_<table>`: the key columns, SNAPTIME, DMLTYPE, RLOG_ROWGUID (the
  change's id: the new ROWGUID, or a fresh `<origin>@<uuid>` for a delete) and OLD_ROWGUID (the version
  the change was made on).
- a replay log `RPLOG_<publisher>_<table>` with SOURCE and TARGET on every node: which changes of which
  source have been applied here, written in the same transaction as the changes.

The triggers differ by role. The publisher logs every change, whoever made it, because it fans each
change out to the other subscribers (PUSH skips the change's origin, so nothing echoes back). A
subscriber logs only its own changes: its log holds exactly what it has not yet sent, until a sync
consumes it. Consecutive local changes of one row keep the first OLD_ROWGUID (the version the
publisher knows) and merge their types (insert + update stays an insert, delete + insert of a row
the publisher had is an update), so conflict detection compares with what the publisher really has.

Deletes that replication replays are done in two steps: the row's ROWGUID is first set to
`del:<change id>`, then the row is deleted. The update step is never logged; the delete is logged by
the publisher under the change id (keeping its origin) and not at all by a subscriber.

The reference assumes primary keys of published tables never change; the triggers enforce it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from replication_admin.engine.dialects import Dialect, EmptyTable
from replication_admin.engine.objects import (
    DELETE_MARK,
    DMLTYPE,
    OLD_ROWGUID,
    ROWGUID,
    SnapshotLogObjects,
    bounded_name,
    key_columns,
    new_guid_sql,
    rlog_key,
    rlog_name,
    rplog_name,
)
from replication_admin.engine.objects import ROWGUID_COLUMN as ROWGUID_COLUMN  # re-exported
from replication_admin.engine.objects import TIMESTAMP as TIMESTAMP  # re-exported
from replication_admin.engine.objects import BidirError as BidirError  # re-exported
from replication_admin.engine.refresh_sql import Moved, timestamp_literal
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

SERVER_NAME = LogicalType("varchar", length=128)
ACTION = LogicalType("varchar", length=1)
FLAG = LogicalType("integer")
ROWNUM = LogicalType("bigint")


def origin_of(guid: str | None) -> str | None:
    """The server a ROWGUID or change id names as its origin."""
    if not guid:
        return None
    if guid.startswith(DELETE_MARK):
        guid = guid[len(DELETE_MARK) :]
    origin, sep, _ = guid.rpartition("@")
    return origin if sep else None


def replay_log_name(publisher: str, table: str, limit: int = 63) -> str:
    return rplog_name(publisher, table, limit)


def check_rowguid(table: TableInfo) -> Column | None:
    """The table's ROWGUID column, if it has one (refusing one that cannot hold `<origin>@<uuid>`)."""
    column = table.column(ROWGUID_COLUMN)
    if column is None:
        return None
    if column.pk_position:
        raise BidirError(f"{table.name}.{column.name} is part of the primary key; ROWGUID must be a plain column")
    if column.logical.kind not in {"varchar", "nvarchar", "long_varchar", "long_nvarchar", "other"}:
        raise BidirError(f"{table.name}.{column.name} is {column.declared}; ROWGUID must be a character column")
    return column


def add_rowguid_ddl(d: Dialect, table: TableInfo) -> str:
    column = f"{d.quote(ROWGUID_COLUMN)} {d.render_type(ROWGUID)}"
    return d.add_column_sql(d.qualify(table.name, table.schema), column)


def fill_rowguid_sql(d: Dialect, table: TableInfo, origin: str) -> str:
    """Give every row without a ROWGUID one of this server's (done before the triggers exist)."""
    guid = d.quote(ROWGUID_COLUMN)
    return f"UPDATE {d.qualify(table.name, table.schema)} SET {guid} = {new_guid_sql(d, origin)} WHERE {guid} IS NULL"


def key_types(d: Dialect, layout: Layout) -> list[str]:
    return d.render_key_types([k.logical for k in layout.keys])


def updateable_rlog_ddl(d: Dialect, table: TableInfo) -> list[str]:
    keys = key_columns(table)
    name = rlog_name(table.name)
    if len(name) > d.max_identifier:
        raise BidirError(f"snapshot log table {name!r} would be longer than {d.label}'s limit")
    types = d.render_key_types([k.logical for k in keys])
    cols = [f"{d.quote(rlog_key(k.name))} {t} NOT NULL" for k, t in zip(keys, types, strict=True)]
    cols += [
        f"{d.quote('SNAPTIME')} {d.render_type(TIMESTAMP)} NOT NULL",
        f"{d.quote('DMLTYPE')} {d.render_type(DMLTYPE)} NOT NULL",
        f"{d.quote('RLOG_ROWGUID')} {d.render_type(ROWGUID)} NOT NULL",
        f"{d.quote(OLD_ROWGUID)} {d.render_type(ROWGUID)}",
        *d.key_constraints_sql([(d.quote(rlog_key(k.name)), k.logical) for k in keys]),
    ]
    qualified = d.qualify(name, table.schema)
    index = d.quote(bounded_name(name + "_SNAPTIME", d.max_identifier))
    return [
        f"CREATE TABLE {qualified} ({', '.join(cols)})",
        f"CREATE INDEX {index} ON {qualified} ({d.quote('SNAPTIME')})",
    ]


def trigger_names(d: Dialect, table: str) -> dict[str, str]:
    suffix = d.bidir_trigger_suffix
    names = {op: f"{table}_{op}{suffix}" for op in ("I", "U", "D")}
    for op in d.bidir_guid_triggers:
        names[op] = f"{table}_{op}{suffix}"
    for name in names.values():
        if len(name) > d.max_identifier:
            raise BidirError(f"trigger {name!r} would be longer than {d.label}'s {d.max_identifier}-character limit")
    return names


def _is_local(d: Dialect, expr: str, local: str) -> str:
    return d.has_prefix_sql(expr, local + "@")


def _is_mark(d: Dialect, expr: str) -> str:
    return d.has_prefix_sql(expr, DELETE_MARK)


def _unmark(d: Dialect, expr: str) -> str:
    return d.substring_from_sql(expr, len(DELETE_MARK) + 1)


@dataclass(frozen=True)
class UpdateableLog:
    """How a trigger writes a row into the updateable log (the dialects' bidir_triggers use it)."""

    d: Dialect
    table: TableInfo
    publisher: bool

    @property
    def rlog(self) -> str:
        return self.d.qualify(rlog_name(self.table.name), self.table.schema)

    def columns(self) -> str:
        d = self.d
        names = [*(rlog_key(k.name) for k in key_columns(self.table)), "SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"]
        return ", ".join(d.quote(n) for n in [*names, OLD_ROWGUID])

    def now(self) -> str:
        return self.d.log_now_sql

    def values(self, ref: str, op: str, guid: str, old: str) -> str:
        keys = [f"{ref}.{self.d.quote(k.name)}" for k in key_columns(self.table)]
        return ", ".join([*keys, self.now(), op, guid, old])

    def is_mark(self, expr: str) -> str:
        """True when the ROWGUID `expr` marks a row that replication is deleting."""
        return _is_mark(self.d, expr)

    def unmark(self, expr: str) -> str:
        """The change id in a delete mark."""
        return _unmark(self.d, expr)

    def merged_sets(self, ex: Callable[[str], str], cur: Callable[[str], str]) -> list[str]:
        """The assignments a second change of a key makes to its log row: `ex(column)` is the new change's
        value, `cur(column)` the log row's (both take a bare name)."""
        q = self.d.quote
        if self.publisher:
            merged_type = ex("DMLTYPE")
            keep_old = [f"{q(OLD_ROWGUID)} = {ex(OLD_ROWGUID)}"]
        else:
            merged_type = (
                f"CASE WHEN {cur('DMLTYPE')} = 'I' AND {ex('DMLTYPE')} = 'U' THEN 'I' "
                f"WHEN {cur('DMLTYPE')} = 'D' AND {ex('DMLTYPE')} = 'I' "
                f"THEN CASE WHEN {cur(OLD_ROWGUID)} IS NULL THEN 'I' ELSE 'U' END "
                f"ELSE {ex('DMLTYPE')} END"
            )
            keep_old = []  # the first change's OLD_ROWGUID is the version the publisher has
        # MariaDB evaluates assignments left to right: DMLTYPE first, while the old values are intact.
        sets = [f"{q('DMLTYPE')} = {merged_type}", f"{q('SNAPTIME')} = {ex('SNAPTIME')}"]
        return [*sets, f"{q('RLOG_ROWGUID')} = {ex('RLOG_ROWGUID')}", *keep_old]

    def on_conflict(self) -> str:
        """What a second change of a key does to its log row."""
        d = self.d
        q = d.quote
        sets = self.merged_sets(lambda c: d.excluded_sql(q(c)), lambda c: d.conflict_current_sql(self.rlog, q(c)))
        conflict = ", ".join(q(rlog_key(k.name)) for k in key_columns(self.table))
        return d.on_conflict_update_sql(conflict, sets)

    def merge(self, values: Sequence[str], source: str) -> str:
        """A MERGE of log rows into the log, for dialects without an upsert (SQL Server, Oracle, DB2): `values`
        are the keys, SNAPTIME, DMLTYPE, RLOG_ROWGUID and OLD_ROWGUID of each row, selected `source` (the
        FROM / WHERE of the select, empty for one row where the dialect needs no FROM)."""
        q = self.d.quote
        keys = [rlog_key(k.name) for k in key_columns(self.table)]
        names = [*keys, "SNAPTIME", "DMLTYPE", "RLOG_ROWGUID", OLD_ROWGUID]
        picks = ", ".join(f"{v} AS {q(n)}" for v, n in zip(values, names, strict=True))
        on = " AND ".join(f"r.{q(k)} = x.{q(k)}" for k in keys)
        sets = self.merged_sets(lambda c: f"x.{q(c)}", lambda c: f"r.{q(c)}")
        row = ", ".join(f"x.{q(n)}" for n in names)
        return (
            f"MERGE INTO {self.rlog} r USING (SELECT {picks}{source}) x ON ({on}) "
            f"WHEN MATCHED THEN UPDATE SET {', '.join(sets)} "
            f"WHEN NOT MATCHED THEN INSERT ({self.columns()}) VALUES ({row});"
        )

    def upsert(self, ref: str, op: str, guid: str, old: str) -> str:
        values = self.values(ref, f"'{op}'", guid, old)
        row = self.d.upsert_row_source(values)
        return f"INSERT INTO {self.rlog} ({self.columns()}) {row} {self.on_conflict()};"


def bidir_objects(d: Dialect, table: TableInfo, local: str, publisher: bool) -> SnapshotLogObjects:
    """The updateable snapshot log and triggers of `table` on server `local` (publisher or subscriber).

    `table` must already have its ROWGUID column."""
    key_columns(table)
    if check_rowguid(table) is None:
        raise BidirError(f"{table.name} has no {ROWGUID_COLUMN} column yet")
    if not d.supports_bidir:
        raise BidirError(f"bi-directional replication runs on SQLite, PostgreSQL and MariaDB, not {d.label}")
    trigger_map = trigger_names(d, table.name)
    create, drop = d.bidir_triggers(table, trigger_map, UpdateableLog(d, table, publisher), local, publisher)
    names = tuple(trigger_map.values())
    drop.append(f"DROP TABLE IF EXISTS {d.qualify(rlog_name(table.name), table.schema)}")
    functions = names if d.trigger_functions else ()
    return SnapshotLogObjects(
        rlog_name(table.name),
        names,
        functions=functions,
        create=tuple(updateable_rlog_ddl(d, table) + create),
        drop=tuple(drop),
    )


def bidir_rplog_ddl(d: Dialect, name: str, schema: str = "", if_not_exists: bool = True) -> str:
    """The bi-directional replay log: which change (RLOG_ROWGUID) of which SOURCE was applied to TARGET."""
    q = d.quote
    cols = [
        f"{q('SOURCE')} {d.render_type(SERVER_NAME)} NOT NULL",
        f"{q('TARGET')} {d.render_type(SERVER_NAME)} NOT NULL",
        f"{q('RLOG_ROWGUID')} {d.render_type(ROWGUID)} NOT NULL",
        f"{q('SNAPTIME')} {d.render_type(TIMESTAMP)} NOT NULL",
        f"PRIMARY KEY ({q('SOURCE')}, {q('TARGET')}, {q('RLOG_ROWGUID')})",
    ]
    create = "CREATE TABLE IF NOT EXISTS" if if_not_exists else "CREATE TABLE"
    return f"{create} {d.qualify(name, schema)} ({', '.join(cols)})"


def bidir_script(
    d: Dialect, table: TableInfo, local: str, publisher: str, is_publisher: bool = False
) -> SnapshotLogObjects:
    """Everything a server of dialect `d` the console does not reach (SQL Server, Oracle, DB2) runs by hand to
    take part, as `local`, in the bi-directional publication of `table` by `publisher`: the ROWGUID column and its
    values for the rows already there (when the table has none yet), the updateable snapshot log with its
    triggers, and the replay log. The same objects the console creates on the servers it reaches."""
    if not (d.supports_bidir or d.bidir_text):
        raise BidirError(f"the reference lists no bi-directional triggers for {d.label}")
    has_guid = check_rowguid(table) is not None
    guided = table_with_rowguid(table)
    key_columns(guided)
    trigger_map = trigger_names(d, table.name)
    create, drop = d.bidir_triggers(guided, trigger_map, UpdateableLog(d, guided, is_publisher), local, is_publisher)
    rplog = replay_log_name(publisher, table.name, d.max_identifier)
    head = [] if has_guid else [add_rowguid_ddl(d, table), fill_rowguid_sql(d, table, local)]
    rlog = d.qualify(rlog_name(table.name), table.schema)
    functions = d.bidir_functions or (tuple(trigger_map.values()) if d.trigger_functions else ())
    return SnapshotLogObjects(
        rlog_name(table.name),
        tuple(trigger_map.values()),
        functions=functions,
        create=(
            *head, *d.bidir_setup_sql, *updateable_rlog_ddl(d, guided), *create,
            bidir_rplog_ddl(d, rplog, table.schema, if_not_exists=d.live),
        ),
        drop=(*drop, f"DROP TABLE {rlog}", f"DROP TABLE {d.qualify(rplog, table.schema)}"),
    )  # fmt: skip


# --- the rows that move ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The published table's columns under safe aliases: k0.. keys, v0.. the others (ROWGUID among them)."""

    keys: tuple[Moved, ...]
    values: tuple[Moved, ...]

    @classmethod
    def of(cls, table: TableInfo) -> Layout:
        keys = tuple(Moved(f"k{i}", c.name, c.name, c.logical) for i, c in enumerate(key_columns(table)))
        values = tuple(Moved(f"v{i}", c.name, c.name, c.logical) for i, c in enumerate(table.non_key_columns))
        return cls(keys, values)

    @property
    def moved(self) -> tuple[Moved, ...]:
        return self.keys + self.values

    @property
    def guid(self) -> Moved:
        return next(m for m in self.values if m.dest.upper() == ROWGUID_COLUMN)

    def renamed(self, table: TableInfo) -> Layout:
        """The same aliases over another server's copy (column names as that server spells them)."""

        def real(m: Moved) -> Moved:
            column = table.column(m.dest)
            if column is None:
                raise BidirError(f"{table.name} has no column {m.dest!r}")
            return Moved(m.alias, column.name, column.name, column.logical)

        return Layout(tuple(real(m) for m in self.keys), tuple(real(m) for m in self.values))


def _sel(d: Dialect, ref: str, m: Moved) -> str:
    return f"{ref}.{d.quote(m.dest)} AS {m.alias}"


def changes_select(d: Dialect, table: TableInfo, layout: Layout, where: str) -> str:
    """Log rows joined to the current rows: keys, op, change id, OLD_ROWGUID, SNAPTIME, present, values."""
    src = d.qualify(table.name, table.schema)
    rlog = d.qualify(rlog_name(table.name), table.schema)
    join = " AND ".join(f"t.{d.quote(k.dest)} = r.{d.quote(rlog_key(k.dest))}" for k in layout.keys)
    items = [f"r.{d.quote(rlog_key(k.dest))} AS {k.alias}" for k in layout.keys]
    items += [
        f"r.{d.quote('DMLTYPE')} AS op",
        f"r.{d.quote('RLOG_ROWGUID')} AS change_id",
        f"r.{d.quote(OLD_ROWGUID)} AS old_guid",
        f"r.{d.quote('SNAPTIME')} AS snaptime",
        f"CASE WHEN t.{d.quote(layout.keys[0].dest)} IS NULL THEN 0 ELSE 1 END AS present",
    ]
    items += [_sel(d, "t", v) for v in layout.values]
    return f"SELECT {', '.join(items)} FROM {rlog} r LEFT JOIN {src} t ON {join} WHERE {where}"


def pull_select(d: Dialect, table: TableInfo, layout: Layout, subscriber: str) -> str:
    """A subscriber's pending changes (its log holds only its own, but say so anyway)."""
    return changes_select(d, table, layout, _is_local(d, f"r.{d.quote('RLOG_ROWGUID')}", subscriber))


def push_select(d: Dialect, table: TableInfo, layout: Layout, subscriber: str, since: datetime) -> str:
    """The publisher's changes of the window that did not come from `subscriber`."""
    where = (
        f"r.{d.quote('SNAPTIME')} >= {timestamp_literal(d, since)} "
        f"AND NOT ({_is_local(d, 'r.' + d.quote('RLOG_ROWGUID'), subscriber)})"
    )
    return changes_select(d, table, layout, where)


def push_window_ids_sql(d: Dialect, table: TableInfo, subscriber: str, since: datetime) -> str:
    """The change ids PUSH would read for `subscriber` (to skip Spark when all are already applied)."""
    rlog = d.qualify(rlog_name(table.name), table.schema)
    guid = d.quote("RLOG_ROWGUID")
    return (
        f"SELECT r.{guid} FROM {rlog} r WHERE r.{d.quote('SNAPTIME')} >= {timestamp_literal(d, since)} "
        f"AND NOT ({_is_local(d, 'r.' + guid, subscriber)})"
    )


def log_backlog_sql(d: Dialect, table: str, schema: str, since: datetime | None, not_from: str = "") -> str:
    """How many rows of a table's RLOG_ log (a snapshot log, or a bi-directional one) are newer than `since` (all
    rows without it), leaving out the changes that came from `not_from` (they are not sent back there), and the
    oldest one's SNAPTIME: both on the SNAPTIME index."""
    snaptime, guid = d.quote("SNAPTIME"), d.quote("RLOG_ROWGUID")
    where = [f"{snaptime} > {timestamp_literal(d, since)}"] if since is not None else []
    if not_from:
        where.append(f"NOT ({_is_local(d, guid, not_from)})")
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT COUNT(*), MIN({snaptime}) FROM {d.qualify(rlog_name(table), schema)}{condition}"


def log_count_sql(d: Dialect, table: TableInfo) -> str:
    return f"SELECT COUNT(*) FROM {d.qualify(rlog_name(table.name), table.schema)}"


def changes_schema(d: Dialect, layout: Layout, read_types: dict[str, str]) -> str:
    parts = [f"{k.alias} {read_types[k.alias]}" for k in layout.keys]
    parts += ["op STRING", "change_id STRING", "old_guid STRING", f"snaptime {d.snaptime_read_type}", "present INT"]
    parts += [f"{v.alias} {read_types[v.alias]}" for v in layout.values]
    return ", ".join(parts)


def rplog_guids_select(
    d: Dialect, rplog: str, schema: str, source: str, target: str, since: datetime | None = None
) -> str:
    q = d.quote
    window = f" AND {q('SNAPTIME')} >= {timestamp_literal(d, since)}" if since is not None else ""
    return (
        f"SELECT {q('RLOG_ROWGUID')} AS change_id FROM {d.qualify(rplog, schema)} "
        f"WHERE {q('SOURCE')} = {d.literal(source)} AND {q('TARGET')} = {d.literal(target)}{window}"
    )


def rplog_listed_sql(d: Dialect, rplog: str, schema: str, source: str, target: str, rows: int) -> str:
    """Which of these change ids (parameters) the replay log lists as applied to `target`."""
    q = d.quote
    return (
        f"SELECT {q('RLOG_ROWGUID')} FROM {d.qualify(rplog, schema)} WHERE {q('SOURCE')} = {d.literal(source)} "
        f"AND {q('TARGET')} = {d.literal(target)} AND {q('RLOG_ROWGUID')} IN ({', '.join(['?'] * rows)})"
    )


def rplog_forget_sql(d: Dialect, rplog: str, schema: str, source: str, consumed: str) -> str:
    """Replay-log rows of pulled changes the subscriber's log no longer holds (listed by change_id in the
    pull's work table `consumed`): never read again."""
    q = d.quote
    return (
        f"DELETE FROM {d.qualify(rplog, schema)} WHERE {q('SOURCE')} = {d.literal(source)} "
        f"AND {q('RLOG_ROWGUID')} IN (SELECT change_id FROM {d.qualify(consumed, schema)})"
    )


def consumed_staging_ddl(d: Dialect, name: str, schema: str) -> str:
    """The ids of pulled changes the publisher had already applied (its replay log lists them), staged on
    the publisher for the clean-up after the apply."""
    return f"CREATE TABLE {d.qualify(name, schema)} (change_id {d.render_type(ROWGUID)} NOT NULL PRIMARY KEY)"


def rplog_purge_sql(d: Dialect, rplog: str, schema: str, source: str, target: str, before: datetime) -> str:
    """Replay-log rows older than any window a push will read again (LAST_PUSH_TS - purge offset)."""
    q = d.quote
    return (
        f"DELETE FROM {d.qualify(rplog, schema)} WHERE {q('SOURCE')} = {d.literal(source)} "
        f"AND {q('TARGET')} = {d.literal(target)} AND {q('SNAPTIME')} < {timestamp_literal(d, before)}"
    )


def incoming_staging_ddl(d: Dialect, name: str, schema: str, layout: Layout) -> str:
    """Changes pulled from a subscriber, staged on the publisher to be looked up against its rows: each with
    what it takes to decide it again under the apply's locks when the publisher's row moved meanwhile (its
    type, the version it was made on, whether the subscriber still has the row, and its values)."""
    cols = [f"{k.alias} {t} NOT NULL" for k, t in zip(layout.keys, key_types(d, layout), strict=True)]
    cols += [
        f"change_id {d.render_type(ROWGUID)} NOT NULL UNIQUE",  # the replay log forgets by it
        f"op {d.render_type(ACTION)} NOT NULL",
        f"old_guid {d.render_type(ROWGUID)}",
        f"snaptime {d.render_type(TIMESTAMP)} NOT NULL",
        f"present {d.render_type(FLAG)} NOT NULL",
        *(f"{v.alias} {d.render_type(v.logical)}" for v in layout.values),
        *d.key_constraints_sql([(k.alias, k.logical) for k in layout.keys]),
    ]
    return f"CREATE TABLE {d.qualify(name, schema)} ({', '.join(cols)})"


def incoming_columns(layout: Layout) -> list[str]:
    """The columns Spark writes into the incoming staging table, in its order."""
    return [
        *(k.alias for k in layout.keys),
        "change_id",
        "op",
        "old_guid",
        "snaptime",
        "present",
        *(v.alias for v in layout.values),
    ]


def redecide_select(d: Dialect, table: TableInfo, layout: Layout, incoming: str, rows: int) -> str:
    """Staged incoming changes (by change id, parameters) with the publisher's current row, read under the
    apply's locks: keys, change_id, op, old_guid, snaptime, present, n<alias> values, pub_present,
    p<alias> values."""
    src = d.qualify(table.name, table.schema)
    stg = d.qualify(incoming, table.schema)
    join = " AND ".join(f"t.{d.quote(k.dest)} = s.{k.alias}" for k in layout.keys)
    items = [f"s.{k.alias} AS {k.alias}" for k in layout.keys]
    items += ["s.change_id AS change_id", "s.op AS op", "s.old_guid AS old_guid", "s.snaptime AS snaptime"]
    items += ["s.present AS present", *(f"s.{v.alias} AS n{v.alias}" for v in layout.values)]
    items.append(f"CASE WHEN t.{d.quote(layout.keys[0].dest)} IS NULL THEN 0 ELSE 1 END AS pub_present")
    items += [f"t.{d.quote(v.dest)} AS p{v.alias}" for v in layout.values]
    marks = ", ".join(["?"] * rows)
    return f"SELECT {', '.join(items)} FROM {stg} s LEFT JOIN {src} t ON {join} WHERE s.change_id IN ({marks})"


def stage_incoming_sql(d: Dialect, layout: Layout, apply_staging: str, incoming: str, schema: str) -> str:
    """Stage an incoming change (change id: the last parameter) for the apply as it came, with its action,
    exp_present and exp_guid (the first three parameters): its values are copied on the server."""
    keys = ", ".join(k.alias for k in layout.keys)
    values = ", ".join(v.alias for v in layout.values)
    columns = ", ".join(staging_columns(layout))
    return (
        f"INSERT INTO {d.qualify(apply_staging, schema)} ({columns}) "
        f"SELECT {keys}, ?, ?, ?, change_id, snaptime, {values} FROM {d.qualify(incoming, schema)} "
        "WHERE change_id = ?"
    )


def publisher_rows_select(d: Dialect, table: TableInfo, layout: Layout, staging: str) -> str:
    """The publisher's current rows for the staged keys (p-prefixed aliases), present or not."""
    src = d.qualify(table.name, table.schema)
    stg = d.qualify(staging, table.schema)
    join = " AND ".join(f"t.{d.quote(k.dest)} = s.{k.alias}" for k in layout.keys)
    items = [*(f"s.{k.alias} AS {k.alias}" for k in layout.keys), "s.change_id AS change_id"]
    items.append(f"CASE WHEN t.{d.quote(layout.keys[0].dest)} IS NULL THEN 0 ELSE 1 END AS pub_present")
    items += [f"t.{d.quote(v.dest)} AS p{v.alias}" for v in layout.values]
    return f"SELECT {', '.join(items)} FROM {stg} s LEFT JOIN {src} t ON {join}"


def apply_staging_ddl(d: Dialect, name: str, schema: str, layout: Layout) -> str:
    """What to do with each change: W write the values (insert or update), D delete, N nothing.

    `exp_present` / `exp_guid` say which version of the row the decision was made on (checked under lock
    before anything is written); `change_id` and `snaptime` go to the replay log."""
    cols = [f"{k.alias} {t} NOT NULL" for k, t in zip(layout.keys, key_types(d, layout), strict=True)]
    cols += [
        f"action {d.render_type(ACTION)} NOT NULL",
        f"exp_present {d.render_type(FLAG)}",
        f"exp_guid {d.render_type(ROWGUID)}",
        f"change_id {d.render_type(ROWGUID)} NOT NULL",
        f"snaptime {d.render_type(TIMESTAMP)} NOT NULL",
    ]
    cols += [f"{v.alias} {d.render_type(v.logical)}" for v in layout.values]
    return f"CREATE TABLE {d.qualify(name, schema)} ({', '.join(cols)})"


def staging_columns(layout: Layout) -> list[str]:
    return (
        [k.alias for k in layout.keys]
        + ["action", "exp_present", "exp_guid", "change_id", "snaptime"]
        + [v.alias for v in layout.values]
    )


def _same(d: Dialect, a: str, b: str) -> str:
    return d.null_safe_equal(a, b)


def _update_join(d: Dialect, dst: str, stg: str, layout: Layout, sets: list[tuple[str, str]], where: str) -> str:
    """UPDATE the table from the staging rows matched by key (`t` is the table, `s` the staging row)."""
    on = " AND ".join(f"t.{d.quote(k.dest)} = s.{k.alias}" for k in layout.keys)
    return d.update_join_sql(dst, stg, on, sets, where)


@dataclass(frozen=True)
class ApplyPlan:
    """One apply transaction: `prelude` drops staged changes the replay log lists; `lock` takes the rows'
    locks; `stale` lists the staged changes (by change id) whose decision was made on a version of the row
    that is no longer there: they are dropped from the staging table and wait for the next sync;
    `statements` delete (mark, then delete), write (update the rows that differ, insert the missing) and
    record every remaining staged change in the replay log."""

    prelude: str
    lock: str | None
    stale: str | None
    statements: tuple[str, ...]


def apply_sql(
    d: Dialect,
    table: TableInfo,
    layout: Layout,
    staging: str,
    rplog: str,
    source: str,
    target: str,
    guarded: bool,
    decided: bool = False,
) -> ApplyPlan:
    """`guarded`: lock the rows first. `decided`: each staged change was decided on the version of its row
    in exp_present / exp_guid, re-checked under the locks; the writes then follow that version exactly (an
    update only of a row that was there, a plain insert of one that was not), so a row inserted after the
    re-check (a lock cannot hold a row that does not exist yet) is a duplicate key, never overwritten."""
    q = d.quote
    schema = table.schema
    dst = d.qualify(table.name, schema)
    stg = d.qualify(staging, schema)
    rpl = d.qualify(rplog, schema)
    on = " AND ".join(f"t.{q(k.dest)} = s.{k.alias}" for k in layout.keys)
    first_key = q(layout.keys[0].dest)
    g = layout.guid
    statements: list[str] = []
    replayed = (
        f"SELECT r.{q('RLOG_ROWGUID')} FROM {rpl} r WHERE r.{q('SOURCE')} = {d.literal(source)} "
        f"AND r.{q('TARGET')} = {d.literal(target)}"
    )
    prelude = f"DELETE FROM {stg} WHERE change_id IN ({replayed})"
    lock = d.lock_joined_sql(dst, stg, on) if guarded else None
    stale = None
    if decided:
        stale = (
            f"SELECT s.change_id FROM {stg} s LEFT JOIN {dst} t ON {on} WHERE NOT ("
            f"(s.exp_present = 1 AND t.{first_key} IS NOT NULL AND {_same(d, f't.{q(g.dest)}', 's.exp_guid')}) "
            f"OR (s.exp_present = 0 AND t.{first_key} IS NULL))"
        )
    mark = d.concat(f"'{DELETE_MARK}'", "s.change_id")
    statements.append(_update_join(d, dst, stg, layout, [(g.dest, mark)], "s.action = 'D'"))
    cols = ", ".join(q(k.dest) for k in layout.keys)
    aliases = ", ".join(k.alias for k in layout.keys)
    statements.append(d.delete_joined_sql(dst, stg, on, "s.action = 'D'", cols, aliases, "action = 'D'", as_alias=True))
    sets = [(v.dest, f"s.{v.alias}") for v in layout.values]
    differs = f"NOT ({_same(d, f't.{q(g.dest)}', f's.{g.alias}')})"
    was_there = " AND s.exp_present = 1" if decided else ""
    statements.append(_update_join(d, dst, stg, layout, sets, f"s.action = 'W' AND {differs}{was_there}"))
    columns = ", ".join(q(m.dest) for m in layout.moved)
    aliases = ", ".join(f"s.{m.alias}" for m in layout.moved)
    missing = "s.exp_present = 0" if decided else f"NOT EXISTS (SELECT 1 FROM {dst} t WHERE {on})"
    statements.append(f"INSERT INTO {dst} ({columns}) SELECT {aliases} FROM {stg} s WHERE s.action = 'W' AND {missing}")
    rp_cols = ", ".join(q(c) for c in ("SOURCE", "TARGET", "RLOG_ROWGUID", "SNAPTIME"))
    rp_select = f"SELECT {d.literal(source)}, {d.literal(target)}, change_id, snaptime FROM {stg}"
    statements.append(d.insert_ignore_sql(rpl, f"({rp_cols}) {rp_select}"))
    return ApplyPlan(prelude, lock, stale, tuple(statements))


def leave_staged_sql(d: Dialect, staging: str, schema: str, rows: int) -> str:
    """Drop staged changes (by change id) from an apply: they wait in their log for the next sync."""
    return f"DELETE FROM {d.qualify(staging, schema)} WHERE change_id IN ({', '.join(['?'] * rows)})"


def pending_local_sql(d: Dialect, table: TableInfo, layout: Layout, staging: str) -> tuple[str, str]:
    """(count and oldest SNAPTIME of, delete of) pushed changes whose row the subscriber changed since
    the last pull: they wait, and the subscriber's change meets the publisher's version at the next pull."""
    rlog = d.qualify(rlog_name(table.name), table.schema)
    stg = d.qualify(staging, table.schema)
    match = " AND ".join(f"r.{d.quote(rlog_key(k.dest))} = s.{k.alias}" for k in layout.keys)
    pending = f"EXISTS (SELECT 1 FROM {rlog} r WHERE {match})"
    own = " AND ".join(f"r.{d.quote(rlog_key(k.dest))} = {stg}.{k.alias}" for k in layout.keys)
    delete = d.delete_via_alias_sql(stg, "s", f"WHERE {pending}", f"EXISTS (SELECT 1 FROM {rlog} r WHERE {own})")
    return f"SELECT COUNT(*), MIN(s.snaptime) FROM {stg} s WHERE {pending}", delete


def pulled_staging_ddl(d: Dialect, name: str, schema: str, layout: Layout) -> str:
    """The changes a pull read from a subscriber's log, staged back on the subscriber by Spark: `op` is
    the change's type (R: the publisher had already applied it), `taken` 1 when the publisher took the
    version as it was (no conflict, or the subscriber won)."""
    cols = [f"{k.alias} {t} NOT NULL" for k, t in zip(layout.keys, key_types(d, layout), strict=True)]
    cols += [
        f"change_id {d.render_type(ROWGUID)} NOT NULL UNIQUE",  # looked up by the consume
        f"op {d.render_type(ACTION)} NOT NULL",
        f"taken {d.render_type(FLAG)} NOT NULL",
        *d.key_constraints_sql([(k.alias, k.logical) for k in layout.keys]),  # looked up by the rebase
    ]
    return f"CREATE TABLE {d.qualify(name, schema)} ({', '.join(cols)})"


def pulled_unstage_sql(d: Dialect, name: str, schema: str, rows: int) -> str:
    """Changes the apply left for the next sync: not consumed."""
    return f"DELETE FROM {d.qualify(name, schema)} WHERE change_id IN ({', '.join(['?'] * rows)})"


def pulled_taken_sql(d: Dialect, name: str, schema: str, rows: int, taken: int = 1) -> str:
    """Changes the publisher took as they were (taken 1: conflicts decided "subscriber wins"), or, decided
    again under the apply's locks, did not (taken 0)."""
    marks = ", ".join(["?"] * rows)
    return f"UPDATE {d.qualify(name, schema)} SET taken = {int(taken)} WHERE change_id IN ({marks})"


def consume_sql(d: Dialect, table: TableInfo, pulled: str) -> str:
    """Delete the pulled log rows staged in `pulled` from a subscriber's log, by change id (a row changed
    since has a new id and stays)."""
    rlog = d.qualify(rlog_name(table.name), table.schema)
    return (
        f"DELETE FROM {rlog} WHERE {d.quote('RLOG_ROWGUID')} IN "
        f"(SELECT change_id FROM {d.qualify(pulled, table.schema)})"
    )


def rebase_sql(d: Dialect, table: TableInfo, layout: Layout, pulled: str) -> list[str]:
    """Log rows left after the consume were made on top of a version the publisher has just taken as it
    was: based on that version (OLD_ROWGUID), or, when that version was a delete, turned into an insert."""
    rlog = d.qualify(rlog_name(table.name), table.schema)
    stg = d.qualify(pulled, table.schema)
    match = " AND ".join(f"s.{k.alias} = {rlog}.{d.quote(rlog_key(k.dest))}" for k in layout.keys)
    deleted = f"SELECT 1 FROM {stg} s WHERE {match} AND s.taken = 1 AND s.op = 'D'"
    written = f"FROM {stg} s WHERE {match} AND s.taken = 1 AND s.op IN ('I', 'U')"
    dml = d.quote("DMLTYPE")
    return [
        f"UPDATE {rlog} SET {dml} = 'I', {d.quote(OLD_ROWGUID)} = NULL WHERE EXISTS ({deleted})",
        f"UPDATE {rlog} SET {dml} = CASE WHEN {dml} = 'D' THEN 'D' ELSE 'U' END, "
        f"{d.quote(OLD_ROWGUID)} = (SELECT MAX(s.change_id) {written}) WHERE EXISTS (SELECT 1 {written})",
    ]


# --- initial copy ------------------------------------------------------------------------------------------


def init_staging_ddl(d: Dialect, name: str, schema: str, layout: Layout) -> str:
    cols = [f"rn {d.render_type(ROWNUM)} NOT NULL"]
    cols += [f"{m.alias} {d.render_type(m.logical)}" for m in layout.moved]
    cols.append("PRIMARY KEY (rn)")
    return f"CREATE TABLE {d.qualify(name, schema)} ({', '.join(cols)})"


def init_empty_sql(d: Dialect, table: TableInfo, local: str) -> EmptyTable:
    """Empty a subscriber's copy and its log before a (re-)copy, at once: its pending changes are discarded
    with the rows they were made on, and no deleted row is logged (the capture triggers do not run row by
    row; where they are dropped for it, they are made again as `local`'s subscriber triggers in the same
    transaction)."""
    triggers = d.bidir_triggers(table, trigger_names(d, table.name), UpdateableLog(d, table, False), local, False)
    rlog = d.qualify(rlog_name(table.name), table.schema)
    return d.empty_logged_table(d.qualify(table.name, table.schema), rlog, triggers)


def init_delete_sql(d: Dialect, table: TableInfo) -> tuple[str, ...]:
    """The same by DELETE, for a copy other tables' foreign keys reference (TRUNCATE is refused there): the
    deleted rows are logged, then the log is emptied, in one transaction."""
    rlog = d.qualify(rlog_name(table.name), table.schema)
    return (f"DELETE FROM {rlog}", f"DELETE FROM {d.qualify(table.name, table.schema)}", f"DELETE FROM {rlog}")


def init_chunk_sql(d: Dialect, table: TableInfo, layout: Layout, staging: str, rows: int) -> tuple[str, str]:
    """(the last row number of the next chunk after ?, the insert of rows after ? up to ?).

    Rows whose key the subscriber already has (a chunk committed before an interruption, or a row
    inserted locally meanwhile) are skipped, so a chunk can be run again."""
    stg = d.qualify(staging, table.schema)
    dst = d.qualify(table.name, table.schema)
    last = f"SELECT MAX(rn) FROM (SELECT rn FROM {stg} WHERE rn > ? ORDER BY rn LIMIT {int(rows)}) c"
    on = " AND ".join(f"t.{d.quote(k.dest)} = s.{k.alias}" for k in layout.keys)
    columns = ", ".join(d.quote(m.dest) for m in layout.moved)
    aliases = ", ".join(f"s.{m.alias}" for m in layout.moved)
    insert = (
        f"INSERT INTO {dst} ({columns}) SELECT {aliases} FROM {stg} s WHERE s.rn > ? AND s.rn <= ? "
        f"AND NOT EXISTS (SELECT 1 FROM {dst} t WHERE {on})"
    )
    return last, insert


def init_staging_key_index_sql(d: Dialect, table: TableInfo, layout: Layout, staging: str) -> str:
    """An index on the staged keys, so the clean-up below looks rows up instead of scanning the copy."""
    name = d.quote(bounded_name(f"{staging}_keys", d.max_identifier))
    return f"CREATE INDEX {name} ON {d.qualify(staging, table.schema)} ({', '.join(k.alias for k in layout.keys)})"


def init_cleanup_sql(d: Dialect, table: TableInfo, layout: Layout, staging: str) -> str:
    """Log rows the copy itself caused (rows of this subscriber's own origin coming back on a
    re-initialisation): they are the publisher's versions, not local changes."""
    rlog = d.qualify(rlog_name(table.name), table.schema)
    stg = d.qualify(staging, table.schema)
    match = " AND ".join(f"s.{k.alias} = {rlog}.{d.quote(rlog_key(k.dest))}" for k in layout.keys)
    return (
        f"DELETE FROM {rlog} WHERE EXISTS (SELECT 1 FROM {stg} s WHERE {match} "
        f"AND s.{layout.guid.alias} = {rlog}.{d.quote('RLOG_ROWGUID')})"
    )


def now_sql(d: Dialect) -> str:
    """The server's clock in UTC, the way its log triggers stamp SNAPTIME."""
    return d.now_select_sql


def work_table(d: Dialect, kind: str, table: str) -> str:
    """Per-table work tables: BSIN (pulled keys), BSAP (apply), BSPL (pulled changes, on the subscriber), BSCN
    (consumed change ids, on the publisher), BSPS (push), BSIC (initial copy)."""
    return bounded_name(f"{kind}_{table}", d.max_identifier)


def table_with_rowguid(table: TableInfo, rowguid: LogicalType = ROWGUID) -> TableInfo:
    if table.column(ROWGUID_COLUMN) is not None:
        return table
    return dataclasses.replace(table, columns=(*table.columns, Column(ROWGUID_COLUMN, "varchar(255)", rowguid)))


@dataclass(frozen=True)
class Classified:
    """A pulled change against the publisher's row: its effective type, its conflict type (None: no
    conflict) and, without conflict, its action (W write, D delete, N nothing)."""

    eff_op: str
    conflict: str | None
    action: str


def classify(
    op: str, present: bool, old_guid: str | None, change_id: str, pub_here: bool, pub_guid: str | None
) -> Classified:
    """The reference's conflict detection for one change (`present`: the subscriber still has the row;
    `pub_here`, `pub_guid`: the publisher has it, under that ROWGUID); the same rules as
    jobs.bidir_sync's classification of a pull, row by row."""
    eff_op = "D" if op in ("I", "U") and not present else op
    same_version = pub_here and pub_guid == old_guid
    if pub_here and pub_guid == change_id and eff_op in ("I", "U"):
        return Classified(eff_op, None, "N")  # the publisher already has this very version
    conflict = None
    if eff_op == "I" and pub_here:
        conflict = "I"
    elif eff_op == "U" and not pub_here:
        conflict = "D"
    elif eff_op == "U" and not same_version:
        conflict = "U"
    elif eff_op == "D" and (not same_version if pub_here else old_guid is not None):
        conflict = "D"  # a delete of a changed row, or of one the publisher no longer has
    action = "W" if eff_op in ("I", "U") else "D" if pub_here else "N"
    return Classified(eff_op, conflict, action)

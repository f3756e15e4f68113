"""Snapshot logs: the RLOG_<table> table and its I/U/D triggers, generated per dialect.

As the reference describes (Table snapshot logs): RLOG_<t> holds the source table's primary key
columns prefixed with RLOG_, SNAPTIME (UTC), DMLTYPE ('I', 'U', 'D') and RLOG_ROWGUID (a uuid per log
row), with the RLOG_ columns as primary key, so there is at most one row per source row ("insert
replacing"). An update that changes the primary key is logged as D for the old key and I for the new.

SNAPTIME is the time of the writing transaction where the dialect has it (PostgreSQL: `now()`, the
transaction's start, so all rows of one transaction share it), else the statement time (MariaDB
`UTC_TIMESTAMP(6)`, SQLite `'now'` to the millisecond). Readers start SNAPTIME windows
`snp_repl_tolerance_offset` minutes early, which covers transactions that commit late.

SQLite, PostgreSQL and MariaDB are created live; SQL Server, Oracle, DB2 and Informix are generated
as text with the object names of "Objects created by incremental snapshot replication".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from replication_admin.engine.dialects import Dialect, IdentifierError
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

RLOG_PREFIX = "RLOG_"
RPLOG_PREFIX = "RPLOG_"
TIMESTAMP = LogicalType("timestamp")
DMLTYPE = LogicalType("varchar", length=1)
ROWGUID = LogicalType("varchar", length=255)
TARGET = LogicalType("varchar", length=255)


class SnapshotLogError(ValueError):
    """A snapshot log cannot be created for this table (no primary key, name too long...)."""


@dataclass(frozen=True)
class SnapshotLogObjects:
    """Names of everything a snapshot log consists of, and the DDL to create and drop it."""

    rlog_table: str
    triggers: tuple[str, ...]
    functions: tuple[str, ...] = ()
    sequences: tuple[str, ...] = ()
    procedures: tuple[str, ...] = ()
    create: tuple[str, ...] = field(default_factory=tuple)
    drop: tuple[str, ...] = field(default_factory=tuple)


def rlog_name(table: str) -> str:
    return RLOG_PREFIX + table


def rlog_key(column: str) -> str:
    return RLOG_PREFIX + column


def bounded_name(name: str, limit: int) -> str:
    """`name`, or when longer than the dialect allows, a prefix plus a short hash so it stays unique."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]  # noqa: S324 - a name, not security
    return f"{name[: limit - 9]}_{digest}"


def rplog_name(server: str, table: str, limit: int = 63) -> str:
    """The replay log of a source table, named after its qualified name as Virtuoso does
    (DB.DBA.Orders -> RPLOG_DB_DBA_Orders): RPLOG_<server>_<table>."""
    return bounded_name(f"{RPLOG_PREFIX}{server}_{table}", limit)


def key_columns(table: TableInfo) -> tuple[Column, ...]:
    keys = table.primary_key
    if not keys:
        raise SnapshotLogError(f"table {table.name!r} has no primary key; a snapshot log needs one")
    return keys


def _check_length(d: Dialect, name: str, what: str) -> None:
    if len(name) > d.max_identifier:
        raise SnapshotLogError(f"{what} {name!r} would be longer than {d.label}'s {d.max_identifier}-character limit")


def rlog_table_ddl(d: Dialect, table: TableInfo) -> list[str]:
    keys = key_columns(table)
    name = rlog_name(table.name)
    _check_length(d, name, "snapshot log table")
    cols = [f"{d.quote(rlog_key(k.name))} {d.render_type(k.logical)} NOT NULL" for k in keys]
    cols += [
        f"{d.quote('SNAPTIME')} {d.render_type(TIMESTAMP)} NOT NULL",
        f"{d.quote('DMLTYPE')} {d.render_type(DMLTYPE)} NOT NULL",
        f"{d.quote('RLOG_ROWGUID')} {d.render_type(ROWGUID)} NOT NULL",
        f"PRIMARY KEY ({', '.join(d.quote(rlog_key(k.name)) for k in keys)})",
    ]
    qualified = d.qualify(name, table.schema)
    statements = [f"CREATE TABLE {qualified} ({', '.join(cols)})"]
    # Readers select a SNAPTIME window: the index keeps that proportional to the changes.
    if d.name == "mysql":
        statements.append(f"CREATE INDEX {d.quote(bounded_name(name + '_SNAPTIME', 64))} ON {qualified} (`SNAPTIME`)")
    elif d.name == "postgresql":
        statements.append(f'CREATE INDEX ON {qualified} ("SNAPTIME")')
    else:
        statements.append(f"CREATE INDEX {d.quote(name + '_SNAPTIME')} ON {qualified} ({d.quote('SNAPTIME')})")
    return statements


def trigger_names(d: Dialect, table: str) -> tuple[str, str, str]:
    suffixes = ("_I", "_U", "_D") if d.name == "db2" else ("_I_log", "_U_log", "_D_log")
    names = tuple(table + s for s in suffixes)
    for name in names:
        _check_length(d, name, "trigger")
    return names  # type: ignore[return-value]


# --- live dialects ------------------------------------------------------------------------------------------


def log_columns(d: Dialect, keys: tuple[Column, ...]) -> str:
    """The RLOG_ key columns, SNAPTIME, DMLTYPE, RLOG_ROWGUID, quoted for the dialect."""
    names = [*(rlog_key(k.name) for k in keys), "SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"]
    return ", ".join(d.quote(n) for n in names)


def _values(d: Dialect, keys: tuple[Column, ...], ref: str, now: str, guid: str, op: str) -> tuple[str, str]:
    columns = log_columns(d, keys)
    values = ", ".join([*(f"{ref}.{d.quote(k.name)}" for k in keys), now, f"'{op}'", guid])
    return columns, values


def _sqlite(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    keys = key_columns(table)
    rlog = d.qualify(rlog_name(table.name))
    now = "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'"
    guid = "lower(hex(randomblob(16)))"
    i_name, u_name, d_name = trigger_names(d, table.name)
    src = d.qualify(table.name)
    same_key = " AND ".join(f"OLD.{d.quote(k.name)} IS NEW.{d.quote(k.name)}" for k in keys)

    def upsert(ref: str, op: str, where: str = "") -> str:
        cols, vals = _values(d, keys, ref, now, guid, op)
        return f"INSERT OR REPLACE INTO {rlog} ({cols}) SELECT {vals}{where};"

    create = [
        *rlog_table_ddl(d, table),
        f"CREATE TRIGGER {d.quote(i_name)} AFTER INSERT ON {src} BEGIN {upsert('NEW', 'I')} END",
        f"CREATE TRIGGER {d.quote(u_name)} AFTER UPDATE ON {src} BEGIN "
        f"{upsert('OLD', 'D', f' WHERE NOT ({same_key})')} "
        f"{upsert('NEW', 'I', f' WHERE NOT ({same_key})')} "
        f"{upsert('NEW', 'U', f' WHERE ({same_key})')} END",
        f"CREATE TRIGGER {d.quote(d_name)} AFTER DELETE ON {src} BEGIN {upsert('OLD', 'D')} END",
    ]
    drop = [f"DROP TRIGGER IF EXISTS {d.quote(n)}" for n in (i_name, u_name, d_name)]
    drop.append(f"DROP TABLE IF EXISTS {rlog}")
    return SnapshotLogObjects(rlog_name(table.name), (i_name, u_name, d_name), create=tuple(create), drop=tuple(drop))


def _dollar_tag(body: str) -> str:
    tag, n = "$rlog$", 0
    while tag in body:
        n += 1
        tag = f"$rlog{n}$"
    return tag


def _postgresql(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    keys = key_columns(table)
    schema = table.schema or "public"
    rlog = d.qualify(rlog_name(table.name), schema)
    src = d.qualify(table.name, schema)
    now = "(now() AT TIME ZONE 'UTC')"
    guid = "gen_random_uuid()::text"
    i_name, u_name, d_name = trigger_names(d, table.name)
    conflict = ", ".join(d.quote(rlog_key(k.name)) for k in keys)
    update = ", ".join(f"{d.quote(c)} = EXCLUDED.{d.quote(c)}" for c in ("SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"))

    def upsert(ref: str, op: str) -> str:
        cols, vals = _values(d, keys, ref, now, guid, op)
        return f"INSERT INTO {rlog} ({cols}) VALUES ({vals}) ON CONFLICT ({conflict}) DO UPDATE SET {update};"

    old_key = ", ".join(f"OLD.{d.quote(k.name)}" for k in keys)
    new_key = ", ".join(f"NEW.{d.quote(k.name)}" for k in keys)
    bodies = {
        i_name: upsert("NEW", "I"),
        u_name: (
            f"IF ROW({old_key}) IS DISTINCT FROM ROW({new_key}) THEN "
            f"{upsert('OLD', 'D')} {upsert('NEW', 'I')} ELSE {upsert('NEW', 'U')} END IF;"
        ),
        d_name: upsert("OLD", "D"),
    }
    events = {i_name: "INSERT", u_name: "UPDATE", d_name: "DELETE"}
    create = list(rlog_table_ddl(d, table))
    for name, body in bodies.items():
        function = d.qualify(name, schema)
        text = f"BEGIN {body} RETURN NULL; END"
        tag = _dollar_tag(text)
        create.append(f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS {tag} {text} {tag}")
        create.append(
            f"CREATE TRIGGER {d.quote(name)} AFTER {events[name]} ON {src} FOR EACH ROW EXECUTE FUNCTION {function}()"
        )
    drop = [f"DROP TRIGGER IF EXISTS {d.quote(n)} ON {src}" for n in bodies]
    drop += [f"DROP FUNCTION IF EXISTS {d.qualify(n, schema)}()" for n in bodies]
    drop.append(f"DROP TABLE IF EXISTS {rlog}")
    names = (i_name, u_name, d_name)
    return SnapshotLogObjects(rlog_name(table.name), names, functions=names, create=tuple(create), drop=tuple(drop))


def _mysql(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    keys = key_columns(table)
    rlog = d.qualify(rlog_name(table.name))
    src = d.qualify(table.name)
    now = "UTC_TIMESTAMP(6)"
    guid = "UUID()"
    i_name, u_name, d_name = trigger_names(d, table.name)
    update = ", ".join(f"`{c}` = VALUES(`{c}`)" for c in ("SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"))

    def upsert(ref: str, op: str) -> str:
        cols, vals = _values(d, keys, ref, now, guid, op)
        return f"INSERT INTO {rlog} ({cols}) VALUES ({vals}) ON DUPLICATE KEY UPDATE {update}"

    same_key = " AND ".join(f"OLD.{d.quote(k.name)} <=> NEW.{d.quote(k.name)}" for k in keys)
    create = [
        *rlog_table_ddl(d, table),
        f"CREATE TRIGGER {d.quote(i_name)} AFTER INSERT ON {src} FOR EACH ROW {upsert('NEW', 'I')}",
        f"CREATE TRIGGER {d.quote(u_name)} AFTER UPDATE ON {src} FOR EACH ROW BEGIN "
        f"IF NOT ({same_key}) THEN {upsert('OLD', 'D')}; {upsert('NEW', 'I')}; "
        f"ELSE {upsert('NEW', 'U')}; END IF; END",
        f"CREATE TRIGGER {d.quote(d_name)} AFTER DELETE ON {src} FOR EACH ROW {upsert('OLD', 'D')}",
    ]
    drop = [f"DROP TRIGGER IF EXISTS {d.quote(n)}" for n in (i_name, u_name, d_name)]
    drop.append(f"DROP TABLE IF EXISTS {rlog}")
    return SnapshotLogObjects(rlog_name(table.name), (i_name, u_name, d_name), create=tuple(create), drop=tuple(drop))


# --- generated as text only ---------------------------------------------------------------------------------


def _mssql(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    keys = key_columns(table)
    rlog, src = d.qualify(rlog_name(table.name)), d.qualify(table.name)
    i_name, u_name, d_name = trigger_names(d, table.name)
    rcols = log_columns(d, keys)
    join = " AND ".join(f"r.{d.quote(rlog_key(k.name))} = x.{d.quote(k.name)}" for k in keys)

    def merge(source: str, op: str) -> str:
        picks = ", ".join(f"x.{d.quote(k.name)}" for k in keys)
        return (
            f"DELETE r FROM {rlog} r JOIN {source} x ON {join}; "
            f"INSERT INTO {rlog} ({rcols}) SELECT {picks}, GETUTCDATE(), '{op}', CONVERT(varchar(255), NEWID()) "
            f"FROM {source} x;"
        )

    changed = " OR ".join(f"UPDATE({d.quote(k.name)})" for k in keys)
    create = [
        *rlog_table_ddl(d, table),
        f"CREATE TRIGGER {d.quote(i_name)} ON {src} AFTER INSERT AS BEGIN SET NOCOUNT ON; {merge('inserted', 'I')} END",
        f"CREATE TRIGGER {d.quote(u_name)} ON {src} AFTER UPDATE AS BEGIN SET NOCOUNT ON; "
        f"IF {changed} BEGIN {merge('deleted', 'D')} {merge('inserted', 'I')} END "
        f"ELSE BEGIN {merge('inserted', 'U')} END END",
        f"CREATE TRIGGER {d.quote(d_name)} ON {src} AFTER DELETE AS BEGIN SET NOCOUNT ON; {merge('deleted', 'D')} END",
    ]
    drop = [f"DROP TRIGGER {d.quote(n)}" for n in (i_name, u_name, d_name)] + [f"DROP TABLE {rlog}"]
    return SnapshotLogObjects(rlog_name(table.name), (i_name, u_name, d_name), create=tuple(create), drop=tuple(drop))


def _row_trigger_text(
    d: Dialect, table: TableInfo, names: tuple[str, str, str], now: str, guid: str, new: str, old: str
) -> list[str]:
    """Row-level triggers in the Oracle / DB2 / Informix style (delete the key's log row, insert anew)."""
    keys = key_columns(table)
    rlog, src = d.qualify(rlog_name(table.name)), d.qualify(table.name)
    rcols = log_columns(d, keys)

    def log(ref: str, op: str) -> str:
        where = " AND ".join(f"{d.quote(rlog_key(k.name))} = {ref}.{d.quote(k.name)}" for k in keys)
        vals = ", ".join([*(f"{ref}.{d.quote(k.name)}" for k in keys), now, f"'{op}'", guid])
        return f"DELETE FROM {rlog} WHERE {where}; INSERT INTO {rlog} ({rcols}) VALUES ({vals});"

    changed = " OR ".join(f"{old}.{d.quote(k.name)} <> {new}.{d.quote(k.name)}" for k in keys)
    i_name, u_name, d_name = names
    header = f"REFERENCING NEW AS {new} OLD AS {old} FOR EACH ROW"
    return [
        f"CREATE TRIGGER {d.quote(i_name)} AFTER INSERT ON {src} REFERENCING NEW AS {new} FOR EACH ROW "
        f"BEGIN {log(new, 'I')} END",
        f"CREATE TRIGGER {d.quote(u_name)} AFTER UPDATE ON {src} {header} BEGIN "
        f"IF {changed} THEN {log(old, 'D')} {log(new, 'I')} ELSE {log(new, 'U')} END IF; END",
        f"CREATE TRIGGER {d.quote(d_name)} AFTER DELETE ON {src} REFERENCING OLD AS {old} FOR EACH ROW "
        f"BEGIN {log(old, 'D')} END",
    ]


def _oracle(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    names = trigger_names(d, table.name)
    function = (
        "CREATE OR REPLACE FUNCTION OPL_GETUTCDATE RETURN DATE IS BEGIN "
        "RETURN CAST(SYS_EXTRACT_UTC(SYSTIMESTAMP) AS DATE); END;"
    )
    create = [
        *rlog_table_ddl(d, table),
        function,
        *_row_trigger_text(d, table, names, "OPL_GETUTCDATE()", "RAWTOHEX(SYS_GUID())", ":NEW", ":OLD"),
    ]
    drop = [f"DROP TRIGGER {d.quote(n)}" for n in names] + [f"DROP TABLE {d.qualify(rlog_name(table.name))}"]
    return SnapshotLogObjects(
        rlog_name(table.name), names, functions=("OPL_GETUTCDATE",), create=tuple(create), drop=tuple(drop)
    )


def _db2(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    names = trigger_names(d, table.name)
    create = [
        *rlog_table_ddl(d, table),
        "CREATE SEQUENCE opl_seq_rowguid AS BIGINT START WITH 1 INCREMENT BY 1 NO CYCLE",
        *_row_trigger_text(
            d, table, names, "CURRENT TIMESTAMP - CURRENT TIMEZONE",
            "CHAR(NEXT VALUE FOR opl_seq_rowguid)", "N", "O",
        ),
    ]  # fmt: skip
    drop = [f"DROP TRIGGER {d.quote(n)}" for n in names] + [f"DROP TABLE {d.qualify(rlog_name(table.name))}"]
    return SnapshotLogObjects(
        rlog_name(table.name), names, sequences=("opl_seq_rowguid",), create=tuple(create), drop=tuple(drop)
    )


def _informix(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    names = trigger_names(d, table.name)
    keys = key_columns(table)
    rlog = d.qualify(rlog_name(table.name))
    r_proc, u_proc = f"{table.name}_R_proc", f"{table.name}_U_proc"
    params = ", ".join(f"p_{i} {d.render_type(k.logical)}" for i, k in enumerate(keys))
    where = " AND ".join(f"{d.quote(rlog_key(k.name))} = p_{i}" for i, k in enumerate(keys))
    rcols = log_columns(d, keys)
    pvals = ", ".join(f"p_{i}" for i in range(len(keys)))
    create = [
        *rlog_table_ddl(d, table),
        "CREATE SEQUENCE opl_seq_rowguid INCREMENT BY 1 START WITH 1",
        f"CREATE PROCEDURE {d.quote(r_proc)}({params}, p_op CHAR(1)) "
        f"DELETE FROM {rlog} WHERE {where}; "
        f"INSERT INTO {rlog} ({rcols}) VALUES ({pvals}, DBINFO('utc_current'), p_op, "
        f"opl_seq_rowguid.NEXTVAL); END PROCEDURE",
        f"CREATE PROCEDURE {d.quote(u_proc)}({params.replace('p_', 'o_')}, {params.replace('p_', 'n_')}) "
        f"IF {' OR '.join(f'o_{i} <> n_{i}' for i in range(len(keys)))} THEN "
        f"CALL {d.quote(r_proc)}({pvals.replace('p_', 'o_')}, 'D'); "
        f"CALL {d.quote(r_proc)}({pvals.replace('p_', 'n_')}, 'I'); "
        f"ELSE CALL {d.quote(r_proc)}({pvals.replace('p_', 'n_')}, 'U'); END IF; END PROCEDURE",
    ]
    src = d.qualify(table.name)
    new_keys = ", ".join(f"n.{d.quote(k.name)}" for k in keys)
    old_keys = ", ".join(f"o.{d.quote(k.name)}" for k in keys)
    create += [
        f"CREATE TRIGGER {d.quote(names[0])} INSERT ON {src} REFERENCING NEW AS n "
        f"FOR EACH ROW (EXECUTE PROCEDURE {d.quote(r_proc)}({new_keys}, 'I'))",
        f"CREATE TRIGGER {d.quote(names[1])} UPDATE ON {src} REFERENCING OLD AS o NEW AS n "
        f"FOR EACH ROW (EXECUTE PROCEDURE {d.quote(u_proc)}({old_keys}, {new_keys}))",
        f"CREATE TRIGGER {d.quote(names[2])} DELETE ON {src} REFERENCING OLD AS o "
        f"FOR EACH ROW (EXECUTE PROCEDURE {d.quote(r_proc)}({old_keys}, 'D'))",
    ]
    drop = [f"DROP TRIGGER {d.quote(n)}" for n in names]
    drop += [f"DROP PROCEDURE {d.quote(p)}" for p in (u_proc, r_proc)] + [f"DROP TABLE {rlog}"]
    return SnapshotLogObjects(
        rlog_name(table.name), names, sequences=("opl_seq_rowguid",), procedures=(r_proc, u_proc),
        create=tuple(create), drop=tuple(drop),
    )  # fmt: skip


_GENERATORS = {
    "sqlite": _sqlite,
    "postgresql": _postgresql,
    "mysql": _mysql,
    "mssql": _mssql,
    "oracle": _oracle,
    "db2": _db2,
    "informix": _informix,
}


def snapshot_log(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    """Everything that makes up the snapshot log of `table` on a server of dialect `d`."""
    key_columns(table)
    _check_length(d, rlog_name(table.name), "snapshot log table")
    try:
        return _GENERATORS[d.name](d, table)
    except IdentifierError as exc:
        raise SnapshotLogError(str(exc)) from None


def rplog_ddl(d: Dialect, name: str, schema: str = "", if_not_exists: bool = False) -> str:
    """The one-way replay log: which log rows have been applied to which target."""
    cols = [
        f"{d.quote('TARGET')} {d.render_type(TARGET)} NOT NULL",
        f"{d.quote('RLOG_ROWGUID')} {d.render_type(ROWGUID)} NOT NULL",
        f"{d.quote('SNAPTIME')} {d.render_type(TIMESTAMP)} NOT NULL",
        f"PRIMARY KEY ({d.quote('TARGET')}, {d.quote('RLOG_ROWGUID')})",
    ]
    create = "CREATE TABLE IF NOT EXISTS" if if_not_exists else "CREATE TABLE"
    return f"{create} {d.qualify(name, schema)} ({', '.join(cols)})"

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
as text with the object names of "Objects created by incremental snapshot replication". Each dialect's
triggers live with the dialect (engine.dialects.<name>.snapshot_log_objects).
"""

from __future__ import annotations

from replication_admin.engine.dialects import Dialect, IdentifierError
from replication_admin.engine.objects import (
    DMLTYPE,
    RLOG_PREFIX,
    ROWGUID,
    RPLOG_PREFIX,
    TARGET,
    TIMESTAMP,
    SnapshotLogError,
    SnapshotLogObjects,
    bounded_name,
    key_columns,
    log_columns,
    rlog_key,
    rlog_name,
    rplog_name,
)
from replication_admin.engine.schema import TableInfo

__all__ = [
    "DMLTYPE",
    "RLOG_PREFIX",
    "ROWGUID",
    "RPLOG_PREFIX",
    "TARGET",
    "TIMESTAMP",
    "SnapshotLogError",
    "SnapshotLogObjects",
    "bounded_name",
    "key_columns",
    "log_columns",
    "rlog_key",
    "rlog_name",
    "rlog_table_ddl",
    "rplog_ddl",
    "rplog_name",
    "snapshot_log",
    "trigger_names",
]


def rlog_table_ddl(d: Dialect, table: TableInfo) -> list[str]:
    return d.snapshot_log_table_ddl(table)


def trigger_names(d: Dialect, table: str) -> tuple[str, str, str]:
    return d.snapshot_trigger_names(table)


def snapshot_log(d: Dialect, table: TableInfo) -> SnapshotLogObjects:
    """Everything that makes up the snapshot log of `table` on a server of dialect `d`."""
    key_columns(table)
    d.check_name_length(rlog_name(table.name), "snapshot log table")
    try:
        return d.snapshot_log_objects(table)
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

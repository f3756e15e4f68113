"""Names and shapes shared by the mode modules and the dialects (no dialect knowledge here).

The snapshot-log tables, the ROWGUID column and the replay settings are named the same on every
server; each dialect builds its own DDL around them (engine.dialects).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol

from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

RLOG_PREFIX = "RLOG_"
RPLOG_PREFIX = "RPLOG_"
# Every table the product creates on a server, by the start of its name: snapshot and replay logs, a
# transactional publication's log (RTSEQ_, RTTX_, RTLOG_), and the work tables of refreshes (RSTG_, RSWP_,
# RSRP_), transactional initial copies (RTIC_) and bi-directional syncs (BSIN_, BSAP_, BSPL_, BSCN_, BSPS_, BSIC_);
# and by whole name, the one-per-database tables of transactional replication. They are shown apart from the
# user's tables and never offered as sources (is_internal_table).
INTERNAL_TABLE_PREFIXES = (
    RLOG_PREFIX, RPLOG_PREFIX, "RTSEQ_", "RTTX_", "RTLOG_", "RSTG_", "RSWP_", "RSRP_", "RTIC_",
    "BSIN_", "BSAP_", "BSPL_", "BSCN_", "BSPS_", "BSIC_",
)  # fmt: skip
INTERNAL_TABLES = ("RTLEVEL", "REPL_TEXT", "RTCTX", "RTPROC", "RTPUBTBL")
TIMESTAMP = LogicalType("timestamp")
DMLTYPE = LogicalType("varchar", length=1)
ROWGUID = LogicalType("varchar", length=255)
TARGET = LogicalType("varchar", length=255)

ROWGUID_COLUMN = "ROWGUID"
OLD_ROWGUID = "OLD_ROWGUID"
DELETE_MARK = "del:"

# Transaction-local settings (PostgreSQL) that tell capture triggers what an apply transaction is.
NOLOG_SETTING = "repladmin.nolog"
ORIGIN_SETTING = "repladmin.origin"
# The same as a transactional logical message, for a publication that captures from the WAL (engine.wal_capture).
CONTEXT_MESSAGE_PREFIX = "repladmin"


class Quoting(Protocol):
    """What these helpers need of a dialect (engine.dialects.Dialect, which imports this module)."""

    def quote(self, name: str) -> str: ...
    def literal(self, value: str) -> str: ...
    def concat(self, left: str, right: str) -> str: ...
    @property
    def uuid_sql(self) -> str: ...


class SnapshotLogError(ValueError):
    """A snapshot log cannot be created for this table (no primary key, name too long...)."""


class BidirError(SnapshotLogError):
    """A table cannot take part in bi-directional replication as asked."""


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


@dataclass(frozen=True)
class CaptureObjects:
    triggers: tuple[str, ...]
    create: tuple[str, ...]
    drop: tuple[str, ...]


def is_internal_table(name: str) -> bool:
    """Whether `name` is one of the product's own tables (INTERNAL_TABLE_PREFIXES, INTERNAL_TABLES), whatever the
    case the server folded it to."""
    upper = name.upper()
    return upper in INTERNAL_TABLES or upper.startswith(INTERNAL_TABLE_PREFIXES)


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


def log_columns(d: Quoting, keys: tuple[Column, ...]) -> str:
    """The RLOG_ key columns, SNAPTIME, DMLTYPE, RLOG_ROWGUID, quoted for the dialect `d`."""
    names = [*(rlog_key(k.name) for k in keys), "SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"]
    return ", ".join(d.quote(n) for n in names)


def log_values(d: Quoting, keys: tuple[Column, ...], ref: str, now: str, guid: str, op: str) -> tuple[str, str]:
    """(log columns, values) of one snapshot-log row taken from the trigger row `ref`."""
    columns = log_columns(d, keys)
    values = ", ".join([*(f"{ref}.{d.quote(k.name)}" for k in keys), now, f"'{op}'", guid])
    return columns, values


def bidir_key_error(table: str) -> str:
    return f"the primary key of {table} is replicated bi-directionally and cannot be updated"


def new_guid_sql(d: Quoting, origin: str) -> str:
    """An SQL expression of the dialect `d` giving a fresh `<origin>@<uuid>`."""
    return d.concat(d.literal(origin + "@"), d.uuid_sql)

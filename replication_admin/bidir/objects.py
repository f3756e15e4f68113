"""The objects of a bi-directional publication on its servers: ROWGUID columns, updateable snapshot logs,
triggers and replay logs, the subscriber's copy of the table, and the names they go by."""

from __future__ import annotations

import logging
from datetime import datetime

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import find_table, lookup_table, with_constraints
from replication_admin.core.shapes import ensure_copy
from replication_admin.core.times import aware, naive_utc
from replication_admin.core.transactions import (
    run_each,
    run_with_undo,
)
from replication_admin.engine import bidir_sql as sql
from replication_admin.engine import dialects
from replication_admin.engine.schema import TableInfo
from replication_admin.engine.snapshot_log import rlog_name
from replication_admin.models import (
    Server,
    SnapshotLog,
    SnapshotPublication,
    SnapshotSubscription,
)

MAX_ATTEMPTS = 4


class BidirError(ReplicationError):
    """A bi-directional replication request that cannot be carried out; the message says why."""


log = logging.getLogger(__name__)


def item_name(server: Server, table: str) -> str:
    return f"{server.name}.{table}"


def subscription_label(subscription: SnapshotSubscription) -> str:
    """How the console names a bi-directional subscription: the published item and the subscriber."""
    return f"{subscription.item} ↔ {subscription.server}"


def lock_name(publication: SnapshotPublication) -> str:
    return f"bidir:{publication.item}"


def server_now(server: Server) -> datetime:
    d = dialects.get(server.dialect)
    with connections.connect(server, readonly=True) as conn:
        value = conn.cursor().execute(sql.now_sql(d)).fetchone()[0]
    return naive_utc(aware(value))


def publisher_table(publication: SnapshotPublication) -> TableInfo:
    assert publication.server is not None
    info = lookup_table(publication.server, publication.table)
    if info is None:
        raise BidirError(f"the published table {publication.table!r} no longer exists on {publication.server}")
    if info.column(sql.ROWGUID_COLUMN) is None:
        raise BidirError(
            f"{publication.server}.{info.name} has no {sql.ROWGUID_COLUMN} column (was the table recreated after "
            "it was published?); drop the publication and publish the table again"
        )
    return info


def subscriber_table(publication: SnapshotPublication, server: Server) -> TableInfo:
    info = lookup_table(server, publication.table)
    if info is None:
        raise BidirError(f"{publication.table!r} does not exist on the subscriber {server.name}")
    return info


def rplog(publication: SnapshotPublication, d) -> str:
    assert publication.server is not None
    return sql.replay_log_name(publication.server.name, publication.table, min(63, d.max_identifier))


def _refuse_snapshot_log(server: Server, table: TableInfo) -> None:
    if SnapshotLog.objects.filter(server=server, table=table.name).exists() or find_table(
        server, rlog_name(table.name)
    ):
        raise BidirError(
            f"{server.name}.{table.name} already has a snapshot log ({rlog_name(table.name)}); "
            "drop it before publishing the table bi-directionally"
        )


def _with_rowguid(server: Server, table: TableInfo) -> tuple[TableInfo, list[str]]:
    """The table with its ROWGUID column (added and filled when missing), and the DDL that did it."""
    d = dialects.get(server.dialect)
    try:
        column = sql.check_rowguid(table)
    except sql.BidirError as exc:
        raise BidirError(str(exc)) from None
    if column is not None:
        return table, [sql.fill_rowguid_sql(d, table, server.name)]
    return sql.table_with_rowguid(table), [sql.add_rowguid_ddl(d, table), sql.fill_rowguid_sql(d, table, server.name)]


def create_objects(server: Server, table: TableInfo, publication: SnapshotPublication, publisher: bool) -> None:
    d = dialects.get(server.dialect)
    if not table.primary_key:
        raise BidirError(f"{server.name}.{table.name} has no primary key; bi-directional replication needs one")
    _refuse_snapshot_log(server, table)
    table, rowguid_ddl = _with_rowguid(server, table)
    try:
        objects = sql.bidir_objects(d, table, server.name, publisher)
        replay = sql.bidir_rplog_ddl(d, rplog(publication, d), table.schema)
    except (sql.BidirError, ValueError) as exc:
        raise BidirError(str(exc)) from None
    run_with_undo(server, [*rowguid_ddl, *objects.create, replay], objects.drop)


def drop_objects(server: Server, table_name: str, publication: SnapshotPublication, drop_table: bool = False) -> None:
    d = dialects.get(server.dialect)
    info = lookup_table(server, table_name)
    if info is None:
        return
    statements = list(sql.bidir_objects(d, sql.table_with_rowguid(info), server.name, False).drop)
    statements.append(f"DROP TABLE IF EXISTS {d.qualify(rplog(publication, d), info.schema)}")
    for kind in ("BSIC", "BSIN", "BSAP", "BSPS"):
        statements.append(f"DROP TABLE IF EXISTS {d.qualify(sql.work_table(d, kind, info.name), info.schema)}")
    if drop_table:
        statements.append(f"DROP TABLE IF EXISTS {d.qualify(info.name, info.schema)}")
    run_each(server, statements, ignore_errors=True)


def create_subscriber_table(publication: SnapshotPublication, server: Server) -> TableInfo:
    """The subscriber's copy: created with the publisher's columns when missing, checked when present."""
    assert publication.server is not None
    source = with_constraints(publication.server, publisher_table(publication))
    return ensure_copy(
        server, publication.table, sql.table_with_rowguid(source), optional=[sql.ROWGUID_COLUMN], log=log.warning
    )

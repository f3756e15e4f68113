"""Snapshot logs and snapshots: create, drop, purge, refresh, schedule."""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta

import pyodbc
from django.db import transaction
from django.utils import timezone

from replication_admin.core import connections
from replication_admin.core.alerts import resolve_alerts
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import find_table, lookup_table, require_table
from replication_admin.core.jobs import do_start_job
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.schema_follow import live_definition
from replication_admin.core.shapes import check_destination, destination_ddl, inc_shape, noninc_shape
from replication_admin.engine import dialects
from replication_admin.engine.objects import is_internal_table
from replication_admin.engine.refresh_sql import timestamp_literal
from replication_admin.engine.snapshot_log import SnapshotLogError, rlog_name, rplog_name, snapshot_log
from replication_admin.engine.statements import quote_name
from replication_admin.models import (
    AuditEntry,
    JobRun,
    RegistryEntry,
    ScheduledEvent,
    Server,
    Snapshot,
    SnapshotLog,
)
from replication_admin.snapshots import refresh
from replication_admin.snapshots.runs import RefreshParams, RepairParams, SnapshotRefresh, SnapshotRepair
from replication_admin.snapshots.selectors import snapshot_name
from replication_admin.snapshots.shapes import SnapshotError, drift_target
from replication_admin.snapshots.shapes import drift_label as drift_label  # re-exported

RPLOG_PURGE_EVENT = "purge_rplogs"

log = logging.getLogger(__name__)


def _failed(actor: Actor, action: str, target: str, error: Exception) -> None:
    record(actor, action, target, AuditEntry.Outcome.ERROR, {"error": str(error)})


def _source_name(server: Server, table: str) -> str:
    return f"{server.name}.{quote_name(table)}"


def _run_ddl(server: Server, statements: list[str], undo: list[str]) -> None:
    """Run DDL; on failure undo what may have been created (MariaDB DDL does not roll back)."""
    d = dialects.get(server.dialect)
    try:
        with connections.connect(server, autocommit=not d.transactional_ddl) as conn:
            cursor = conn.cursor()
            for statement in statements:
                cursor.execute(statement)
            if d.transactional_ddl:
                conn.commit()
    except pyodbc.Error as exc:
        with connections.connect(server) as conn:
            for statement in undo:
                with contextlib.suppress(pyodbc.Error):
                    conn.cursor().execute(statement)
        raise SnapshotError(f"{server.name}: {connections.driver_message(exc)}") from None


# --- snapshot logs ---------------------------------------------------------------------------------------


def do_create_snapshot_log(actor: Actor, server: Server, table: str) -> SnapshotLog:
    require(actor, EDIT, "snapshot_log.create", f"{server.name}.{table}")
    try:
        info = require_table(server, table)
        if is_internal_table(info.name):
            raise SnapshotError(f"{info.name} is one of replication's own tables: it takes no snapshot log")
        if SnapshotLog.objects.filter(server=server, table=info.name).exists():
            raise SnapshotError(f"a snapshot log for {_source_name(server, info.name)} already exists")
        if find_table(server, rlog_name(info.name)) is not None:
            raise SnapshotError(f"table {rlog_name(info.name)!r} already exists on {server.name}; drop it first")
        objects = snapshot_log(dialects.get(server.dialect), info)
        _run_ddl(server, list(objects.create), list(objects.drop))
    except (ReplicationError, SnapshotLogError, connections.ConnectionFailed) as exc:
        _failed(actor, "snapshot_log.create", f"{server.name}.{table}", exc)
        raise SnapshotError(str(exc)) from None
    with transaction.atomic():
        log = SnapshotLog.objects.create(
            source=_source_name(server, info.name),
            rlog=_source_name(server, objects.rlog_table),
            rplog=rplog_name(server.name, info.name),
            server=server,
            table=info.name,
        )
        # Virtuoso schedules the replay-log purge whenever a snapshot log is created.
        ScheduledEvent.objects.get_or_create(
            name=RPLOG_PURGE_EVENT,
            defaults={"start": timezone.now(), "sql": "repl_purge_rplogs()", "interval": 30},
        )
        record(
            actor,
            "snapshot_log.create",
            log.source,
            detail={"objects": [objects.rlog_table, *objects.triggers]},
        )
    return log


def _log_for(server: Server, table: str) -> SnapshotLog:
    log = SnapshotLog.objects.filter(server=server, table=table).first()
    if log is None:
        real = find_table(server, table)
        log = SnapshotLog.objects.filter(server=server, table=real).first() if real else None
    if log is None:
        raise SnapshotError(f"there is no snapshot log for {_source_name(server, table)}")
    return log


def do_drop_snapshot_log(actor: Actor, server: Server, table: str) -> str:
    require(actor, EDIT, "snapshot_log.drop", f"{server.name}.{table}")
    try:
        log = _log_for(server, table)
        info = connections.describe_table(server, log.table)
        objects = snapshot_log(dialects.get(server.dialect), info)
        with connections.connect(server) as conn:
            cursor = conn.cursor()
            for statement in objects.drop:
                cursor.execute(statement)
    except (ReplicationError, SnapshotLogError, connections.ConnectionFailed, connections.TableNotFound) as exc:
        _failed(actor, "snapshot_log.drop", f"{server.name}.{table}", exc)
        raise SnapshotError(str(exc)) from None
    except pyodbc.Error as exc:
        _failed(actor, "snapshot_log.drop", f"{server.name}.{table}", exc)
        raise SnapshotError(f"{server.name}: {connections.driver_message(exc)}") from None
    with transaction.atomic():
        source = log.source
        log.delete()
        record(actor, "snapshot_log.drop", source, detail={"dropped": [objects.rlog_table, *objects.triggers]})
    return f"dropped {', '.join(objects.triggers)} and {objects.rlog_table} on {server.name}"


def do_purge_snapshot_log(actor: Actor, server: Server, table: str) -> int:
    """Delete log rows every snapshot of the table has replayed (older than MIN(SN_LAST_TS) - tolerance)."""
    require(actor, OPERATE, "snapshot_log.purge", f"{server.name}.{table}")
    log = _log_for(server, table)
    snapshots = Snapshot.objects.filter(source_server=server, source_table=log.table, is_incremental__isnull=False)
    if not snapshots.exists():
        record(actor, "snapshot_log.purge", log.source, detail={"deleted": 0, "reason": "no snapshots"})
        return 0
    if snapshots.filter(last_ts__isnull=True).exists():
        record(actor, "snapshot_log.purge", log.source, detail={"deleted": 0, "reason": "a snapshot never ran"})
        return 0
    oldest = min(s.last_ts for s in snapshots if s.last_ts is not None)  # none is null (checked above)
    cutoff = oldest - timedelta(minutes=RegistryEntry.get_int("snp_repl_tolerance_offset"))
    d = dialects.get(server.dialect)
    schema = connections.table_schema(server)
    with connections.connect(server) as conn:
        deleted = (
            conn.cursor()
            .execute(
                f"DELETE FROM {d.qualify(rlog_name(log.table), schema)} "
                f"WHERE {d.quote('SNAPTIME')} < {timestamp_literal(d, cutoff.replace(tzinfo=None))}"
            )
            .rowcount
        )
    record(actor, "snapshot_log.purge", log.source, detail={"deleted": deleted, "before": cutoff.isoformat()})
    return deleted


def do_purge_rplogs(actor: Actor) -> int:
    """repl_purge_rplogs(): replay-log rows older than MIN(SN_LAST_TS) - snp_repl_purge_offset go."""
    require(actor, OPERATE, "rplog.purge")
    offset = RegistryEntry.get_int("snp_repl_purge_offset")
    deleted = 0
    for log in SnapshotLog.objects.all():
        snapshots = Snapshot.objects.filter(
            source_server=log.server, source_table=log.table, is_incremental__isnull=False
        )
        for dest in Server.objects.filter(name__in=snapshots.values("dest_server")):
            times = [s.last_ts for s in snapshots if s.dest_server_id == dest.name]
            if not times or any(t is None for t in times) or find_table(dest, log.rplog) is None:
                continue
            cutoff = (min(t for t in times if t is not None) - timedelta(minutes=offset)).replace(tzinfo=None)
            d = dialects.get(dest.dialect)
            schema = connections.table_schema(dest)
            older = f"{d.quote('SNAPTIME')} < {timestamp_literal(d, cutoff)}"
            purge = f"DELETE FROM {d.qualify(log.rplog, schema)} WHERE {older}"
            with connections.connect(dest) as conn:
                deleted += conn.cursor().execute(purge).rowcount
    record(actor, "rplog.purge", detail={"deleted": deleted})
    return deleted


# --- snapshots --------------------------------------------------------------------------------------------


def _create_destination(dest: Server, table: str, shape) -> tuple[str, tuple[str, ...] | None]:
    """The destination's real name, and None when it existed, else what of the source's constraints and
    indexes the created table could not carry."""
    existing = lookup_table(dest, table)
    if existing is not None:
        check_destination(shape, existing)
        return existing.name, None
    ddl, not_copied = destination_ddl(shape, dest, table)
    _run_ddl(
        dest, ddl, [f"DROP TABLE IF EXISTS {dialects.get(dest.dialect).qualify(table, connections.table_schema(dest))}"]
    )
    for item in not_copied:
        log.warning("%s.%s: not copied: %s", dest.name, table, item)
    return table, not_copied


def _register(actor: Actor, action: str, snapshot: Snapshot, created: tuple[str, ...] | None) -> Snapshot:
    detail: dict = {"query": snapshot.query, "created_destination": created is not None}
    if created:
        detail["not_copied"] = list(created)
    with transaction.atomic():
        snapshot.save(force_insert=True)
        record(actor, action, snapshot.name, detail=detail)
    return snapshot


def do_create_noninc_snapshot(actor: Actor, source: Server, query: str, dest: Server, table: str) -> Snapshot:
    """CREATE NONINCREMENTAL SNAPSHOT dest AS 'query': register it, create the destination if missing."""
    name = snapshot_name(dest, table)
    require(actor, EDIT, "snapshot.create", name)
    try:
        if Snapshot.objects.filter(dest_server=dest, dest_table__iexact=table).exists():
            raise SnapshotError(f"snapshot {name} already exists")
        servers = frozenset(Server.objects.values_list("name", flat=True))
        shape = noninc_shape(source, query, servers)
        real, created = _create_destination(dest, table, shape)
    except (ReplicationError, connections.ConnectionFailed) as exc:
        _failed(actor, "snapshot.create", name, exc)
        raise SnapshotError(str(exc)) from None
    snapshot = Snapshot(
        name=snapshot_name(dest, real), query=query, is_incremental=None, source_server=source,
        dest_server=dest, dest_table=real,
    )  # fmt: skip
    return _register(actor, "snapshot.create", snapshot, created)


def do_create_inc_snapshot(
    actor: Actor,
    source: Server,
    source_table: str,
    columns: str | None,
    condition: str | None,
    dest: Server,
    table: str,
) -> Snapshot:
    """CREATE SNAPSHOT dest FROM source ['cols'] [WHERE 'cond']."""
    name = snapshot_name(dest, table)
    require(actor, EDIT, "snapshot.create", name)
    try:
        if Snapshot.objects.filter(dest_server=dest, dest_table__iexact=table).exists():
            raise SnapshotError(f"snapshot {name} already exists")
        info = require_table(source, source_table)
        if source.pk == dest.pk and info.name.lower() == table.lower():
            raise SnapshotError("a snapshot cannot be its own source table")
        shape = inc_shape(source, info, columns, condition)
        real, created = _create_destination(dest, table, shape)
    except (ReplicationError, connections.ConnectionFailed) as exc:
        _failed(actor, "snapshot.create", name, exc)
        raise SnapshotError(str(exc)) from None
    snapshot = Snapshot(
        name=snapshot_name(dest, real), query=shape.sql, is_incremental=1, source_server=source,
        source_table=info.name, dest_server=dest, dest_table=real, source_columns=columns or "",
        condition=condition or "", definition=live_definition(source, info.name) or [],
    )  # fmt: skip
    return _register(actor, "snapshot.create", snapshot, created)


def find_snapshot(server: Server, table: str) -> Snapshot:
    snapshot = Snapshot.objects.filter(dest_server=server, dest_table=table).first()
    if snapshot is None:
        snapshot = Snapshot.objects.filter(dest_server=server, dest_table__iexact=table).first()
    if snapshot is None:
        raise SnapshotError(f"there is no snapshot {snapshot_name(server, table)}")
    return snapshot


def event_name(snapshot: Snapshot) -> str:
    return f"snapshot {snapshot.name}"


def do_drop_snapshot(actor: Actor, snapshot: Snapshot, with_delete: bool) -> str:
    require(actor, EDIT, "snapshot.drop", snapshot.name)
    dest = snapshot.dest_server
    d = dialects.get(dest.dialect)
    schema = connections.table_schema(dest)
    if with_delete:
        try:
            with connections.connect(dest) as conn:
                conn.cursor().execute(f"DROP TABLE IF EXISTS {d.qualify(snapshot.dest_table, schema)}")
        except (pyodbc.Error, connections.ConnectionFailed) as exc:
            _failed(actor, "snapshot.drop", snapshot.name, exc)
            raise SnapshotError(f"{dest.name}: {exc}") from None
    with transaction.atomic():
        name = snapshot.name
        ScheduledEvent.objects.filter(name=event_name(snapshot)).delete()
        snapshot.delete()
        resolve_alerts("validation_drift", drift_target(name, snapshot.source_table or ""), f"{name} dropped")
        record(actor, "snapshot.drop", name, detail={"with_delete": with_delete})
    return f"dropped snapshot {name}" + (f" and table {snapshot.dest_table}" if with_delete else "")


def do_refresh_snapshot(
    actor: Actor, snapshot: Snapshot, nonincremental: bool = False, sync: bool | None = None
) -> JobRun:
    mode = " as nonincremental" if nonincremental else ""
    return do_start_job(
        actor, SnapshotRefresh, f"UPDATE SNAPSHOT {snapshot.name}{mode}",
        RefreshParams(snapshot=snapshot.name, nonincremental=nonincremental), sync=sync,
    )  # fmt: skip


def validatable(snapshot: Snapshot) -> str:
    """Why the snapshot cannot be validated ("" when it can): only an incremental snapshot with a snapshot log,
    refreshed once, has a destination an incremental refresh brings up to its source; a full one is its query's
    rows at its last refresh, and a refresh of it replaces everything a validation would tell apart."""
    if snapshot.is_incremental is None or not snapshot.source_table:
        return f"{snapshot.name} is not incremental: refresh it (UPDATE SNAPSHOT) or compare it with its source"
    if refresh.snapshot_log_for(snapshot) is None:
        return f"{snapshot.source_server_id}.{snapshot.source_table} has no snapshot log (REPL_CREATE_SNAPSHOT_LOG)"
    if snapshot.last_ts is None:
        return f"{snapshot.name} was never refreshed (UPDATE SNAPSHOT)"
    return ""


def refresh_within(job: JobRun, reporter, snapshot: Snapshot) -> dict:
    """An incremental refresh run inside another job (a validation catching the destination up), under the
    snapshot's item lock as a refresh job takes it: LockBusy while another refresh holds it."""
    return refresh.refresh_snapshot(job, reporter, snapshot.name)


def do_schedule_snapshot(actor: Actor, snapshot: Snapshot, every_minutes: int | None) -> ScheduledEvent | None:
    """Refresh every N minutes (a SYS_SCHEDULED_EVENT running UPDATE SNAPSHOT), or stop when None/0."""
    require(actor, OPERATE, "snapshot.schedule", snapshot.name)
    with transaction.atomic():
        if not every_minutes:
            ScheduledEvent.objects.filter(name=event_name(snapshot)).delete()
            record(actor, "snapshot.schedule", snapshot.name, detail={"every_minutes": None})
            return None
        if every_minutes < 1 or every_minutes > 525600:
            raise SnapshotError("the interval is 1 to 525600 minutes")
        event, _ = ScheduledEvent.objects.update_or_create(
            name=event_name(snapshot),
            defaults={
                "start": timezone.now(),
                "sql": f"UPDATE SNAPSHOT {snapshot.name}",
                "interval": every_minutes,
                "disabled": 0,
            },
        )
        record(actor, "snapshot.schedule", snapshot.name, detail={"every_minutes": every_minutes})
    return event


def do_repair_snapshot(actor: Actor, snapshot: Snapshot, sync: bool | None = None) -> JobRun:
    """Fix exactly the destination rows that differ from the source query (found as compare finds them)."""
    return do_start_job(
        actor, SnapshotRepair, f"repair {snapshot.name}", RepairParams(snapshot=snapshot.name), sync=sync
    )

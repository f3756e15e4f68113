"""Console actions: acknowledging alerts (the alert leaves the dashboard; the same trouble later opens a new
one), starting compares of two tables or of a snapshot with its source, and lifting login lockouts."""

from __future__ import annotations

from axes.utils import reset as axes_reset
from django.db import transaction
from django.utils import timezone

from replication_admin.console.runs import Compare, CompareParams
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.jobs import do_start_job
from replication_admin.models import Alert, JobRun, Server, Snapshot


def do_acknowledge_alert(actor: Actor, alert: Alert) -> str:
    target = f"alert #{alert.pk} {alert.kind} {alert.target}"
    require(actor, "replication_admin.operate", "alert.acknowledge", target)
    with transaction.atomic():
        done = Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(
            acknowledged_at=timezone.now(), acknowledged_by=actor.username
        )
        record(actor, "alert.acknowledge", target)
    return f"acknowledged: {alert}" if done else f"{alert} was already acknowledged"


def do_start_compare(actor: Actor, left: Server, left_table: str, right: Server, right_table: str) -> JobRun:
    target = f"{left.name}.{left_table} ↔ {right.name}.{right_table}"
    params = CompareParams(
        left_server=left.name, left_table=left_table, right_server=right.name, right_table=right_table
    )
    return do_start_job(actor, Compare, target, params)


def do_compare_snapshot(actor: Actor, snapshot: Snapshot, sync: bool | None = None) -> JobRun:
    """Compare a snapshot's destination with its source query."""
    params = CompareParams(
        snapshot=snapshot.name,
        left_server=snapshot.source_server_id,
        right_server=snapshot.dest_server_id,
        right_table=snapshot.dest_table,
    )
    return do_start_job(actor, Compare, f"{snapshot.name} ↔ its source", params, sync=sync)


def do_unlock_login(actor: Actor, username: str, address: str | None = None) -> int:
    """Lift the login lockout of a user name (from one address, or from every address); audited. The number of
    lockout records removed (0: it was not locked out)."""
    target = f"{username} from {address}" if address else username
    require(actor, "auth.change_user", "login.unlock", target)
    with transaction.atomic():
        removed = axes_reset(ip=address, username=username)  # ip None: from every address
        record(actor, "login.unlock", target, detail={"username": username, "address": address, "removed": removed})
    return removed

"""Acknowledging alerts (operators): the alert leaves the dashboard; the same trouble later opens a new one."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from replication_admin.core.audit import Actor, record, require
from replication_admin.models import Alert


def do_acknowledge_alert(actor: Actor, alert: Alert) -> str:
    target = f"alert #{alert.pk} {alert.kind} {alert.target}"
    require(actor, "replication_admin.operate", "alert.acknowledge", target)
    with transaction.atomic():
        done = Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(
            acknowledged_at=timezone.now(), acknowledged_by=actor.username
        )
        record(actor, "alert.acknowledge", target)
    return f"acknowledged: {alert}" if done else f"{alert} was already acknowledged"

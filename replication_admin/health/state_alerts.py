"""Alerts that follow the items' states as every page reads them (engine/health.py, through the status rows): an
item that is "broken" (a table it replicates is gone: dropped or renamed on the publisher, or the subscriber's copy
dropped) opens an ITEM_BROKEN alert with the one-line reason, and the alert resolves by itself once the table is
back or the item is dropped. Run every few seconds with the watchdog (tasks.watch_round), so the alert follows the
state within a round; each round reads the servers through the cached, bounded live reads."""

from __future__ import annotations

import logging
from datetime import datetime

from django.urls import reverse
from django.utils import timezone

from replication_admin.bidir.selectors import bidir_status_rows
from replication_admin.core.alerts import open_alerts, safely_raise, safely_resolve
from replication_admin.engine import health
from replication_admin.models import Alert, subscription_label
from replication_admin.snapshots.selectors import snapshot_states
from replication_admin.transactional.selectors import trx_status_rows

log = logging.getLogger(__name__)


def broken_items(now: datetime | None = None) -> dict[str, tuple[str, str]]:
    """Every broken item: its alert target → (why, its page)."""
    now = now or timezone.now()
    found: dict[str, tuple[str, str]] = {}
    for snap in snapshot_states(now=now):
        if snap["state"] == health.BROKEN:
            found[f"snapshot {snap['name']}"] = (snap["last_error"], reverse("snapshots-detail", args=[snap["name"]]))
    for pub in bidir_status_rows(now=now):
        url = reverse("publications-detail", args=[pub["id"]])
        for sub in pub["subscribers"]:
            if sub["state"] == health.BROKEN:
                found[f"{pub['item']} <-> {sub['server']}"] = (sub["last_error"], url)
        if pub["state"] == health.BROKEN and not pub["subscribers"]:
            found[f"publication {pub['item']}"] = (pub["last_error"], url)
    for account in trx_status_rows(now):
        server, name = account["server"], account["account"]
        for sub in account["subscribers"]:
            if sub["state"] == health.BROKEN:
                url = reverse("trx-subscriptions-detail", args=[sub["subscriber"], server, name])
                found[subscription_label(sub["subscriber"], server, name)] = (sub["last_error"], url)
        if account["state"] == health.BROKEN and not account["subscribers"]:
            url = reverse("trx-publications-detail", args=[server, name])
            found[f"publication {server}/{name}"] = (account["last_error"], url)
    return found


def check_items(now: datetime | None = None) -> dict:
    """Open an alert for each broken item, resolve those whose item is whole again (or gone)."""
    found = broken_items(now)
    for target, (why, url) in found.items():
        safely_raise(Alert.Kind.ITEM_BROKEN, target, why, url)
    resolved = 0
    for alert in open_alerts().filter(kind=Alert.Kind.ITEM_BROKEN).exclude(target__in=list(found)):
        safely_resolve(alert.kind, alert.target, "its tables are there again (or the item was dropped)")
        resolved += 1
    return {"broken": len(found), "resolved": resolved}


def safely_check_items() -> None:
    """For the watchdog's loop: a round that fails is logged and tried again next round."""
    try:
        check_items()
    except Exception:
        log.exception("checking the items' states for alerts failed")

"""The periodic health check (a django-q2 schedule, every 2 minutes, created by migration 0011_status): every
registered server is tested with a short timeout (its last_check_* and its server_unreachable alert follow the
outcome), and open alerts whose cause has cleared are resolved: a failed scheduled event that has completed since,
a job that failed while a later job of the same kind and target succeeded, a lag alert whose subscriber is back
under its publication's threshold (live lag)."""

from __future__ import annotations

import logging

from django.db.models import Max
from django.utils import timezone

from replication_admin.core.alerts import open_alerts, resolve_alerts
from replication_admin.models import Alert, JobRun, ReplAccount, ReplSubscriber, ScheduledEvent
from replication_admin.servers.actions import check_all_servers
from replication_admin.transactional.selectors import live_lags

log = logging.getLogger(__name__)


def resolve_cleared_alerts() -> int:
    """Resolve the open alerts whose condition no longer holds; returns how many."""
    resolved = 0
    alerts = list(open_alerts().filter(kind__in=[Alert.Kind.EVENT_ERROR, Alert.Kind.JOB_FAILED, Alert.Kind.LAG]))
    events = {
        e.name: e
        for e in ScheduledEvent.objects.filter(name__in=[a.target for a in alerts if a.kind == Alert.Kind.EVENT_ERROR])
    }
    for alert in alerts:
        if alert.kind == Alert.Kind.EVENT_ERROR:
            event = events.get(alert.target)
            if event is None:
                resolved += resolve_alerts(alert.kind, alert.target, "the event was dropped")
            elif not event.last_error and event.last_completed and event.last_completed >= alert.created_at:
                resolved += resolve_alerts(
                    alert.kind, alert.target, f"the event completed at {event.last_completed:%Y-%m-%d %H:%M:%S} UTC"
                )
        elif alert.kind == Alert.Kind.JOB_FAILED:
            kind, _, target = alert.target.partition(" ")
            succeeded = JobRun.objects.filter(
                kind=kind, target=target, state=JobRun.State.SUCCEEDED, finished_at__gte=alert.last_seen_at
            )
            later = succeeded.aggregate(last=Max("id"))["last"]
            if later is not None:
                resolved += resolve_alerts(alert.kind, alert.target, f"job #{later} succeeded")
    resolved += _resolve_lag_alerts([a for a in alerts if a.kind == Alert.Kind.LAG])
    return resolved


def _resolve_lag_alerts(alerts: list[Alert]) -> int:
    if not alerts:
        return 0
    targets = {a.target for a in alerts}
    subs = [
        s for s in ReplSubscriber.objects.filter(subscribed=True).values("server", "account", "subscriber", "count",
                                                                          "init_state")
        if f"{s['subscriber']} <- {s['server']}/{s['account']}" in targets
    ]  # fmt: skip
    accounts = list(ReplAccount.objects.all())
    thresholds = {(a.server, a.account): a.alert_lag for a in accounts}
    lags = live_lags(subs, timezone.now(), {(a.server, a.account): a.count for a in accounts})
    resolved = 0
    for s in subs:
        target = f"{s['subscriber']} <- {s['server']}/{s['account']}"
        lag, limit = (
            lags[(s["server"], s["account"], s["subscriber"])].transactions,
            thresholds.get((s["server"], s["account"])),
        )
        if lag is not None and (limit is None or lag <= limit):
            resolved += resolve_alerts(Alert.Kind.LAG, target, f"lag back to {lag} transactions")
    unsubscribed = targets - {f"{s['subscriber']} <- {s['server']}/{s['account']}" for s in subs}
    for target in unsubscribed:
        resolved += resolve_alerts(Alert.Kind.LAG, target, "the subscription was dropped")
    return resolved


def check_health() -> dict:
    """The scheduled entry point: test every server, then resolve the alerts whose cause cleared."""
    servers = check_all_servers()
    resolved = resolve_cleared_alerts()
    down = sorted(name for name, ok in servers.items() if not ok)
    if down:
        log.warning("servers unreachable: %s", ", ".join(down))
    return {"servers": len(servers), "unreachable": down, "alerts_resolved": resolved}

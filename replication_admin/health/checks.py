"""The periodic health check (a django-q2 schedule, every 2 minutes: migrations 0012_status and 0029_health_checks):
every registered server is tested with a short timeout (its last_check_* and its server_unreachable alert follow the
outcome), and open alerts whose cause has cleared are resolved: a failed scheduled event that has completed since,
a job that failed while a later job of the same kind and target succeeded, a lag alert whose subscriber is back
under its publication's limits (live lag).

check_lag, the cheap part, also runs on its own every REPLADMIN_LAG_CHECK_SECONDS (20) from each qcluster's scheduler
thread, so a lag alert opens within about a minute: a subscription's lag alert opens when it is more transactions
behind than ACC_ALERT_LAG or its oldest unapplied transaction is older than its time limit (ACC_ALERT_LAG_SECONDS,
else REPLADMIN_LAG_ALERT_SECONDS), read live (what a WAL slot still holds included) and closes when it is back under
both; a WAL publication's slot_wal alert opens when its slot keeps more WAL than REPLADMIN_SLOT_WAL_ALERT_BYTES or is
unreserved or lost; and an idle WAL publication's slot is moved past the WAL other tables wrote (the heartbeat)."""

from __future__ import annotations

import logging
from datetime import datetime

import pyodbc
from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from replication_admin.core.alerts import open_alerts, raise_alert, resolve_alerts
from replication_admin.core.connections import ConnectionFailed
from replication_admin.core.errors import ReplicationError
from replication_admin.models import Alert, JobRun, ReplAccount, ReplSubscriber, ScheduledEvent
from replication_admin.servers.actions import check_all_servers
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional.selectors import (
    TIME_REASON,
    WalBacklog,
    size_text,
    slot_problem,
    slots,
    subscriber_states,
)

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


def _judge_lag(subs: list[ReplSubscriber], now: datetime, open_new: bool) -> tuple[int, int]:
    """Open (when `open_new`) or count up the lag alert of each subscription over a limit, resolve it for those
    back under both; a lag that cannot be known leaves its alert as it is. Returns (over, resolved). The lag and
    its time limit are the status rows' (transactional/states.py): a scheduled subscription may be behind by its
    interval on top of the limit, as its state allows."""
    states = subscriber_states((s.pk for s in subs), now)
    over = resolved = 0
    for sub in subs:
        row = states.get(sub.pk)
        if row is None or row["lag_transactions"] is None:
            continue
        transactions, seconds = row["lag_transactions"], row["lag_seconds"]
        # The subscription's own limits, else its publication's (transactional/profile.py).
        count_limit, time_limit = row["alert_lag"], row["lag_limit_seconds"]
        reasons = []
        if count_limit is not None and transactions > count_limit:
            reasons.append(f"{transactions} transactions behind (alert above {count_limit})")
        if seconds is not None and seconds > time_limit:
            # TIME_REASON in the message: a sync that leaves some behind does not resolve such an alert
            reasons.append(f"its {TIME_REASON} is {seconds:.0f} s old (alert above {time_limit:g} s)")
        if reasons:
            over += 1
            if open_new or open_alerts().filter(kind=Alert.Kind.LAG, target=sub.label).exists():
                message = f"{sub.subscriber} is behind {sub.server}/{sub.account}: " + "; ".join(reasons)
                raise_alert(Alert.Kind.LAG, sub.label, message, sub.get_absolute_url())
        else:
            age = "" if seconds is None else f", the oldest {seconds:.0f} s old"
            resolved += resolve_alerts(Alert.Kind.LAG, sub.label, f"lag back to {transactions} transactions{age}")
    return over, resolved


def _resolve_lag_alerts(alerts: list[Alert]) -> int:
    if not alerts:
        return 0
    targets = {a.target for a in alerts}
    subs = [s for s in ReplSubscriber.objects.filter(subscribed=True) if s.label in targets]
    resolved = _judge_lag(subs, timezone.now(), open_new=False)[1]
    for target in targets - {s.label for s in subs}:
        resolved += resolve_alerts(Alert.Kind.LAG, target, "the subscription was dropped")
    return resolved


def _guard_slots() -> tuple[int, int, int]:
    """Each WAL publication's slot: its slot_wal alert opened or resolved, and its heartbeat when it is idle.
    Returns (alerts open, resolved, slots moved)."""
    accounts = {(a.server, a.account): a for a in ReplAccount.objects.filter(capture=ReplAccount.Capture.WAL)}
    over = resolved = moved = 0
    for key, read in slots(accounts).items():
        if not read.ok or not isinstance(read.value, WalBacklog):
            continue  # unknown: the alert stays as it is (the server's own alert says it cannot be reached)
        backlog, target = read.value, f"{key[0]}/{key[1]}"
        problem = slot_problem(backlog, settings.SLOT_WAL_ALERT_BYTES)
        if problem:
            over += 1
            raise_alert(Alert.Kind.SLOT_WAL, target, problem, accounts[key].get_absolute_url())
            continue
        kept = size_text(backlog.retained_bytes or 0)
        resolved += resolve_alerts(Alert.Kind.SLOT_WAL, target, f"the slot keeps {kept} of WAL ({backlog.wal_status})")
        if not backlog.active and backlog.complete and not backlog.pending and backlog.unread_bytes:
            try:
                moved += trx_actions.advance_idle_slot(*key)
            except (pyodbc.Error, ConnectionFailed, ReplicationError) as exc:
                log.warning("the slot of %s was not moved: %s", target, str(exc).splitlines()[0] if str(exc) else exc)
    return over, resolved, moved


def check_lag() -> dict:
    """The periodic lag check (see the module's doc): lag alerts by count and time, slot alerts, idle slots moved."""
    subs = list(ReplSubscriber.objects.filter(subscribed=True, init_state="done"))
    lagging, resolved = _judge_lag(subs, timezone.now(), open_new=True)
    slots_over, slots_resolved, moved = _guard_slots()
    return {"lagging": lagging, "lag_resolved": resolved, "slots_over": slots_over, "slots_resolved": slots_resolved,
            "slots_moved": moved}  # fmt: skip


def safely_check_lag() -> None:
    """For the scheduler thread: a failed check is logged; the next one tries again."""
    try:
        check_lag()
    except Exception:
        log.exception("the periodic lag check failed")


def check_health() -> dict:
    """The scheduled entry point: test every server, then resolve the alerts whose cause cleared."""
    servers = check_all_servers()
    resolved = resolve_cleared_alerts()
    lag = check_lag()
    down = sorted(name for name, ok in servers.items() if not ok)
    if down:
        log.warning("servers unreachable: %s", ", ".join(down))
    return {"servers": len(servers), "unreachable": down, "alerts_resolved": resolved, "lag": lag}

"""Alerts: raised where replication notices trouble, e-mailed once, open until the cause clears (resolved where the
success is recorded: resolve_alerts) or an operator acknowledges it. Closed alerts stay as history."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from replication_admin.core import notifications
from replication_admin.models import Alert

log = logging.getLogger(__name__)


def raise_alert(kind: str, target: str, message: str, url: str = "") -> Alert:
    """Open an alert (and e-mail it), or count up the open one of the same kind and target."""
    now = timezone.now()
    target = target[:300]
    open_alert = open_alerts().filter(kind=kind, target=target)
    if open_alert.update(count=F("count") + 1, last_seen_at=now, message=message):
        return open_alert.get()
    try:
        with transaction.atomic():
            alert = Alert.objects.create(kind=kind, target=target, message=message, url=url, last_seen_at=now)
    except IntegrityError:  # raised at the same moment elsewhere
        return open_alerts().get(kind=kind, target=target)
    try:
        notifications.queue_alert(alert)
    except Exception:  # the alert stands whether or not its channels can be told
        log.exception("could not queue the %s alert for its notification channels", kind)
    recipients = list(settings.ALERT_RECIPIENTS)
    if recipients:
        subject = f"[replication_admin] {alert.get_kind_display()}: {target}"
        body = f"{message}\n\n{settings.CONSOLE_URL.rstrip('/')}{url}\n" if url else f"{message}\n"
        sent = send_mail(subject[:200], body, None, recipients, fail_silently=True)
        if sent:
            Alert.objects.filter(pk=alert.pk).update(emailed_at=timezone.now())
    log.warning("alert %s: %s: %s", kind, target, message)
    return alert


def safely_raise(kind: str, target: str, message: str, url: str = "") -> None:
    """For the places that report trouble: an alert that cannot be stored never hides the trouble itself."""
    try:
        raise_alert(kind, target, message, url)
    except Exception:
        log.exception("could not raise the %s alert for %s", kind, target)


# An alert neither acknowledged nor resolved (the dashboard's alerts, the Alerts page's "open" tab).
OPEN = Q(acknowledged_at__isnull=True, resolved_at__isnull=True)


def open_alerts() -> QuerySet[Alert]:
    return Alert.objects.filter(OPEN)


def resolve_alerts(kind: str, target: str, reason: str) -> int:
    """Close the open alert of this kind and target because its cause cleared (`reason`: how, for people, e.g.
    "job #12 succeeded"); it stays in the history with resolved_at. Returns how many were resolved (0 or 1)."""
    done = (
        open_alerts().filter(kind=kind, target=target[:300]).update(resolved_at=timezone.now(), resolution=reason[:300])
    )
    if done:
        log.info("alert %s resolved: %s: %s", kind, target, reason)
    return done


def resolve_alerts_of(kind: str, target_prefix: str, reason: str) -> int:
    """Close every open alert of this kind whose target starts with `target_prefix` (the drift alerts of each table
    of a subscription copied again or dropped)."""
    done = (
        open_alerts()
        .filter(kind=kind, target__startswith=target_prefix)
        .update(resolved_at=timezone.now(), resolution=reason[:300])
    )
    if done:
        log.info("%s %s alert(s) of %s resolved: %s", done, kind, target_prefix, reason)
    return done


def safely_resolve(kind: str, target: str, reason: str) -> None:
    """For the places that record success: an alert that cannot be resolved never fails the success itself."""
    try:
        resolve_alerts(kind, target, reason)
    except Exception:
        log.exception("could not resolve the %s alert for %s", kind, target)


# --- notification rounds ------------------------------------------------------------------------------------------


def send_notifications() -> list[notifications.Outcome]:
    """One round of notices: the conflicts nobody was told of made into messages, then the due messages sent. A
    destination whose message has failed ALERT_AFTER_ATTEMPTS times opens a "notification not delivered" alert,
    resolved by the next message it takes."""
    notifications.record_conflicts()
    outcomes = notifications.deliver_due()
    for outcome in outcomes:
        kind, target = Alert.Kind.NOTIFY_FAILED, outcome.destination
        if outcome.error is None:
            resolve_alerts(kind, target, f"notification #{outcome.notification.pk} delivered")
        elif outcome.notification.attempts >= notifications.ALERT_AFTER_ATTEMPTS:
            tries = "no more tries" if outcome.final else "tried again later"
            message = f"{outcome.notification.attempts} tries failed ({tries}): {outcome.error}"
            raise_alert(kind, target, message, reverse("alerts-channels"))
    return outcomes


def safely_send_notifications() -> None:
    """For the scheduler's rounds and the end of syncs: a notice that cannot be sent never fails the work."""
    try:
        send_notifications()
    except Exception:
        log.exception("the notification round failed")

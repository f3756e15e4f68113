"""Alerts: raised where replication notices trouble, e-mailed once, open until the cause clears (resolved where the
success is recorded: resolve_alerts) or an operator acknowledges it. Closed alerts stay as history."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

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


def safely_resolve(kind: str, target: str, reason: str) -> None:
    """For the places that record success: an alert that cannot be resolved never fails the success itself."""
    try:
        resolve_alerts(kind, target, reason)
    except Exception:
        log.exception("could not resolve the %s alert for %s", kind, target)

"""Alerts: raised where replication notices trouble, e-mailed once, shown until acknowledged."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from replication_admin.models import Alert

log = logging.getLogger(__name__)


def raise_alert(kind: str, target: str, message: str, url: str = "") -> Alert:
    """Open an alert (and e-mail it), or count up the open one of the same kind and target."""
    now = timezone.now()
    target = target[:300]
    open_alert = Alert.objects.filter(kind=kind, target=target, acknowledged_at__isnull=True)
    if open_alert.update(count=F("count") + 1, last_seen_at=now, message=message):
        return open_alert.get()
    try:
        with transaction.atomic():
            alert = Alert.objects.create(kind=kind, target=target, message=message, url=url, last_seen_at=now)
    except IntegrityError:  # raised at the same moment elsewhere
        return Alert.objects.get(kind=kind, target=target, acknowledged_at__isnull=True)
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


def open_alerts():
    return Alert.objects.filter(acknowledged_at__isnull=True)

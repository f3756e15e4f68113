"""Notices to people: the conflicts syncs decided and the alerts that open, sent to e-mail addresses and to the
notification channels made in the console (Apprise URLs: a generic JSON webhook, Slack, Teams, mail and the rest
Apprise knows; a kept library rather than a sender per service).

Each notice is first a `Notification` row (an outbox), written in the transaction that decides to notify: a
conflict is marked notified in the same transaction its messages are written, so none is told twice or lost
when a process dies. `deliver_due` sends what is due: it claims a row for `Notification.CLAIM_SECONDS`, sends it,
and on failure retries it with backoff up to `Notification.MAX_ATTEMPTS` times. The scheduler's rounds call it on
every host, and so does the end of a sync run as a job, so a sync's conflicts go out at once."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from replication_admin.core import crypto
from replication_admin.core.words import key_label
from replication_admin.models import (
    ConflictBackup,
    Notification,
    NotificationChannel,
    RegistryEntry,
    SnapshotConflictResolver,
    TransactionalConflictResolver,
)

if TYPE_CHECKING:
    from replication_admin.models import Alert

log = logging.getLogger(__name__)

DEFAULT_EMAIL_KEY = "conflict_notify_email"
CONFLICT_BATCH = 500  # conflicts made into messages per transaction
DELIVER_BATCH = 20  # messages one round sends at most: a round never ties its thread for long
FIRST_RETRY_SECONDS = 30
LAST_RETRY_SECONDS = 3_600
# A message that failed this many times opens a "notification not delivered" alert for its destination.
ALERT_AFTER_ATTEMPTS = 3
EVENTS = NotificationChannel.Event


class NotificationError(Exception):
    """A channel's URL refused, said in one line."""


# --- channels' URLs -------------------------------------------------------------------------------------


def _apprise() -> Any:
    import apprise  # noqa: PLC0415 - its services load on first use (a third of a second): only where sent

    return apprise


def check_url(url: str) -> str:
    """The URL as kept, or NotificationError: one line naming what is wrong. Returns the hint shown in lists
    (Apprise's own rendering with its secrets masked, without the options)."""
    url = url.strip()
    if not url:
        raise NotificationError("give the channel's URL, e.g. json://hooks.example.com/replication")
    if any(ch.isspace() for ch in url):
        raise NotificationError("a channel's URL has no spaces or line breaks")
    service = _apprise().Apprise.instantiate(url)
    if service is None:
        scheme = url.split("://", 1)[0] if "://" in url else url[:20]
        if scheme.lower() in ("http", "https"):
            raise NotificationError(
                f"{url.split('/')[2] if url.count('/') >= 2 else url} is not a service Apprise knows by its address: "
                f"for a generic JSON webhook write {'jsons' if scheme.lower() == 'https' else 'json'}://"
                f"{url.split('://', 1)[1]}"
            )
        raise NotificationError(
            f"{scheme!r} is not a notification URL Apprise knows: start it with json:// (a JSON webhook), "
            "slack://, msteams://, mailto:// or another of Apprise's services"
        )
    return str(service.url(privacy=True)).split("?", 1)[0][:200]


def channel_url(channel: NotificationChannel) -> str:
    return crypto.decrypt(channel.url_encrypted)


def send_to_channel(channel: NotificationChannel, subject: str, body: str) -> str | None:
    """Send one message to a channel and note on it when it last took one or why it did not: None when it took it,
    else the error in one line."""
    try:
        error = send_to_url(channel_url(channel), subject, body)
    except crypto.SecretError as exc:
        error = str(exc).replace("password", "channel URL")
    now = timezone.now()
    if error is None:
        NotificationChannel.objects.filter(pk=channel.pk).update(last_sent_at=now, last_error="")
    else:
        NotificationChannel.objects.filter(pk=channel.pk).update(last_error=error, last_error_at=now)
    return error


def send_to_url(url: str, subject: str, body: str) -> str | None:
    """Send one message through Apprise: None when the service took it, else its error in one line."""
    apprise = _apprise()
    notifier = apprise.Apprise()
    if not notifier.add(url):
        return "the URL is no longer one Apprise knows"
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as logs:
        result = notifier.notify(title=subject, body=body)
    if result:
        return None
    said = [line.strip() for line in logs.getvalue().splitlines() if line.strip()]
    return (said[-1] if said else "the service did not take the message")[:500]


# --- the outbox ---------------------------------------------------------------------------------------------


def _channels(event: str) -> list[NotificationChannel]:
    # JSON lists are not searched alike by every catalog: the few channels are filtered here.
    return [c for c in NotificationChannel.objects.filter(enabled=True) if event in c.events]


def queue_alert(alert: Alert) -> int:
    """An alert opened: a message to every enabled channel that takes alerts (a channel's own failure to deliver
    is not sent to that channel). Returns the messages written."""
    url = f"{settings.CONSOLE_URL.rstrip('/')}{alert.url}" if alert.url else ""
    subject = f"[replication_admin] {alert.get_kind_display()}: {alert.target}"[:250]
    body = f"{alert.message}\n\n{url}" if url else alert.message
    rows = [
        Notification(channel=channel, event=EVENTS.ALERTS, subject=subject, body=body)
        for channel in _channels(EVENTS.ALERTS)
        if not (alert.kind == "notify_failed" and alert.target == channel.name)
    ]
    Notification.objects.bulk_create(rows)
    return len(rows)


def _line(backup: ConflictBackup) -> str:
    return (
        f"- {backup.get_conflict_type_display()} conflict on {key_label(backup.primary_key or {})} in "
        f"{backup.table_name} from {backup.source}: {backup.get_decision_display()} ({backup.resolver or 'default'})"
    )


def _message(backups: list[ConflictBackup]) -> tuple[str, str]:
    items = sorted({b.item for b in backups})
    where = items[0] if len(items) == 1 else f"{len(items)} items"
    subject = f"[replication_admin] {len(backups)} conflict(s) on {where}"[:250]
    inbox = f"{settings.CONSOLE_URL.rstrip('/')}/conflicts/"
    lines = [_line(b) for b in backups]
    body = (
        "Replication decided these conflicts; the losing versions are kept in the conflict inbox "
        f"({inbox}).\n\n" + "\n".join(lines)
    )
    return subject, body


def _owners(backups: list[ConflictBackup]) -> dict[tuple[str, int], str]:
    """(kind, resolver id) → the address its resolver names (CR_NOTIFY), for the resolvers that decided these."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for b in backups:
        if b.resolver_id is not None:
            wanted[b.kind].add(b.resolver_id)
    owners: dict[tuple[str, int], str] = {}
    for kind, model in (("snapshot", SnapshotConflictResolver), ("transactional", TransactionalConflictResolver)):
        if wanted.get(kind):
            for pk, address in model.objects.filter(pk__in=wanted[kind]).exclude(notify="").values_list("id", "notify"):
                owners[(kind, pk)] = address
    return owners


def record_conflicts(limit: int = CONFLICT_BATCH) -> int:
    """Make the applied conflicts nobody was told of into messages, and mark them told, in one transaction: an
    e-mail to the owner named by the resolver that decided them, the default rule's decisions to the registry's
    `conflict_notify_email`, and one message to every channel that takes conflicts. Returns the conflicts told."""
    with transaction.atomic():
        pending = ConflictBackup.objects.filter(notified=False).order_by("id")
        if connection.features.has_select_for_update_skip_locked:
            pending = pending.select_for_update(skip_locked=True)  # another host's round takes the others
        backups = list(pending[:limit])
        if not backups:
            return 0
        owners = _owners(backups)
        default = RegistryEntry.get_value(DEFAULT_EMAIL_KEY).strip()
        by_address: dict[str, list[ConflictBackup]] = defaultdict(list)
        for b in backups:
            address = owners.get((b.kind, b.resolver_id)) if b.resolver_id is not None else default
            if address:
                by_address[address].append(b)
        rows = []
        for address, told in by_address.items():
            subject, body = _message(told)
            rows.append(Notification(emails=[address], event=EVENTS.CONFLICTS, subject=subject, body=body))
        channels = _channels(EVENTS.CONFLICTS)
        if channels:
            subject, body = _message(backups)
            rows += [Notification(channel=c, event=EVENTS.CONFLICTS, subject=subject, body=body) for c in channels]
        Notification.objects.bulk_create(rows)
        ConflictBackup.objects.filter(pk__in=[b.pk for b in backups]).update(notified=True)
    return len(backups)


# --- sending ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One message tried: sent, or not (its error; `final` once it will not be tried again)."""

    notification: Notification
    error: str | None = None
    final: bool = False

    @property
    def destination(self) -> str:
        return self.notification.destination


def retry_after(attempts: int) -> timedelta:
    return timedelta(seconds=min(LAST_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** max(attempts - 1, 0)))


def _send(notification: Notification) -> str | None:
    if notification.channel is not None:
        return send_to_channel(notification.channel, notification.subject, notification.body)
    try:
        send_mail(notification.subject, notification.body, None, list(notification.emails))
    except Exception as exc:  # the mail server's refusal, whatever its class: said on the message
        return f"{type(exc).__name__}: {exc}"[:500]
    return None


def due() -> Q:
    """Messages to send now: pending, their time come, and not for a channel someone switched off."""
    return Q(state=Notification.State.PENDING, next_attempt_at__lte=timezone.now()) & (
        Q(channel__isnull=True) | Q(channel__enabled=True)
    )


def deliver_due(limit: int = DELIVER_BATCH) -> list[Outcome]:
    """Send up to `limit` due messages, each claimed first so two hosts never send the same one at once."""
    outcomes = []
    due_now = Notification.objects.filter(due()).order_by("next_attempt_at", "id").values_list("pk", flat=True)
    for pk in list(due_now[:limit]):
        now = timezone.now()
        claimed = Notification.objects.filter(pk=pk, state=Notification.State.PENDING, next_attempt_at__lte=now).update(
            next_attempt_at=now + timedelta(seconds=Notification.CLAIM_SECONDS), attempts=F("attempts") + 1
        )
        if not claimed:
            continue
        notification = Notification.objects.select_related("channel").get(pk=pk)
        error = _send(notification)
        outcomes.append(_settle(notification, error))
    return outcomes


def _settle(notification: Notification, error: str | None) -> Outcome:
    now = timezone.now()
    if error is None:
        Notification.objects.filter(pk=notification.pk).update(
            state=Notification.State.SENT, sent_at=now, last_error=""
        )
        return Outcome(notification)
    final = notification.attempts >= Notification.MAX_ATTEMPTS
    Notification.objects.filter(pk=notification.pk).update(
        state=Notification.State.FAILED if final else Notification.State.PENDING,
        next_attempt_at=now + retry_after(notification.attempts),
        last_error=error,
    )
    log.warning("notification %s to %s not delivered: %s", notification.pk, notification.destination, error)
    return Outcome(notification, error, final)


def send_test(channel: NotificationChannel, by: str) -> str | None:
    """Send a test message to the channel now (not through the outbox): None when the service took it."""
    return send_to_channel(
        channel,
        f"[replication_admin] test of the channel {channel.name}",
        f"{by} sent this from {settings.CONSOLE_URL}: alerts and conflicts chosen for this channel will arrive here.",
    )

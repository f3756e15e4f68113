"""Console actions: acknowledging alerts (the alert leaves the dashboard; the same trouble later opens a new
one), lifting login lockouts, making and revoking the API tokens of the status API and metrics, the notification
channels and who hears of default-rule conflicts, and the scheduler's run now, pause, resume and interval of a
SYS_SCHEDULED_EVENT."""

from __future__ import annotations

from collections.abc import Iterable

from axes.utils import reset as axes_reset
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from replication_admin.core import crypto, events, notifications
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.errors import ReplicationError
from replication_admin.core.permissions import EDIT, OPERATE, UNLOCK_LOGINS
from replication_admin.engine.schedule import due_at, next_run, slot_at
from replication_admin.models import (
    Alert,
    ApiToken,
    AuditEntry,
    NotificationChannel,
    RegistryEntry,
    ReplLock,
    ScheduledEvent,
)

MAX_INTERVAL = 525_600  # minutes: a year


def do_acknowledge_alert(actor: Actor, alert: Alert) -> str:
    target = f"alert #{alert.pk} {alert.kind} {alert.target}"
    require(actor, OPERATE, "alert.acknowledge", target)
    with transaction.atomic():
        done = Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(
            acknowledged_at=timezone.now(), acknowledged_by=actor.username
        )
        record(actor, "alert.acknowledge", target)
    return f"acknowledged: {alert}" if done else f"{alert} was already acknowledged"


def do_unlock_login(actor: Actor, username: str, address: str | None = None) -> int:
    """Lift the login lockout of a user name (from one address, or from every address); audited. The number of
    lockout records removed (0: it was not locked out)."""
    target = f"{username} from {address}" if address else username
    require(actor, UNLOCK_LOGINS, "login.unlock", target)
    with transaction.atomic():
        removed = axes_reset(ip=address, username=username)  # ip None: from every address
        record(actor, "login.unlock", target, detail={"username": username, "address": address, "removed": removed})
    return removed


def do_create_api_token(actor: Actor, name: str, scopes: Iterable[str]) -> tuple[ApiToken, str]:
    """A new token for the status API and metrics, and the token itself: the only time it is at hand (the catalog
    keeps its hash; the audit row names it by its prefix)."""
    name = name.strip()
    require(actor, EDIT, "api_token.create", name)
    wanted = set(scopes)
    chosen = [scope for scope in ApiToken.Scope.values if scope in wanted]
    if not name:
        raise ValidationError("Give the token a name that says who uses it.")
    if not chosen or len(chosen) != len(wanted):
        raise ValidationError(f"Choose its scopes among {', '.join(ApiToken.Scope.values)}.")
    secret = ApiToken.new_secret()
    with transaction.atomic(durable=True):
        token = ApiToken.objects.create(
            name=name, prefix=secret[: ApiToken.PREFIX_LENGTH], token_hash=ApiToken.digest(secret), scopes=chosen,
            created_by=actor.username,
        )  # fmt: skip
        record(actor, "api_token.create", str(token), detail={"token": token.pk, "prefix": token.prefix,
                                                               "scopes": chosen})  # fmt: skip
    return token, secret


def do_revoke_api_token(actor: Actor, token: ApiToken) -> bool:
    """Refuse the token from now on (kept in the list as revoked). False when it already was revoked."""
    require(actor, EDIT, "api_token.revoke", str(token))
    with transaction.atomic(durable=True):
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=actor.username
        )
        outcome = AuditEntry.Outcome.OK if revoked else AuditEntry.Outcome.ERROR
        record(actor, "api_token.revoke", str(token), outcome, {"token": token.pk, "prefix": token.prefix,
                                                                "already_revoked": not revoked})  # fmt: skip
    return bool(revoked)


# --- notification channels -----------------------------------------------------------------------------------


def _channel_refused(actor: Actor, action: str, name: str, message: str) -> ValidationError:
    record(actor, action, name, AuditEntry.Outcome.ERROR, {"refused": message})
    return ValidationError(message)


def _events(actor: Actor, action: str, name: str, chosen: Iterable[str]) -> list[str]:
    wanted = set(chosen)
    picked = [event for event in NotificationChannel.Event.values if event in wanted]
    if not picked or len(picked) != len(wanted):
        raise _channel_refused(
            actor, action, name, f"choose what the channel hears among {', '.join(NotificationChannel.Event.values)}"
        )
    return picked


def do_create_notification_channel(actor: Actor, name: str, url: str, chosen: Iterable[str]) -> NotificationChannel:
    """A channel alerts or conflicts (or both) are sent to: its Apprise URL checked, then kept encrypted; the audit
    row names it by its hint, never by the URL (which may hold a webhook's secret)."""
    name = name.strip()
    require(actor, EDIT, "notify_channel.create", name)
    if not name:
        raise _channel_refused(actor, "notify_channel.create", name, "give the channel a name, e.g. on-call Slack")
    picked = _events(actor, "notify_channel.create", name, chosen)
    try:
        hint = notifications.check_url(url)
    except notifications.NotificationError as exc:
        raise _channel_refused(actor, "notify_channel.create", name, str(exc)) from None
    if NotificationChannel.objects.filter(name=name).exists():
        raise _channel_refused(actor, "notify_channel.create", name, f"a channel named {name!r} exists already")
    with transaction.atomic(durable=True):
        channel = NotificationChannel.objects.create(
            name=name, url_encrypted=crypto.encrypt(url.strip()), hint=hint, events=picked, created_by=actor.username
        )
        record(actor, "notify_channel.create", name, detail={"channel": channel.pk, "hint": hint, "events": picked})
    return channel


def do_set_notification_channel(
    actor: Actor, channel: NotificationChannel, *, enabled: bool, chosen: Iterable[str]
) -> str:
    """Switch a channel on or off and choose what it hears. Messages waiting for a channel switched off are not
    sent while it stays off."""
    require(actor, EDIT, "notify_channel.change", channel.name)
    picked = _events(actor, "notify_channel.change", channel.name, chosen)
    with transaction.atomic(durable=True):
        NotificationChannel.objects.filter(pk=channel.pk).update(enabled=enabled, events=picked)
        record(actor, "notify_channel.change", channel.name, detail={"channel": channel.pk, "enabled": enabled,
               "events": picked, "before": {"enabled": channel.enabled, "events": channel.events}})  # fmt: skip
    state = "on" if enabled else "off"
    return f"The channel {channel.name} is {state}; it hears {', '.join(picked)}."


def do_delete_notification_channel(actor: Actor, channel: NotificationChannel) -> str:
    """Drop a channel and the messages still waiting for it."""
    require(actor, EDIT, "notify_channel.delete", channel.name)
    with transaction.atomic(durable=True):
        waiting = channel.notification_set.filter(state="pending").count()
        channel.delete()
        record(actor, "notify_channel.delete", channel.name, detail={"hint": channel.hint, "waiting": waiting})
    return f"Deleted the channel {channel.name}" + (f" and its {waiting} waiting message(s)." if waiting else ".")


def do_test_notification_channel(actor: Actor, channel: NotificationChannel) -> str | None:
    """Send a test message now: None when the service took it, else its error (both in the audit log)."""
    require(actor, EDIT, "notify_channel.test", channel.name)
    error = notifications.send_test(channel, actor.username)
    outcome = AuditEntry.Outcome.OK if error is None else AuditEntry.Outcome.ERROR
    record(actor, "notify_channel.test", channel.name, outcome, {"channel": channel.pk, "error": error or ""})
    return error


def do_set_conflict_notify_email(actor: Actor, address: str) -> str:
    """Who is e-mailed about conflicts the default rule decided (empty: nobody)."""
    address = address.strip()
    require(actor, EDIT, "conflict.notify_email", address or "nobody")
    if address:
        try:
            validate_email(address)
        except ValidationError:
            message = f"{address!r} is not an e-mail address"
            raise _channel_refused(actor, "conflict.notify_email", address, message) from None
    with transaction.atomic(durable=True):
        RegistryEntry.objects.update_or_create(key=notifications.DEFAULT_EMAIL_KEY, defaults={"value": address})
        record(actor, "conflict.notify_email", address or "nobody", detail={"address": address})
    if address:
        return f"Conflicts the default rule decides are e-mailed to {address}."
    return "Nobody is e-mailed about conflicts the default rule decides."


# --- the scheduler's events ----------------------------------------------------------------------------------


class EventError(ReplicationError):
    """A scheduler action that cannot be done, said in one line."""


def _refused(actor: Actor, action: str, name: str, message: str) -> EventError:
    record(actor, action, name, AuditEntry.Outcome.ERROR, {"refused": message})
    return EventError(message)


def event_running(event: ScheduledEvent) -> bool:
    """The event's run holds its item lock, renewed by its worker: alive means running now."""
    return ReplLock.objects.filter(name=f"event:{event.name}", expires_at__gt=timezone.now()).exists()


def _at(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else "never"


def do_run_event_now(actor: Actor, event: ScheduledEvent) -> str:
    """Hand the event's run to a worker at once, claimed as a tick claims it: for its due time when it is due
    (the next tick then has nothing to hand out), else for now, so its slots stay where they were and the next
    run is the next slot (a paused event runs once and stays paused)."""
    require(actor, OPERATE, "event.run_now", event.name)
    if event_running(event):
        raise _refused(actor, "event.run_now", event.name, f"{event.name} is running now; it was not started again")
    now = timezone.now()
    times = event.times()
    at = due_at(times, now) or now
    if not events.claim(times, at):
        raise _refused(actor, "event.run_now", event.name, f"the scheduler handed {event.name} out just now")
    record(actor, "event.run_now", event.name, detail={"slot": at.isoformat()})
    events.hand_out(event.name, at)
    return f"{event.name} was handed to a worker; its next scheduled run stays {_at(_next(event.name))}"


def _next(name: str):
    event = ScheduledEvent.objects.get(name=name)
    return next_run(event.times(), timezone.now())


def _skip_missed_slots(event: ScheduledEvent, times) -> None:
    """Record the latest slot that has come as handed out, so that the change takes effect at the next slot
    instead of running at once for the ones missed (an event already due keeps its run)."""
    now = timezone.now()
    latest = slot_at(times, now)
    if latest is not None and (event.last_slot is None or latest > event.last_slot):
        ScheduledEvent.objects.filter(name=event.name).update(last_slot=latest)


def do_pause_event(actor: Actor, event: ScheduledEvent, paused: bool) -> str:
    """Pause (SE_DISABLED = 1: the scheduler skips it) or resume an event; a resumed event runs at its next
    slot, not at once for the slots it missed."""
    action = "event.pause" if paused else "event.resume"
    require(actor, OPERATE, action, event.name)
    with transaction.atomic():
        locked = ScheduledEvent.objects.select_for_update().get(name=event.name)
        if bool(locked.disabled) == paused:
            state = "paused" if paused else "running on its schedule"
            record(actor, action, event.name, detail={"unchanged": True})
            return f"{event.name} was already {state}"
        ScheduledEvent.objects.filter(name=event.name).update(disabled=1 if paused else 0)
        if not paused:
            _skip_missed_slots(locked, ScheduledEvent.objects.get(name=event.name).times())
        record(actor, action, event.name)
    if paused:
        return f"{event.name} is paused: the scheduler skips it until it is resumed"
    return f"{event.name} is resumed: next run {_at(_next(event.name))}"


def do_set_event_interval(actor: Actor, event: ScheduledEvent, minutes: object) -> str:
    """SE_INTERVAL: every how many minutes the event runs (1 to a year); its slots stay anchored on SE_START,
    and the next run is the next slot of the new interval."""
    require(actor, OPERATE, "event.interval", event.name)
    try:
        value = int(str(minutes).strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_INTERVAL:
        message = f"the interval is a whole number of minutes from 1 to {MAX_INTERVAL}, not {str(minutes)[:40]!r}"
        raise _refused(actor, "event.interval", event.name, message)
    with transaction.atomic():
        locked = ScheduledEvent.objects.select_for_update().get(name=event.name)
        before = locked.interval
        was_due = due_at(locked.times(), timezone.now()) is not None
        ScheduledEvent.objects.filter(name=event.name).update(interval=value)
        if not was_due:
            _skip_missed_slots(locked, ScheduledEvent.objects.get(name=event.name).times())
        record(actor, "event.interval", event.name, detail={"before": before, "after": value})
    return f"{event.name} runs every {value} minute{'s' if value != 1 else ''}: next run {_at(_next(event.name))}"

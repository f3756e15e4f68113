"""Console actions: acknowledging alerts (the alert leaves the dashboard; the same trouble later opens a new
one), lifting login lockouts, making and revoking the API tokens of the status API and metrics, and the scheduler's run
now, pause, resume and interval of a SYS_SCHEDULED_EVENT."""

from __future__ import annotations

from collections.abc import Iterable

from axes.utils import reset as axes_reset
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from replication_admin.core import events
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.errors import ReplicationError
from replication_admin.core.permissions import EDIT, OPERATE, UNLOCK_LOGINS
from replication_admin.engine.schedule import due_at, next_run, slot_at
from replication_admin.models import Alert, ApiToken, AuditEntry, ReplLock, ScheduledEvent

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

"""django-q2 entry points only: run a JobRun by id through the job runner registry, the scheduler round
that hands due SYS_SCHEDULED_EVENTs to workers, and the demo's stand-in for users.

Importing this module registers every feature's job kinds (their runs modules)."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import ExitStack, suppress
from datetime import datetime

from django.conf import settings
from django.core.mail import send_mail
from django.db import close_old_connections, connection, transaction
from django.urls import reverse
from django.utils import timezone

from replication_admin.bidir import runs as bidir_runs
from replication_admin.compare import actions as compare_actions
from replication_admin.compare import runs as compare_runs
from replication_admin.compare import validation as compare_validation
from replication_admin.conflicts import actions as conflict_actions
from replication_admin.conflicts import runs as conflict_runs
from replication_admin.core import events, heartbeats, jobs, reaper
from replication_admin.core.alerts import safely_raise, safely_send_notifications
from replication_admin.core.audit import Actor, record
from replication_admin.core.locks import LockBusy, item_lock
from replication_admin.demo import CONTESTED_EVERY, reprice, simulate_activity
from replication_admin.engine.schedule import due_at
from replication_admin.engine.statements import StatementError
from replication_admin.health import checks as health_checks
from replication_admin.health import state_alerts
from replication_admin.models import AuditEntry, ConflictBackup, JobRun, ScheduledEvent, Server
from replication_admin.snapshots import runs as snapshot_runs
from replication_admin.statements import execute
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import runs as trx_runs

log = logging.getLogger(__name__)

# Every job kind, registered by importing its feature's runs module.
RUNNER_MODULES = (bidir_runs, conflict_runs, compare_runs, compare_validation, snapshot_runs, trx_runs)


def run_job(job_id: int, inline: bool = False) -> str:
    """Run one JobRun (start → run → finish); a redelivered or cancelled job is left as it is."""
    return jobs.execute(job_id, inline=inline)


# --- scheduler ------------------------------------------------------------------------------------------
#
# Events run on their slots (engine/schedule.py). A tick hands each due event to a worker for one scheduled
# time, claimed first in SE_LAST_SLOT by a compare-and-set, so ticks on several hosts never hand out the
# same time twice. A tick reads only the due rows (SE_NEXT_RUN, indexed), in batches (core/events.py).
# Ticks come from each qcluster's scheduler thread (`scheduler_loop`), which sleeps until the next event's
# next run (one MIN(SE_NEXT_RUN); at most REPLADMIN_SCHEDULER_TICK seconds), and from the django-q2 schedule
# every minute (`scheduler_round`, for a cluster started without this product's qcluster command).

EVENT_ACTOR = Actor.scheduler()


def scheduler_tick() -> list[str]:
    """Hand each due SYS_SCHEDULED_EVENT to a worker, for the latest of its slots that has come. Only the due
    rows are read, claimed in batches (core/events.py); another tick's claims are skipped, not waited for."""
    handed = []
    for event, at in events.claim_due(timezone.now()):
        events.hand_out(event.name, at)
        handed.append(event.name)
    return handed


def scheduler_round() -> list[str]:
    """Every minute (a django-q2 schedule): reap, then one scheduler tick."""
    reaper.safely_reap()  # also here, for hosts that run the scheduler without this product's qcluster
    handed = scheduler_tick()
    trx_actions.retry_due_halts()  # halted subscriptions no follower serves: their next try, when due
    conflict_actions.safely_purge_expired_conflicts()  # hourly: backups past their retention
    compare_actions.safely_start_due_validations()  # subscriptions' tables whose validation is due
    safely_send_notifications()
    with suppress(Exception), transaction.atomic():  # a missed beat shows as a late tick, never as a failed round
        heartbeats.beat(heartbeats.Kind.SCHEDULER, {"tick": timezone.now().isoformat()})
    return handed


def scheduler_loop(stop: threading.Event) -> None:
    """The qcluster's scheduler thread: a tick at each event's next run, and at least every
    REPLADMIN_SCHEDULER_TICK seconds (new and changed events), until `stop` is set."""
    longest = float(settings.SCHEDULER_TICK)
    pulse = heartbeats.Pulse(heartbeats.Kind.SCHEDULER)
    next_lag_check = 0.0
    while not stop.is_set():
        try:
            scheduler_tick()
            trx_actions.retry_due_halts()  # halted subscriptions no follower serves: their next try, when due
            safely_send_notifications()  # conflicts the followers decided, alerts for the channels, retries
            pulse({"tick": timezone.now().isoformat()})  # the Health page's "last tick"
            if time.monotonic() >= next_lag_check:  # lag and slot alerts within about a minute, without a sync
                next_lag_check = time.monotonic() + settings.LAG_CHECK_SECONDS
                health_checks.safely_check_lag()
                state_alerts.safely_check_items()  # broken items (a table gone) alert in the same round
                conflict_actions.safely_purge_expired_conflicts()  # hourly: backups past their retention
                compare_actions.safely_start_due_validations()  # subscriptions' tables whose validation is due
            wait = events.seconds_to_next(timezone.now(), longest)
        except Exception:  # the next tick tries again; the scheduler never takes its host down
            log.exception("scheduler tick failed")
            close_old_connections()
            wait = longest
        stop.wait(max(wait, 0.05))
    connection.close()


def running_since(event: ScheduledEvent) -> str:
    started = event.last_started
    return timezone.localtime(started).strftime("%H:%M:%S") if started else "an earlier slot"


def _skipped(event: ScheduledEvent, slot: datetime) -> str:
    """The event's previous run still holds it: this slot's run is not needed, and not an error."""
    message = f"still running since {running_since(event)}"
    record(EVENT_ACTOR, "event.run", event.name, AuditEntry.Outcome.SKIPPED,
           {"slot": slot.isoformat(), "skipped": message})  # fmt: skip
    return f"event {event.name} skipped: {message}"


def _settle_job_audits(job_ids: list[int]) -> list[dict]:
    """The audit rows of the jobs the event's statements ran say how each job ended (they were written
    as the jobs were queued, before anyone knew)."""
    settled = []
    for job in JobRun.objects.filter(pk__in=job_ids).order_by("pk"):
        outcome = jobs.FINISHED_OUTCOMES.get(job.state)
        if outcome is None:
            continue  # still queued or running: its row stays as written
        for entry in AuditEntry.objects.filter(via=EVENT_ACTOR.via, action=f"job.{job.kind}", detail__job=job.pk):
            entry.outcome = outcome
            entry.detail = {**entry.detail, "state": job.state, **({"error": job.error[:2000]} if job.error else {})}
            entry.save(update_fields=["outcome", "detail"])
        settled.append({"job": job.pk, "state": job.state})
    return settled


def _run_statements(event: ScheduledEvent) -> tuple[str | None, list[int]]:
    """Run the event's statements; the first error (None when all went well) and the jobs they ran."""
    job_ids: list[int] = []
    try:
        context = Server.objects.filter(name=event.server).first() if event.server else None
        if event.server and context is None:
            raise LookupError(f"the event runs on server {event.server!r}, which is not registered")
        outcomes = execute(EVENT_ACTOR, event.sql, context=context, wait=True)
        for outcome in outcomes:
            job_ids += [outcome.job_id] if outcome.job_id else []
            job_ids += [j for j in outcome.details.get("jobs", []) if isinstance(j, int)]
        failed = [o for o in outcomes if not o.ok]
        return (f"{failed[0].statement}: {failed[0].message}" if failed else None), job_ids
    except StatementError as exc:
        return str(exc), job_ids
    except Exception as exc:  # an event must record its failure, whatever it was
        log.exception("scheduled event %s failed", event.name)
        return f"{type(exc).__name__}: {exc}", job_ids


def _run_claimed(event: ScheduledEvent, slot: datetime) -> str:
    name = event.name
    started = timezone.now()
    ScheduledEvent.objects.filter(name=name).update(last_started=started)
    error, job_ids = _run_statements(event)
    detail: dict = {"slot": slot.isoformat(), "started": started.isoformat(), "jobs": _settle_job_audits(job_ids)}
    if error is None:
        ScheduledEvent.objects.filter(name=name).update(
            last_completed=timezone.now(), last_error=None, notification_sent=0
        )
        record(EVENT_ACTOR, "event.run", name, AuditEntry.Outcome.OK, detail)
        return f"event {name} completed"
    ScheduledEvent.objects.filter(name=name).update(last_error=error[:4000])
    record(EVENT_ACTOR, "event.run", name, AuditEntry.Outcome.ERROR, {**detail, "error": error[:2000]})
    safely_raise("event_error", name, error[:2000], reverse("scheduler"))
    if event.enable_notify and event.notify and not event.notification_sent:
        send_mail(
            f"[replication_admin] scheduled event {name} failed",
            f"The scheduled event {name} failed:\n\n{error}\n\nStatements:\n{event.sql}\n",
            None,
            [event.notify],
            fail_silently=True,
        )
        ScheduledEvent.objects.filter(name=name).update(notification_sent=1)
    return f"event {name} failed: {error}"


def run_event(name: str, slot: datetime | None = None) -> str:
    """Run one scheduled event's statements for the scheduled time `slot` (handed out by a tick) and
    record SE_LAST_STARTED, then SE_LAST_COMPLETED or SE_LAST_ERROR, and an audit row with the outcome.

    Called without `slot` (by hand), it runs when the event is due, claiming the time as a tick would.
    A run that finds the event's previous run still going is skipped, and audited so."""
    event = ScheduledEvent.objects.filter(name=name).first()
    if event is None:
        return f"event {name} is gone"
    if slot is None:
        at = due_at(event.times(), timezone.now())
        if at is None or not events.claim(event.times(), at):
            return f"event {name} is not due"
        slot = at
    elif event.last_slot is not None and event.last_slot > slot:
        return f"event {name}: a later run was handed out; it does this one's work"
    with ExitStack() as stack:
        try:
            stack.enter_context(item_lock(f"event:{name}", None, wait=0))
        except LockBusy:
            return _skipped(event, slot)
        return _run_claimed(ScheduledEvent.objects.get(name=name), slot)


def demo_activity() -> dict:
    """The demo's stand-in for users: a minute of orders on the Demo database (scheduled by demo_setup)."""
    done = simulate_activity(str(settings.VAR_DIR / "demo.sqlite3"))
    # Until the inbox holds a conflict, every minute is contested: a new demo shows one at its first syncs.
    contested = timezone.now().minute % CONTESTED_EVERY == 0 or not ConflictBackup.objects.exists()
    done["repriced"] = reprice(str(settings.VAR_DIR / "demo.sqlite3"), contested=contested)
    branch = settings.VAR_DIR / "branch.sqlite3"
    if branch.exists():
        done["repriced_at_branch"] = reprice(str(branch), contested=contested)
    return done

"""django-q2 entry points only: run a JobRun by id through the job runner registry, the scheduler round
that hands due SYS_SCHEDULED_EVENTs to workers, and the demo's stand-in for users.

Importing this module registers every feature's job kinds (their runs modules)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone
from django_q.tasks import async_task

from replication_admin.bidir import runs as bidir_runs
from replication_admin.conflicts import runs as conflict_runs
from replication_admin.console import runs as console_runs
from replication_admin.core import jobs, reaper
from replication_admin.core.alerts import safely_raise
from replication_admin.core.audit import Actor
from replication_admin.core.locks import LockBusy, item_lock
from replication_admin.demo import reprice, simulate_activity
from replication_admin.engine.schedule import EventTimes, due_events, is_due
from replication_admin.engine.statements import StatementError
from replication_admin.models import ScheduledEvent, Server
from replication_admin.snapshots import runs as snapshot_runs
from replication_admin.statements import execute
from replication_admin.transactional import runs as trx_runs

log = logging.getLogger(__name__)

# Every job kind, registered by importing its feature's runs module.
RUNNER_MODULES = (bidir_runs, conflict_runs, console_runs, snapshot_runs, trx_runs)


def run_job(job_id: int, inline: bool = False) -> str:
    """Run one JobRun (start → run → finish); a redelivered or cancelled job is left as it is."""
    return jobs.execute(job_id, inline=inline)


# --- scheduler ------------------------------------------------------------------------------------------


def _event_times(event) -> EventTimes:
    return EventTimes(
        name=event.name,
        start=event.start,
        interval=event.interval,
        last_completed=event.last_completed,
        disabled=event.disabled,
    )


def scheduler_round() -> list[str]:
    """Every minute (a django-q2 schedule): hand each due SYS_SCHEDULED_EVENT to a worker."""
    reaper.safely_reap()  # also here, for hosts that run the scheduler without this product's qcluster
    now = timezone.now()
    due = due_events((_event_times(e) for e in ScheduledEvent.objects.all()), now)
    for event in due:
        async_task("replication_admin.tasks.run_event", event.name, task_name=f"event-{event.name}"[:100],
                   group="scheduler", sync=settings.JOBS_SYNC)  # fmt: skip
    return [e.name for e in due]


def run_event(name: str) -> str:
    """Run one scheduled event's statements and record SE_LAST_COMPLETED or SE_LAST_ERROR."""
    try:
        with item_lock(f"event:{name}", None, wait=0):  # a second run of a running event is not needed
            event = ScheduledEvent.objects.filter(name=name).first()
            if event is None or not is_due(_event_times(event), timezone.now()):
                return f"event {name} is not due"
            try:
                context = Server.objects.filter(name=event.server).first() if event.server else None
                if event.server and context is None:
                    raise LookupError(f"the event runs on server {event.server!r}, which is not registered")
                outcomes = execute(Actor.scheduler(), event.sql, context=context, wait=True)
                failed = [o for o in outcomes if not o.ok]
                error = f"{failed[0].statement}: {failed[0].message}" if failed else None
            except StatementError as exc:
                error = str(exc)
            except Exception as exc:  # an event must record its failure, whatever it was
                log.exception("scheduled event %s failed", name)
                error = f"{type(exc).__name__}: {exc}"
            if error is None:
                ScheduledEvent.objects.filter(name=name).update(
                    last_completed=timezone.now(), last_error=None, notification_sent=0
                )
                return f"event {name} completed"
            ScheduledEvent.objects.filter(name=name).update(last_error=error[:4000])
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
    except LockBusy:
        return f"event {name} is already running"


def demo_activity() -> dict:
    """The demo's stand-in for users: a minute of orders on the Demo database (scheduled by demo_setup)."""
    done = simulate_activity(str(settings.VAR_DIR / "demo.sqlite3"))
    done["repriced"] = reprice(str(settings.VAR_DIR / "demo.sqlite3"))
    branch = settings.VAR_DIR / "branch.sqlite3"
    if branch.exists():
        done["repriced_at_branch"] = reprice(str(branch))
    return done

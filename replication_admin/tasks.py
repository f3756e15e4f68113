"""django-q2 entry points: take a JobRun id, advance its state, call the Spark job in jobs/.

Everything a job measures is measured here, inside the task, and stored on the JobRun.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager

import pyodbc
from django.conf import settings
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from jobs.session import SparkConfig, get_spark
from replication_admin.conflicts.actions import run_resolver_dry_run
from replication_admin.core import connections
from replication_admin.engine import dialects
from replication_admin.engine.compare import ComparePlanError, plan_compare
from replication_admin.engine.schedule import EventTimes, due_events, is_due
from replication_admin.models import JobRun, Server

log = logging.getLogger(__name__)


class JobCancelled(Exception):
    pass


class JobError(Exception):
    """An expected failure with a message meant for the person who started the job."""


def spark_config() -> SparkConfig:
    return SparkConfig(
        master=settings.SPARK_MASTER,
        driver_memory=settings.SPARK_DRIVER_MEMORY,
        jars=tuple(settings.JDBC_JARS),
    )


class Reporter:
    """Progress, log lines and phase timings of one JobRun, written as it goes."""

    MIN_INTERVAL = 0.25  # seconds between progress writes; the page polls every second

    def __init__(self, job: JobRun) -> None:
        self.job = job
        self.timings: dict[str, float] = {}
        self._last_write = 0.0

    def log(self, line: str) -> None:
        stamp = timezone.now().strftime("%H:%M:%S")
        self.job.log += f"[{stamp}] {line}\n"
        JobRun.objects.filter(pk=self.job.pk).update(log=self.job.log)

    def progress(self, done: int, total: int, message: str = "") -> None:
        state = JobRun.objects.filter(pk=self.job.pk).values_list("state", flat=True).first()
        if state == JobRun.State.CANCELLED:
            raise JobCancelled()
        now = time.monotonic()
        if message:
            self.log(message)
        if now - self._last_write < self.MIN_INTERVAL and done < total and not message:
            return
        self._last_write = now
        JobRun.objects.filter(pk=self.job.pk).update(
            progress_done=done, progress_total=total, message=message[:500] if message else self.job.message
        )

    def spark_progress(self, base: float, span: float, steps: int):
        """A callback for Spark's task progress, mapped into steps [base, base + span] of `steps`.

        It runs on the progress thread, which has its own database connection. When the job runs inside
        the caller's transaction (sync mode in a transaction), that connection would wait on it, so live
        progress is skipped there; a job that has finished is never written to by a late report."""
        if settings.JOBS_SYNC or connection.in_atomic_block:
            return None
        job_id = self.job.pk

        def report(done: int, total: int) -> None:
            fraction = done / total if total else 0.0
            JobRun.objects.filter(pk=job_id, state=JobRun.State.RUNNING).update(
                progress_done=int(100 * (base + span * fraction)), progress_total=100 * steps
            )
            connection.close()

        return report

    @contextmanager
    def phase(self, name: str):
        started = time.monotonic()
        try:
            yield
        finally:
            self.timings[name] = round(time.monotonic() - started, 4)


def _server(name: str) -> Server:
    try:
        return Server.objects.get(name=name)
    except Server.DoesNotExist:
        raise JobError(f"server {name!r} is not registered") from None


def _snapshot_source(name: str):
    """A snapshot's source query as a left side: (server, virtual table of its output, query)."""
    from replication_admin.models import Snapshot
    from replication_admin.snapshots.shapes import shape_of

    snapshot = Snapshot.objects.select_related("source_server").filter(name=name).first()
    if snapshot is None:
        raise JobError(f"snapshot {name} does not exist")
    shape = shape_of(snapshot)
    return shape.server, shape.as_table(f"query of {snapshot.name}"), shape.sql


def run_compare(job: JobRun, reporter: Reporter) -> dict:
    params = job.params
    right = _server(params["right_server"])
    with reporter.phase("introspect"):
        try:
            query = None
            if params.get("snapshot"):
                left, left_info, query = _snapshot_source(params["snapshot"])
            else:
                left = _server(params["left_server"])
                left_info = connections.describe_table(left, params["left_table"])
            right_info = connections.describe_table(right, params["right_table"])
            plan = plan_compare(
                dialects.get(left.dialect),
                left_info,
                dialects.get(right.dialect),
                right_info,
                left_query=query,
            )
        except (connections.ConnectionFailed, connections.TableNotFound, ComparePlanError) as exc:
            raise JobError(str(exc)) from None
        left_endpoint = connections.jdbc_endpoint(left, readonly=True)
        right_endpoint = connections.jdbc_endpoint(right, readonly=True)
    reporter.log(f"key ({', '.join(plan.key_columns)}); comparing {len(plan.compared_columns)} column(s)")
    with reporter.phase("spark_session"):
        spark = get_spark(spark_config())
    from jobs import compare

    with reporter.phase("spark_job"):
        return compare.run(spark, plan, left_endpoint, right_endpoint, progress=reporter.progress)


def run_snapshot_refresh(job: JobRun, reporter: Reporter) -> dict:
    from replication_admin.snapshots.refresh import refresh_snapshot

    return refresh_snapshot(job, reporter, spark_config())


def run_snapshot_repair(job: JobRun, reporter: Reporter) -> dict:
    from replication_admin.snapshots.refresh import repair_snapshot

    return repair_snapshot(job, reporter, spark_config())


def run_bidir_init(job: JobRun, reporter: Reporter) -> dict:
    from replication_admin.bidir.sync import init_subscription

    return init_subscription(job, reporter, spark_config())


def run_bidir_sync(job: JobRun, reporter: Reporter) -> dict:
    from replication_admin.bidir.sync import sync_publication

    return sync_publication(job, reporter, spark_config())


def run_trx_init(job: JobRun, reporter: Reporter) -> dict:
    from replication_admin.transactional.replication import init_copy

    return init_copy(job, reporter, spark_config())


def run_trx_sync(job: JobRun, reporter: Reporter) -> dict:
    from replication_admin.transactional.replication import sync_job

    return sync_job(job, reporter)


HANDLERS: dict[str, Callable[[JobRun, Reporter], dict]] = {
    "bidir_init": run_bidir_init,
    "bidir_sync": run_bidir_sync,
    "compare": run_compare,
    "resolver_dry_run": run_resolver_dry_run,
    "snapshot_refresh": run_snapshot_refresh,
    "snapshot_repair": run_snapshot_repair,
    "trx_init": run_trx_init,
    "trx_sync": run_trx_sync,
}


def _expected(exc: Exception) -> str | None:
    """The message for failures a person can act on; None for the unexpected ones (logged with trace)."""
    from replication_admin.engine.queries import QueryError
    from replication_admin.snapshots.refresh import LockBusy
    from replication_admin.snapshots.shapes import SnapshotError

    if isinstance(exc, JobError | SnapshotError | LockBusy | QueryError | connections.ConnectionFailed):
        return str(exc)
    if isinstance(exc, pyodbc.Error):
        return f"database error: {connections.driver_message(exc)}"
    return None


def run_job(job_id: int) -> str:
    """Run one JobRun. A redelivered or cancelled job is left as it is."""
    started = time.monotonic()
    claimed = JobRun.objects.filter(pk=job_id, state=JobRun.State.QUEUED).update(
        state=JobRun.State.RUNNING, started_at=timezone.now(), worker_pid=os.getpid()
    )
    if not claimed:
        state = JobRun.objects.filter(pk=job_id).values_list("state", flat=True).first()
        return f"job {job_id} not run: {state or 'missing'}"
    job = JobRun.objects.get(pk=job_id)
    JobRun.objects.filter(pk=job_id).update(attempts=job.attempts + 1)
    reporter = Reporter(job)
    handler = HANDLERS.get(job.kind)
    try:
        if handler is None:
            raise JobError(f"unknown job kind {job.kind!r}")
        result = handler(job, reporter)
    except JobCancelled:
        reporter.timings["total"] = round(time.monotonic() - started, 4)
        JobRun.objects.filter(pk=job_id).update(timings=reporter.timings)
        return f"job {job_id} cancelled"
    except Exception as exc:
        reporter.timings["total"] = round(time.monotonic() - started, 4)
        expected = _expected(exc)
        message = expected if expected is not None else f"{type(exc).__name__}: {exc}"
        if expected is None:
            log.exception("job %s failed", job_id)
            reporter.log(traceback.format_exc())
        JobRun.objects.filter(pk=job_id, state=JobRun.State.RUNNING).update(
            state=JobRun.State.FAILED,
            error=message[:10000],
            finished_at=timezone.now(),
            timings=reporter.timings,
            message="failed",
        )
        from replication_admin.core.alerts import safely_raise

        safely_raise("job_failed", f"{job.kind} {job.target}", message[:2000], reverse("jobs-detail", args=[job_id]))
        return f"job {job_id} failed"
    reporter.timings["total"] = round(time.monotonic() - started, 4)
    JobRun.objects.filter(pk=job_id, state=JobRun.State.RUNNING).update(
        state=JobRun.State.SUCCEEDED,
        result=result,
        finished_at=timezone.now(),
        timings=reporter.timings,
        message="done",
    )
    return f"job {job_id} succeeded"


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
    from django_q.tasks import async_task

    from replication_admin.models import ScheduledEvent

    now = timezone.now()
    due = due_events((_event_times(e) for e in ScheduledEvent.objects.all()), now)
    for event in due:
        async_task("replication_admin.tasks.run_event", event.name, task_name=f"event-{event.name}"[:100],
                   group="scheduler", sync=settings.JOBS_SYNC)  # fmt: skip
    return [e.name for e in due]


def run_event(name: str) -> str:
    """Run one scheduled event's statements and record SE_LAST_COMPLETED or SE_LAST_ERROR."""
    from django.core.mail import send_mail

    from replication_admin.core.audit import Actor
    from replication_admin.engine.statements import StatementError
    from replication_admin.models import ScheduledEvent
    from replication_admin.snapshots.refresh import LockBusy, item_lock
    from replication_admin.statements import execute

    try:
        with item_lock(f"event:{name}", None):
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
            from replication_admin.core.alerts import safely_raise

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
    from replication_admin.demo import reprice, simulate_activity

    done = simulate_activity(str(settings.VAR_DIR / "demo.sqlite3"))
    done["repriced"] = reprice(str(settings.VAR_DIR / "demo.sqlite3"))
    branch = settings.VAR_DIR / "branch.sqlite3"
    if branch.exists():
        done["repriced_at_branch"] = reprice(str(branch))
    return done

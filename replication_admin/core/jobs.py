"""Background jobs: one JobRunner lifecycle (start → run → finish) for every kind, a registry by kind,
typed frozen parameters and results per kind, the job's log appended line by line, and queueing and cancelling.

A feature declares its kinds in its `runs.py`:

    @register
    class SnapshotRefresh(JobRunner[RefreshParams]):
        kind = "snapshot_refresh"
        label = "Refresh a snapshot"
        params_type = RefreshParams
        result_type = RefreshResult

        def run(self) -> RefreshResult: ...

and starts one with `do_start_job(actor, SnapshotRefresh, target, RefreshParams(...))`; its pages read the
result back with `result_of(job)`. The django-q2 task
(`replication_admin.tasks.run_job`) hands the job's id to `execute`, which owns the JobRun's state: a
redelivered or cancelled job is left as it is, a failure is stored as one line (the trace goes to the
job's log) and raises an alert.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import UnionType
from typing import Any, ClassVar, Generic, Self, TypeVar, Union, cast, get_args, get_origin, get_type_hints

import pyodbc
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, TextField, Value
from django.db.models.functions import Concat
from django.urls import reverse
from django.utils import timezone
from django_q.tasks import async_task

from replication_admin.core import connections, transactions
from replication_admin.core.alerts import safely_raise, safely_resolve
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.errors import LockBusy, ReplicationError
from replication_admin.core.leases import HEARTBEAT, HOST, expiry
from replication_admin.core.permissions import OPERATE
from replication_admin.core.spark import job_spark
from replication_admin.engine.queries import QueryError
from replication_admin.models import AuditEntry, JobRun

log = logging.getLogger(__name__)


class JobCancelled(Exception):
    pass


class JobError(ReplicationError):
    """An expected failure with a message meant for the person who started the job."""


@dataclasses.dataclass(frozen=True)
class JobParams:
    """A job kind's parameters: stored as JSON on the JobRun, read back typed."""

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Self:
        data = data or {}
        names = {f.name for f in dataclasses.fields(cls)}
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise JobError(f"the job has no {', '.join(missing)} parameter")
        return cls(**{k: v for k, v in data.items() if k in names})

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


P = TypeVar("P", bound=JobParams)


def _typed(hint: Any, value: Any) -> Any:
    """`value` read from JSON as `hint` says: a JobResult (or a list, a dict's values, an optional of one) built
    from its dict; anything else as stored."""
    if value is None:
        return None
    if isinstance(hint, type) and issubclass(hint, JobResult) and isinstance(value, dict):
        return hint.from_json(value)
    origin, args = get_origin(hint), get_args(hint)
    if origin in (UnionType, Union):
        inner = [a for a in args if a is not type(None)]
        return _typed(inner[0], value) if len(inner) == 1 else value
    if origin is list and args and isinstance(value, list):
        return [_typed(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return {k: _typed(args[1], v) for k, v in value.items()}
    return value


# A result field that is stored only when it holds something (a key older rows never had, such as the copy a sync
# made after a conflict): `field(default=None, metadata=STORED_WHEN_SET)`.
STORED_WHEN_SET = {"stored_when_set": True}


def _plain(value: Any) -> Any:
    if isinstance(value, JobResult):
        return value.as_json()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# The figures of a run every job kind reports in the same words and order (the job page, the jobs list, an item's
# history and its chart): what it read, what it wrote, what it pulled from and pushed to subscribers, the
# conflicts it decided and what it skipped. A kind reports those it has.
RUN_COUNTS = ("read", "written", "pulled", "pushed", "conflicts", "skipped")


def run_counts(**counts: int) -> dict[str, int]:
    """The counts given, in RUN_COUNTS order."""
    return {name: int(counts[name]) for name in RUN_COUNTS if name in counts}


@dataclasses.dataclass(frozen=True)
class JobResult:
    """A job kind's result: returned by its runner, stored as JSON on the JobRun (its fields as keys, in their
    order), read back typed (`result_of`). Every field has a default, so rows stored before a field existed still
    read; keys a row holds that the class does not know are left out. A kind whose result takes several shapes
    names each by its `mode` key (`modes`: {mode: subclass}); reading picks the shape the row's mode names."""

    modes: ClassVar[dict[str, type[JobResult]]] = {}
    unit: ClassVar[str] = "rows"  # what its counts count

    def counts(self) -> dict[str, int]:
        """This run's figures among RUN_COUNTS (run_counts), those its kind has."""
        return {}

    @classmethod
    def mode_of(cls, data: dict[str, Any]) -> str:
        """Which of `modes` a stored result is."""
        return str(data.get("mode", ""))

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Self:
        data = data or {}
        shape = cls.modes.get(cls.mode_of(data))
        target = shape if shape is not None and issubclass(shape, cls) else cls
        hints = get_type_hints(target)
        fields = dataclasses.fields(target)
        return target(**{f.name: _typed(hints[f.name], data[f.name]) for f in fields if f.name in data})

    def as_json(self) -> dict[str, Any]:
        return {
            f.name: _plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None or not f.metadata.get("stored_when_set")
        }


R = TypeVar("R", bound=JobResult)


class Reporter:
    """Progress, log lines and phase timings of one JobRun, written as it goes."""

    MIN_INTERVAL = 0.25  # seconds between progress writes; the page polls every second

    def __init__(self, job: JobRun) -> None:
        self.job = job
        self.timings: dict[str, float] = {}
        self._last_write = 0.0

    def log(self, line: str) -> None:
        """Append one line to the job's log: one UPDATE carrying only that line (`log = log || line` in SQL), so
        a long log costs each new line the same small write."""
        stamp = timezone.now().strftime("%H:%M:%S")
        JobRun.objects.filter(pk=self.job.pk).update(
            log=Concat(F("log"), Value(f"[{stamp}] {line}\n"), output_field=TextField())
        )

    def progress(self, done: int, total: int, message: str = "") -> None:
        state = JobRun.objects.filter(pk=self.job.pk).values_list("state", flat=True).first()
        if state in (JobRun.State.CANCELLED, JobRun.State.LOST) or HEARTBEAT.was_taken_back(self.job.pk):
            # Cancelled, or taken back by the reaper while this worker was cut off: another attempt runs it.
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

    def spark_progress(self, base: float, span: float, steps: int) -> Callable[[int, int], None] | None:
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
    def phase(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.timings[name] = round(time.monotonic() - started, 4)


@dataclasses.dataclass(frozen=True)
class Subject:
    """The object a job works on: its name for people ("snapshot wh.copy") and the URL of its page."""

    name: str
    url: str = ""


class JobRunner(Generic[P]):
    """One kind of background job. Subclasses set kind, label, params_type and result_type, implement run()
    (returning a result_type) and say which object a job works on (subject)."""

    kind: ClassVar[str]
    label: ClassVar[str]
    params_type: ClassVar[type[JobParams]]
    result_type: ClassVar[type[JobResult]] = JobResult
    # Whether a person may run a failed or cancelled job of this kind again with the same parameters.
    retryable: ClassVar[bool] = True

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        """The object a job with these parameters works on; None when the kind does not name one."""
        return None

    def __init__(self, job: JobRun, reporter: Reporter) -> None:
        self.job = job
        self.reporter = reporter
        # params_type is the class of P (a ClassVar cannot name a type variable)
        self.params: P = cast(P, self.params_type.from_json(job.params))

    def run(self) -> JobResult:
        raise NotImplementedError


RUNNERS: dict[str, type[JobRunner[Any]]] = {}


def register(runner: type[JobRunner[P]]) -> type[JobRunner[P]]:
    """Make a job kind runnable (a class decorator in each feature's runs.py)."""
    if runner.kind in RUNNERS and RUNNERS[runner.kind] is not runner:
        raise ValueError(f"job kind {runner.kind!r} is registered twice")
    RUNNERS[runner.kind] = runner
    return runner


def result_of(job: JobRun, result_type: type[R] = JobResult) -> R | None:  # type: ignore[assignment]
    """The typed result of a finished job (its kind's result_type read from the row); None when it has none, or
    when it is not a `result_type` (a compare's page asks for a CompareResult)."""
    runner = RUNNERS.get(job.kind)
    if runner is None or not isinstance(job.result, dict):
        return None
    result = runner.result_type.from_json(job.result)
    return result if isinstance(result, result_type) else None


def job_subject(kind: str, params: dict[str, Any] | None) -> Subject | None:
    """The object a job works on, as its kind names it (None for an unknown kind or one that names none)."""
    runner = RUNNERS.get(kind)
    if runner is None:
        return None
    try:
        return runner.subject(params or {})
    except (KeyError, TypeError, ValueError):  # parameters of an older version: no link rather than no page
        return None


# --- the lifecycle ---------------------------------------------------------------------------------------


def _expected(exc: Exception) -> str | None:
    """The message for failures a person can act on; None for the unexpected ones (logged with trace)."""
    line = transactions.one_line(exc)  # connection and Spark faults: one line naming the server and cause
    if line is not None:
        return line
    if isinstance(exc, ReplicationError | QueryError | connections.ConnectionFailed):
        return str(exc)
    if isinstance(exc, pyodbc.Error):
        return f"database error: {connections.driver_message(exc)}"
    return None


def _start(job_id: int) -> JobRun | None:
    """Claim a queued job for this process, with its lease; None when it is not queued (redelivered,
    cancelled, gone)."""
    claimed = JobRun.objects.filter(pk=job_id, state=JobRun.State.QUEUED).update(
        state=JobRun.State.RUNNING, started_at=timezone.now(), worker_pid=os.getpid(), worker_host=HOST,
        lease_expires_at=expiry(), waiting_for=None, message="",
    )  # fmt: skip
    if not claimed:
        return None
    job = JobRun.objects.get(pk=job_id)
    JobRun.objects.filter(pk=job_id).update(attempts=job.attempts + 1)
    job.attempts += 1
    if job.not_before is not None:  # a retry's backoff (at most 30 s), waited out with the lease held
        time.sleep(max(0.0, min(30.0, (job.not_before - timezone.now()).total_seconds())))
    return job


def _back_to_queue(job: JobRun, busy: LockBusy) -> str:
    """A queued run that found its item busy waits behind the job applying it, without a worker."""
    message = busy.waiting[:500]
    JobRun.objects.filter(pk=job.pk, state=JobRun.State.RUNNING).update(
        state=JobRun.State.QUEUED, started_at=None, worker_pid=None, worker_host="", lease_expires_at=None,
        attempts=job.attempts - 1, sent_at=None, message=message, waiting_for_id=busy.holder_job_id,
        not_before=None if busy.holder_job_id else timezone.now() + timedelta(seconds=2),
    )  # fmt: skip
    # The holder may have ended meanwhile: then nobody else would hand this one out soon.
    holder = busy.holder_job_id
    unfinished = [JobRun.State.QUEUED, JobRun.State.RUNNING]
    if holder is not None and not JobRun.objects.filter(pk=holder, state__in=unfinished).exists():
        _wake_waiters(holder)
    return f"job {job.pk} {message}"


def _wake_waiters(job_id: int) -> None:
    """Hand out the jobs that waited behind `job_id`, now that it has ended."""
    for waiter in JobRun.objects.filter(state=JobRun.State.QUEUED, waiting_for_id=job_id).order_by("pk"):
        if JobRun.objects.filter(pk=waiter.pk, waiting_for_id=job_id).update(waiting_for=None):
            enqueue(waiter, sync=False)


def _finish(job: JobRun, reporter: Reporter, started: float, **fields: Any) -> None:
    reporter.timings["total"] = round(time.monotonic() - started, 4)
    with transaction.atomic():
        finished = JobRun.objects.filter(pk=job.pk, state=JobRun.State.RUNNING).update(
            finished_at=timezone.now(), timings=reporter.timings, **fields
        )
        if finished:  # not when it was cancelled meanwhile: the cancellation audited its end
            audit_finished(job, fields["state"], fields.get("error", ""))


FINISHED_OUTCOMES: dict[str, str] = {
    JobRun.State.SUCCEEDED: AuditEntry.Outcome.OK,
    JobRun.State.SKIPPED: AuditEntry.Outcome.SKIPPED,
    JobRun.State.FAILED: AuditEntry.Outcome.ERROR,
    JobRun.State.LOST: AuditEntry.Outcome.ERROR,
    JobRun.State.CANCELLED: AuditEntry.Outcome.ERROR,
}


def audit_finished(job: JobRun, state: str, error: str = "") -> AuditEntry:
    """The audit row (`job.finished`) of a job that ended, under the name of whoever queued it: the row that
    queued it (for a lost job's next attempt, the row that queued the first attempt), with how it ended and
    its error's first line. Written in the transaction that writes the job's final state."""
    first, hops = job, 0
    while first.retry_of_id is not None and hops < 100:
        first, hops = JobRun.objects.get(pk=first.retry_of_id), hops + 1
    queued = AuditEntry.objects.filter(action=f"job.{first.kind}", detail__job=first.pk).order_by("pk").first()
    line = next((text.strip() for text in error.splitlines() if text.strip()), "")[:500]
    detail = {"job": job.pk, "kind": job.kind, "state": state, **({"error": line} if line else {})}
    if queued is not None:
        who = {"user_id": queued.user_id, "username": queued.username, "via": queued.via}
        who["remote_addr"] = queued.remote_addr
    else:  # queued without an audit row (only code does that): the job's own record of who asked
        scheduled = job.trigger == JobRun.Trigger.SCHEDULER
        by = job.created_by.get_username() if job.created_by is not None else ""
        who = {"user_id": job.created_by_id, "username": by or ("scheduler" if scheduled else "command")}
        who["via"] = "scheduler" if scheduled else "web" if by else "command"
    return AuditEntry.objects.create(
        action="job.finished", target=str(job)[:500], outcome=FINISHED_OUTCOMES[state], detail=detail, **who
    )


def execute(job_id: int, inline: bool = False) -> str:
    """Run one JobRun through its kind's runner: start → run → finish, holding its lease throughout.

    `inline`: the run happens inside the requesting process (it waits for a busy item there)."""
    started = time.monotonic()
    job = _start(job_id)
    if job is None:
        state = JobRun.objects.filter(pk=job_id).values_list("state", flat=True).first()
        return f"job {job_id} not run: {state or 'missing'}"
    job.runs_inline = inline
    # Inside a caller's transaction another thread could not write the lease; such a run is short.
    beating = not connection.in_atomic_block
    if beating:
        HEARTBEAT.add_job(job.pk)
    try:
        return _run(job, Reporter(job), started)
    finally:
        if beating:
            HEARTBEAT.remove_job(job.pk)
        if JobRun.objects.filter(pk=job.pk, state__in=JobRun.FINISHED).exists():
            _wake_waiters(job.pk)


def _taken_back(job: JobRun) -> bool:
    state = JobRun.objects.filter(pk=job.pk).values_list("state", flat=True).first()
    return state in (JobRun.State.CANCELLED, JobRun.State.LOST) or HEARTBEAT.was_taken_back(job.pk)


def _attempt(job: JobRun, runner_type: type[JobRunner[Any]], reporter: Reporter) -> JobResult:
    """One run of the job from its start; none once the reaper took the job back (its next attempt, a JobRun of
    its own, runs it: this one must not run beside it)."""
    if _taken_back(job):
        raise JobCancelled()
    return runner_type(job, reporter).run()


def _run(job: JobRun, reporter: Reporter, started: float) -> str:
    job_id = job.pk
    try:
        runner_type = RUNNERS.get(job.kind)
        if runner_type is None:
            raise JobError(f"unknown job kind {job.kind!r}")
        # A retryable error the steps did not clear runs the job again from its start (jobs are idempotent).
        with job_spark(job):
            result = transactions.job_retries(lambda: _attempt(job, runner_type, reporter), reporter.log)
    except JobCancelled:
        reporter.timings["total"] = round(time.monotonic() - started, 4)
        JobRun.objects.filter(pk=job_id).update(timings=reporter.timings)
        # A cancelled job ends when its worker stops, not when the cancel was asked: its duration then holds
        # its own timings (the cancellation's audit row keeps when it was asked).
        JobRun.objects.filter(pk=job_id, state=JobRun.State.CANCELLED).update(finished_at=timezone.now())
        return f"job {job_id} cancelled"
    except LockBusy as busy:
        if job.trigger == JobRun.Trigger.SCHEDULER:
            # The running job does the work this run was for: not needed, not a failure, no alert.
            _finish(job, reporter, started, state=JobRun.State.SKIPPED, message=f"skipped: {busy}"[:500])
            return f"job {job_id} skipped"
        if not job.runs_inline:
            return _back_to_queue(job, busy)
        message = str(busy)
        _finish(job, reporter, started, state=JobRun.State.FAILED, error=message, message="failed")
        safely_raise("job_failed", f"{job.kind} {job.target}", message, reverse("jobs-detail", args=[job_id]))
        return f"job {job_id} failed"
    except Exception as exc:
        if _taken_back(job):  # the reaper ended this attempt (lost or stalled) and queued the next one
            log.warning("job %s: the attempt taken back ended with %s", job_id, type(exc).__name__)
            return f"job {job_id} taken back"
        expected = _expected(exc)
        message = expected if expected is not None else f"{type(exc).__name__}: {exc}"
        if expected is None or transactions.is_retryable(exc):  # the one line is the error; the trace is logged
            log.exception("job %s failed", job_id)
            reporter.log(traceback.format_exc())
        _finish(job, reporter, started, state=JobRun.State.FAILED, error=message[:10000], message="failed")
        safely_raise("job_failed", f"{job.kind} {job.target}", message[:2000], reverse("jobs-detail", args=[job_id]))
        return f"job {job_id} failed"
    # A runner not yet declaring its result type may still return the plain JSON.
    stored = result.as_json() if isinstance(result, JobResult) else result
    _finish(job, reporter, started, state=JobRun.State.SUCCEEDED, result=stored, message="done")
    safely_resolve("job_failed", f"{job.kind} {job.target}", f"job #{job_id} succeeded")
    return f"job {job_id} succeeded"


# --- queueing --------------------------------------------------------------------------------------------


def enqueue(job: JobRun, sync: bool | None = None) -> None:
    """Hand a JobRun to django-q2 once the row is committed (the worker reads it by id).

    In sync mode django-q2 runs the task right here (REPLADMIN_JOBS_SYNC, or `sync=True` for callers
    that need the outcome, such as replsql and the scheduler)."""
    sync = settings.JOBS_SYNC if sync is None else sync

    def send() -> None:
        JobRun.objects.filter(pk=job.pk).update(sent_at=timezone.now())
        task_id = async_task(
            "replication_admin.tasks.run_job",
            job.pk,
            inline=sync,
            task_name=f"job-{job.pk}-{job.kind}",
            group=job.kind,
            sync=sync,
        )
        JobRun.objects.filter(pk=job.pk, state=JobRun.State.QUEUED).update(task_id=str(task_id or "")[:64])

    if sync:
        send()
    else:
        transaction.on_commit(send)


def do_start_job(
    actor: Actor,
    runner: type[JobRunner[P]],
    target: str,
    params: P,
    perm: str = OPERATE,
    sync: bool | None = None,
    rerun_of: JobRun | None = None,
) -> JobRun:
    """Queue a job of `runner`'s kind (audited under the actor's name); `rerun_of`: the failed or cancelled
    job a person runs again with these parameters."""
    kind = runner.kind
    require(actor, perm, f"job.{kind}", target)
    data = params.as_json()
    subject = job_subject(kind, data)
    inline = settings.JOBS_SYNC if sync is None else sync
    trigger = JobRun.Trigger.SCHEDULER if actor.via == "scheduler" else JobRun.Trigger.PERSON
    with transaction.atomic():
        if not inline:
            # The same request already waiting in the queue: one run serves both.
            same = JobRun.objects.filter(kind=kind, target=target, state=JobRun.State.QUEUED)
            same = same.exclude(trigger=JobRun.Trigger.RETRY).order_by("pk")
            queued = next((j for j in same[:20] if j.params == data), None)
            if queued is not None:
                record(actor, f"job.{kind}", target, detail={"job": queued.pk, "merged_into": queued.pk, **data})
                if rerun_of is not None:
                    record(actor, "job.retry", str(rerun_of), detail={"job": rerun_of.pk, "merged_into": queued.pk})
                return queued
        job = JobRun.objects.create(
            kind=kind,
            target=target,
            params=data,
            item=subject.name[:500] if subject is not None else "",
            trigger=trigger,
            rerun_of=rerun_of,
            created_by=actor.user if actor.user is not None and actor.user.is_authenticated else None,
        )
        record(actor, f"job.{kind}", target, detail={"job": job.pk, **data})
        if rerun_of is not None:
            record(actor, "job.retry", str(rerun_of), detail={"job": rerun_of.pk, "retry": job.pk, "params": data})
    enqueue(job, sync=sync)
    return JobRun.objects.get(pk=job.pk) if sync or (sync is None and settings.JOBS_SYNC) else job


def do_cancel_job(actor: Actor, job: JobRun) -> bool:
    """Cancel a queued job, or ask a running one to stop at its next progress report."""
    require(actor, OPERATE, "job.cancel", str(job))
    with transaction.atomic():
        updated = JobRun.objects.filter(pk=job.pk, state__in=[JobRun.State.QUEUED, JobRun.State.RUNNING]).update(
            state=JobRun.State.CANCELLED, finished_at=timezone.now(), message="cancelled by " + actor.username
        )
        record(actor, "job.cancel", str(job), AuditEntry.Outcome.OK if updated else AuditEntry.Outcome.ERROR)
        if updated:
            audit_finished(job, JobRun.State.CANCELLED, f"cancelled by {actor.username}")
    return bool(updated)


# --- running a failed job again ---------------------------------------------------------------------------

RERUNNABLE = (JobRun.State.FAILED, JobRun.State.CANCELLED, JobRun.State.LOST)


_UNSET: Any = object()


def rerun_refusal(job: JobRun, following: JobRun | None = _UNSET) -> str | None:
    """Why a person may not run `job` again now (one line), or None when they may. `following`: the job that
    already ran it again (looked up when not given)."""
    runner = RUNNERS.get(job.kind)
    if runner is None or not runner.retryable:
        return f"job #{job.pk} cannot be retried: {job.kind} jobs are not run again from the console"
    if job.state not in RERUNNABLE:
        return f"job #{job.pk} is {job.state}: only a failed or cancelled job is retried"
    if following is _UNSET:
        following = followers([job]).get(job.pk)
    if following is not None:
        return f"job #{job.pk} was already run again as job #{following.pk} ({following.state})"
    return None


def followers(jobs: list[JobRun]) -> dict[int, JobRun]:
    """The first job that ran each of `jobs` again (the reaper's next attempt or a person's retry), by id."""
    ids = [j.pk for j in jobs]
    found: dict[int, JobRun] = {}
    for follower in JobRun.objects.filter(Q(retry_of__in=ids) | Q(rerun_of__in=ids)).order_by("pk"):
        for original in (follower.retry_of_id, follower.rerun_of_id):
            if original in ids and original not in found:
                found[original] = follower
    return found


def do_retry_job(actor: Actor, job: JobRun) -> JobRun:
    """Queue a failed or cancelled job again: the same kind, target and parameters, through do_start_job (so
    it takes the item's lock, its lease and the queue's merging as any job does), linked to the original."""
    target = str(job)
    require(actor, OPERATE, "job.retry", target)
    refusal = rerun_refusal(job)
    if refusal is not None:
        record(actor, "job.retry", target, AuditEntry.Outcome.ERROR, {"job": job.pk, "refused": refusal})
        raise JobError(refusal)
    runner = RUNNERS[job.kind]
    # do_start_job writes the job, its audit row and the job.retry row in one transaction.
    return do_start_job(actor, runner, job.target, runner.params_type.from_json(job.params), rerun_of=job)


# The counts a chart of runs draws against rows (left axis) and the few it draws on their own axis (right), so that
# three conflicts are not a flat line under a million rows read.
ROW_COUNTS = ("read", "written", "pulled", "pushed")
COUNT_COLOURS = {"read": "#90a4ae", "written": "#1565c0", "pulled": "#6a1b9a", "pushed": "#00838f",
                 "conflicts": "#c62828", "skipped": "#ef6c00"}  # fmt: skip


def counts_of(job: JobRun) -> tuple[dict[str, int], str]:
    """A finished job's counts (JobResult.counts) and what they count; nothing for a job without a result."""
    result = result_of(job)
    if result is None:
        return {}, ""
    return result.counts(), result.unit


def runs_figure(jobs: Iterable[JobRun]) -> dict[str, Any]:
    """A plotly figure of the counts of each run (oldest first, one group of bars per run): rows on the left axis,
    conflicts and skips on a right axis of their own."""
    runs = [(job, *counts_of(job)) for job in sorted(jobs, key=lambda j: j.pk)]
    runs = [(job, counts, unit) for job, counts, unit in runs if counts]
    units = sorted({unit for _, _, unit in runs})
    traces: list[dict[str, Any]] = []
    for n, name in enumerate(RUN_COUNTS):
        points = [(f"#{job.pk}", counts[name]) for job, counts, _ in runs if name in counts]
        # A count every run has at 0 (no run pulled anything) is left out, but for read and written.
        if not points or (not any(y for _, y in points) and name not in ("read", "written")):
            continue
        traces.append({
            "type": "bar", "name": name, "x": [x for x, _ in points], "y": [y for _, y in points],
            "offsetgroup": str(n), "marker": {"color": COUNT_COLOURS[name]},
            **({} if name in ROW_COUNTS else {"yaxis": "y2"}),
        })  # fmt: skip
    layout: dict[str, Any] = {
        "barmode": "group",
        "height": 240,
        "margin": {"l": 50, "r": 50, "t": 30, "b": 40},
        "showlegend": True,
        "legend": {"orientation": "h", "y": 1.15},
        "xaxis": {"type": "category", "title": {"text": "run"}},
        "yaxis": {"title": {"text": " / ".join(units) or "rows"}, "rangemode": "tozero", "tickformat": ",d"},
    }
    for axis, key in (("y", "yaxis"), ("y2", "yaxis2")):
        drawn = [t for t in traces if t.get("yaxis", "y") == axis]
        if axis == "y2" and drawn:
            layout[key] = {"title": {"text": "conflicts, skipped"}, "overlaying": "y", "side": "right",
                           "rangemode": "tozero", "tickformat": ",d", "showgrid": False}  # fmt: skip
        if drawn and max((max(t["y"]) for t in drawn), default=0) <= 5:
            layout[key]["dtick"] = 1  # whole-number ticks on a short count axis
    return {"data": traces, "layout": layout}

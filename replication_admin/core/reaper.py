"""The reaper: the runtime heals itself without a person.

It runs every few seconds in every worker host (the qcluster command's runtime thread), in the scheduler
round and in the in-sync follower, and does three things:

1. A running job whose lease expired (its worker died, hung or was cut off, on any host) or whose worker
   pid is gone on this host is taken back: marked "lost" with the reason, its item locks freed, and a new
   attempt queued after a short backoff (every job is idempotent; attempts are bounded by
   REPLADMIN_JOB_ATTEMPTS; the job page shows the chain). The new attempt cleans the staging objects the
   lost one left, as any run of the item does before it stages.
   The watchdog takes back the same way a running job whose progress has not moved for SPARK_STALL_SECONDS.
2. An item lock whose holder stopped renewing it is freed.
3. A queued job is handed (again) to the task broker when it is due: a retry after its backoff, a job
   that waited behind another one that has ended, or a job handed out a minute ago that no worker took
   and that the broker no longer holds (a task taken by a worker that died with it, which the Redis
   broker would otherwise lose and the ORM broker would hold back until its retry time).
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.db.models.functions import Length
from django.urls import reverse
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from replication_admin.core import jobs
from replication_admin.core.alerts import safely_raise
from replication_admin.core.audit import Actor, record
from replication_admin.core.leases import HOST, lease_seconds, process_gone
from replication_admin.core.spark import INTERRUPT_WAIT, interrupt_job_spark
from replication_admin.models import AuditEntry, JobRun, ReplLock

log = logging.getLogger(__name__)

REAPER = Actor(user=None, via="reaper")
# A job handed to the broker this long ago that no worker has started is looked for in the broker.
RESEND_AFTER = timedelta(seconds=60)


def backoff(attempt: int) -> float:
    """Seconds before attempt `attempt + 1`: 1, 4, 16, then 30."""
    return float(min(30, 4 ** (attempt - 1)))


def take_back(job_id: int, reason: str) -> JobRun | None:
    """Mark a running job lost, free its locks and queue its next attempt (None when none is left)."""
    now = timezone.now()
    with transaction.atomic():
        job = JobRun.objects.select_for_update().filter(pk=job_id, state=JobRun.State.RUNNING).first()
        if job is None:
            return None
        attempt = max(job.attempts, 1)
        where = f"worker pid {job.worker_pid} on {job.worker_host or '?'}"
        retry: JobRun | None = None
        if attempt < settings.JOB_ATTEMPTS:
            retry = JobRun.objects.create(
                kind=job.kind, target=job.target, params=job.params, item=job.item, created_by=job.created_by,
                trigger=JobRun.Trigger.RETRY, retry_of=job, attempts=attempt,
                # Not before the interruption below is done (the backoff is counted again from then).
                not_before=now + timedelta(seconds=INTERRUPT_WAIT + backoff(attempt)),
                message=f"attempt {attempt + 1}, after job #{job.pk} was lost",
            )  # fmt: skip
            error = f"lost: {reason} ({where}); attempt {attempt + 1} was queued as job #{retry.pk}"
        else:
            error = f"lost: {reason} ({where}); gave up after {attempt} attempts"
        JobRun.objects.filter(pk=job.pk).update(
            state=JobRun.State.LOST, finished_at=now, message="lost", error=error, lease_expires_at=None
        )
        jobs.audit_finished(job, JobRun.State.LOST, error)
        record(
            REAPER, "job.retry" if retry else "job.lost", str(job), AuditEntry.Outcome.ERROR,
            {"job": job.pk, "reason": reason, "retry": retry.pk if retry else None},
        )  # fmt: skip
    # Its Spark work is interrupted once the job is marked lost (the job's own thread, failing at the interruption,
    # then finds it no longer running and records nothing: before, under load it could record "failed" first and
    # no attempt followed), and before its locks are freed: nothing of it may run beside the next attempt.
    interrupt_job_spark(job)
    with transaction.atomic():
        ReplLock.objects.filter(job_id=job.pk).delete()
        if retry is not None:
            # The backoff runs from the moment nothing of the lost attempt runs any more.
            retry.not_before = timezone.now() + timedelta(seconds=backoff(attempt))
            JobRun.objects.filter(pk=retry.pk).update(not_before=retry.not_before)
        # Jobs waiting behind the lost one now wait behind its next attempt.
        JobRun.objects.filter(state=JobRun.State.QUEUED, waiting_for_id=job.pk).update(waiting_for=retry)
    log.warning("job %s: %s", job.pk, error)
    if retry is not None:
        # Handed out at once (the worker that takes it waits out the backoff): the attempt does not depend
        # on another pass of a reaper; dispatch_due still hands it out again should this send be lost.
        jobs.enqueue(retry, sync=False)
    if retry is None:
        safely_raise("job_failed", f"{job.kind} {job.target}", error, reverse("jobs-detail", args=[job.pk]))
    return retry


def _take_back_lost_jobs() -> list[int]:
    now = timezone.now()
    lease = timedelta(seconds=lease_seconds())
    expired = JobRun.objects.filter(state=JobRun.State.RUNNING).filter(
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, started_at__lt=now - lease)
    )
    lost = [(pk, "its worker stopped renewing the job's lease") for pk in expired.values_list("pk", flat=True)[:50]]
    # On this host a dead worker is known at once, without waiting for its lease to run out.
    here = JobRun.objects.filter(state=JobRun.State.RUNNING, worker_host=HOST).values_list("pk", "worker_pid")
    lost += [(pk, "its worker process ended during the run") for pk, pid in here[:200] if process_gone(pid)]
    taken = []
    for pk, reason in lost:
        if take_back(pk, reason) is not None or not JobRun.objects.filter(pk=pk, state=JobRun.State.RUNNING).exists():
            taken.append(pk)
    return taken


# The job watchdog: the progress each running job showed when this process first saw it so, and since when (seconds
# of time.monotonic()). Kept per process: each reaper measures the stall from its own first look.
_progress_seen: dict[int, tuple[tuple[Any, ...], float]] = {}


def _take_back_stalled_jobs() -> list[int]:
    """A running job whose progress (its Spark tasks, progress bar, message and log) has not moved for
    SPARK_STALL_SECONDS is taken back like a lost one: its Spark session interrupted, its locks freed, its next
    attempt queued. A master that lost its executors, a task that hangs: nothing stays "running" for ever."""
    bound = settings.SPARK_STALL_SECONDS
    if bound <= 0:
        return []
    now = time.monotonic()
    running = JobRun.objects.filter(state=JobRun.State.RUNNING).annotate(log_length=Length("log"))
    seen: dict[int, tuple[tuple[Any, ...], float]] = {}
    stalled = []
    for pk, *progress in running.values_list("pk", "progress_done", "progress_total", "message", "log_length")[:500]:
        mark = tuple(progress)
        before = _progress_seen.get(pk)
        since = before[1] if before is not None and before[0] == mark else now
        seen[pk] = (mark, since)
        if now - since >= bound:
            stalled.append(pk)
    _progress_seen.clear()
    _progress_seen.update(seen)
    taken = []
    for pk in stalled:
        reason = f"no progress for {bound} s (REPLADMIN_SPARK_STALL_SECONDS): its Spark work was interrupted"
        if take_back(pk, reason) is not None or not JobRun.objects.filter(pk=pk, state=JobRun.State.RUNNING).exists():
            taken.append(pk)
            _progress_seen.pop(pk, None)
    return taken


def _free_expired_locks() -> int:
    now = timezone.now()
    # A lost job's locks are take_back's to free, once its Spark work is interrupted (at most INTERRUPT_WAIT after it
    # was marked lost); another reaper leaves them that long.
    taken_back = Q(job__state=JobRun.State.LOST, job__finished_at__gt=now - timedelta(seconds=INTERRUPT_WAIT + 5))
    stale = ReplLock.objects.filter(Q(expires_at__lt=now) | (Q(job__state__in=JobRun.FINISHED) & ~taken_back))
    freed = stale.delete()[0]
    for lock in ReplLock.objects.filter(host=HOST):
        if process_gone(lock.pid):
            freed += ReplLock.objects.filter(name=lock.name, pid=lock.pid, host=HOST).delete()[0]
    return freed


def pending_task_ids() -> set[str]:
    """Ids of the tasks the broker still holds for a worker to take (not yet taken, or due again)."""
    broker = get_broker()
    ids: set[str] = set()
    if settings.Q_CLUSTER.get("orm"):
        rows = OrmQ.objects.using(settings.Q_CLUSTER["orm"]).filter(key=broker.list_key, lock__lt=timezone.now())
        for row in rows[:5000]:
            ids.add(str(row.task_id()))
    else:
        for payload in broker.connection.lrange(broker.list_key, 0, 5000):
            task: dict[str, Any] = SignedPackage.loads(payload)
            ids.add(str(task.get("id")))
    return ids


def dispatch_due() -> list[int]:
    """Hand out the queued jobs that are due (see the module's third point)."""
    now = timezone.now()
    ready = (
        JobRun.objects.filter(state=JobRun.State.QUEUED)
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
        .filter(Q(waiting_for__isnull=True) | Q(waiting_for__state__in=JobRun.FINISHED))
    )
    held_back = Q(sent_at__isnull=True) & (
        Q(not_before__isnull=False) | Q(waiting_for__isnull=False) | Q(created_at__lt=now - timedelta(seconds=10))
    )
    candidates = list(ready.filter(held_back | Q(sent_at__lt=now - RESEND_AFTER)).order_by("pk")[:100])
    if not candidates:
        return []
    pending = pending_task_ids() if any(j.sent_at is not None for j in candidates) else set()
    sent = []
    for job in candidates:
        if job.sent_at is not None and job.task_id in pending:
            continue  # still waiting for a free worker: not lost
        JobRun.objects.filter(pk=job.pk).update(waiting_for=None)
        jobs.enqueue(job, sync=False)
        sent.append(job.pk)
    return sent


def reap() -> dict[str, Any]:
    """One pass of the reaper; safe to run anywhere, any number of times at once."""
    outcome: dict[str, Any] = {"lost": _take_back_lost_jobs(), "stalled": _take_back_stalled_jobs()}
    outcome["locks_freed"] = _free_expired_locks()
    outcome["sent"] = dispatch_due()
    return outcome


def safely_reap() -> dict[str, Any] | None:
    try:
        return reap()
    except Exception:  # the next pass tries again; the reaper never takes its host down
        log.exception("reaper pass failed")
        if not connection.in_atomic_block:
            close_old_connections()  # a catalog connection cut meanwhile (restart, failover) is opened anew
        return None

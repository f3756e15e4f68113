"""Item locks: one apply per item at a time (a refresh of a snapshot, a sync of a publication or a
subscription, a scheduled event), so that a redelivered task never applies twice concurrently.

A lock is a lease (core.leases): its holder's heartbeat renews it, so a holder that died or was cut off
wherever it ran loses it when the lease expires; on the holder's own host a dead pid frees it at once.
Finding the item busy is never a failure by itself:
  - a scheduled run is skipped (the running job does the work),
  - a queued run goes back to the queue behind the running job and starts when it ends (core.jobs),
  - a run inside the requesting process (a command without --queue) waits here, saying so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from replication_admin.core import reaper
from replication_admin.core.errors import LockBusy
from replication_admin.core.leases import HEARTBEAT, HOST, expiry, process_gone
from replication_admin.models import JobRun, ReplLock

__all__ = ["LockBusy", "item_lock", "wait_behind", "wait_until"]


def _alive(lock: ReplLock) -> bool:
    if lock.job_id is not None:
        state = JobRun.objects.filter(pk=lock.job_id).values_list("state", flat=True).first()
        if state is None or state in JobRun.FINISHED:
            return False
    if lock.host == HOST and process_gone(lock.pid):
        return False
    if lock.expires_at is not None:
        return lock.expires_at > timezone.now()
    return lock.host != HOST or not process_gone(lock.pid)


def _take_free(name: str, job: JobRun | None) -> bool:
    """Take `name` if nobody holds it, in one statement (a follower takes its subscription's lock on every step, and a
    free lock is the usual case): an INSERT that does nothing where the row is there (PostgreSQL and SQLite, the
    catalog's engines, say so alike). False then: _take looks at who holds it."""
    meta = ReplLock._meta
    fields: list[models.Field[Any, Any]] = []
    for field_name in ("name", "job", "pid", "host", "acquired_at", "expires_at"):
        field = meta.get_field(field_name)
        assert isinstance(field, models.Field)  # a concrete column
        fields.append(field)
    values = [name, job.pk if job is not None else None, os.getpid(), HOST, timezone.now(), expiry()]
    quote = connection.ops.quote_name
    statement = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) ON CONFLICT ({quote(fields[0].column)}) DO NOTHING"
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, [f.get_db_prep_save(v, connection) for f, v in zip(fields, values, strict=True)])
        return bool(cursor.rowcount == 1)


def _take(name: str, job: JobRun | None) -> None:
    """Take `name` for this process, or raise LockBusy naming the job that holds it."""
    if _take_free(name, job):
        HEARTBEAT.add_lock(name)
        return
    with transaction.atomic():
        current = ReplLock.objects.select_for_update().filter(name=name).first()
        # Held by this very holder (the same job, or the same process when no job holds it): taken again.
        # Another job of this process (a sync run inline beside the follower's thread) is another holder.
        mine = current is not None and (current.pid, current.host, current.job_id) == (
            os.getpid(), HOST, job.pk if job is not None else None
        )  # fmt: skip
        if current is not None and not mine:
            if _alive(current):
                holder = f"job #{current.job_id}" if current.job_id else "another process"
                raise LockBusy(
                    f"{name} is being applied by {holder} (pid {current.pid} on {current.host})",
                    current.job_id,
                    f"waiting for {holder}, which is applying {name}",
                )
            took_over = current.job_id
        else:
            took_over = None
        try:
            ReplLock.objects.update_or_create(
                name=name, defaults={"job": job, "pid": os.getpid(), "host": HOST, "expires_at": expiry()}
            )
        except IntegrityError:
            raise LockBusy(f"{name} is being applied by another job") from None
    HEARTBEAT.add_lock(name)
    if took_over is not None:
        # Its holder is gone: the job it left running is taken back (and retried) like the reaper does.
        reaper.take_back(took_over, f"its worker stopped while applying {name}")


def wait_until(done: Callable[[], bool], seconds: float) -> bool:
    """Ask `done` again, with growing pauses (0.2 s to 2 s), until it says yes or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    pause = 0.2
    while not done():
        if time.monotonic() + pause > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 2.0)
    return True


def _default_wait(job: JobRun | None) -> float:
    """Only a run inside the requesting process waits here; a queued or scheduled one is handed back."""
    if job is not None and (job.trigger == JobRun.Trigger.SCHEDULER or not job.runs_inline):
        return 0
    return float(settings.LOCK_WAIT)


@contextmanager
def item_lock(name: str, job: JobRun | None, wait: float | None = None) -> Iterator[None]:
    """Hold `name` while applying. A lock left by a gone holder is taken over. A busy item raises LockBusy
    at once for queued and scheduled jobs (core.jobs queues or skips them); a run inside the requesting
    process waits behind the running job (up to `wait` seconds, REPLADMIN_LOCK_WAIT by default), saying so
    in its message."""
    busy: LockBusy | None = None

    def taken() -> bool:
        nonlocal busy
        try:
            _take(name, job)
            return True
        except LockBusy as exc:
            busy = exc
            if job is None:
                return False
            if JobRun.objects.filter(pk=job.pk, state=JobRun.State.CANCELLED).exists():
                raise
            JobRun.objects.filter(pk=job.pk).update(message=exc.waiting[:500])
            return False

    if not wait_until(taken, _default_wait(job) if wait is None else wait):
        assert busy is not None
        raise busy
    try:
        yield
    finally:
        HEARTBEAT.remove_lock(name)
        held = ReplLock.objects.filter(name=name)
        (held.filter(job=job) if job is not None else held.filter(job=None, pid=os.getpid(), host=HOST)).delete()


def wait_behind(job: JobRun, earlier: JobRun, what: str) -> None:
    """`job` needs `earlier` (queued or running) to finish first: a run inside the requesting process
    waits for it here; a queued one goes back to the queue behind it (LockBusy); a scheduled one is skipped."""
    message = f"waiting for {what} (job #{earlier.pk})"
    if _default_wait(job) == 0:
        raise LockBusy(message, earlier.pk, message)

    def finished() -> bool:
        state = JobRun.objects.filter(pk=earlier.pk).values_list("state", flat=True).first()
        JobRun.objects.filter(pk=job.pk).update(message=message)
        return state is None or state in JobRun.FINISHED

    if not wait_until(finished, settings.LOCK_WAIT):
        raise LockBusy(f"{what} (job #{earlier.pk}) has not finished after {settings.LOCK_WAIT} s", earlier.pk)

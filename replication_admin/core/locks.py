"""Item locks: one apply per item at a time (a refresh of a snapshot, a sync of a publication or a
subscription, a scheduled event), so that a redelivered task never applies twice concurrently."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from replication_admin.core.errors import ReplicationError
from replication_admin.models import JobRun, ReplLock


class LockBusy(ReplicationError):
    """The item is being applied by another job."""


def _alive(lock: ReplLock) -> bool:
    if lock.job_id is not None:
        state = JobRun.objects.filter(pk=lock.job_id).values_list("state", flat=True).first()
        if state in JobRun.FINISHED or state is None:
            return False
    if lock.host != socket.gethostname():
        return True
    try:
        os.kill(lock.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _take(name: str, job: JobRun | None) -> None:
    """Take `name` for this process, or raise LockBusy naming the job that holds it."""
    with transaction.atomic():
        current = ReplLock.objects.select_for_update().filter(name=name).first()
        if current is not None and current.pid != os.getpid():
            if _alive(current):
                raise LockBusy(f"{name} is being applied by job #{current.job_id} (pid {current.pid})")
            # Its process is gone: say so on the job it left running, then take the item over.
            if current.job_id is not None:
                JobRun.objects.filter(pk=current.job_id, state=JobRun.State.RUNNING).update(
                    state=JobRun.State.FAILED,
                    finished_at=timezone.now(),
                    error=f"the worker (pid {current.pid} on {current.host}) died during the run; "
                    f"job #{job.pk if job else '-'} took over and re-applied what was missing",
                )
        try:
            ReplLock.objects.update_or_create(
                name=name, defaults={"job": job, "pid": os.getpid(), "host": socket.gethostname()}
            )
        except IntegrityError:
            raise LockBusy(f"{name} is being applied by another job") from None


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


@contextmanager
def item_lock(name: str, job: JobRun | None, wait: float | None = None) -> Iterator[None]:
    """Hold `name` while applying; a lock left by a dead process is taken over. A job that finds the item
    busy waits behind the running one (up to `wait` seconds, REPLADMIN_LOCK_WAIT by default) instead of
    failing, and says so in its message; past that, or with wait=0, LockBusy."""
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
            JobRun.objects.filter(pk=job.pk).update(message=f"waiting: {exc}"[:500])
            return False

    if not wait_until(taken, settings.LOCK_WAIT if wait is None else wait):
        assert busy is not None
        raise busy
    try:
        yield
    finally:
        ReplLock.objects.filter(name=name, pid=os.getpid()).delete()

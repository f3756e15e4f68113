"""Leases: a running job and an item lock belong to their holder only while the holder renews them.

Every process that runs jobs or holds item locks has one heartbeat thread that renews, every
LEASE_SECONDS / 5, the lease of each job it runs and of each lock it holds. A worker that dies, is cut
off from the catalog or is shut down stops renewing; once the lease has expired, wherever the holder
ran (another host included), the reaper (core.reaper) takes the job back and frees its locks. A holder of
this process's own host identity (HOST) whose pid has ended is taken back at once, without waiting.

A heartbeat that finds its job no longer running (taken back, cancelled) marks it so the job stops at
its next progress report instead of racing the attempt that replaced it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import OperationalError, connection
from django.utils import timezone

from replication_admin.models import JobRun, ReplLock

log = logging.getLogger(__name__)

# This process's worker host identity (REPLADMIN_HOST, else the machine's name). Only for a holder of the
# same identity may a pid be looked up here (process_gone); any other holder is judged by its lease alone.
HOST = settings.HOST_IDENTITY or socket.gethostname()


def process_gone(pid: int | None) -> bool:
    """Has process `pid` of this host ended? (No pid, or one we may not signal, counts as not gone.) Callers
    ask only about holders whose recorded host is HOST: a pid of another identity may be on another machine."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def lease_seconds() -> int:
    return int(settings.LEASE_SECONDS)


def expiry(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=lease_seconds())


class _Heartbeat:
    """The process's heartbeat: the jobs it runs and the locks it holds, renewed by one daemon thread."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.jobs: set[int] = set()
        self.locks: set[str] = set()
        self.taken_back: set[int] = set()
        self.pid = 0
        self.thread: threading.Thread | None = None

    def _ensure_running(self) -> None:
        # A forked worker inherits the sets but not the thread: start afresh in each process.
        if self.pid == os.getpid() and self.thread is not None and self.thread.is_alive():
            return
        if self.pid != os.getpid():
            self.jobs, self.locks, self.taken_back = set(), set(), set()
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._loop, name="replication-heartbeat", daemon=True)
        self.thread.start()

    def add_job(self, job_id: int) -> None:
        with self.guard:
            self._ensure_running()
            self.jobs.add(job_id)

    def remove_job(self, job_id: int) -> None:
        with self.guard:
            self.jobs.discard(job_id)
            self.taken_back.discard(job_id)

    def add_lock(self, name: str) -> None:
        with self.guard:
            self._ensure_running()
            self.locks.add(name)

    def remove_lock(self, name: str) -> None:
        with self.guard:
            self.locks.discard(name)

    def was_taken_back(self, job_id: int) -> bool:
        with self.guard:
            return job_id in self.taken_back

    def beat(self) -> None:
        with self.guard:
            jobs, locks = sorted(self.jobs), sorted(self.locks)
        if not jobs and not locks:
            return
        _wait_briefly_for_catalog()
        until = expiry()
        if jobs:
            JobRun.objects.filter(pk__in=jobs, state=JobRun.State.RUNNING).update(lease_expires_at=until)
            running = set(JobRun.objects.filter(pk__in=jobs, state=JobRun.State.RUNNING).values_list("pk", flat=True))
            with self.guard:
                self.taken_back |= set(jobs) - running
        if locks:
            ReplLock.objects.filter(name__in=locks, host=HOST, pid=os.getpid()).update(expires_at=until)

    def _loop(self) -> None:
        stop = threading.Event()
        while not stop.wait(beat_seconds()):
            _beat_once(self)


def _beat_once(heartbeat: _Heartbeat) -> None:
    try:
        heartbeat.beat()
    except OperationalError as exc:
        if "lock" in str(exc).lower():  # a long transaction holds the lock: the SQLite file's, a job row's
            log.info("heartbeat deferred: the catalog is busy; renewing in %.0f s", beat_seconds())
        else:
            log.warning("heartbeat failed", exc_info=True)
        connection.close()
    except Exception:  # a missed beat is retried at the next one; the lease has slack for four
        log.warning("heartbeat failed", exc_info=True)
        connection.close()


def beat_seconds() -> float:
    return max(1.0, lease_seconds() / 5)


def _wait_briefly_for_catalog() -> None:
    """The heartbeat waits at most half a beat for a lock in the catalog (the write lock of a SQLite file, a job's
    row on PostgreSQL), not the 30 s others wait: a beat missed is renewed at the next one, and the heartbeat never
    queues behind a long transaction (a test's, a bulk import's) nor makes it wait."""
    with connection.cursor() as cursor:
        cursor.execute(settings.CATALOG_BRIEF_WAIT_SQL.format(ms=int(beat_seconds() * 500)))


HEARTBEAT = _Heartbeat()

"""The lease heartbeat renews the leases of the jobs this process runs; it never queues behind another
connection's long transaction (the write lock of a SQLite catalog, a job's row on PostgreSQL): it waits half a
beat at most, says the beat was deferred, and the next beat renews."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from replication_admin.core import leases
from replication_admin.models import JobRun

pytestmark = pytest.mark.django_db(transaction=True)


def running_job() -> JobRun:
    return JobRun.objects.create(
        kind="snapshot_refresh",
        target="snapshot dst.t",
        params={"snapshot": "dst.t", "nonincremental": False},
        state=JobRun.State.RUNNING,
        started_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(seconds=5),
    )


def beat_in_a_thread(heartbeat: leases._Heartbeat) -> tuple[list[BaseException], list[int]]:
    """One beat on the heartbeat's own thread (its own catalog connection), as the daemon runs it."""
    errors: list[BaseException] = []
    busy_timeouts: list[int] = []

    def run() -> None:
        try:
            heartbeat.beat()
        except BaseException as exc:
            errors.append(exc)
        finally:
            busy_timeouts.append(lock_wait_ms())
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return errors, busy_timeouts


def lock_wait_ms() -> int:
    """How long this thread's catalog connection waits for a lock, in ms."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA busy_timeout")
            return int(cursor.fetchone()[0])
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'lock_timeout'")  # in ms
        return int(cursor.fetchone()[0])


def test_a_beat_renews_the_lease_of_a_job_this_process_runs():
    job = running_job()
    heartbeat = leases._Heartbeat()
    heartbeat.jobs.add(job.pk)

    errors, _ = beat_in_a_thread(heartbeat)

    job.refresh_from_db()
    assert errors == []
    assert job.lease_expires_at > timezone.now() + timedelta(seconds=leases.lease_seconds() - 30)


def test_a_beat_behind_a_long_transaction_gives_up_after_half_a_beat_and_is_deferred(caplog):
    job = running_job()
    before = JobRun.objects.get(pk=job.pk).lease_expires_at
    heartbeat = leases._Heartbeat()
    heartbeat.jobs.add(job.pk)

    with transaction.atomic():  # holds the job's row (and on SQLite the file's write lock) until the block ends
        JobRun.objects.filter(pk=job.pk).update(message="a long transaction")
        errors, busy_timeouts = beat_in_a_thread(heartbeat)

    assert busy_timeouts == [int(leases.beat_seconds() * 500)]
    assert len(errors) == 1 and "lock" in str(errors[0]).lower()
    assert JobRun.objects.get(pk=job.pk).lease_expires_at == before

    # The loop's handling of that failure: one line at INFO, no traceback at WARNING.
    caplog.set_level(logging.INFO, logger=leases.__name__)
    with transaction.atomic():
        JobRun.objects.filter(pk=job.pk).update(message="another long transaction")
        stop_after_one = _one_loop_round(heartbeat)
    assert stop_after_one
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == leases.__name__]
    assert [level for level, _ in messages] == [logging.INFO]
    assert messages[0][1].startswith("heartbeat deferred: the catalog is busy")

    errors, _ = beat_in_a_thread(heartbeat)
    assert errors == []
    assert JobRun.objects.get(pk=job.pk).lease_expires_at > before


def _one_loop_round(heartbeat: leases._Heartbeat) -> bool:
    """Run the daemon loop's body once on its own thread (the wait replaced by nothing)."""
    done: list[bool] = []

    def run() -> None:
        try:
            leases._beat_once(heartbeat)
            done.append(True)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return done == [True]

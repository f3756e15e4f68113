"""The reaper takes back jobs whose lease expired wherever their worker ran, frees their items, queues
their next attempt after a backoff (bounded attempts), and hands out again a queued job whose task the
broker lost. A scheduled run of a busy item is skipped without an alert."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import OrmQ

from replication_admin import tasks
from replication_admin.core import jobs, reaper
from replication_admin.core.audit import Actor
from replication_admin.core.leases import HOST
from replication_admin.models import Alert, AuditEntry, JobRun, ReplLock
from replication_admin.statements import execute
from replication_admin.transactional import sync as trx_sync
from tests.conftest import ROOT, _pg_admin, catalog_env
from tests.snapshots.test_snapshot_refresh import COLUMNS, Workload
from tests.tables import create_table

pytestmark = pytest.mark.django_db(transaction=True)


def running_elsewhere(**fields) -> JobRun:
    """A job a worker on another host runs, whose lease ran out a minute ago."""
    defaults = {
        "kind": "snapshot_refresh",
        "target": "snapshot dst.t",
        "params": {"snapshot": "dst.t", "nonincremental": False},
        "state": JobRun.State.RUNNING,
        "worker_host": "another-host",
        "worker_pid": 4242,
        "attempts": 1,
        "started_at": timezone.now() - timedelta(minutes=5),
        "lease_expires_at": timezone.now() - timedelta(minutes=1),
    }
    return JobRun.objects.create(**{**defaults, **fields})


def test_a_job_whose_lease_expired_on_another_host_is_taken_back_and_retried_after_a_backoff():
    job = running_elsewhere()
    ReplLock.objects.create(name="snapshot:dst.t", job=job, pid=4242, host="another-host",
                            expires_at=timezone.now() - timedelta(minutes=1))  # fmt: skip
    waiter = JobRun.objects.create(kind="snapshot_refresh", target="snapshot dst.t", waiting_for=job)

    outcome = reaper.reap()

    job.refresh_from_db()
    assert outcome["lost"] == [job.pk]
    assert job.state == JobRun.State.LOST
    assert "stopped renewing the job's lease" in job.error and "another-host" in job.error
    retry = JobRun.objects.get(retry_of=job)
    assert (retry.state, retry.trigger, retry.params, retry.attempts) == ("queued", "retry", job.params, 1)
    assert retry.not_before is not None and retry.not_before > timezone.now()  # waited out by its worker
    assert f"attempt 2 was queued as job #{retry.pk}" in job.error
    assert not ReplLock.objects.exists()
    assert JobRun.objects.get(pk=waiter.pk).waiting_for_id == retry.pk  # waits for the next attempt now
    assert AuditEntry.objects.filter(action="job.retry", via="reaper", detail__job=job.pk).exists()
    assert not Alert.objects.exists()  # healing itself is not an alert

    # The retry is handed to the broker at once; a reaper hands it out again only if that send is lost.
    retry.refresh_from_db()
    assert retry.sent_at is not None and retry.task_id
    assert retry.task_id in {row.task_id() for row in OrmQ.objects.all()}
    assert reaper.reap()["sent"] == []


def test_a_job_lost_on_its_last_attempt_is_given_up_with_an_alert():
    job = running_elsewhere(attempts=5)
    reaper.reap()
    job.refresh_from_db()
    assert job.state == JobRun.State.LOST and "gave up after 5 attempts" in job.error
    assert not JobRun.objects.filter(retry_of=job).exists()
    assert Alert.objects.get(kind="job_failed").message == job.error


def test_a_job_whose_worker_process_died_on_this_host_is_taken_back_at_once():
    proc = subprocess.Popen(["true"])
    proc.wait()
    job = running_elsewhere(
        worker_host=HOST, worker_pid=proc.pid, lease_expires_at=timezone.now() + timedelta(minutes=1)
    )
    assert reaper.reap()["lost"] == [job.pk]
    assert "worker process ended" in JobRun.objects.get(pk=job.pk).error


def test_a_dead_pid_of_another_host_identity_on_this_machine_waits_for_its_lease_to_expire():
    """REPLADMIN_HOST gives two worker processes of one machine two identities: neither judges the other's
    pids (which, on two machines, would be another machine's); only the lease decides."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    job = running_elsewhere(
        worker_host=f"{HOST}-b", worker_pid=proc.pid, lease_expires_at=timezone.now() + timedelta(minutes=1)
    )
    ReplLock.objects.create(name="snapshot:dst.t", job=job, pid=proc.pid, host=f"{HOST}-b",
                            expires_at=timezone.now() + timedelta(minutes=1))  # fmt: skip
    assert reaper.reap() == {"lost": [], "stalled": [], "locks_freed": 0, "sent": []}
    JobRun.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert reaper.reap()["lost"] == [job.pk]
    assert "stopped renewing the job's lease" in JobRun.objects.get(pk=job.pk).error
    assert not ReplLock.objects.exists()


def test_the_host_identity_comes_from_repladmin_host_else_the_machine_name():
    show = [sys.executable, str(ROOT / "manage.py"), "shell", "-c",
            "from replication_admin.core.leases import HOST; print(HOST)"]  # fmt: skip
    named = subprocess.run(show, cwd=ROOT, env={**os.environ, "REPLADMIN_HOST": "host-a"},
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert named.stdout.split()[-1] == "host-a"
    default = subprocess.run(show, cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "REPLADMIN_HOST"},
                             capture_output=True, text=True, check=True)  # fmt: skip
    assert default.stdout.split()[-1] == socket.gethostname()


def test_a_live_lease_is_left_alone():
    job = running_elsewhere(lease_expires_at=timezone.now() + timedelta(seconds=30))
    ReplLock.objects.create(name="snapshot:dst.t", job=job, pid=4242, host="another-host",
                            expires_at=timezone.now() + timedelta(seconds=30))  # fmt: skip
    assert reaper.reap() == {"lost": [], "stalled": [], "locks_freed": 0, "sent": []}
    assert JobRun.objects.get(pk=job.pk).state == JobRun.State.RUNNING
    assert ReplLock.objects.filter(job=job).exists()


def test_a_queued_job_whose_task_the_broker_no_longer_holds_is_handed_out_again():
    """A worker took the task and died before starting it (with Redis the task is gone; with the ORM broker
    it is locked until its retry time): after a minute the reaper sends it again, exactly once."""
    job = JobRun.objects.create(kind="compare", target="a ↔ b", task_id="gone-with-the-worker",
                                sent_at=timezone.now() - timedelta(minutes=2))  # fmt: skip
    waiting = JobRun.objects.create(kind="compare", target="c ↔ d", sent_at=timezone.now() - timedelta(minutes=2))
    assert reaper.reap()["sent"] == [job.pk, waiting.pk]
    job.refresh_from_db()
    assert job.task_id != "gone-with-the-worker" and job.task_id in {r.task_id() for r in OrmQ.objects.all()}
    # Now the broker holds both tasks for a free worker: no second copy is sent.
    JobRun.objects.update(sent_at=timezone.now() - timedelta(minutes=2))
    assert reaper.reap()["sent"] == []
    assert OrmQ.objects.count() == 2


def test_the_orm_broker_offers_a_dead_workers_task_again_after_its_retry_time_and_nothing_runs_twice(settings):
    """The ORM broker (on the catalog, shared by every worker host) re-offers a task whose lock is older than
    Q_CLUSTER['retry']; by then the lease machinery has long queued the job's next attempt, so the old task
    finds its job lost and runs nothing."""
    assert settings.Q_CLUSTER["retry"] > settings.Q_CLUSTER["timeout"]  # never re-offered while it may run
    job = JobRun.objects.create(kind="compare", target="a ↔ b")
    jobs.enqueue(job, sync=False)
    broker = get_broker()
    (task_id, _), *_ = broker.dequeue()  # a worker host takes the task ...
    assert broker.dequeue() is None  # ... and holds it: no other host gets it
    JobRun.objects.filter(pk=job.pk).update(state=JobRun.State.RUNNING, worker_host="host-a", worker_pid=4242,
                                            attempts=1, started_at=timezone.now() - timedelta(minutes=5),
                                            lease_expires_at=timezone.now() - timedelta(seconds=1))  # fmt: skip
    assert reaper.reap()["lost"] == [job.pk]  # ... and dies: its lease expires, the next attempt is queued
    retry = JobRun.objects.get(retry_of=job)
    OrmQ.objects.filter(pk=task_id).update(lock=timezone.now() - timedelta(seconds=1))  # `retry` s later
    offered = [pk for _ in range(2) for pk, _ in broker.dequeue() or []]  # with the retry's own task
    assert task_id in offered
    assert tasks.run_job(job.pk) == f"job {job.pk} not run: lost"
    JobRun.objects.filter(pk=retry.pk).update(state=JobRun.State.RUNNING)  # another host runs the retry
    assert tasks.run_job(retry.pk) == f"job {retry.pk} not run: running"
    assert JobRun.objects.get(pk=job.pk).state == JobRun.State.LOST


@pytest.mark.skipif(settings.DB_ENGINE != "postgresql", reason="a PostgreSQL catalog (REPLADMIN_DB_ENGINE)")
def test_a_reaper_whose_catalog_connection_was_cut_reconnects_at_its_next_pass():
    """A catalog restart or failover ends the persistent connections of every long-running loop."""
    assert reaper.safely_reap() is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with _pg_admin() as admin:
        admin.execute("SELECT pg_terminate_backend(?)", pid)
    assert reaper.safely_reap() is None  # this pass fails on the cut connection (logged) ...
    assert reaper.safely_reap() is not None  # ... the next one reconnects


@pytest.mark.skipif(settings.DB_ENGINE != "postgresql", reason="a PostgreSQL catalog (REPLADMIN_DB_ENGINE)")
def test_an_in_sync_follower_whose_catalog_connection_was_cut_reconnects_at_its_next_round(caplog):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with _pg_admin() as admin:
        admin.execute("SELECT pg_terminate_backend(?)", pid)
    rounds = iter(range(5))
    trx_sync.follow_loop(lambda: next(rounds, None) is None, interval=0.01, reaps=False)  # no reaper here
    assert caplog.text.count("reading the in-sync subscriptions failed") == 1
    assert trx_sync.followed() == []


@pytest.mark.live_db
def test_a_scheduled_refresh_of_a_busy_snapshot_is_skipped_without_an_alert(make_server):
    source = make_server("postgresql", "bsrc")
    make_server("mysql", "bdst")
    create_table(source, "t", COLUMNS, ["id"])
    Workload(source, "t", seed=3).insert(10)
    outcomes = execute(Actor.command(), "create snapshot log for t; create snapshot bdst.t_copy from t", context=source)
    assert all(o.ok for o in outcomes), outcomes
    holder_process = subprocess.Popen(["sleep", "60"])
    try:
        holder = JobRun.objects.create(kind="snapshot_refresh", target="t_copy", state=JobRun.State.RUNNING)
        ReplLock.objects.create(name="snapshot:bdst.t_copy", job=holder, pid=holder_process.pid, host=HOST,
                                expires_at=timezone.now() + timedelta(minutes=1))  # fmt: skip
        outcome = execute(Actor.scheduler(), "update snapshot bdst.t_copy", wait=True)[0]
    finally:
        holder_process.kill()
        holder_process.wait()
    skipped = JobRun.objects.get(pk=outcome.job_id)
    assert outcome.ok, outcome.message
    assert skipped.state == JobRun.State.SKIPPED and skipped.trigger == JobRun.Trigger.SCHEDULER
    assert skipped.message == f"skipped: snapshot:bdst.t_copy is being applied by job #{holder.pk} " + (
        f"(pid {holder_process.pid} on {HOST})"
    )
    assert not Alert.objects.exists()


REDIS_SCRIPT = """
import django, sys
from datetime import timedelta
django.setup()
from django.utils import timezone
from django_q.brokers import get_broker
from replication_admin.core import jobs, reaper
from replication_admin.models import JobRun

broker = get_broker()
broker.purge_queue()
job = JobRun.objects.create(kind="compare", target="a <-> b")
jobs.enqueue(job, sync=False)
job.refresh_from_db()
assert job.task_id in reaper.pending_task_ids(), "the queued task is not seen in Redis"
first = job.task_id
assert broker.dequeue(), "nothing to take"  # a worker takes the task ... and dies with it
assert job.task_id not in reaper.pending_task_ids()
JobRun.objects.filter(pk=job.pk).update(sent_at=timezone.now() - timedelta(minutes=2))
assert reaper.dispatch_due() == [job.pk]
job.refresh_from_db()
assert job.task_id != first and job.task_id in reaper.pending_task_ids()
assert reaper.dispatch_due() == []  # held by the broker again: not sent twice
broker.purge_queue()
print("handed out again:", job.task_id)
"""


def test_with_the_redis_broker_a_task_taken_by_a_worker_that_died_is_handed_out_again(settings):
    """Redis has no acknowledgement: a task popped by a worker that dies is gone from the broker."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "replication_admin.settings",
        **catalog_env(str(settings.DATABASES["default"]["NAME"])),
        "REPLADMIN_REDIS_URL": "redis://127.0.0.1:6379/15",
    }
    done = subprocess.run([sys.executable, "-c", REDIS_SCRIPT], env=env, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "handed out again" in done.stdout


def test_a_running_job_whose_progress_does_not_move_past_the_stall_bound_is_taken_back_and_retried(monkeypatch):
    """The watchdog compares what each pass sees; the clock is the reaper's own, moved here by hand."""
    settings.SPARK_STALL_SECONDS = 100
    clock = [1000.0]
    monkeypatch.setattr(reaper.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(reaper, "_progress_seen", {})
    alive = {"worker_host": "another-host", "lease_expires_at": timezone.now() + timedelta(minutes=10)}
    stuck = running_elsewhere(progress_done=3, progress_total=10, **alive)
    moving = running_elsewhere(progress_done=3, progress_total=10, target="snapshot dst.u", **alive)
    ReplLock.objects.create(name="snapshot:dst.t", job=stuck, pid=4242, host="another-host",
                            expires_at=timezone.now() + timedelta(minutes=10))  # fmt: skip
    assert reaper.reap()["stalled"] == []
    clock[0] += 60
    JobRun.objects.filter(pk=moving.pk).update(progress_done=4)
    assert reaper.reap()["stalled"] == []
    clock[0] += 60  # 120 s without a move for one, 60 s for the other
    outcome = reaper.reap()
    assert outcome["stalled"] == [stuck.pk]
    stuck.refresh_from_db()
    assert stuck.state == JobRun.State.LOST and "no progress for 100 s" in stuck.error
    assert JobRun.objects.filter(retry_of=stuck, state=JobRun.State.QUEUED).exists()
    assert not ReplLock.objects.filter(job=stuck).exists()
    assert JobRun.objects.get(pk=moving.pk).state == JobRun.State.RUNNING
    settings.SPARK_STALL_SECONDS = 0  # off: nothing is taken back however long it waits
    clock[0] += 10_000
    assert reaper.reap()["stalled"] == []

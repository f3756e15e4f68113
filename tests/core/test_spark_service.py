"""The shared Spark service: a fresh process reaches it, jobs run on it in sessions of their own that the
reaper interrupts, an unreachable service is one line, SQLite files stay where executors can see them, and a
lone command without a service still runs on an embedded session."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.service import fair_pools, job_pool
from jobs.session import connect
from replication_admin.compare.actions import do_compare_snapshot
from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.core.reaper import take_back
from replication_admin.core.spark import endpoint, job_spark, session_id_of, spark_config, spark_session
from replication_admin.engine.types import LogicalType
from replication_admin.models import JobRun, Snapshot
from replication_admin.statements import execute
from tests.conftest import ROOT, catalog_env, require_spark
from tests.spark_service import free_port, spark_mode
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

COLUMNS = [("id", LogicalType("integer")), ("name", LogicalType("varchar", length=40))]


def run(text: str, context=None) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def needs_service() -> None:
    require_spark()
    if spark_mode() == "embedded":
        pytest.skip("the suite runs without the Spark service (REPLADMIN_TEST_SPARK=embedded)")


def test_a_fresh_process_reaches_the_spark_service_and_runs_a_task_on_its_master():
    needs_service()
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "spark_service", "--ping"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    expected = "spark://127.0.0.1:" if spark_mode() == "cluster" else "local["
    assert f"answers: master {expected}" in out.stdout, out.stdout


@pytest.mark.django_db(transaction=True)
def test_the_reaper_interrupts_what_a_lost_jobs_session_left_running_on_the_service():
    needs_service()
    job = JobRun.objects.create(
        kind="compare", target="lost job", state=JobRun.State.RUNNING, started_at=timezone.now(),
        worker_host="elsewhere", worker_pid=1, lease_expires_at=timezone.now() - timedelta(seconds=1),
    )  # fmt: skip
    session = connect(spark_config(), session_id_of(job))
    outcome: dict[str, object] = {}
    started = threading.Event()

    def endless() -> None:
        def progress(stages, inflight_tasks, operation_id, done):
            started.set()

        session.registerProgressHandler(progress)
        try:
            # Far more rows than the cores can sum before the test ends: it stops only when interrupted.
            outcome["rows"] = session.range(0, 10**13, 1, 2).selectExpr("sum(id % 7) AS s").collect()
        except Exception as exc:
            outcome["error"] = str(exc)

    worker = threading.Thread(target=endless, daemon=True)
    worker.start()
    assert started.wait(120), "the long operation never started on the service"
    retry = take_back(job.pk, "its worker stopped renewing the job's lease")
    worker.join(60)
    assert not worker.is_alive(), "the lost job's Spark operation was not interrupted"
    assert "rows" not in outcome
    error = str(outcome.get("error", "")).upper()
    assert any(word in error for word in ("CANCEL", "INTERRUPT", "SESSION_CLOSED")), error
    job.refresh_from_db()
    assert job.state == JobRun.State.LOST and retry is not None and retry.retry_of_id == job.pk


@pytest.mark.django_db
def test_each_jobs_spark_work_runs_in_its_own_fair_pool_on_the_service():
    needs_service()
    from pyspark.sql.functions import udf  # noqa: PLC0415

    def scheduler_pool(_: int) -> str:  # nested: pickled by value, run on an executor
        from pyspark import TaskContext  # noqa: PLC0415

        context = TaskContext.get()
        return context.getLocalProperty("spark.scheduler.pool") if context else ""

    jobs = [JobRun.objects.create(kind="compare", target=f"pool {n}") for n in range(2)]
    seen = []
    for job in jobs:
        with job_spark(job):
            spark = spark_session()
            # The pool a task runs in, as the scheduler handed it over with the task.
            rows = spark.range(0, 4, 1, 2).select(udf(scheduler_pool, "string")("id").alias("pool")).collect()
            seen.append({r["pool"] for r in rows})
    assert seen == [{job_pool(job.pk)} for job in jobs]
    assert job_pool(jobs[0].pk) != job_pool(jobs[1].pk)
    assert f'<pool name="{job_pool(jobs[1].pk)}">' in fair_pools()  # declared: FAIR inside, never leaked


@pytest.fixture
def sqlite_snapshot(make_server, db):
    source = make_server("sqlite", "lite")
    dest = make_server("postgresql", "pgd")
    create_table(source, "items", COLUMNS, ["id"])
    insert_rows(source, "items", ["id", "name"], [(i, f"item {i}") for i in range(1, 41)])
    run("create nonincremental snapshot pgd.items_copy as 'select * from lite.items'")
    return source, dest


def test_a_sqlite_server_is_refused_when_the_executors_may_not_see_its_file(sqlite_snapshot, settings):
    source, dest = sqlite_snapshot
    insert_rows(source, "items", ["id", "name"], [(i, f"item {i}") for i in range(41, 61)])
    settings.SPARK_SQLITE_SHARED = False
    with pytest.raises(ReplicationError, match=r"server lite is a SQLite file.*REPLADMIN_SPARK_SQLITE_SHARED=1"):
        endpoint(source)
    outcomes = execute(Actor.command(), "update snapshot pgd.items_copy", wait=True)
    assert not outcomes[0].ok
    assert "server lite is a SQLite file" in outcomes[0].message
    assert "\n" not in outcomes[0].message
    assert len(fetch_all(dest, 'SELECT id FROM "items_copy"')) == 40  # nothing changed


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_spark_service_fails_the_job_with_one_line_naming_it(sqlite_snapshot, settings):
    require_spark()
    settings.SPARK_REMOTE = f"sc://127.0.0.1:{free_port()}"
    settings.SPARK_CONNECT_RETRY_SECONDS = 1
    settings.RETRY_SECONDS = 2
    job = do_compare_snapshot(Actor.command(), Snapshot.objects.get(name__iendswith="items_copy"), sync=True)
    assert job.state == JobRun.State.FAILED
    assert job.error == f"Spark service {settings.SPARK_REMOTE}: unreachable (connection refused)"


@pytest.mark.django_db(transaction=True)
def test_a_lone_command_without_the_service_runs_on_an_embedded_session(sqlite_snapshot, settings):
    require_spark()
    source, dest = sqlite_snapshot
    insert_rows(source, "items", ["id", "name"], [(i, f"item {i}") for i in range(41, 101)])
    # No remote, and no service where replsql looks for one: the command's own embedded session.
    env = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"])), "REPLADMIN_SPARK_REMOTE": "",
           "REPLADMIN_SPARK_CONNECT_PORT": str(free_port())}  # fmt: skip
    env.pop("REPLADMIN_SPARK_SQLITE_SHARED", None)
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "replsql", "update snapshot pgd.items_copy"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    rows = fetch_all(dest, 'SELECT id, name FROM "items_copy" ORDER BY id')
    assert rows == [(i, f"item {i}") for i in range(1, 101)]

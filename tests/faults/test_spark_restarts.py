"""Spark's own processes fail mid-job and the product heals without a person.

Each test runs a Spark cluster of its own (a standalone master and two workers of one core each) and the supervised
Spark service (`manage.py spark_service`, writing its heartbeat into the test catalog) on free ports, and two real
django-q2 worker hosts using that service. A full refresh of 200,000 rows PostgreSQL -> MariaDB goes through Spark
(REPLADMIN_FULL_COPY_PATH=spark) and, while its Spark work runs:

- the Spark service is killed whole and started again 15 s later: the job's client sees its session lost, opens a
  new one and runs the job again;
- the master is killed and started again 15 s later (without recovery, it forgets the service's application): the
  service notices it has no executors and restarts its server, and the job runs again on the new one;
- both Spark workers are frozen (SIGSTOP): the job's Spark work makes no progress, the watchdog interrupts it and
  queues the next attempt, and that attempt succeeds once the workers run again.

Each ends succeeded, content equal (count and hash of the rows on both sides), no staging table and no item lock
left. The seconds from the fault to the job's success are printed as BENCH lines, never asserted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest

from replication_admin.core.audit import Actor
from replication_admin.models import Alert, JobRun, ProcessHeartbeat, ReplLock
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import COLUMNS
from tests.conftest import ROOT, catalog_env, unavailable
from tests.faults.test_self_healing import Hosts, final_attempt, queue, tables_on
from tests.spark_service import _wait_port, free_port
from tests.tables import create_table, fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

ROWS = 200_000
NO_EXECUTORS_SECONDS = 20  # the service's bound without executors (REPLADMIN_SPARK_NO_EXECUTORS_SECONDS)
STALL_SECONDS = 60  # the watchdog's bound in the stall test (REPLADMIN_SPARK_STALL_SECONDS)
DOWN_FOR = 15.0  # how long the service stays dead
MASTER_DOWN_FOR = 5.0  # how long the master stays dead


@dataclass
class PrivateSpark:
    """A standalone master, two workers and the supervised Spark service, each in a process group of its own."""

    work: Path
    catalog: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    service_port: int = field(default_factory=free_port)
    no_executors_seconds: int = NO_EXECUTORS_SECONDS

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.service_port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REPLADMIN_TEST_SPARK")}
        env.update(self.catalog)
        env.update({
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(self.work), "SPARK_WORKER_DIR": str(self.work),
            "REPLADMIN_SPARK_REMOTE": self.remote, "REPLADMIN_SPARK_MASTER": self.master,
            "REPLADMIN_SPARK_MASTER_UI_PORT": str(self.ui_port),
            "REPLADMIN_SPARK_NO_EXECUTORS_SECONDS": str(self.no_executors_seconds),
            "REPLADMIN_SPARK_CONF": "spark.cores.max=2 spark.executor.memory=1g spark.executor.cores=1",
            "REPLADMIN_SPARK_DRIVER_MEMORY": "1g", "REPLADMIN_SPARK_SQLITE_SHARED": "1",
            "REPLADMIN_SPARK_CONNECT_RETRY_SECONDS": "30",  # the product's default, not the suite's long wait
            # The jobs' retry window covers the service's restart: on this shared machine a restarted service
            # takes up to two minutes to answer again (its Django start, then the JVM's).
            "REPLADMIN_RETRY_SECONDS": "240",
        })  # fmt: skip
        return env

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.work / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(
                argv, cwd=ROOT, env=self.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs[name] = proc
        return proc

    def _spark_class(self, *args: str) -> list[str]:
        import pyspark  # noqa: PLC0415

        return [os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class"), *args]

    def start_master(self) -> None:
        proc = self._spawn("master", self._spark_class(
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(self.ui_port),
        ))  # fmt: skip
        _wait_port(self.port, proc, "Spark master", self.work / "master.log")

    def start_workers(self) -> None:
        for n in (1, 2):
            self._spawn(f"worker{n}", self._spark_class(
                "org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1", "--cores", "1",
                "--memory", "1536m", "--webui-port", str(free_port()), "--work-dir", str(self.work / f"worker{n}"),
            ))  # fmt: skip

    def start_service(self) -> None:
        proc = self._spawn("service", [
            sys.executable, str(ROOT / "manage.py"), "spark_service", "--port", str(self.service_port),
            "--work-dir", str(self.work / "service"),
        ])  # fmt: skip
        # A loaded machine takes minutes to start Django and then the JVM.
        _wait_port(self.service_port, proc, "Spark service", self.work / "service.log", timeout=600)

    def wait_ready(self) -> None:
        ping = [sys.executable, str(ROOT / "manage.py"), "spark_service", "--ping", "--wait", "400"]
        out = subprocess.run(ping, cwd=ROOT, env=self.env(), capture_output=True, text=True)
        assert out.returncode == 0, out.stderr + (self.work / "service" / "service.log").read_text(errors="replace")

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def signal_workers(self, signum: int) -> None:
        for name in ("worker1", "worker2"):
            os.killpg(self.procs[name].pid, signum)  # the worker and the executor it started

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def cluster(request, transactional_db, settings, tmp_path, monkeypatch) -> Iterator[tuple[PrivateSpark, Hosts]]:
    """The private Spark and two worker hosts on it; the watchdog's bound is the product's default and the service's
    bound without executors NO_EXECUTORS_SECONDS, unless the test gives its own (indirect parametrisation:
    {"stall": seconds, "no_executors": seconds})."""
    if shutil.which("java") is None:
        unavailable("no java on PATH (Spark needs a Java runtime)")
    db_path = str(settings.DATABASES["default"]["NAME"])
    bounds = getattr(request, "param", {})
    spark = PrivateSpark(tmp_path, catalog_env(db_path),
                         no_executors_seconds=bounds.get("no_executors", NO_EXECUTORS_SECONDS))  # fmt: skip
    pool = Hosts(db_path, tmp_path)
    try:
        spark.start_master()
        spark.start_workers()
        spark.start_service()
        spark.wait_ready()
        # The worker hosts and this process use the private service; every full copy goes through Spark.
        for key, value in spark.env().items():
            if key.startswith("REPLADMIN_SPARK") or key == "REPLADMIN_RETRY_SECONDS":
                monkeypatch.setenv(key, value)
        monkeypatch.setenv("REPLADMIN_FULL_COPY_PATH", "spark")
        monkeypatch.setenv("REPLADMIN_SPARK_STALL_SECONDS", str(bounds.get("stall", 600)))
        settings.SPARK_REMOTE, settings.SPARK_MASTER = spark.remote, spark.master
        settings.FULL_COPY_PATH = "spark"
        pool.start()
        pool.start()
        yield spark, pool
    finally:
        pool.stop_all()
        spark.stop()


def rows_of(server, sql: str) -> tuple[int, str]:
    """Count and sha256 of a table's rows (id, name, price), in id order, as both sides read them."""
    rows = sorted((int(r[0]), str(r[1]), Decimal(r[2]).quantize(Decimal("0.01"))) for r in fetch_all(server, sql))
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


def prepare(make_server, tag: str):
    """A source of ROWS rows, its full-refresh snapshot on MariaDB, copied once; then changed."""
    source = make_server("postgresql", f"{tag}src")
    dest = make_server("mysql", f"{tag}dst")
    create_table(source, "items", COLUMNS, ["id"])
    from replication_admin.core import connections  # noqa: PLC0415

    with connections.connect(source) as conn:
        conn.cursor().execute(f"INSERT INTO items SELECT g, 'item ' || g, g / 4.0 FROM generate_series(1, {ROWS}) g")
    created = execute(
        Actor.command(), f"create nonincremental snapshot {tag}dst.items_copy as 'select * from {tag}src.items'"
    )
    assert all(o.ok for o in created), created
    first = final_attempt(queue(f"update snapshot {tag}dst.items_copy"), timeout=600)
    assert first.state == JobRun.State.SUCCEEDED, first.error
    with connections.connect(source) as conn:  # what the refresh under test brings
        conn.cursor().execute("UPDATE items SET price = price + 1, name = name || ' v2' WHERE id % 7 = 0")
        conn.cursor().execute(
            f"INSERT INTO items SELECT g, 'new ' || g, 1.5 FROM generate_series({ROWS + 1}, {ROWS + 999}) g"
        )
    return source, dest


def wait_for_spark_work(job_id: int) -> JobRun:
    """The refresh is running and its Spark tasks have started."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        job = JobRun.objects.get(pk=job_id)
        assert not job.finished, (job.state, job.error)
        if job.state == JobRun.State.RUNNING and job.progress_total:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job #{job_id} never ran Spark work")


def assert_healed(job_id: int, source, dest, clean: set[str], fault_at: float, label: str) -> JobRun:
    final = final_attempt(job_id, timeout=600)
    assert final.state == JobRun.State.SUCCEEDED, chain_log(job_id)
    assert final.finished_at is not None
    expected = rows_of(source, "SELECT id, name, price FROM items")
    assert expected[0] == ROWS + 999
    assert rows_of(dest, "SELECT id, name, price FROM items_copy") == expected
    assert tables_on(dest) == clean, f"left on {dest.name}: {tables_on(dest) - clean}"
    assert not ReplLock.objects.exists(), list(ReplLock.objects.values())
    seconds = final.finished_at.timestamp() - fault_at
    print(f"\nBENCH spark {label} -> job succeeded (s): product={seconds:.1f} peer=- ratio=-")
    return final


def chain_log(job_id: int) -> str:
    logs, job = [], JobRun.objects.get(pk=job_id)
    while job is not None:
        logs.append(f"#{job.pk} {job.state} {job.error}\n{job.log}")
        job = JobRun.objects.filter(retry_of=job).first()
    return "\n".join(logs)


def test_a_refresh_whose_spark_service_restarts_mid_job_is_retried_on_a_new_session_and_succeeds(
    cluster, make_server, settings
):
    spark, _pool = cluster
    source, dest = prepare(make_server, "sv")
    clean = tables_on(dest)
    job_id = queue("update snapshot svdst.items_copy")
    wait_for_spark_work(job_id)
    spark.kill("service")
    killed_at = time.time()
    time.sleep(DOWN_FOR)
    spark.start_service()
    assert_healed(job_id, source, dest, clean, killed_at, "service killed, back 15 s later")
    log = chain_log(job_id)
    assert "Spark service" in log, log  # the attempt saw the service go and was run again


def test_a_refresh_whose_spark_master_restarts_mid_job_is_retried_after_the_service_re_registers(
    cluster, make_server, settings
):
    spark, _pool = cluster
    source, dest = prepare(make_server, "ms")
    clean = tables_on(dest)
    job_id = queue("update snapshot msdst.items_copy")
    wait_for_spark_work(job_id)
    spark.kill("master")
    killed_at = time.time()
    time.sleep(MASTER_DOWN_FOR)  # back soon: the workers register again while the job still runs
    spark.start_master()
    assert_healed(job_id, source, dest, clean, killed_at, "master killed, back 5 s later")
    print(f"master restart: the job ran {len(chain_log(job_id).split('running the job again')) - 1} more time(s)")
    # The service says so in its heartbeat: a live master and executors again; no executors alert left open.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        beat = ProcessHeartbeat.objects.filter(kind="spark", stopped_at__isnull=True).order_by("-renewed_at").first()
        details = beat.details if beat else {}
        if details.get("master_alive") and details.get("executors"):
            break
        time.sleep(1)
    assert details.get("master_alive") and details.get("executors"), details
    deadline = time.monotonic() + 60
    while Alert.objects.filter(target="Spark executors", resolved_at__isnull=True).exists():
        assert time.monotonic() < deadline, list(Alert.objects.values("target", "message", "resolved_at"))
        time.sleep(1)


# Frozen workers also leave the driver without executors: the service's own restart for that must not come first
# and run out the job's retry window before the watchdog acts (the watchdog is what this test is about).
@pytest.mark.parametrize("cluster", [{"no_executors": 20 * STALL_SECONDS}], indirect=True)
def test_a_refresh_whose_spark_work_makes_no_progress_is_interrupted_by_the_watchdog_and_retried(
    cluster, make_server, settings, monkeypatch
):
    spark, pool = cluster
    source, dest = prepare(make_server, "st")
    # The watchdog's bound is small from here on (worker hosts started again with it): the first copy above, whose
    # tasks may each take longer than that on a loaded machine, ran under the default.
    pool.stop_all()
    monkeypatch.setenv("REPLADMIN_SPARK_STALL_SECONDS", str(STALL_SECONDS))
    pool.start()
    pool.start()
    clean = tables_on(dest)
    job_id = queue("update snapshot stdst.items_copy")
    wait_for_spark_work(job_id)
    spark.signal_workers(signal.SIGSTOP)  # the tasks hang: no progress, nothing fails
    frozen_at = time.time()
    try:
        deadline = time.monotonic() + 600  # a guard against hanging, as the other waits here
        while JobRun.objects.get(pk=job_id).state == JobRun.State.RUNNING:
            assert time.monotonic() < deadline, chain_log(job_id)
            time.sleep(0.5)
    finally:
        spark.signal_workers(signal.SIGCONT)
    stalled = JobRun.objects.get(pk=job_id)
    assert stalled.state == JobRun.State.LOST and "no progress" in stalled.error, (stalled.state, stalled.error)
    assert JobRun.objects.filter(retry_of=stalled).exists()
    assert_healed(job_id, source, dest, clean, frozen_at, "workers frozen, watchdog")

"""Spark service benchmarks (run on demand: `make bench`, which runs them on the standalone cluster the suite
starts). They print figures and ratios measured in the same run; they assert nothing about speed.

- a fresh process to its first Spark task: on the warm service vs an embedded session's cold start (< 1 s);
- a compare of a 3,000-row table from the console, end to end, warm (< 3 s);
- 4 full refreshes at once on the cluster: every one makes progress before the first ends; total time vs the
  same four one after another;
- a full refresh of 1,000,000 rows PostgreSQL -> MariaDB through a service on a local master vs an embedded
  session in-process vs the native pipe (the service costs <= 5 % against in-process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from replication_admin.compare.actions import do_compare_snapshot
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun, Snapshot
from replication_admin.snapshots.actions import do_refresh_snapshot
from replication_admin.statements import execute
from tests.bench.test_snapshot_bench import fill_source, native_pipe, report
from tests.conftest import ROOT, catalog_env
from tests.spark_service import free_port, spark_mode
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.bench, pytest.mark.spark, pytest.mark.live_db]

ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))


def manage(*args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT, env=env or dict(os.environ), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return time.perf_counter() - started, out.stdout


EMBEDDED_FIRST_TASK = (
    "import time; t=time.perf_counter(); from replication_admin.core.spark import spark_session; "
    "spark_session().range(1).count(); print(f'first task {time.perf_counter()-t:.3f}')"
)


def test_a_fresh_process_reaches_its_first_spark_task(spark):
    if spark_mode() == "embedded":
        pytest.skip("needs the Spark service")
    services, embedded = [], []
    for _ in range(3):
        _, out = manage("spark_service", "--ping")
        services.append(float(out.split(", ")[-1].split(" s ")[0]))
        _, out = manage("shell", "-c", EMBEDDED_FIRST_TASK, env={**os.environ, "REPLADMIN_SPARK_REMOTE": ""})
        embedded.append(float(out.strip().rsplit(" ", 1)[1]))
    service, cold = sorted(services)[1], sorted(embedded)[1]
    report("fresh process to its first task (median of 3)", service_s=service, embedded_cold_s=cold,
           ratio=cold / service, target="service < 1 s")  # fmt: skip


def test_a_console_compare_of_3000_rows_end_to_end(make_server, spark):
    pg = make_server("postgresql", "cpg")
    make_server("mysql", "cmy")
    fill_source(pg, 3000)
    execute(Actor.command(), "create nonincremental snapshot cmy.copied as 'select * from cpg.bench'")
    snapshot = Snapshot.objects.get()
    times = []
    for _ in range(5):
        started = time.perf_counter()
        job = do_compare_snapshot(Actor.command(), snapshot, sync=True)
        times.append(time.perf_counter() - started)
        assert job.state == JobRun.State.SUCCEEDED and job.result["equal"], job.error
    report("compare of 3,000 rows, warm (median of 5)", seconds=sorted(times)[2], first_s=times[0],
           mode=spark_mode(), target="< 3 s")  # fmt: skip


@pytest.mark.django_db(transaction=True)  # the refreshes write the catalog from their own threads
def test_four_refreshes_at_once_all_make_progress(make_server, spark):
    pg = make_server("postgresql", "qpg")
    my = make_server("mysql", "qmy")
    rows = ROWS // 4
    fill_source(pg, rows)
    names = [f"copy{i}" for i in range(4)]
    for name in names:
        execute(Actor.command(), f"create nonincremental snapshot qmy.{name} as 'select * from qpg.bench'")
    snapshots = [Snapshot.objects.get(name__iendswith=name) for name in names]

    def refresh(snapshot: Snapshot, marks: dict) -> None:
        job = do_refresh_snapshot(Actor.command(), snapshot, sync=True)
        marks["ended"] = time.perf_counter()
        marks["job"] = job.pk

    started = time.perf_counter()
    for snapshot in snapshots:
        do_refresh_snapshot(Actor.command(), snapshot, sync=True)
    one_by_one = time.perf_counter() - started

    marks: list[dict] = [{} for _ in snapshots]
    threads = [threading.Thread(target=refresh, args=(s, m)) for s, m in zip(snapshots, marks, strict=True)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together = time.perf_counter() - started
    first_end = min(m["ended"] for m in marks)
    jobs = [JobRun.objects.get(pk=m["job"]) for m in marks]
    assert all(j.state == JobRun.State.SUCCEEDED for j in jobs), [j.error for j in jobs]
    for name in names:
        assert fetch_all(my, f"SELECT count(*) FROM {name}") == [(rows,)]
    # Every job started its Spark work before the first of them had finished (none waited for cores).
    began = [j.started_at.timestamp() + j.timings.get("spark_session", 0) for j in jobs]
    ends = [j.finished_at.timestamp() for j in jobs]
    report("4 refreshes at once", rows_each=rows, mode=spark_mode(), one_by_one_s=one_by_one, together_s=together,
           ratio=one_by_one / together, all_started_before_first_end=max(began) < min(ends),
           first_end_s=first_end - started)  # fmt: skip


@pytest.mark.django_db(transaction=True)  # the refreshes run in replsql processes on the test catalog
def test_full_refresh_through_the_service_vs_in_process_vs_native(make_server, spark, settings):
    pg = make_server("postgresql", "fpg")
    my = make_server("mysql", "fmy")
    fill_source(pg, ROWS)
    execute(Actor.command(), "create nonincremental snapshot fmy.copied as 'select * from fpg.bench'")
    # A service on a local master beside the suite's, so both sides run on the same cores.
    port = free_port()
    env = {**os.environ, "REPLADMIN_SPARK_MASTER": "local[*]"}
    env.pop("REPLADMIN_SPARK_CONF", None)
    service = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "spark_service", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        local_remote = f"sc://127.0.0.1:{port}"
        manage("spark_service", "--ping", "--wait", "180", env={**env, "REPLADMIN_SPARK_REMOTE": local_remote})
        catalog = catalog_env(str(settings.DATABASES["default"]["NAME"]))
        sides: dict[str, list[float]] = {"service": [], "in_process": [], "native": []}
        for _ in range(3):
            for side, remote in (("service", local_remote), ("in_process", "")):
                # Two refreshes in one process, the second timed: both sides warm, as on a running worker.
                twice = "update snapshot fmy.copied; update snapshot fmy.copied"
                manage("replsql", twice, env={**env, **catalog, "REPLADMIN_SPARK_REMOTE": remote})
                job = JobRun.objects.filter(kind="snapshot_refresh").latest("id")
                assert job.state == JobRun.State.SUCCEEDED, job.error
                sides[side].append(job.timings["total"])
            run_sql(my, "DROP TABLE IF EXISTS native")
            sides["native"].append(native_pipe(pg, my))
        assert fetch_all(my, "SELECT count(*) FROM copied") == [(ROWS,)]
        med = {k: sorted(v)[1] for k, v in sides.items()}
        report("full refresh PostgreSQL->MariaDB: service vs in-process vs native (median of 3)", rows=ROWS,
               service_s=med["service"], in_process_s=med["in_process"], native_s=med["native"],
               service_vs_in_process=med["service"] / med["in_process"], target="<= 1.05",
               native_ratio_service=med["native"] / med["service"])  # fmt: skip
    finally:
        os.killpg(service.pid, signal.SIGTERM)
        service.wait(timeout=30)

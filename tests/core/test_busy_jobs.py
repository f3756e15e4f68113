"""Busy is not a failure, order cannot race, and one SIGTERM stops a worker host promptly — with a real
django-q2 cluster of two workers on live databases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from replication_admin.core import connections
from replication_admin.models import Alert, AuditEntry, JobRun, ReplLock
from tests.bidir.test_bidir_sync import same
from tests.conftest import ROOT, catalog_env, require_spark
from tests.faults.test_self_healing import final_attempt, queue, run
from tests.snapshots.test_snapshot_refresh import COLUMNS, Workload
from tests.tables import create_table, fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

# How long a process may take to stop before the test calls it hung (a bound, not a timing: a stop takes
# about a second on a quiet machine and several on a loaded one).
STOP_BOUND = 60


def start_cluster(db_path: str, log_path, workers: int = 2) -> subprocess.Popen:
    env = {**os.environ, **catalog_env(db_path), "REPLADMIN_WORKERS": str(workers), "REPLADMIN_JOBS_SYNC": "0"}
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "qcluster"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


@pytest.fixture
def two_workers(transactional_db, settings, tmp_path) -> Iterator[subprocess.Popen]:
    require_spark()
    proc = start_cluster(str(settings.DATABASES["default"]["NAME"]), tmp_path / "qcluster.log")
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_for(predicate, what: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_a_second_refresh_of_a_busy_snapshot_waits_in_the_queue_behind_the_first_and_then_runs(
    two_workers, make_server
):
    source = make_server("postgresql", "qsrc")
    dest = make_server("mysql", "qdst")
    create_table(source, "t", COLUMNS, ["id"])
    work = Workload(source, "t", seed=21)
    work.insert(30_000)
    run("create snapshot log for t; create snapshot qdst.t_copy from t", context=source)
    for _ in range(200):  # changes in the log before either refresh: none can fall between the two
        work.step()
    first = queue("update snapshot qdst.t_copy as nonincremental")
    wait_for(lambda: JobRun.objects.filter(pk=first, state="running").exists(), "the first refresh to start")
    second = queue("update snapshot qdst.t_copy")  # at once: the first copies 30,000 rows meanwhile
    seen_waiting = False

    def second_waits_or_ends() -> bool:
        nonlocal seen_waiting
        job = JobRun.objects.get(pk=second)
        if job.state == "queued" and job.waiting_for_id == first:
            seen_waiting = True
            assert job.message == f"waiting for job #{first}, which is applying snapshot:qdst.t_copy"
        return seen_waiting or job.finished

    wait_for(second_waits_or_ends, "the second refresh to wait behind the first")
    # The same request again while it waits: merged into the waiting one, not queued twice.
    assert queue("update snapshot qdst.t_copy") == second
    assert AuditEntry.objects.filter(detail__merged_into=second).count() == 1

    done = [final_attempt(first), final_attempt(second)]
    assert seen_waiting, "the second refresh never waited behind the first"
    assert [j.state for j in done] == ["succeeded", "succeeded"], [j.error for j in done]
    assert done[1].started_at >= done[0].finished_at
    rows = fetch_all(dest, "SELECT count(*), sum(`id`) FROM `t_copy`")[0]
    assert (rows[0], int(rows[1])) == (len(work.ids), sum(work.ids))
    assert not JobRun.objects.filter(state="failed").exists()
    assert not Alert.objects.exists()
    assert not ReplLock.objects.exists()


def test_a_sync_queued_before_the_initial_copy_waits_for_it_and_neither_fails(two_workers, make_server, settings):
    pub = make_server("postgresql", "pg1")
    sub = make_server("mysql", "my2")
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
        for n in range(1, 3001):
            conn.cursor().execute("INSERT INTO items VALUES (?, ?)", n, f"row {n}")
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", context=pub)
    run("REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct')", context=sub)
    sync = queue("REPL_SYNC ('pg1', 'acct')", context=sub)  # the race the wizard and the demo used to lose
    copy = queue("REPL_INIT_COPY ('pg1', 'acct')", context=sub)
    with connections.connect(pub) as conn:
        for n in range(3001, 3101):
            conn.cursor().execute("INSERT INTO items VALUES (?, ?)", n, f"row {n}")
    jobs = [final_attempt(copy), final_attempt(sync)]
    assert [j.state for j in jobs] == ["succeeded", "succeeded"], [j.error for j in jobs]
    settings.JOBS_SYNC = True  # the checks below run here
    run("REPL_SYNC ('pg1', 'acct')", context=sub)
    assert same(pub, sub, "items")["equal"]
    assert not JobRun.objects.filter(state="failed").exists()
    assert not Alert.objects.exists()


def test_one_sigterm_stops_a_worker_host_mid_job_and_the_job_resumes_on_the_next_one(
    two_workers, make_server, settings, tmp_path
):
    source = make_server("postgresql", "tsrc")
    dest = make_server("mysql", "tdst")
    create_table(source, "t", COLUMNS, ["id"])
    Workload(source, "t", seed=8).insert(60_000)
    run("create snapshot log for t; create snapshot tdst.t_copy from t", context=source)
    job = queue("update snapshot tdst.t_copy as nonincremental")
    wait_for(lambda: JobRun.objects.filter(pk=job, state="running").exists(), "the refresh to start")
    time.sleep(1.0)
    os.kill(two_workers.pid, signal.SIGTERM)  # one signal to the command, as a service manager sends
    try:
        two_workers.wait(timeout=STOP_BOUND)
    except subprocess.TimeoutExpired:
        pytest.fail(f"qcluster was still running {STOP_BOUND} s after SIGTERM")
    leftovers = subprocess.run(["pgrep", "-g", str(two_workers.pid)], capture_output=True, text=True).stdout.split()
    assert leftovers == [], f"processes of the stopped host still run: {leftovers}"
    stopped = JobRun.objects.get(pk=job)
    if stopped.state == JobRun.State.LOST:  # stopped mid-run: handed back, its item free, a retry queued
        assert "shut down" in stopped.error
        assert not ReplLock.objects.filter(job_id=job).exists()
    successor = start_cluster(str(settings.DATABASES["default"]["NAME"]), tmp_path / "successor.log")
    try:
        final = final_attempt(job)
    finally:
        os.killpg(successor.pid, signal.SIGKILL)
        successor.wait()
    assert final.state == JobRun.State.SUCCEEDED, final.error
    assert fetch_all(dest, "SELECT count(*) FROM `t_copy`")[0][0] == 60_000


def test_one_sigterm_stops_the_follower_and_the_console(transactional_db, settings):
    env = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"]))}
    commands = [["replfollow"], ["runserver", "--noreload", "127.0.0.1:8765"]]
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *c],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for c in commands
    ]
    time.sleep(4.0)  # both up and in their loops
    for proc in procs:
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
    for proc, command in zip(procs, commands, strict=True):
        try:
            proc.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{command[0]} was still running {STOP_BOUND} s after SIGTERM")


def test_a_sigterm_to_the_whole_process_group_stops_an_idle_worker_host(two_workers):
    """What a terminal's Ctrl-C or `kill -- -PGID` sends: every process of the host at once."""
    time.sleep(3.0)
    os.killpg(two_workers.pid, signal.SIGTERM)
    try:
        two_workers.wait(timeout=STOP_BOUND)
    except subprocess.TimeoutExpired:
        pytest.fail(f"qcluster was still running {STOP_BOUND} s after a group-wide SIGTERM")

"""Killing the worker at random points of a refresh loses and doubles nothing.

Each trial changes the source, starts the refresh in a separate process, SIGKILLs the whole process
group at a random point once the job is running, then refreshes to completion and compares destination and
source by content. Half the trials kill an incremental refresh, half a full one.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from replication_admin.compare.actions import do_compare_snapshot
from replication_admin.core import reaper
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun, ReplLock, Snapshot
from replication_admin.statements import execute
from tests.conftest import ROOT, catalog_env, require_spark
from tests.snapshots.test_snapshot_refresh import COLUMNS, Workload
from tests.tables import create_table, fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

# Half incremental, half full; REPLADMIN_FAULT_TRIALS (3 in the suite) sets how many of each.
TRIALS = 2 * int(os.environ.get("REPLADMIN_FAULT_TRIALS", "3"))


def compare(name: str) -> dict:
    job = do_compare_snapshot(Actor.command(), Snapshot.objects.get(name=name), sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job.result


def start_refresh(statement: str, db_path: str) -> subprocess.Popen:
    # Every window goes through Spark here: a long run gives the kills more places to land.
    env = {
        **os.environ,
        **catalog_env(db_path),
        "REPLADMIN_JOBS_SYNC": "1",
        "REPLADMIN_REFRESH_SMALL_WINDOW": "0",
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "replsql", statement],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def test_a_refresh_killed_at_random_points_converges_when_run_again(transactional_db, settings, make_server, spark):
    require_spark()
    rng = random.Random(20261122)
    source = make_server("postgresql", "ksrc")
    dest = make_server("mysql", "kdst")
    create_table(source, "t", COLUMNS, ["id"])
    work = Workload(source, "t", seed=11)
    work.insert(20_000)
    outcomes = execute(Actor.command(), "create snapshot log for t; create snapshot kdst.t_copy from t", context=source)
    assert all(o.ok for o in outcomes), outcomes
    db_path = str(settings.DATABASES["default"]["NAME"])

    interrupted = 0
    for trial in range(TRIALS):
        full = trial % 2 == 1
        statement = "update snapshot kdst.t_copy" + (" as nonincremental" if full else "")
        delay = rng.uniform(0.0, 1.2)
        for attempt in range(3):  # a refresh that ended before its kill gets new changes and a sooner kill
            for _ in range(300):
                work.step()
            before = fetch_all(dest, "SELECT count(*) FROM `t_copy`")[0][0]
            proc = start_refresh(statement, db_path)
            # A random point of the run: once the job is claimed (a warm Spark service leaves a short window).
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                if JobRun.objects.filter(state="running", worker_pid=proc.pid).exists():
                    break
                time.sleep(0.05)
            time.sleep(delay / 3**attempt)
            running = JobRun.objects.filter(state="running", worker_pid=proc.pid).exists()
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if running:
                break
        interrupted += running
        if full:  # an interrupted full refresh leaves the old content (or, finished, the new)
            assert fetch_all(dest, "SELECT count(*) FROM `t_copy`")[0][0] in {before, len(work.ids)}

        result = execute(Actor.command(), statement)[0]
        assert result.ok, result.message
        comparison = compare("kdst.t_copy")
        assert comparison["equal"], (trial, full, comparison)
        assert comparison["right_count"] == len(work.ids)
        assert not ReplLock.objects.filter(pid=proc.pid).exists()

    print(f"\nFAULTS {TRIALS} trials, {interrupted} kills landed inside a running refresh, all converged")
    # Most kills land inside a run (the rest after it finished); every such job says what happened.
    assert interrupted >= TRIALS // 2, f"only {interrupted} of {TRIALS} kills interrupted a running refresh"
    reaper.reap()  # what every worker host and the scheduler round do every few seconds
    stale = JobRun.objects.filter(state="running")
    assert not stale.exists(), list(stale.values("pk", "worker_pid"))
    lost = JobRun.objects.filter(state="lost", error__contains="worker").count()
    assert lost >= interrupted - 1  # a kill during start-up may come before the job row is claimed

    # Refreshing once more changes nothing.
    before = fetch_all(dest, "SELECT count(*), sum(`id`) FROM `t_copy`")
    again = execute(Actor.command(), "update snapshot kdst.t_copy")[0]
    assert again.ok and again.details["changes"] == 0
    assert fetch_all(dest, "SELECT count(*), sum(`id`) FROM `t_copy`") == before

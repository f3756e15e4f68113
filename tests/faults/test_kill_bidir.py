"""Killing the worker during a bi-directional initial copy or sync loses and doubles nothing.

Each trial starts the statement in a separate process (its own Spark), SIGKILLs the whole process
group after a random delay, runs the statement again to completion, and compares every replica with
the publisher by content. Conflicts are recorded once per change (REPL_CONFLICT's unique key)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from decimal import Decimal

import pytest

from replication_admin.core import reaper
from replication_admin.core.audit import Actor
from replication_admin.models import ConflictBackup, JobRun, SnapshotSubscription
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import COLUMNS, assert_converged, rows, sql, user_op
from tests.conftest import ROOT, catalog_env, require_spark
from tests.tables import create_table, insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def run(text: str):
    outcome = execute(Actor.command(), text, wait=True)[-1]
    assert outcome.ok, outcome.message
    return outcome


def start(statement: str, db_path: str) -> subprocess.Popen:
    env = {**os.environ, **catalog_env(db_path), "REPLADMIN_JOBS_SYNC": "1"}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "replsql", statement],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def kill_after(proc: subprocess.Popen, seconds: float) -> bool:
    """Wait for the process's job to be running (a new process starts its own Spark first), let it work
    `seconds`, then SIGKILL its whole process group; True when the kill landed inside the running job."""
    deadline = time.monotonic() + 120
    while not JobRun.objects.filter(state="running", worker_pid=proc.pid).exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    time.sleep(seconds)
    running = JobRun.objects.filter(state="running", worker_pid=proc.pid).exists()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return running


def test_initial_copy_and_sync_killed_at_random_points_converge_when_run_again(
    transactional_db, settings, make_server, spark
):
    require_spark()
    settings.JOBS_SYNC = True  # compare jobs run here; the killed statements run in their own process
    rng = random.Random(20261123)
    db_path = str(settings.DATABASES["default"]["NAME"])
    pub = make_server("postgresql", "pg1")
    sub_my = make_server("mysql", "my2")
    sub_lite = make_server("sqlite", "lite3")
    create_table(pub, "items", COLUMNS, ["id"])
    insert_rows(pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) / 4) for i in range(1, 15_001)])
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('my2', 'pg1.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('lite3', 'pg1.items', 2)"
    )
    interrupted = 0
    # The initial copy, killed while staging or while committing its chunks, then resumed.
    for name, delay in (("my2", rng.uniform(0.5, 3.0)), ("lite3", rng.uniform(0.5, 4.0))):
        statement = f"REPL_INIT_SNAPSHOT ('{name}', 'pg1.items', 2, 500)"
        for attempt in range(3):  # a copy that ended before its kill (a quiet machine) is run again, killed sooner
            if kill_after(start(statement, db_path), delay / 3**attempt):
                interrupted += 1
                break
        state = SnapshotSubscription.objects.get(server=name).init_state
        assert state in {"staging", "copying", "done"}
        run(statement)
    assert_converged(pub, sub_my, sub_lite)
    assert len(rows(sub_lite)) == 15_000

    # Syncs killed at random points, with changes and conflicts on every node in between.
    for trial in range(2):
        delay = rng.uniform(0.2, 4.0)
        for attempt in range(3):  # a sync that ended before its kill gets new changes and a sooner kill
            for _ in range(60):
                user_op(rng.choice((pub, sub_my, sub_lite)), rng, trial, set(), set())
            sql(pub, 'UPDATE "items" SET name = ? WHERE id > 10000 AND id <= 10100', [f"bulk {trial}.{attempt}"])
            if kill_after(start("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)", db_path), delay / 3**attempt):
                interrupted += 1
                break
        before = ConflictBackup.objects.count()
        run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")
        assert_converged(pub, sub_my, sub_lite)
        assert ConflictBackup.objects.count() >= before
    print(f"\nFAULTS bidir: {interrupted} of 4 kills landed inside a running job; all converged")
    assert interrupted >= 2
    reaper.reap()  # what every worker host and the scheduler round do every few seconds
    assert not JobRun.objects.filter(state="running").exists()
    again = run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)").details["subscribers"]
    assert all(v["pulled"] == 0 and v["pushed"] == 0 for v in again.values()), again

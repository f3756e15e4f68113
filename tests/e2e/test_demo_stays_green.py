"""The demo stays green: its setup, a real worker cluster and the in-sync follower, left running for
several scheduler rounds, end with no failed job, no open alert and conflicts in the inbox.

Everything the demo writes lives apart from a real demo: its own catalog, var directory and databases
(REPLADMIN_DEMO_DATABASE), dropped afterwards."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyodbc
import pytest

from tests.conftest import ROOT, require_spark

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

# Scheduler rounds (minutes) to watch at least; the watch goes on until the inbox holds a conflict.
ROUNDS = int(os.environ.get("REPLADMIN_DEMO_ROUNDS", "2"))
ADMIN_DSNS = {
    "postgresql": "DRIVER={PostgreSQL Unicode};SERVER=127.0.0.1;PORT=5432;DATABASE=postgres;UID=root;",
    "mysql": "DRIVER={MariaDB Unicode};SERVER=127.0.0.1;PORT=3306;UID=root;PWD=;",
}


def drop_databases(name: str) -> None:
    for dialect, dsn in ADMIN_DSNS.items():
        with pyodbc.connect(dsn, autocommit=True, timeout=5) as conn:
            if dialect == "postgresql":
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            else:
                conn.execute(f"DROP DATABASE IF EXISTS `{name}`")


def catalog(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path, timeout=30) as conn:
        return conn.execute(sql).fetchall()


def test_the_demo_left_running_has_no_failed_job_no_open_alert_and_conflicts_in_the_inbox(tmp_path):
    require_spark()
    var = tmp_path / "var"
    var.mkdir()
    shutil.copy(ROOT / "var" / "dev.env", var / "dev.env")
    database = f"ra_demo_{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "REPLADMIN_VAR_DIR": str(var),
        "REPLADMIN_ENV_FILE": str(var / "dev.env"),
        "REPLADMIN_DB_ENGINE": "sqlite",  # the demo's own catalog, whatever the suite's
        "REPLADMIN_DB_PATH": str(var / "console.sqlite3"),
        "REPLADMIN_SQLITE_DIRS": str(var),
        "REPLADMIN_DEMO_DATABASE": database,
        "REPLADMIN_JOBS_SYNC": "0",
        "REPLADMIN_WORKERS": "2",
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    procs: list[subprocess.Popen] = []
    try:
        subprocess.run([*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True)
        setup = subprocess.run([*manage, "demo_setup", "--orders", "500"], cwd=ROOT, env=env,
                               capture_output=True, text=True)  # fmt: skip
        assert setup.returncode == 0, setup.stderr
        assert "FAIL" not in setup.stdout, setup.stdout
        # The login and the token, kept for scripts/demo.sh to print last, readable by this account only.
        login = var / "demo-login.txt"
        assert login.stat().st_mode & 0o077 == 0
        kept = login.read_text().splitlines()
        assert kept[0].startswith("log in at http://127.0.0.1:8000/ as admin / ") and kept[0] in setup.stdout
        assert kept[1].startswith('API token "demo monitoring" (status, metrics): ra_')
        token = kept[1].rsplit(" ", 1)[1]
        assert kept[2:] == [f'  curl -H "Authorization: Bearer {token}" http://127.0.0.1:8000/{path}'
                            for path in ("api/status", "metrics")]  # fmt: skip
        for command in ("qcluster", "replfollow"):
            with open(tmp_path / f"{command}.log", "wb") as log:
                procs.append(subprocess.Popen([*manage, command], cwd=ROOT, env=env, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
        db = var / "console.sqlite3"
        deadline = time.monotonic() + 60 * (ROUNDS + 3)
        rounds_done = 0
        while time.monotonic() < deadline:
            time.sleep(10)
            assert all(p.poll() is None for p in procs), "a demo process ended"
            rounds_done = catalog(db, "SELECT count(*) FROM django_q_task WHERE func LIKE '%scheduler_round'")[0][0]
            conflicts = catalog(db, 'SELECT count(*) FROM "REPL_CONFLICT"')[0][0]
            if rounds_done >= ROUNDS and conflicts:
                break
        failed = catalog(db, "SELECT id, kind, target, error FROM REPL_JOB_RUN WHERE state = 'failed'")
        alerts = catalog(db, 'SELECT "AL_KIND", "AL_TARGET", "AL_MESSAGE", "AL_RESOLVED_AT" FROM "REPL_ALERT"')
        succeeded = dict(catalog(db, "SELECT kind, count(*) FROM REPL_JOB_RUN WHERE state = 'succeeded' GROUP BY kind"))
        conflicts = catalog(db, 'SELECT count(*) FROM "REPL_CONFLICT"')[0][0]
        print(f"\nDEMO after {rounds_done} scheduler rounds: succeeded {succeeded}, {conflicts} conflict(s)")
        assert rounds_done >= ROUNDS
        assert failed == [], failed
        assert [a for a in alerts if a[3] is None] == [], alerts  # none open
        assert [a for a in alerts if a[0] == "job_failed"] == [], alerts  # and no job ever failed
        assert conflicts > 0
        # Every kind the demo runs has run: refreshes, bidir copies and syncs, the transactional copy.
        assert {"snapshot_refresh", "bidir_init", "bidir_sync", "trx_init"} <= set(succeeded), succeeded
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        drop_databases(database)

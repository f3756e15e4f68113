"""Killing a transactional sync at random points, then running it again: every transaction is applied
exactly once and in order.

Each publisher transaction inserts a row and logs a REPL_TEXT call of `bump (n)`; on the subscriber
bump(n) only succeeds when the previous call it saw was n - 1, so a transaction applied twice, or out
of order, fails there and would show up as a skipped transaction."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun, RegistryEntry, SkippedTransaction
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import same
from tests.conftest import ROOT, catalog_env

pytestmark = [pytest.mark.live_db]

BUMP = (
    "CREATE PROCEDURE bump (IN n integer) BEGIN "
    "UPDATE counter SET v = v + 1, last = n WHERE id = 1 AND last = n - 1; "
    "IF ROW_COUNT() = 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'bump out of order or twice'; END IF; END"
)


def run(server, text: str):
    outcome = execute(Actor.command(), text, context=server)[-1]
    assert outcome.ok, outcome.message
    return outcome


def start(statement: str, server: str, db_path: str):
    env = {**os.environ, **catalog_env(db_path), "REPLADMIN_JOBS_SYNC": "1"}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "replsql", "--server", server, statement],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def kill_while_running(proc, rng: random.Random, scale: float = 1.0) -> bool:
    """Wait for the process's job to be running, let it work a random while (times `scale`), then SIGKILL its
    group; True when the kill landed inside the running job."""
    deadline = time.monotonic() + 60
    while not JobRun.objects.filter(state="running", worker_pid=proc.pid).exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    time.sleep(rng.uniform(0.05, 0.6) * scale)
    running = JobRun.objects.filter(state="running", worker_pid=proc.pid).exists()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return running


def publish_transactions(pub, first: int, count: int) -> None:
    with connections.connect(pub, autocommit=False) as conn:
        cursor = conn.cursor()
        for n in range(first, first + count):
            cursor.execute("INSERT INTO items (id, name) VALUES (?, ?)", n, f"row {n}")
            cursor.execute(
                'INSERT INTO "REPL_TEXT" ("ACCOUNT", "STMT", "ARGS") VALUES (?, ?, ?)', "acct", "bump (?)", f"[{n}]"
            )
            conn.commit()


# Triggers, or the WAL (a kill may land mid-read), its slot read by SQL or streamed (every backlog).
@pytest.mark.parametrize("capture", ["postgresql", "pgwal", "pgwal streamed"])
def test_a_sync_killed_at_random_points_applies_every_transaction_once_and_in_order(
    transactional_db, settings, make_server, spark, capture, monkeypatch
):
    settings.JOBS_SYNC = True
    if capture == "pgwal streamed":
        settings.WAL_STREAM_BYTES = 1
        monkeypatch.setenv("REPLADMIN_WAL_STREAM_BYTES", "1")  # the killed syncs' processes
    rng = random.Random(20261123)
    db_path = str(settings.DATABASES["default"]["NAME"])
    pub = make_server(capture.split()[0], "pg1")
    sub = make_server("mysql", "my2")
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    with connections.connect(sub) as conn:
        conn.cursor().execute("CREATE TABLE counter (id int PRIMARY KEY, v int, last int)")
        conn.cursor().execute("INSERT INTO counter VALUES (1, 0, 0)")
        conn.cursor().execute(BUMP)
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct'); REPL_INIT_COPY ('pg1', 'acct')")
    RegistryEntry.objects.update_or_create(key="repl_apply_batch", defaults={"value": "10"})
    interrupted = 0
    total = 0
    for _trial in range(3):
        for attempt in range(3):  # a sync that ended before its kill gets more transactions and a sooner kill
            publish_transactions(pub, total + 1, 2000)
            total += 2000
            if kill_while_running(start("REPL_SYNC ('pg1', 'acct')", "my2", db_path), rng, 1 / 3**attempt):
                interrupted += 1
                break
        JobRun.objects.filter(state="running").update(state="failed", error="killed")
        run(sub, "REPL_SYNC ('pg1', 'acct')")
        with connections.connect(sub) as conn:
            assert tuple(conn.cursor().execute("SELECT v, last FROM counter").fetchone()) == (total, total)
        assert same(pub, sub, "items")["equal"]
    assert not SkippedTransaction.objects.exists()
    assert interrupted == 3, f"only {interrupted} of 3 kills landed inside a running sync"

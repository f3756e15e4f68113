"""A worker host killed mid-job is healed by the product itself, with nobody re-running anything.

Two real django-q2 clusters (two "worker hosts", one worker each) serve the test database. Each trial
changes the source, queues a job, waits until a worker runs it, SIGKILLs that worker's whole cluster
(process group: cluster, worker, Spark JVM) and restarts nothing but a replacement for the next trial.
The surviving cluster's reaper sees the worker gone, marks the job lost, frees its item and queues the
next attempt, which it runs: the request ends succeeded, content equal to the source, nothing doubled,
no lock and no staging table left. The time from kill to healed job is printed (make bench-style
figures, never asserted).
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest

from replication_admin.compare.actions import do_compare_snapshot
from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.models import JobRun, RegistryEntry, ReplLock, Server, Snapshot
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import COLUMNS as BIDIR_COLUMNS
from tests.bidir.test_bidir_sync import assert_converged, same, user_op
from tests.conftest import ROOT, catalog_env, require_spark
from tests.snapshots.test_snapshot_refresh import COLUMNS, Workload
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

# Kills per test: 3 in the suite; REPLADMIN_FAULT_TRIALS=10 (or more) for a longer hunt at random points.
TRIALS = int(os.environ.get("REPLADMIN_FAULT_TRIALS", "3"))
HEALED: dict[str, list[float]] = {}
# How long each kind of job ran in the trials so far (seconds): kills are timed within that, so they land inside
# the job whether the machine makes it take 0.5 s or 5 s.
RAN: dict[str, list[float]] = {}


@dataclass
class Hosts:
    """Worker clusters in their own process groups, on the test database."""

    db_path: str
    log_dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    started: int = 0

    def start(self) -> subprocess.Popen:
        env = {
            **os.environ,
            **catalog_env(self.db_path),
            "REPLADMIN_WORKERS": "1",
            "REPLADMIN_JOBS_SYNC": "0",
            "REPLADMIN_REFRESH_SMALL_WINDOW": "0",  # every window through Spark: runs long enough to be hit
        }
        self.started += 1
        with open(self.log_dir / f"qcluster-{self.started}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "qcluster"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def running(self) -> list[subprocess.Popen]:
        return [p for p in self.procs if p.poll() is None]

    def owner(self, pid: int) -> subprocess.Popen | None:
        """The cluster whose process group holds `pid`."""
        try:
            group = os.getpgid(pid)
        except ProcessLookupError:
            return None
        return next((p for p in self.running() if p.pid == group), None)

    def stop_all(self) -> None:
        for proc in self.running():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def hosts(transactional_db, settings, tmp_path) -> Iterator[Hosts]:
    require_spark()
    pool = Hosts(str(settings.DATABASES["default"]["NAME"]), tmp_path)
    pool.start()
    pool.start()
    yield pool
    pool.stop_all()


@contextmanager
def here(settings) -> Iterator[None]:
    """Checks (compares) run in the test process while the jobs under test go to the workers."""
    settings.JOBS_SYNC = True
    try:
        yield
    finally:
        settings.JOBS_SYNC = False


def queue(text: str, context: Server | None = None) -> int:
    outcome = execute(Actor.command(), text, context=context, wait=False)[-1]
    assert outcome.ok and outcome.job_id, outcome.message
    return outcome.job_id


def run(text: str, context: Server | None = None):
    outcome = execute(Actor.command(), text, context=context, wait=True)[-1]
    assert outcome.ok, outcome.message
    return outcome


def final_attempt(job_id: int, timeout: float = 300.0) -> JobRun:
    """Follow the request's chain of attempts until one has finished and none follows it."""
    deadline = time.monotonic() + timeout
    job = JobRun.objects.get(pk=job_id)
    while time.monotonic() < deadline:
        job.refresh_from_db()  # before looking for its retry: a lost job and its retry commit together
        nxt = JobRun.objects.filter(retry_of=job).first()
        if nxt is not None:
            job = nxt
            continue
        if job.finished:
            return job
        time.sleep(0.2)
    raise AssertionError(f"job #{job_id}: attempt #{job.pk} is still {job.state} after {timeout} s:\n{job.log}")


def kill_and_heal(pool: Hosts, job_id: int, rng: random.Random, label: str) -> bool:
    """Kill the cluster running `job_id` at a random point, start a replacement for the next trial and
    wait for the request to end. True when the kill landed inside the running job."""
    deadline = time.monotonic() + 300
    while True:
        job = JobRun.objects.get(pk=job_id)
        if job.state == JobRun.State.RUNNING and job.worker_pid:
            break
        assert not job.finished or job.state == JobRun.State.QUEUED, (job.state, job.error)
        assert time.monotonic() < deadline, f"job #{job_id} never started"
        time.sleep(0.05)
    ran = RAN.get(label) or [1.5]
    time.sleep(rng.uniform(0.1, 0.8) * statistics.median(ran))
    owner = pool.owner(job.worker_pid)
    assert owner is not None, f"job #{job_id}'s worker pid {job.worker_pid} belongs to no cluster"
    landed = JobRun.objects.filter(pk=job_id, state=JobRun.State.RUNNING).exists()
    os.killpg(owner.pid, signal.SIGKILL)
    killed_at = time.time()
    owner.wait()
    pool.start()  # the next trial has two hosts again; this one heals on the survivor
    final = final_attempt(job_id)
    assert final.state == JobRun.State.SUCCEEDED, (final.pk, final.state, final.error)
    assert final.started_at is not None and final.finished_at is not None
    RAN.setdefault(label, []).append((final.finished_at - final.started_at).total_seconds())
    if landed:
        assert JobRun.objects.get(pk=job_id).state == JobRun.State.LOST
        assert final.pk != job_id and final.trigger == JobRun.Trigger.RETRY
        assert final.finished_at is not None
        HEALED.setdefault(label, []).append(final.finished_at.timestamp() - killed_at)
    return landed


def compare_snapshot(name: str) -> dict:
    job = do_compare_snapshot(Actor.command(), Snapshot.objects.get(name=name), sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job.result


def tables_on(server: Server) -> set[str]:
    sql, params = dialects.get(server.dialect).tables_sql(server.schema)
    with connections.connect(server, readonly=True) as conn:
        return {row[0] for row in conn.cursor().execute(sql, params).fetchall()}


def assert_clean(*servers_and_tables: tuple[Server, set[str]]) -> None:
    assert not ReplLock.objects.exists(), list(ReplLock.objects.values())
    for server, before in servers_and_tables:
        assert tables_on(server) == before, f"left on {server.name}: {tables_on(server) - before}"


def report(label: str, landed: int) -> None:
    times = HEALED.get(label, [])
    if times:
        print(
            f"\nHEALED {label}: {landed}/{TRIALS} kills inside the job; kill → healed "
            f"median {statistics.median(times):.1f} s, max {max(times):.1f} s"
        )
    assert landed >= max(1, TRIALS // 2), f"only {landed} of {TRIALS} kills landed inside a running job"


@pytest.mark.parametrize("mode", ["full", "incremental"])
def test_a_snapshot_refresh_whose_worker_host_is_killed_finishes_on_the_other_host(hosts, make_server, mode):
    rng = random.Random(f"refresh-{mode}")
    source = make_server("postgresql", "hsrc")
    dest = make_server("mysql", "hdst")
    create_table(source, "t", COLUMNS, ["id"])
    work = Workload(source, "t", seed=5)
    work.insert(20_000)
    run("create snapshot log for t; create snapshot hdst.t_copy from t", context=source)
    clean = tables_on(dest)
    statement = "update snapshot hdst.t_copy" + (" as nonincremental" if mode == "full" else "")
    landed = 0
    for _trial in range(TRIALS):
        for _ in range(400):
            work.step()
        landed += kill_and_heal(hosts, queue(statement), rng, f"snapshot {mode} refresh")
        rows = fetch_all(dest, "SELECT count(*), sum(`id`) FROM `t_copy`")[0]
        assert (rows[0], int(rows[1])) == (len(work.ids), sum(work.ids))
        assert compare_snapshot("hdst.t_copy")["equal"]
        assert_clean((dest, clean))
    compare = run("update snapshot hdst.t_copy")
    assert compare.details["changes"] == 0  # nothing left over, nothing applied twice
    report(f"snapshot {mode} refresh", landed)


@pytest.mark.parametrize("step", ["init", "sync"])
def test_a_bidirectional_job_whose_worker_host_is_killed_finishes_on_the_other_host(hosts, make_server, settings, step):
    rng = random.Random(f"bidir-{step}")
    pub = make_server("postgresql", "pg1")
    sub = make_server("mysql", "my2")
    create_table(pub, "items", BIDIR_COLUMNS, ["id"])
    insert_rows(pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) / 4) for i in range(1, 20_001)])
    run("REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2); REPL_CREATE_SNAPSHOT_SUB ('my2', 'pg1.items', 2)")
    if step == "sync":
        run("REPL_INIT_SNAPSHOT ('my2', 'pg1.items', 2, 500)")
    clean = tables_on(sub), tables_on(pub)
    landed = 0
    for trial in range(TRIALS):
        if step == "init":
            statement = "REPL_INIT_SNAPSHOT ('my2', 'pg1.items', 2, 500)"
        else:
            for _ in range(80):
                user_op(rng.choice((pub, sub)), rng, trial, set(), set())
            statement = "REPL_UPDATE_SNAPSHOT ('pg1.items', 2)"
        landed += kill_and_heal(hosts, queue(statement), rng, f"bidir {step}")
        with here(settings):
            assert_converged(pub, sub)
        assert_clean((sub, clean[0]), (pub, clean[1]))
    again = run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)").details["subscribers"]
    assert all(v["pulled"] == 0 and v["pushed"] == 0 for v in again.values()), again
    report(f"bidir {step}", landed)


def publish(pub: Server, first: int, count: int) -> None:
    with connections.connect(pub, autocommit=False) as conn:
        cursor = conn.cursor()
        for n in range(first, first + count):
            cursor.execute("INSERT INTO items (id, name) VALUES (?, ?)", n, f"row {n}")
            if n % 10 == 0:
                cursor.execute("UPDATE items SET name = ? WHERE id = ?", f"row {n} again", n - 5)
            conn.commit()


@pytest.mark.parametrize("step", ["init", "sync"])
def test_a_transactional_job_whose_worker_host_is_killed_finishes_on_the_other_host(hosts, make_server, settings, step):
    rng = random.Random(f"trx-{step}")
    pub = make_server("postgresql", "pg1")
    sub = make_server("mysql", "my2")
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", context=pub)
    if step == "init":  # one bulk insert: a copy of 200,000 rows runs long enough for a kill to land in it
        with connections.connect(pub, autocommit=False) as conn:
            conn.cursor().execute(
                "INSERT INTO items (id, name) SELECT g, 'row ' || g FROM generate_series(1, 200000) g"
            )
            conn.commit()
    else:
        publish(pub, 1, 100)
    run("REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct')", context=sub)
    if step == "sync":
        run("REPL_INIT_COPY ('pg1', 'acct')", context=sub)
    clean = tables_on(sub) | {"items"}  # the copy creates the subscriber's table
    total = 200_000 if step == "init" else 100
    # Small apply batches: a sync of a few thousand transactions runs long enough for a kill to land in it.
    RegistryEntry.objects.update_or_create(key="repl_apply_batch", defaults={"value": "20"})
    landed = 0
    for _trial in range(TRIALS):
        publish(pub, total + 1, 3000)
        total += 3000
        statement = "REPL_INIT_COPY ('pg1', 'acct')" if step == "init" else "REPL_SYNC ('pg1', 'acct')"
        landed += kill_and_heal(hosts, queue(statement, context=sub), rng, f"transactional {step}")
        with here(settings):
            if step == "init":  # the copy is as of its start; a sync brings what came after
                run("REPL_SYNC ('pg1', 'acct')", context=sub)
            assert same(pub, sub, "items")["equal"]
        assert fetch_all(sub, "SELECT count(*) FROM items")[0][0] == total
        assert_clean((sub, clean))
    report(f"transactional {step}", landed)


def test_the_reaper_gives_the_request_back_when_no_host_survives(hosts, make_server):
    """With every host killed, the job stays taken back and queued; the next host to start finishes it."""
    rng = random.Random("no-survivor")
    source = make_server("postgresql", "nsrc")
    dest = make_server("mysql", "ndst")
    create_table(source, "t", COLUMNS, ["id"])
    Workload(source, "t", seed=9).insert(20_000)
    run("create snapshot log for t; create snapshot ndst.t_copy from t", context=source)
    pause = 1.0
    for _attempt in range(4):  # a refresh that ended before the kill is asked for again, killed sooner
        job_id = queue("update snapshot ndst.t_copy as nonincremental")
        deadline = time.monotonic() + 300
        while not JobRun.objects.filter(pk=job_id, state=JobRun.State.RUNNING).exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(rng.uniform(0.2, 1.0) * pause)
        hosts.stop_all()
        if JobRun.objects.get(pk=job_id).state == JobRun.State.RUNNING:
            break
        hosts.start()
        pause /= 3
    assert JobRun.objects.get(pk=job_id).state == JobRun.State.RUNNING  # nobody is left to notice
    hosts.start()
    final = final_attempt(job_id)
    assert final.state == JobRun.State.SUCCEEDED and final.pk != job_id, (final.state, final.error)
    assert "worker" in JobRun.objects.get(pk=job_id).error
    assert fetch_all(dest, "SELECT count(*) FROM `t_copy`")[0][0] == 20_000

"""Several worker hosts on one PostgreSQL catalog: a host killed mid-job is healed by the other one.

The test makes its own throwaway catalog database on the live PostgreSQL (migrated with `manage.py migrate`)
and drives everything through `manage.py` in child processes, as an operator would: two `manage.py qcluster`
processes with REPLADMIN_HOST=host-a and host-b share that catalog and its ORM broker. A full refresh of a
large snapshot (PostgreSQL → MariaDB) is queued; the host that took it is SIGKILLed mid-job (its process
group: cluster, worker, Spark JVM). The other host's reaper sees the lease expire (not the dead pid: that
pid belongs to another host identity), marks the job lost and runs its next attempt: it succeeds on the
other host, with the destination content-equal to the source, nothing doubled, no staging table left.
Workers inherit the test's environment (REPLADMIN_SPARK_* included). Whatever it starts or creates, the test
stops and drops, also when it fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import MY, PG, ROOT, _my_admin, create_database, drop_database, require_service, require_spark

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

ROWS = int(os.environ.get("REPLADMIN_HOSTS_TEST_ROWS", "1000000"))
LEASE = 8  # seconds: a dead host's job is taken back within LEASE + REAP_INTERVAL
HEALED_WITHIN = 60.0


class Catalog:
    """A throwaway PostgreSQL catalog and the worker hosts and commands that run on it."""

    def __init__(self, name: str, log_dir: Path) -> None:
        self.name = name
        self.log_dir = log_dir
        self.hosts: dict[str, subprocess.Popen] = {}
        self.env = {k: v for k, v in os.environ.items() if k not in {"REPLADMIN_REDIS_URL", "REPLADMIN_HOST"}}
        self.env.update({
            "REPLADMIN_DB_ENGINE": "postgresql",
            "REPLADMIN_DB_NAME": name,
            "REPLADMIN_DB_HOST": str(PG["host"]),
            "REPLADMIN_DB_PORT": str(PG["port"]),
            "REPLADMIN_DB_USER": str(PG["user"]),
            "REPLADMIN_DB_PASSWORD": str(PG["password"]),
            "REPLADMIN_WORKERS": "1",
            "REPLADMIN_JOBS_SYNC": "0",
            "REPLADMIN_LEASE_SECONDS": str(LEASE),
        })  # fmt: skip

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, f"manage.py {args[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    def start_host(self, identity: str) -> subprocess.Popen:
        with open(self.log_dir / f"qcluster-{identity}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "qcluster"],
                cwd=ROOT, env={**self.env, "REPLADMIN_HOST": identity},
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.hosts[identity] = proc
        return proc

    def kill_host(self, identity: str) -> None:
        proc = self.hosts[identity]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # Whatever the group left behind (nothing should be): a child that left the group is not ours to find.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for identity in list(self.hosts):
            self.kill_host(identity)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}"
            for path in sorted(self.log_dir.glob("*.log"))
        )

    def query(self, sql: str, *params: object) -> list[tuple]:
        with psycopg.connect(
            host=str(PG["host"]), port=int(PG["port"]), user=str(PG["user"]), password=str(PG["password"]) or None,
            dbname=self.name, autocommit=True, connect_timeout=10,
        ) as conn:  # fmt: skip
            return conn.execute(sql, params).fetchall()

    def job(self, job_id: int) -> dict:
        columns = ["id", "state", "worker_host", "worker_pid", "error", "started_at", "finished_at", "trigger"]
        rows = self.query(f'SELECT {", ".join(columns)} FROM "REPL_JOB_RUN" WHERE id = %s', job_id)
        assert rows, f"no job #{job_id}"
        return dict(zip(columns, rows[0], strict=True))

    def retry_of(self, job_id: int) -> int | None:
        rows = self.query('SELECT id FROM "REPL_JOB_RUN" WHERE retry_of_id = %s', job_id)
        return rows[0][0] if rows else None


@pytest.fixture
def catalog(tmp_path) -> Iterator[Catalog]:
    require_spark()
    require_service("postgresql")
    require_service("mysql")
    pool = Catalog(create_database("postgresql"), tmp_path)
    try:
        pool.manage("migrate", "--no-input")
        yield pool
    finally:
        pool.stop_all()
        drop_database("postgresql", pool.name)


@pytest.fixture
def data_databases() -> Iterator[tuple[str, str]]:
    made: list[tuple[str, str]] = []
    try:
        made.append(("postgresql", create_database("postgresql")))
        made.append(("mysql", create_database("mysql")))
        yield made[0][1], made[1][1]
    finally:
        for dialect, name in made:
            drop_database(dialect, name)


def pg_source(database: str):
    return psycopg.connect(
        host=str(PG["host"]), port=int(PG["port"]), user=str(PG["user"]), password=str(PG["password"]) or None,
        dbname=database, autocommit=True,
    )  # fmt: skip


def digest(rows) -> tuple[int, int, str]:
    """Count, sum of keys and a hash of every row in key order."""
    count, keys, hashed = 0, 0, hashlib.sha256()
    for key, name, amount in rows:
        count, keys = count + 1, keys + int(key)
        hashed.update(f"{int(key)}\x1f{name}\x1f{int(amount)}\x1e".encode())
    return count, keys, hashed.hexdigest()


def source_digest(database: str) -> tuple[int, int, str]:
    with pg_source(database) as conn, conn.cursor(name="rows", withhold=True) as cursor:
        cursor.execute("SELECT id, name, amount FROM t ORDER BY id")
        return digest(cursor)


def destination_digest(database: str) -> tuple[int, int, str]:
    with _my_admin() as conn:
        cursor = conn.cursor()
        cursor.execute(f"USE `{database}`")
        return digest(cursor.execute("SELECT id, name, amount FROM t_copy ORDER BY id"))


def destination_tables(database: str) -> set[str]:
    with _my_admin() as conn:
        rows = (
            conn.cursor()
            .execute("SELECT table_name FROM information_schema.tables WHERE table_schema = ?", database)
            .fetchall()
        )
    return {r[0] for r in rows}


def wait_for(predicate, what: str, seconds: float, catalog: Catalog):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting {seconds:.0f} s for {what}\n{catalog.logs()}")
        time.sleep(0.1)


def test_a_full_refresh_whose_worker_host_is_killed_mid_job_is_finished_by_the_other_host(catalog, data_databases):
    source_db, dest_db = data_databases
    with pg_source(source_db) as conn:
        conn.execute("CREATE TABLE t (id integer PRIMARY KEY, name varchar(40) NOT NULL, amount integer NOT NULL)")
        conn.execute(
            "INSERT INTO t SELECT n, 'row ' || md5(n::text), mod(n::bigint * 7919, 100003) FROM generate_series(1, %s) n",
            (ROWS,),
        )
        conn.execute("ANALYZE t")
    for name, dialect, params, database in (("hsrc", "postgresql", PG, source_db), ("hdst", "mysql", MY, dest_db)):
        catalog.manage(
            "register_server", name, "--dialect", dialect, "--host", str(params["host"]),
            "--port", str(params["port"]), "--database", database, "--user", str(params["user"]),
        )  # fmt: skip
    catalog.start_host("host-a")
    catalog.start_host("host-b")

    queued = catalog.manage("replsql", "--queue", "--server", "hsrc", "create snapshot hdst.t_copy from t")
    found = re.search(r"\s(\d+)\s*$", queued.strip().splitlines()[-1])
    assert found, queued
    job_id = int(found.group(1))

    job = wait_for(
        lambda: (j := catalog.job(job_id))["state"] == "running" and j, "a host to start the refresh", 120, catalog
    )
    taker = job["worker_host"]
    other = "host-b" if taker == "host-a" else "host-a"
    assert taker in catalog.hosts, job
    time.sleep(0.8)  # inside the job: Spark is reading and writing (1,000,000 rows take seconds on the service)
    sessions = catalog.query("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", catalog.name)[0][0]
    assert catalog.job(job_id)["state"] == "running", f"the refresh ended before the kill:\n{catalog.job(job_id)}"
    catalog.kill_host(taker)
    killed_at = time.monotonic()

    retry_id = wait_for(lambda: catalog.retry_of(job_id), "the lost job's next attempt", HEALED_WITHIN, catalog)
    taken_back = time.monotonic() - killed_at
    lost = catalog.job(job_id)
    assert lost["state"] == "lost", lost
    # Taken back because its lease ran out: the other identity never judged host-a's pid.
    assert "stopped renewing the job's lease" in lost["error"] and f"on {taker}" in lost["error"], lost["error"]
    remaining = HEALED_WITHIN - (time.monotonic() - killed_at)
    retry = wait_for(
        lambda: (j := catalog.job(retry_id))["state"] not in {"queued", "running"} and j,
        "the next attempt to finish on the other host", max(1.0, remaining), catalog,
    )  # fmt: skip
    healed = time.monotonic() - killed_at
    assert retry["state"] == "succeeded", f"{retry}\n{catalog.logs()}"
    assert retry["worker_host"] == other and retry["trigger"] == "retry", retry
    assert catalog.retry_of(retry_id) is None
    print(
        f"\nHEALED several hosts: {ROWS} rows, {taker} killed → taken back after {taken_back:.1f} s, "
        f"{other} finished the refresh after {healed:.1f} s; {sessions} catalog sessions with both hosts up"
    )

    assert destination_digest(dest_db) == source_digest(source_db)  # count, sum of keys, hash of every row
    assert destination_tables(dest_db) == {"t_copy"}, "staging objects were left behind"
    assert catalog.query('SELECT count(*) FROM "REPL_LOCK"') == [(0,)]
    assert catalog.query("""SELECT count(*) FROM "REPL_JOB_RUN" WHERE state = 'running'""") == [(0,)]

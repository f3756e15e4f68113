"""Shared fixtures: throwaway databases on the live servers, registered servers, one SparkSession.

Under CI=true a missing PostgreSQL, MariaDB, Java or JDBC jar fails the test run; elsewhere the tests
that need it are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyodbc
import pytest
from django.conf import settings

from jobs.session import get_spark
from replication_admin.core.audit import Actor
from replication_admin.core.spark import spark_config
from replication_admin.models import JobRun
from replication_admin.servers.actions import ServerData, do_register_server
from tests.dev_env import free_ports, port_is_free
from tests.pg_cluster import ClusterDidNotStart, own_cluster
from tests.spark_service import wait_for_spark
from tests.users import editor_client, operator_client, viewer_client  # noqa: F401 - fixtures for every feature's tests

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() == "true"

PG = {"host": "127.0.0.1", "port": 5432, "user": "root", "password": ""}
# The suite's own cluster with wal_level = logical (started on first use): "pgwal" servers live there, and their
# transactional publications capture from the WAL.
WAL_PG = {
    "host": "127.0.0.1",
    # One cluster per pytest-xdist worker (gw0, gw1, …), each on its own port.
    "port": int(os.environ.get("REPLADMIN_TEST_WAL_PG_PORT", "5446"))
    + int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0),
    "user": "postgres",
    "password": "",
}
WAL_SETTINGS = {"wal_level": "logical", "max_replication_slots": "64", "max_wal_senders": "8"}
MY = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


# Tests of a minute or more (fault trials, the demo, schedules watched slot by slot) start first within their group:
# with two test processes (make test) neither is then left running one of them alone at the end.
LONG_RUNNING = (
    "tests/faults/",
    "tests/e2e/test_demo_stays_green.py",
    "tests/console/test_scheduler_on_time.py",
    "tests/bidir/test_steady_writes.py",
)


def _db_group(item: pytest.Item) -> int:
    """pytest-django's order: 0 database tests rolled back, 1 transactional ones (flushed), 2 the rest."""
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", [])
    transactional = bool(marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")))
    transactional = transactional or "transactional_db" in fixtures or "live_server" in fixtures
    return 1 if transactional else 0 if (marker is not None or "db" in fixtures) else 2


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups = [_db_group(item) for item in items]
    if groups != sorted(groups):
        return  # not pytest-django's order as understood here: leave it as it is
    items.sort(key=lambda item: (_db_group(item), not item.nodeid.startswith(LONG_RUNNING)))


def unavailable(reason: str) -> None:
    """Fail under CI (a service the suite needs is missing), skip elsewhere."""
    if IN_CI:
        pytest.fail(f"required for CI but unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


def _pg_admin(params: dict | None = None) -> pyodbc.Connection:
    params = params or PG
    return pyodbc.connect(
        f"DRIVER={{PostgreSQL Unicode}};SERVER={params['host']};PORT={params['port']};DATABASE=postgres;"
        f"UID={params['user']};PWD={params['password']};",
        autocommit=True,
        timeout=5,
    )


def _my_admin() -> pyodbc.Connection:
    return pyodbc.connect(
        f"DRIVER={{MariaDB Unicode}};SERVER={MY['host']};PORT={MY['port']};UID={MY['user']};PWD={MY['password']};",
        autocommit=True,
        timeout=5,
    )


def _wal_admin() -> pyodbc.Connection:
    return _pg_admin(WAL_PG)


_ADMIN = {"postgresql": _pg_admin, "mysql": _my_admin, "pgwal": _wal_admin}
_service_state: dict[str, str | None] = {}


def require_service(dialect: str) -> None:
    if dialect == "sqlite":
        return
    if dialect not in _service_state:
        try:
            _ADMIN[dialect]().close()
            _service_state[dialect] = None
        except pyodbc.Error as exc:
            _service_state[dialect] = f"{dialect} at 127.0.0.1 is not reachable: {exc}"
    if _service_state[dialect]:
        unavailable(_service_state[dialect])


def require_spark() -> None:
    if shutil.which("java") is None:
        unavailable("no java on PATH (Spark needs a Java runtime)")
    missing = [jar for jar in settings.JDBC_JARS if not os.path.isfile(jar)]
    if missing:
        unavailable(f"JDBC jars missing: {', '.join(missing)}")
    wait_for_spark()


def create_database(dialect: str) -> str:
    name = f"ra_test_{uuid.uuid4().hex[:10]}"
    with _ADMIN[dialect]() as conn:
        if dialect in ("postgresql", "pgwal"):
            conn.execute(f'CREATE DATABASE "{name}"')
        else:
            conn.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    return name


def drop_database(dialect: str, name: str) -> None:
    with _ADMIN[dialect]() as conn:
        if dialect == "pgwal":  # a database with a replication slot cannot be dropped
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = ?", name
            )
        if dialect in ("postgresql", "pgwal"):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        else:
            conn.execute(f"DROP DATABASE IF EXISTS `{name}`")


def catalog_env(name: str) -> dict[str, str]:
    """The environment that points a child process (a worker host, replsql) at the test catalog `name`:
    a SQLite file, or the PostgreSQL test database when the suite runs with REPLADMIN_DB_ENGINE=postgresql."""
    if settings.DB_ENGINE == "postgresql":
        return {"REPLADMIN_DB_ENGINE": "postgresql", "REPLADMIN_DB_NAME": name}
    return {"REPLADMIN_DB_PATH": name}


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker) -> Iterator[None]:
    """pytest-django's test catalog; on PostgreSQL the sessions still open on it at the end (a heartbeat
    thread's persistent connection, a worker host stopped a moment ago) are ended so it can be dropped."""
    yield
    if settings.DB_ENGINE != "postgresql":
        return
    name = str(settings.DATABASES["default"]["NAME"])
    with django_db_blocker.unblock(), _pg_admin() as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", name
        )


@pytest.fixture(autouse=True, scope="session")
def sqlite_dirs_include_tmp():
    """Test SQLite files live under the system temp folder; let the console use them."""
    settings.SQLITE_ALLOWED_DIRS = [*settings.SQLITE_ALLOWED_DIRS, tempfile.gettempdir()]
    os.environ["REPLADMIN_SQLITE_DIRS"] = ",".join(settings.SQLITE_ALLOWED_DIRS)


@pytest.fixture(scope="session")
def wal_postgres() -> Iterator[None]:
    """The suite's PostgreSQL cluster with wal_level = logical, on its own port, stopped at the end. The port was
    chosen free when the run began; if something took it since, the cluster moves to another free one."""
    if not port_is_free(WAL_PG["port"]):
        WAL_PG["port"] = free_ports(1)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(own_cluster(WAL_PG["port"], WAL_SETTINGS))
        except ClusterDidNotStart:
            WAL_PG["port"] = free_ports(1)
            stack.enter_context(own_cluster(WAL_PG["port"], WAL_SETTINGS))
        yield


@pytest.fixture
def live_database(request) -> Iterator[Callable[[str], str]]:
    """Factory: a fresh database on the live PostgreSQL / MariaDB (or "pgwal": the suite's cluster with
    wal_level = logical), dropped after the test."""
    made: list[tuple[str, str]] = []

    def make(dialect: str) -> str:
        if dialect == "pgwal":
            request.getfixturevalue("wal_postgres")
        else:
            require_service(dialect)
        name = create_database(dialect)
        made.append((dialect, name))
        return name

    yield make
    for dialect, name in made:
        drop_database(dialect, name)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Callable[[str], str]:
    """Factory: an empty SQLite file under the test's tmp folder."""

    def make(stem: str = "db") -> str:
        path = tmp_path / f"{stem}-{uuid.uuid4().hex[:6]}.sqlite3"
        sqlite3.connect(path).close()
        return str(path)

    return make


def server_data(dialect: str, name: str, database: str):
    if dialect == "sqlite":
        return ServerData(name=name, dialect="sqlite", database=database)
    params = {"postgresql": PG, "pgwal": WAL_PG}.get(dialect, MY)
    return ServerData(
        name=name,
        dialect="postgresql" if dialect == "pgwal" else dialect,
        host=params["host"],
        port=params["port"],
        database=database,
        user=params["user"],
        password=params["password"],
    )


@pytest.fixture
def make_server(db, live_database, sqlite_path):
    """Factory: register a server on a fresh database of the given dialect."""
    counter = {"n": 0}

    def make(dialect: str, name: str | None = None):
        counter["n"] += 1
        database = sqlite_path(dialect) if dialect == "sqlite" else live_database(dialect)
        data = server_data(dialect, name or f"{dialect[:2]}{counter['n']}", database)
        return do_register_server(Actor.command(), data)

    return make


@pytest.fixture
def spark():
    """The process's session (on the suite's Spark service unless REPLADMIN_TEST_SPARK=embedded): the same one
    the jobs use when run in sync mode outside a job. Asked for again by each test, not kept for the session: a
    test that restarts a Spark service closes the process's client (the product then opens a new one), and a
    client kept here would answer NO_ACTIVE_SESSION to every test after it."""
    require_spark()
    return get_spark(spark_config())


@pytest.fixture
def jobs_sync(settings):
    """Run queued jobs through django-q2's sync mode, inside the test process."""
    settings.JOBS_SYNC = True
    return settings


@pytest.fixture
def qcluster(transactional_db, settings, tmp_path) -> Iterator[subprocess.Popen]:
    """A real django-q2 cluster (ORM broker) in a child process, on the test database.

    Its output goes to a file (a pipe nobody reads would fill up and stall the workers)."""
    require_spark()
    env = dict(os.environ)
    env.update(catalog_env(str(settings.DATABASES["default"]["NAME"])))
    env["REPLADMIN_WORKERS"] = "1"
    env["REPLADMIN_JOBS_SYNC"] = "0"
    log_path = tmp_path / "qcluster.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proc.log_path = log_path  # type: ignore[attr-defined]
    time.sleep(1.0)
    if proc.poll() is not None:
        pytest.fail(f"qcluster exited at start:\n{log_path.read_text(errors='replace')}")
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_for_job(job_id: int, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = JobRun.objects.get(pk=job_id)
        if job.finished:
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s (state {job.state}, log:\n{job.log})")

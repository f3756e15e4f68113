"""Spark as the control plane sees it: the session's configuration from settings, a session of each job's
own on the Spark service, and JDBC endpoints of registered servers for the jobs in jobs/."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings

from jobs import session as spark_sessions
from jobs.native_load import NativeAddress
from jobs.service import job_pool
from jobs.session import SparkConfig, get_spark, job_session_id
from jobs.snapshot_refresh import Endpoint
from replication_admin.core import connections, transactions
from replication_admin.core.errors import ReplicationError
from replication_admin.engine import dialects
from replication_admin.models import Server

if TYPE_CHECKING:
    from replication_admin.models import JobRun

log = logging.getLogger(__name__)

INTERRUPT_WAIT = 20.0  # seconds the reaper gives the service to interrupt a lost job's Spark work


def spark_config() -> SparkConfig:
    return SparkConfig(
        master=settings.SPARK_MASTER,
        driver_memory=settings.SPARK_DRIVER_MEMORY,
        jars=tuple(settings.JDBC_JARS),
        remote=settings.SPARK_REMOTE,
        driver_host=settings.SPARK_DRIVER_HOST,
        bind_address=settings.SPARK_BIND_ADDRESS,
        extra=tuple(settings.SPARK_CONF.items()),
        connect_retry_seconds=settings.SPARK_CONNECT_RETRY_SECONDS,
    )


@dataclass
class _JobSpark:
    session_id: str
    pool: str
    session: Any = None
    lost: bool = False  # the service lost or dropped the session: the next one interrupts what is left of it


_job: ContextVar[_JobSpark | None] = ContextVar("job_spark", default=None)


def session_id_of(job: JobRun) -> str:
    return job_session_id(job.pk, job.created_at.isoformat())


@contextmanager
def job_spark(job: JobRun) -> Iterator[None]:
    """While a job runs on the Spark service, its Spark work goes through a session of its own (named
    after the job), released when the job ends: what it cached goes with it, and the reaper can interrupt
    that session when the job's worker dies."""
    if not settings.SPARK_REMOTE:
        yield
        return
    scope = _JobSpark(session_id_of(job), job_pool(job.pk))
    token = _job.set(scope)
    try:
        yield
    finally:
        _job.reset(token)
        if scope.session is not None:
            spark_sessions.release(scope.session)


def spark_session() -> Any:
    """The running job's session on the Spark service; elsewhere this process's session."""
    config = spark_config()
    scope = _job.get()
    if config.remote and scope is not None:
        if scope.session is None:
            scope.session = spark_sessions.connect(config, scope.session_id, pool=scope.pool)
            if scope.lost:
                # A service that only dropped the connection still runs the previous attempt's operations in
                # this session: they stop before the retry writes beside them (best effort, bounded).
                scope.lost = False
                with contextlib.suppress(Exception):
                    scope.session.interruptAll()
        return scope.session
    return get_spark(config)


def forget_lost_sessions(exc: BaseException) -> None:
    """The Spark service is unreachable, restarted or lost a session (transactions.is_spark_service_fault): drop
    this process's cached sessions, so that the retry opens new ones (a restarted service knows none of them)."""
    scope = _job.get()
    if scope is not None and scope.session is not None:
        lost, scope.session, scope.lost = scope.session, None, True
        spark_sessions.forget(lost)
    spark_sessions.forget(None)  # the process's shared session too
    _masters.clear()
    _slots.clear()
    log.warning("Spark service fault (%s): the next attempt opens a new session", type(exc).__name__)


transactions.on_spark_service_fault = forget_lost_sessions


# Run in a child process: the reaper runs in qcluster's main process, which forks workers later, and a gRPC
# channel opened before a fork is not safe in the child.
_INTERRUPT = (
    "import sys; from jobs.session import SparkConfig, interrupt_session; "
    "print(len(interrupt_session(SparkConfig(remote=sys.argv[1]), sys.argv[2])))"
)


def interrupt_job_spark(job: JobRun) -> None:
    """Stop what a lost job left running on the Spark service (its writes into work tables would otherwise
    go on beside its next attempt's); bounded, best effort: an unreachable service has nothing running."""
    if not settings.SPARK_REMOTE:
        return
    argv = [sys.executable, "-c", _INTERRUPT, settings.SPARK_REMOTE, session_id_of(job)]
    try:
        done = subprocess.run(argv, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=INTERRUPT_WAIT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("job %s: could not interrupt its Spark session: %s", job.pk, exc)
        return
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        log.warning("job %s: could not interrupt its Spark session: %s", job.pk, lines[-1] if lines else "?")
    elif done.stdout.strip() not in {"", "0"}:
        log.warning("job %s: interrupted %s Spark operations of its session", job.pk, done.stdout.strip())


# --- where Spark may read and write -------------------------------------------------------------------------

_masters: dict[str, str] = {}  # service address -> its master, asked once per process


def service_master() -> str:
    """The master Spark's executors run under (the service's, when one is configured)."""
    config = spark_config()
    if not config.remote:
        return config.master
    if config.remote not in _masters:
        _masters[config.remote] = str(spark_session().conf.get("spark.master"))
    return _masters[config.remote]


def executors_see_local_files() -> bool:
    """May Spark's executors open a SQLite file by the path this host knows it by?"""
    if settings.SPARK_SQLITE_SHARED is not None:
        return bool(settings.SPARK_SQLITE_SHARED)
    return service_master().startswith("local")


def endpoint(server: Server, readonly: bool = False) -> Endpoint:
    """Where a Spark job reads (readonly) or writes a server's tables."""
    if dialects.get(server.dialect).local_file and not executors_see_local_files():
        raise ReplicationError(
            f"server {server.name} is a SQLite file, which the executors of Spark master {service_master()} "
            "may not see: run its jobs on a local master, or set REPLADMIN_SPARK_SQLITE_SHARED=1 when every "
            "executor sees the file at the same path"
        )
    transactions.note_spark_server(server)  # a JDBC failure naming no host is put down to the job's servers
    native = None
    if not readonly and settings.NATIVE_LOAD and dialects.get(server.dialect).bulk_loader and not server.odbc_dsn:
        address = connections.address_for(server)
        native = NativeAddress(
            dialect=server.dialect,
            host=address.host,
            port=address.port or int(dialects.get(server.dialect).default_port or 0),
            database=address.database,
            user=address.user,
            password=address.password,
        )
    return Endpoint(dialect=server.dialect, jdbc=connections.jdbc_endpoint(server, readonly=readonly), native=native)


_slots: dict[str, int] = {}  # service address ("" embedded) -> its task slots, asked once per process


def task_slots() -> int:
    """How many tasks Spark runs at once (the service's or the embedded session's default parallelism)."""
    remote = settings.SPARK_REMOTE
    if remote not in _slots:
        value = spark_session().conf.get("spark.default.parallelism", None)
        _slots[remote] = max(int(value), 1) if value else 2
    return _slots[remote]


def ping_service() -> dict[str, Any]:
    """Reach the Spark service with a fresh session and run one task: its master, slots and the time taken."""
    config = spark_config()
    started = time.monotonic()
    session = spark_sessions.connect(config, retry_seconds=0)
    try:
        session.range(1).count()
        seconds = time.monotonic() - started
        master = str(session.conf.get("spark.master"))
        slots = int(session.conf.get("spark.default.parallelism", "0") or 0)
    finally:
        spark_sessions.release(session)
    return {"master": master, "slots": slots, "seconds": seconds}

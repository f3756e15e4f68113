"""Spark sessions: a client of the shared Spark service, or an embedded session as the fallback.

With `remote` set (sc://host:port, the service started by `manage.py spark_service`), every process is a
thin Spark Connect client: a fresh process reaches the warm service in about a second, and all jobs share
one driver and the cluster's cores (one Spark application, FAIR scheduling). A job gets a session of its
own, named after the job (`job_session_id`), so that the reaper can interrupt and release what a dead
worker left running on the service.

Without `remote`, the process starts an embedded session (its own driver JVM, created on first use and
then kept warm). django-q2 forks its workers, and neither a JVM nor a gRPC channel may be shared across a
fork, so sessions are created inside the process that uses them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

# The service's client identity: sessions are keyed by (user, session id), and a reaper on another host
# (another OS user) must reach a dead worker's session.
SERVICE_USER = "replication_admin"
_SESSION_NAMESPACE = uuid.UUID("9a6c3f0e-4d4b-4f53-9a55-7265706c6164")

_lock = threading.Lock()
_session: Any = None  # SparkSession (classic or Connect)
_session_key: tuple[int, str] | None = None  # (pid, remote) it was made for


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    driver_memory: str = "2g"
    jars: tuple[str, ...] = ()
    app_name: str = "replication_admin"
    remote: str = ""  # sc://host:port of the Spark service; "" runs an embedded session in this process
    driver_host: str = "127.0.0.1"
    bind_address: str = "127.0.0.1"
    extra: tuple[tuple[str, str], ...] = field(default=())  # any spark.* setting, applied last
    connect_retry_seconds: int = 30  # how long a client retries an unreachable service


def default_parallelism(master: str) -> int:
    """Task slots of a local master (local, local[4], local[*], local[4,2]); 0 when not local."""
    if master == "local":
        return 1
    if master.startswith("local["):
        inside = master[len("local[") :].rstrip("]").split(",")[0]
        if inside == "*":
            return os.cpu_count() or 2
        return max(1, int(inside)) if inside.isdigit() else 2
    return 0


# A dead executor host costs seconds, not minutes (docs/scale-out.md, "A dead host costs seconds", says why each).
# A host that dies without closing its connections (power, kernel, link) is noticed only by these timeouts: Spark's
# defaults (120 s network timeout, checked every 60 s) kept a job waiting on its lost executor for minutes.
DEAD_HOST_CONF = {
    # Executors report every 3 s; one silent for 30 s is declared lost and its tasks run elsewhere. The same bound
    # ends RPC asks and block fetches to a host that no longer answers.
    "spark.executor.heartbeatInterval": "3s",
    "spark.network.timeout": "30s",
    "spark.network.timeoutInterval": "5s",  # how often the driver looks for silent executors (default 60 s)
    # A shuffle fetch from a dead host fails in seconds and its stage is recomputed from the surviving executors.
    "spark.shuffle.io.maxRetries": "2",
    "spark.shuffle.io.retryWait": "2s",
    # JDBC reads and writes have no data locality: never hold a task back for a preferred (possibly dead) host.
    "spark.locality.wait": "0s",
    # A lost executor's tasks do not count as failures; 4 real failures of one task fail the job's attempt, which
    # the product retries (its own attempts, with backoff).
    "spark.task.maxFailures": "4",
    # With a handful of executors, excluding one after failures can leave a job no executor at all.
    "spark.excludeOnFailure.enabled": "false",
    # A speculative copy of a JDBC write task would write its rows a second time.
    "spark.speculation": "false",
}
# The standalone master's own bound (seconds, the master's Java option, not an application setting): a worker
# silent this long is removed and its executors reported lost to the service (default 60 s).
MASTER_WORKER_TIMEOUT = 15


def master_java_options() -> str:
    """SPARK_MASTER_OPTS for a standalone master that drops a dead worker host in seconds."""
    return f"-Dspark.worker.timeout={MASTER_WORKER_TIMEOUT}"


def spark_conf(config: SparkConfig, parallelism: int | None = None) -> dict[str, str]:
    """The driver's configuration, shared by the embedded session and the service."""
    slots = parallelism or default_parallelism(config.master) or 2
    conf = {
        "spark.master": config.master,
        "spark.app.name": config.app_name,
        "spark.jars": ",".join(config.jars),
        "spark.driver.memory": config.driver_memory,
        "spark.driver.host": config.driver_host,
        "spark.driver.bindAddress": config.bind_address,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Python work on the executors (the bulk loads of jobs.native_load) runs in this interpreter, which has
        # pyarrow and the databases' drivers (spark.pyspark.python on a host of its own, via REPLADMIN_SPARK_CONF).
        "spark.pyspark.python": sys.executable,
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -Dfile.encoding=UTF-8",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC -Dfile.encoding=UTF-8",
        # Shuffles sized to the task slots (200 partitions would spend most of the time scheduling on a
        # small cluster); adaptive execution coalesces them further for small inputs.
        "spark.default.parallelism": str(slots),
        "spark.sql.shuffle.partitions": str(max(2, slots * 2)),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        **DEAD_HOST_CONF,
    }
    conf.update(dict(config.extra))
    return conf


def missing_jars(config: SparkConfig) -> list[str]:
    return [jar for jar in config.jars if not os.path.isfile(jar)]


def job_session_id(job_id: int, created: str) -> str:
    """The Spark Connect session id of a job: stable for the job (the reaper computes it again), unique across
    catalogs sharing one service (job numbers repeat; a released session id cannot be used again)."""
    return str(uuid.uuid5(_SESSION_NAMESPACE, f"job:{job_id}:{created}"))


def connect_url(remote: str, session_id: str | None) -> str:
    url = f"{remote.rstrip('/')}/;user_id={SERVICE_USER}"
    return f"{url};session_id={session_id}" if session_id else url


def _bounded_retries(session: Any, seconds: int) -> None:
    """An unreachable service fails a job after about `seconds` (pyspark's default retries for 10 minutes)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy  # noqa: PLC0415 - needs the connect extras

    retries, waited, backoff = 0, 0.0, 0.05
    while waited < seconds:
        waited += backoff
        backoff = min(backoff * 4, 10.0)
        retries += 1
    session.client.set_retry_policies([DefaultPolicy(max_retries=retries, max_backoff=10_000)])


def connect(
    config: SparkConfig, session_id: str | None = None, retry_seconds: int | None = None, pool: str | None = None
) -> Any:
    """A new Spark Connect session on the service (with `session_id`: that very session); with `pool`, its
    work is scheduled in that FAIR pool (the service's SQL executions carry their session's `spark.*`
    settings to their stages)."""
    session = SparkSession.builder.remote(connect_url(config.remote, session_id)).create()
    # Each client registers an exit hook that calls the service (to clean an ML cache this product never
    # fills): it would keep every job's client alive for the life of the worker, and at exit retry a stopped
    # service for minutes.
    atexit.unregister(session.client._cleanup_ml_cache)
    seconds = config.connect_retry_seconds if retry_seconds is None else retry_seconds
    if seconds > 0:
        _bounded_retries(session, seconds)
    else:
        session.client.set_retry_policies([])
    if pool:
        session.conf.set("spark.scheduler.pool", pool)
    return session


def _embedded(config: SparkConfig) -> SparkSession:
    absent = missing_jars(config)
    if absent:
        raise RuntimeError(f"JDBC driver jars not found: {', '.join(absent)} (run scripts/setup.sh)")
    os.environ.setdefault("SPARK_LOCAL_IP", config.bind_address)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers with this venv's packages
    # A Connect client marks its process (and the children it starts) as Connect-only in the environment;
    # an embedded session is asked for explicitly here.
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"):
        os.environ.pop(name, None)
    builder = SparkSession.builder
    for key, value in spark_conf(config).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _utc() -> None:
    # collect() turns timestamps into Python datetimes in the process's time zone: keep it UTC.
    if os.environ.get("TZ") != "UTC":
        os.environ["TZ"] = "UTC"
        time.tzset()


def _closed(session: Any) -> bool:
    """A Connect client pyspark closed (its service restarted: INVALID_HANDLE.SESSION_CHANGED)."""
    return is_connect(session) and bool(session.client.is_closed)


def get_spark(config: SparkConfig) -> Any:
    """This process's shared session (a Connect client or the embedded session), created on first use."""
    global _session, _session_key
    key = (os.getpid(), config.remote)
    with _lock:
        if _session is not None and _session_key == key and not _closed(_session):
            return _session
        _utc()
        _session = connect(config) if config.remote else _embedded(config)
        _session_key = key
        return _session


def release(session: Any) -> None:
    """Release a Connect session on the service and close its channel, once."""
    with contextlib.suppress(Exception):  # the service may be gone; its idle sessions expire there
        session.stop()
    # pyspark closes the client again when the session object is collected, and closing shuts down the
    # release thread pool every session of the process shares: collected inside that pool's submit(), it
    # deadlocks the process. A released session has nothing left to close.
    with contextlib.suppress(Exception):
        session.client.close = lambda: None


def forget(session: Any) -> None:
    """Drop a session whose service went away or restarted, without waiting on the service: close its channel
    here (never release it there, so that its id may be taken up again) and forget it as this process's shared
    session (None: the shared session). The next get_spark() or connect() opens a new one."""
    global _session, _session_key
    with _lock:
        if session is None:
            session = _session  # the shared session itself
        if session is _session:
            _session, _session_key = None, None
    if session is None:
        return
    if not is_connect(session):
        return  # an embedded session lives with this process
    with contextlib.suppress(Exception):
        session.client.set_retry_policies([])
        session.client.close()
    with contextlib.suppress(Exception):
        session.client.close = lambda: None  # see release()


def interrupt_session(config: SparkConfig, session_id: str) -> list[str]:
    """Interrupt every operation of a session on the service and release it; the interrupted operation ids."""
    session = connect(config, session_id, retry_seconds=0)
    try:
        interrupted: Iterable[str] = session.interruptAll() or []
        return list(interrupted)
    finally:
        release(session)


def is_connect(session: Any) -> bool:
    return type(session).__module__.startswith("pyspark.sql.connect")

"""One lazily created SparkSession per process.

django-q2 forks its workers, and a JVM must not be shared across a fork, so the session is created on
first use inside the process that runs the job and then kept warm for the next job (cold start about
4-6 s here, warm about 0).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None
_session_pid: int | None = None


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    driver_memory: str = "2g"
    jars: tuple[str, ...] = ()
    app_name: str = "replication_admin"


def spark_conf(config: SparkConfig) -> dict[str, str]:
    return {
        "spark.master": config.master,
        "spark.app.name": config.app_name,
        "spark.jars": ",".join(config.jars),
        "spark.driver.memory": config.driver_memory,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -Dfile.encoding=UTF-8",
        # Small machine, small shuffles: 200 partitions would spend most of the time scheduling.
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        "spark.sql.adaptive.enabled": "true",
    }


def missing_jars(config: SparkConfig) -> list[str]:
    return [jar for jar in config.jars if not os.path.isfile(jar)]


def get_spark(config: SparkConfig) -> SparkSession:
    """Return this process's SparkSession, creating it on first use."""
    global _session, _session_pid
    with _lock:
        if _session is not None and _session_pid == os.getpid():
            return _session
        absent = missing_jars(config)
        if absent:
            raise RuntimeError(f"JDBC driver jars not found: {', '.join(absent)} (run scripts/setup.sh)")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # collect() turns timestamps into Python datetimes in the process's time zone: keep it UTC.
        os.environ["TZ"] = "UTC"
        time.tzset()
        builder = SparkSession.builder
        for key, value in spark_conf(config).items():
            builder = builder.config(key, value)
        _session = builder.getOrCreate()
        _session.sparkContext.setLogLevel("ERROR")
        _session_pid = os.getpid()
        return _session


def stop_spark() -> None:
    global _session, _session_pid
    with _lock:
        if _session is not None and _session_pid == os.getpid():
            _session.stop()
        _session = None
        _session_pid = None

"""The shared Spark service: a Spark Connect server (it ships in the pyspark package) with the JDBC drivers,
started by `manage.py spark_service`, the demo and the test suite.

One service means one driver and one Spark application for every worker, replsql call and console dry run:
no cold start per process, and on a cluster the jobs share its cores under the FAIR scheduler instead of the
first application keeping every core.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from jobs.session import SparkConfig, default_parallelism, spark_conf

CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"

# Each job runs in a pool of its own (the pool of its number modulo JOB_POOLS; two jobs that meet in one pool
# still share it fairly), and the pools share the cores fairly: a long full refresh does not hold back a
# small sync that arrives after it. The pools are declared, FAIR inside, because Spark never removes a pool
# made on the fly (a pool per job number would grow for the life of the service).
JOB_POOLS = 32


def job_pool(job_id: int) -> str:
    return f"job-{job_id % JOB_POOLS:02d}"


# The service's log4j2 configuration: Spark's defaults (its log4j2-defaults.properties), but for the errors Spark
# Connect logs when a client leaves an operation it is done with. A client that reattaches to its query, or has read
# its result, makes the server interrupt the sender of the earlier stream ("during: async-grpc-response-sender",
# INVALID_CURSOR.DISCONNECTED), and a release that arrives after its session closed fails the same way
# (releaseExecute, INVALID_HANDLE.SESSION_CLOSED). Spark logs each at ERROR with a stack trace, though the query's
# own outcome reaches the client (and the job's log) either way; such lines are dropped so that an ERROR in this log
# is worth reading. Every other error of ErrorUtils is kept.
CLEANUP_RPCS = ("async-grpc-response-sender", "releaseExecute", "releaseSession")
LOG_CONFIG = """\
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.jetty2.name = org.sparkproject.jetty.util.component.AbstractLifeCycle
logger.jetty2.level = error
logger.parquet.name = org.apache.parquet.CorruptStatistics
logger.parquet.level = error
logger.connect_errors.name = org.apache.spark.sql.connect.utils.ErrorUtils
logger.connect_errors.filter.cleanup.type = RegexFilter
logger.connect_errors.filter.cleanup.regex = Spark Connect RPC error during: ({rpcs})\\. .*
logger.connect_errors.filter.cleanup.onMatch = DENY
logger.connect_errors.filter.cleanup.onMismatch = NEUTRAL
"""


def log_config() -> str:
    """The service's log4j2.properties (LOG_CONFIG)."""
    return LOG_CONFIG.format(rpcs="|".join(CLEANUP_RPCS))


def fair_pools() -> str:
    pools = ["default", *(job_pool(n) for n in range(JOB_POOLS))]
    declared = "".join(
        f'  <pool name="{name}">\n    <schedulingMode>FAIR</schedulingMode>\n    <weight>1</weight>\n'
        "    <minShare>0</minShare>\n  </pool>\n"
        for name in pools
    )
    return f'<?xml version="1.0"?>\n<allocations>\n{declared}</allocations>\n'


def spark_home() -> str:
    return os.path.dirname(pyspark.__file__)


def master_hosts(master: str) -> list[str]:
    """The hosts of a standalone master URL (spark://h1:7077 or, with standby masters, spark://h1:7077,h2:7077)."""
    if not master.startswith("spark://"):
        return []
    return [part.rsplit(":", 1)[0] for part in master.removeprefix("spark://").split(",") if part]


def _json(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 - a fixed http:// URL
        return json.load(reply)


def master_state(master: str, ui_port: int = 8080, timeout: float = 3.0) -> dict[str, Any] | None:
    """What the standalone master says on its web UI (port `ui_port`): {"url", "status" (ALIVE, STANDBY,
    RECOVERING), "workers" (alive), "cores"}, from the first master that is ALIVE, else the first that answers;
    None when none answers (or the master is not a standalone one)."""
    found: dict[str, Any] | None = None
    for host in master_hosts(master):
        try:
            info = _json(f"http://{host}:{ui_port}/json/", timeout)
        except (OSError, ValueError):
            continue
        state = {
            "url": str(info.get("url", host)),
            "status": str(info.get("status", "")),
            "workers": int(info.get("aliveworkers", len(info.get("workers", [])))),
            "cores": int(info.get("cores", 0)),
        }
        if state["status"] == "ALIVE":
            return state
        found = found or state
    return found


def standalone_cores(master: str, timeout: float = 3.0, ui_port: int = 8080) -> int:
    """Cores of the workers registered with a standalone master (its web UI's JSON); 0 if unknown."""
    state = master_state(master, ui_port, timeout)
    return int(state["cores"]) if state else 0


def driver_executors(ui_port: int, host: str = "127.0.0.1", timeout: float = 3.0) -> tuple[int, int] | None:
    """(executors, cores) registered with the service's driver, from its status API (the driver's web UI on the
    service host, `ui_port`); on a local master the driver itself is the executor. None when it does not answer."""
    base = f"http://{host}:{ui_port}/api/v1/applications"
    try:
        apps = _json(base, timeout)
        if not apps:
            return None
        listed = _json(f"{base}/{apps[0]['id']}/executors", timeout)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    active = [e for e in listed if e.get("isActive", True)]
    remote = [e for e in active if e.get("id") != "driver"]
    counted = remote or [e for e in active if e.get("id") == "driver" and int(e.get("totalCores", 0)) > 0]
    return len(remote), sum(int(e.get("totalCores", 0)) for e in counted)


def task_slots(config: SparkConfig, master_ui_port: int = 8080) -> int:
    """How many tasks the service can run at once: the local master's threads, spark.cores.max, or the
    standalone cluster's cores."""
    extra = dict(config.extra)
    if "spark.default.parallelism" in extra:
        return int(extra["spark.default.parallelism"])
    local = default_parallelism(config.master)
    if local:
        return local
    if "spark.cores.max" in extra:
        return int(extra["spark.cores.max"])
    return standalone_cores(config.master, ui_port=master_ui_port) or 2


def service_command(
    config: SparkConfig, host: str, port: int, work_dir: Path, status_port: int = 0, master_ui_port: int = 8080
) -> list[str]:
    """spark-submit's argv for the Connect server, writing its FAIR pools file into `work_dir`. With `status_port`,
    the driver's web UI listens there (on the service's bind address), read-only, for its status API: the
    supervisor of `manage.py spark_service` reads the executors registered with the service from it."""
    work_dir.mkdir(parents=True, exist_ok=True)
    pools = work_dir / "fairscheduler.xml"
    pools.write_text(fair_pools())
    logging_file = work_dir / "log4j2.properties"
    logging_file.write_text(log_config())
    conf = spark_conf(config, parallelism=task_slots(config, master_ui_port))
    if status_port:
        conf.update(
            {
                "spark.ui.enabled": "true",
                "spark.ui.port": str(status_port),
                "spark.port.maxRetries": "0",  # that port or none: the supervisor asks at that very port
                "spark.ui.killEnabled": "false",
                # The service runs for weeks: the UI keeps a few ended jobs, not a thousand.
                "spark.ui.retainedJobs": "50",
                "spark.ui.retainedStages": "100",
                "spark.ui.retainedTasks": "10000",
                "spark.sql.ui.retainedExecutions": "50",
            }
        )
    driver_options = " ".join(
        filter(None, [conf.get("spark.driver.extraJavaOptions"), f"-Dlog4j2.configurationFile={logging_file.as_uri()}"])
    )
    conf.update(
        {
            "spark.connect.grpc.binding.address": host,
            "spark.connect.grpc.binding.port": str(port),
            "spark.scheduler.mode": "FAIR",
            "spark.scheduler.allocation.file": str(pools),
            "spark.log.level": "WARN",
            "spark.driver.extraJavaOptions": driver_options,
            # The service outlives every job: cached frames of ended sessions are dropped with them.
            "spark.cleaner.periodicGC.interval": "5min",
        }
    )
    conf.update(dict(config.extra))  # the environment has the last word
    argv = [os.path.join(spark_home(), "bin", "spark-submit"), "--class", CONNECT_SERVER]
    argv += ["--name", f"{config.app_name} Spark service"]
    for key, value in conf.items():
        if key in {"spark.app.name"}:
            continue
        argv += ["--conf", f"{key}={value}"]
    return argv


def service_environment(config: SparkConfig) -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_HOME"] = spark_home()
    env.setdefault("SPARK_LOCAL_IP", config.bind_address)
    env["TZ"] = "UTC"
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # executors' Python work (jobs.native_load) runs in this venv
    return env

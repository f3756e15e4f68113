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


def standalone_cores(master: str, timeout: float = 3.0) -> int:
    """Cores of the workers registered with a standalone master (its web UI's JSON, port 8080); 0 if unknown."""
    if not master.startswith("spark://"):
        return 0
    host = master.removeprefix("spark://").split(",")[0].rsplit(":", 1)[0]
    try:
        with urllib.request.urlopen(f"http://{host}:8080/json/", timeout=timeout) as reply:
            return int(json.load(reply).get("cores", 0))
    except (OSError, ValueError):
        return 0


def task_slots(config: SparkConfig) -> int:
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
    return standalone_cores(config.master) or 2


def service_command(config: SparkConfig, host: str, port: int, work_dir: Path) -> list[str]:
    """spark-submit's argv for the Connect server, writing its FAIR pools file into `work_dir`."""
    work_dir.mkdir(parents=True, exist_ok=True)
    pools = work_dir / "fairscheduler.xml"
    pools.write_text(fair_pools())
    conf = spark_conf(config, parallelism=task_slots(config))
    conf.update(
        {
            "spark.connect.grpc.binding.address": host,
            "spark.connect.grpc.binding.port": str(port),
            "spark.scheduler.mode": "FAIR",
            "spark.scheduler.allocation.file": str(pools),
            "spark.log.level": "WARN",
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

"""The Spark service notices a dead executor host in seconds: its command carries the dead-host timeouts
(jobs.session.DEAD_HOST_CONF), the environment's REPLADMIN_SPARK_CONF still has the last word, and a standalone
master is started with a worker timeout of seconds. The behaviour itself (a host killed whole mid-job) is
tests/faults/test_separate_hosts.py."""

from __future__ import annotations

from jobs.service import service_command
from jobs.session import DEAD_HOST_CONF, SparkConfig, master_java_options, spark_conf

# spark.cores.max: the service does not ask a master's web UI for its cores.
CLUSTER = SparkConfig(master="spark://master:7077", extra=(("spark.cores.max", "2"),))


def seconds(value: str) -> float:
    return float(value.removesuffix("s"))


def confs(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_spark_service_runs_with_timeouts_that_drop_a_dead_executor_in_seconds(tmp_path):
    conf = confs(service_command(CLUSTER, "10.0.0.5", 15002, tmp_path))
    for key, value in DEAD_HOST_CONF.items():
        assert conf[key] == value, key
    timeout = seconds(conf["spark.network.timeout"])
    assert timeout <= 30
    # Many missed heartbeats before an executor counts as lost, and looked for often.
    assert seconds(conf["spark.executor.heartbeatInterval"]) * 5 <= timeout
    assert seconds(conf["spark.network.timeoutInterval"]) <= 10
    assert conf["spark.speculation"] == "false"  # a speculative JDBC write would write its rows twice


def test_the_environment_still_overrides_a_dead_host_timeout():
    config = SparkConfig(extra=(("spark.network.timeout", "90s"),))
    assert spark_conf(config)["spark.network.timeout"] == "90s"


def test_a_standalone_master_drops_a_silent_worker_in_seconds():
    assert master_java_options() == "-Dspark.worker.timeout=15"

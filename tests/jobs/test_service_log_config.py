"""The Spark service's log drops the errors Spark Connect logs when a client leaves an operation it is done with
(an interrupted response sender, a late release) and keeps every other error: checked by log4j itself, in a JVM
logging through the service's configuration as Spark's ErrorUtils does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyspark

from jobs.service import log_config, service_command
from jobs.session import SparkConfig

JAVA = shutil.which("java")
LOGS = r"""
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

public class Logs {
    public static void main(String[] args) {
        Logger errors = LogManager.getLogger("org.apache.spark.sql.connect.utils.ErrorUtils");
        Exception cause = new RuntimeException("[INVALID_CURSOR.DISCONNECTED] The cursor is invalid.");
        errors.error("Spark Connect RPC error during: async-grpc-response-sender. UserId: u. SessionId: s.", cause);
        errors.error("Spark Connect RPC error during: releaseExecute. UserId: u. SessionId: s.", cause);
        errors.error("Spark Connect RPC error during: execute. UserId: u. SessionId: s.",
                     new RuntimeException("[TABLE_OR_VIEW_NOT_FOUND] a real error"));
        LogManager.getLogger("org.apache.spark.scheduler.TaskSetManager").error("Lost task 0.0 in stage 1.0");
    }
}
"""


def test_the_service_log_drops_cleanup_errors_and_keeps_every_other(tmp_path: Path):
    assert JAVA, "no java on PATH: Spark needs it too"
    (tmp_path / "log4j2.properties").write_text(log_config())
    (tmp_path / "Logs.java").write_text(LOGS)
    jars = Path(pyspark.__file__).parent / "jars"
    classpath = ":".join(str(j) for j in sorted(jars.glob("log4j-*.jar")))
    run = subprocess.run(
        [JAVA, "-cp", classpath, f"-Dlog4j2.configurationFile={(tmp_path / 'log4j2.properties').as_uri()}",
         str(tmp_path / "Logs.java")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    logged = run.stderr
    assert "during: execute" in logged and "TABLE_OR_VIEW_NOT_FOUND" in logged  # a query's error, with its trace
    assert "ERROR TaskSetManager: Lost task 0.0" in logged
    assert "async-grpc-response-sender" not in logged and "releaseExecute" not in logged
    assert "INVALID_CURSOR" not in logged


def test_the_service_starts_with_that_configuration_beside_the_drivers_own_options(tmp_path: Path):
    argv = service_command(SparkConfig(master="local[2]"), "127.0.0.1", 15002, tmp_path)
    options = next(argv[i + 1] for i, a in enumerate(argv) if a == "--conf" and "extraJavaOptions" in argv[i + 1]
                   and "driver" in argv[i + 1])  # fmt: skip
    assert f"-Dlog4j2.configurationFile={(tmp_path / 'log4j2.properties').as_uri()}" in options
    assert "-Duser.timezone=UTC" in options  # the session's own options are kept
    assert (tmp_path / "log4j2.properties").read_text() == log_config()

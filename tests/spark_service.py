"""The Spark the test suite's jobs run on (a pytest plugin: `-p tests.spark_service` in pyproject.toml).

REPLADMIN_TEST_SPARK chooses it:
- `cluster` (what `make test` and CI use): a standalone master and two workers (1 core, 1 GB executors each)
  from the pip pyspark package, and the Spark service (`manage.py spark_service`) against them;
- `service`: the Spark service on a local master;
- `embedded`: no service; each process starts its own session (the fallback of a lone command).
When REPLADMIN_SPARK_REMOTE is already set, the suite uses that service and starts nothing. Under pytest-xdist
the controller starts it and its workers share it: they inherit REPLADMIN_SPARK_REMOTE, and
REPLADMIN_TEST_SPARK_STATUS names the file the controller writes when the service is up (empty) or failed (why).

Everything is started in the background when the session starts (tests that need no Spark do not wait for
it), on free loopback ports, and stopped when it ends, also on failure. Child processes (workers, replsql)
inherit REPLADMIN_SPARK_REMOTE; the `spark` fixture waits until the service answers.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODES = ("cluster", "service", "embedded")
START_TIMEOUT = 180.0
STATUS_FILE = "status"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited at start:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f} s")


class SparkForTests:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.work = Path(tempfile.mkdtemp(prefix="repladmin-spark-"))
        self.procs: list[subprocess.Popen] = []
        self.remote = ""
        self.error: str | None = None
        self.ready = threading.Event()
        self.master = "local[*]"
        self.env: dict[str, str] = {}
        self.stopping = False
        self.lock = threading.Lock()

    # --- processes --------------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
        log = self.work / f"{name}.log"
        with self.lock:
            if self.stopping:
                raise RuntimeError("the test session ended")
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            self.procs.append(proc)
        return proc, log

    def _spark_class(self, *args: str) -> list[str]:
        import pyspark  # noqa: PLC0415 - only when a cluster is started

        return [os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class"), *args]

    def _start_cluster(self, env: dict[str, str]) -> None:
        from jobs.session import master_java_options  # noqa: PLC0415 - only when a cluster is started

        port, ui = free_port(), free_port()
        # The master drops a dead worker in seconds (docs/scale-out.md, "A dead host costs seconds").
        master_env = {**env, "SPARK_MASTER_OPTS": f"{env.get('SPARK_MASTER_OPTS', '')} {master_java_options()}"}
        master, log = self._spawn(
            "master",
            self._spark_class(
                "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                "--webui-port", str(ui),
            ),
            master_env,
        )  # fmt: skip
        _wait_port(port, master, "Spark master", log)
        self.master = f"spark://127.0.0.1:{port}"
        for n in (1, 2):
            self._spawn(
                f"worker{n}",
                self._spark_class(
                    "org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1",
                    "--cores", "1", "--memory", "1536m", "--webui-port", str(free_port()),
                    "--work-dir", str(self.work / f"worker{n}"),
                ),
                env,
            )  # fmt: skip

    def start(self) -> None:
        try:
            env = dict(os.environ)
            env["SPARK_LOCAL_IP"] = "127.0.0.1"
            env["SPARK_LOG_DIR"] = str(self.work)
            env["SPARK_WORKER_DIR"] = str(self.work)
            if self.mode == "cluster":
                self._start_cluster(env)
            port = int(self.remote.rsplit(":", 1)[1])
            service_env = {**env, **self.env, "REPLADMIN_SPARK_MASTER": self.master}
            service_env.pop("REPLADMIN_SPARK_REMOTE", None)
            proc, log = self._spawn(
                "service",
                [
                    sys.executable,
                    str(ROOT / "manage.py"),
                    "spark_service",
                    "--port",
                    str(port),
                    "--no-heartbeat",
                    "--work-dir",
                    str(self.work / "service-files"),
                ],
                service_env,
            )
            _wait_port(port, proc, "Spark service", log)
            self._wait_for_cores(proc, log)
        except Exception as exc:
            self.error = f"Spark for the tests ({self.mode}) did not start: {exc}"
        finally:
            self.ready.set()
            with self.lock:  # a run that ended before Spark was up has removed the directory already
                if not self.stopping:
                    (self.work / STATUS_FILE).write_text(self.error or "")  # for pytest-xdist's workers

    def _wait_for_cores(self, proc: subprocess.Popen, log: Path) -> None:
        """On a cluster, the first job would wait until both workers have registered: wait here instead."""
        check = [sys.executable, str(ROOT / "manage.py"), "spark_service", "--ping", "--wait", "120"]
        out = subprocess.run(check, cwd=ROOT, env={**os.environ, **self.env}, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{out.stderr.strip()}\n{log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()
        shutil.rmtree(self.work, ignore_errors=True)


def _plan() -> SparkForTests | None:
    """Decided when the plugin is imported, before Django reads its settings from the environment."""
    if os.environ.get("REPLADMIN_SPARK_REMOTE"):
        return None
    mode = os.environ.get("REPLADMIN_TEST_SPARK", "service")
    if mode not in MODES:
        raise pytest.UsageError(f"REPLADMIN_TEST_SPARK must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "embedded" or shutil.which("java") is None:
        return None  # without Java the tests that need Spark fail (CI) or skip with the reason (tests/conftest.py)
    spark = SparkForTests(mode)
    spark.remote = f"sc://127.0.0.1:{free_port()}"
    spark.env = {
        "REPLADMIN_SPARK_REMOTE": spark.remote,
        # A job that starts while the service is still coming up waits for it instead of failing.
        "REPLADMIN_SPARK_CONNECT_RETRY_SECONDS": str(int(START_TIMEOUT)),
        "REPLADMIN_TEST_SPARK_STATUS": str(spark.work / STATUS_FILE),
        "REPLADMIN_TEST_SPARK_MODE": mode,
    }
    if mode == "cluster":
        # Executors on this host see the suite's SQLite files at the same path.
        spark.env["REPLADMIN_SPARK_SQLITE_SHARED"] = "1"
        spark.env["REPLADMIN_SPARK_CONF"] = "spark.cores.max=2 spark.executor.memory=1g spark.executor.cores=1"
    os.environ.update(spark.env)  # children inherit it
    return spark


_spark = _plan()


def pytest_configure(config: pytest.Config) -> None:
    if _spark is not None and not _spark.stopping:
        atexit.register(_spark.stop)
        threading.Thread(target=_spark.start, name="spark-for-tests", daemon=True).start()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _spark is not None:
        _spark.stop()


def wait_for_spark() -> None:
    """Block until the suite's Spark service answers; fail the test with the reason when it did not start."""
    if _spark is None:
        _wait_for_controllers_spark()
        return
    _spark.ready.wait(START_TIMEOUT + 150)
    if _spark.error:
        pytest.fail(_spark.error, pytrace=False)


def _wait_for_controllers_spark() -> None:
    """A pytest-xdist worker: the controller started the service and writes its status file when it is up."""
    status = os.environ.get("REPLADMIN_TEST_SPARK_STATUS")
    if not status:
        return
    deadline = time.monotonic() + START_TIMEOUT + 150
    while not os.path.exists(status):
        if time.monotonic() > deadline:
            pytest.fail(f"the Spark service of the test run did not start within {START_TIMEOUT + 150:.0f} s")
        time.sleep(0.5)
    error = Path(status).read_text()
    if error:
        pytest.fail(error, pytrace=False)


def spark_mode() -> str:
    if _spark is not None:
        return _spark.mode
    if os.environ.get("REPLADMIN_TEST_SPARK_STATUS"):
        return os.environ.get("REPLADMIN_TEST_SPARK_MODE", "external")  # a pytest-xdist worker
    return "external" if os.environ.get("REPLADMIN_SPARK_REMOTE") else "embedded"

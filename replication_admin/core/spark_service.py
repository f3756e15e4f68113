"""The Spark service, supervised: `manage.py spark_service` runs the Spark Connect server (a JVM, jobs/service.py) as
its child and keeps it serving.

- The server exits (crash, out of memory, killed): it is started again, after a short backoff.
- On a standalone master, the server has had no executor for SPARK_NO_EXECUTORS_SECONDS: it is restarted. A master
  restarted without recovery (spark.deploy.recoveryMode) forgets the applications registered with it, and the old
  application's SparkContext never registers again: it would wait for executors for ever, its jobs "running" with
  0/0 tasks. A new server registers a new application and gets the workers' cores back. Jobs running on the old one
  see their session lost and retry on the new one (core/transactions.py: is_spark_service_fault).
- Every few seconds it says what it sees in its heartbeat (REPL_PROCESS, kind "spark"): whether the master is
  alive, the executors and cores registered with the service, its restarts. The Health page and /api/status show
  it; the "Spark executors" alert is raised while the service has no executor or its master is gone for
  SPARK_NO_EXECUTORS_SECONDS, and resolved when they are back.

The executors are read from the driver's own status API (its web UI on a local port, read-only): what the driver
has registered is what jobs can use, whatever the master believes; the master's JSON (its web UI port,
SPARK_MASTER_UI_PORT) says whether it is alive.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from jobs.service import driver_executors, master_state, service_command, service_environment
from jobs.session import SparkConfig
from replication_admin.core import heartbeats
from replication_admin.core.alerts import safely_raise, safely_resolve
from replication_admin.models import Alert

log = logging.getLogger(__name__)

CHECK_EVERY = 2.0  # seconds between two looks at the server
STOP_WAIT = 20.0  # seconds a server is given to stop before it is killed
EXECUTORS_ALERT = "Spark executors"  # the target of the component-down alert about the service's executors


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process, before it runs: it is killed when the supervisor dies (Linux), never orphaned."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Supervisor:
    config: SparkConfig
    host: str
    port: int
    work_dir: Path
    heartbeat: bool = True
    say: Callable[[str], None] = print
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    reason: str = ""
    no_executors_since: float | None = None
    master_gone_since: float | None = None
    stopping: bool = False
    seen: dict[str, Any] = field(default_factory=dict)
    status_port: int = 0
    alerted: bool | None = None  # the executors alert: raised by this process, resolved, or not known yet
    pulse: heartbeats.Pulse = field(default_factory=lambda: heartbeats.Pulse(heartbeats.Kind.SPARK))

    @property
    def standalone(self) -> bool:
        return self.config.master.startswith("spark://")

    @property
    def status_host(self) -> str:
        bind = self.config.bind_address
        return "127.0.0.1" if bind in {"", "0.0.0.0", "::"} else bind  # noqa: S104 - comparing, not binding

    def start(self) -> None:
        self.status_port = settings.SPARK_STATUS_PORT or free_port(self.status_host)
        argv = service_command(
            self.config, self.host, self.port, self.work_dir, self.status_port, settings.SPARK_MASTER_UI_PORT
        )
        log_path = self.work_dir / "service.log"
        with open(log_path, "ab") as out:
            self.proc = subprocess.Popen(
                argv, env=service_environment(self.config), stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )  # fmt: skip
        self.started = time.monotonic()
        self.no_executors_since = None
        self.say(f"Spark service on sc://{self.host}:{self.port}, master {self.config.master} (pid {self.proc.pid})")

    def stop_server(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self, reason: str) -> None:
        self.reason = f"{reason} (restart {self.restarts + 1} at {timezone.now():%Y-%m-%d %H:%M:%S} UTC)"
        self.say(f"restarting the Spark service: {reason}")
        log.warning("restarting the Spark service: %s", reason)
        self.stop_server()
        self.restarts += 1
        time.sleep(min(30.0, 2.0 ** min(self.restarts, 5)) if self.restarts > 3 else 1.0)
        if not self.stopping:
            self.start()

    def look(self) -> dict[str, Any]:
        """What the server and its master say now."""
        seen: dict[str, Any] = {
            "remote": f"sc://{self.host}:{self.port}",
            "master": self.config.master,
            "server_pid": self.proc.pid if self.proc else None,
            "restarts": self.restarts,
            "last_restart": self.reason,
            "no_executor_bound": settings.SPARK_NO_EXECUTORS_SECONDS,
        }
        executors = driver_executors(self.status_port, self.status_host)
        seen["executors"], seen["cores"] = executors if executors is not None else (None, None)
        if self.standalone:
            state = master_state(self.config.master, settings.SPARK_MASTER_UI_PORT)
            seen["master_status"] = state["status"] if state else "no answer"
            seen["master_alive"] = bool(state and state["status"] == "ALIVE")
            seen["master_workers"] = state["workers"] if state else None
        else:
            seen["master_alive"] = None  # a local master lives in the service itself
        return seen

    def check(self) -> None:
        """One look: restart a server that exited or that has had no executor for too long; beat and alert."""
        assert self.proc is not None
        if self.proc.poll() is not None and not self.stopping:
            self.restart(f"the server exited with status {self.proc.returncode}")
            return
        seen = self.seen = self.look()
        now = time.monotonic()
        bound = float(settings.SPARK_NO_EXECUTORS_SECONDS)
        without = self.standalone and seen["executors"] == 0
        if without:
            self.no_executors_since = self.no_executors_since or now
        else:
            self.no_executors_since = None
        gone_for = now - self.no_executors_since if self.no_executors_since is not None else 0.0
        seen["no_executors_for"] = round(gone_for, 1)
        if self.standalone and seen["master_alive"] is False:
            self.master_gone_since = self.master_gone_since or now
        else:
            self.master_gone_since = None
        master_gone_for = now - self.master_gone_since if self.master_gone_since is not None else 0.0
        self.alert(seen, gone_for >= bound, master_gone_for >= bound)
        if without and bound > 0 and gone_for >= bound and now - self.started >= bound:
            self.restart(
                f"no executor registered for {gone_for:.0f} s (master {seen.get('master_status', '?')}): "
                "a new server registers a new application"
            )

    def alert(self, seen: dict[str, Any], long_without: bool, master_gone: bool) -> None:
        """Beat with what is seen; raise the executors alert after the bound without executors or without a live
        master (its executors still work, but none lost meanwhile comes back), resolve it when both are back."""
        if not self.heartbeat:
            return
        self.pulse(seen)
        if (long_without or master_gone) and self.alerted is not True:  # raised once per outage, not every look
            what = [f"has no executor ({seen['executors']})"] if seen.get("executors") == 0 else []
            if master_gone:
                what.append(f"its master {self.config.master} does not answer as alive ({seen['master_status']})")
            safely_raise(
                Alert.Kind.COMPONENT_DOWN, EXECUTORS_ALERT,
                f"the Spark service sc://{self.host}:{self.port}: {' and '.join(what)}; without executors Spark "
                f"jobs wait, and the service restarts its server after {settings.SPARK_NO_EXECUTORS_SECONDS} s",
                reverse("health"),
            )  # fmt: skip
            self.alerted = True
        elif seen.get("executors") and seen.get("master_alive") is not False and self.alerted is not False:
            self.alerted = False  # unknown at start (None): an alert of an earlier run of the service is resolved
            safely_resolve(
                Alert.Kind.COMPONENT_DOWN,
                EXECUTORS_ALERT,
                f"{seen['executors']} executor(s), {seen['cores']} cores registered with the Spark service",
            )

    def run(self) -> int:
        def on_signal(signum: int, frame: object) -> None:
            self.stopping = True

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)
        self.start()
        try:
            while not self.stopping:
                with contextlib.suppress(InterruptedError):
                    self.check()
                deadline = time.monotonic() + CHECK_EVERY
                while not self.stopping and time.monotonic() < deadline:
                    time.sleep(0.2)
        finally:
            self.stop_server()
            if self.heartbeat:
                heartbeats.stopped(heartbeats.Kind.SPARK)
        return 0


def executors_text(details: dict[str, Any]) -> str:
    """The service's executors and master as the Health page says them."""
    executors, cores = details.get("executors"), details.get("cores")
    parts = []
    if executors is None:
        parts.append("executors not reported")
    elif str(details.get("master", "")).startswith("spark://"):
        parts.append(f"{executors} executor(s), {cores} cores")
    else:
        parts.append(f"{cores} cores in the service")
    if details.get("master_alive") is False:
        parts.append(f"master {details.get('master')} {details.get('master_status', 'does not answer')}")
    elif details.get("master_alive"):
        parts.append(f"master alive ({details.get('master_workers')} worker(s))")
    if details.get("restarts"):
        parts.append(f"{details['restarts']} restart(s), the last: {details.get('last_restart', '')}")
    return "; ".join(parts)

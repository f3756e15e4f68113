"""A PostgreSQL cluster of the test's own (another port, its own settings such as wal_level=logical), started
from the installed server binaries as the `postgres` OS user and stopped afterwards, also on failure."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

BIN = Path("/usr/lib/postgresql/15/bin")


def _as_postgres(*args: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else list(args)


class ClusterDidNotStart(RuntimeError):
    """pg_ctl start failed; the message carries the server's log."""


def wait_accepting(host: str, port: int, seconds: float = 30) -> None:
    """Wait until a just started PostgreSQL accepts connections (a guard of `seconds`, then its error)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            psycopg.connect(host=host, port=port, user="postgres", dbname="postgres").close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def own_cluster(port: int, settings: dict[str, str] | None = None) -> Iterator[str]:
    """A started cluster on 127.0.0.1:`port` (trust auth, user postgres); yields its data directory."""
    if not (BIN / "initdb").exists():
        reason = f"the PostgreSQL 15 server binaries in {BIN}"
        if os.environ.get("CI", "").lower() == "true":  # as tests.conftest.unavailable: CI fails, never skips
            pytest.fail(f"required for CI but unavailable: {reason}", pytrace=False)
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix=f"repladmin-pg{port}-"))
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    subprocess.run(
        _as_postgres(str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"),
        check=True,
        capture_output=True,
    )
    options = {
        "port": str(port),
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": str(base),
        "fsync": "on",
        **(settings or {}),
    }
    with open(data / "postgresql.auto.conf", "a") as conf:
        for key, value in options.items():
            conf.write(f"{key} = '{value}'\n")
    started = subprocess.run(
        _as_postgres(str(BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "start"),
        capture_output=True,
        text=True,
    )
    if started.returncode != 0:
        log = (base / "log").read_text(errors="replace") if (base / "log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        raise ClusterDidNotStart(f"PostgreSQL on port {port} did not start: {started.stderr.strip()} {log[-2000:]}")
    try:
        wait_accepting("127.0.0.1", port)
        yield str(data)
    finally:
        subprocess.run(
            _as_postgres(str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"), capture_output=True
        )
        shutil.rmtree(base, ignore_errors=True)

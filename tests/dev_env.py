"""Loaded by pytest before Django (`-p tests.dev_env` in pyproject.toml): the test suite runs with the development
settings of var/dev.env unless REPLADMIN_ENV_FILE already names another file. Child processes inherit it."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

os.environ.setdefault("REPLADMIN_ENV_FILE", str(Path(__file__).resolve().parent.parent / "var" / "dev.env"))


def _free_ports(count: int) -> int:
    """The first of `count` consecutive loopback ports nothing listens on now."""
    for _ in range(50):
        first = random.randint(20000, 40000)
        free = True
        for port in range(first, first + count):
            with socket.socket() as probe:
                free = free and probe.connect_ex(("127.0.0.1", port)) != 0
        if free:
            return first
    raise RuntimeError("no free block of loopback ports for the test WAL clusters")


# Two test runs in one checkout (a quick run of one file beside the suite) must not share the console's test
# catalog (SQLite corrupts it) or the WAL cluster's port: each run has its own, which pytest-xdist's workers inherit
# (pytest-django suffixes the catalog with the worker's name, the WAL cluster adds the worker's number to the port).
if "PYTEST_XDIST_WORKER" not in os.environ:
    _var = Path(__file__).resolve().parent.parent / "var"
    os.environ.setdefault("REPLADMIN_TEST_DB_PATH", str(_var / f"test-console-{os.getpid()}.sqlite3"))
    os.environ.setdefault("REPLADMIN_TEST_WAL_PG_PORT", str(_free_ports(4)))

"""Loaded by pytest before Django (`-p tests.dev_env` in pyproject.toml): the test suite runs with the development
settings of var/dev.env unless REPLADMIN_ENV_FILE already names another file. Child processes inherit it."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

os.environ.setdefault("REPLADMIN_ENV_FILE", str(Path(__file__).resolve().parent.parent / "var" / "dev.env"))


def port_is_free(port: int) -> bool:
    """Whether a server could bind 127.0.0.1:`port` now (nothing listens there, no connection uses it)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """The first of `count` consecutive free loopback ports, below the kernel's ephemeral range (32768 and up) so
    that no outgoing connection takes one before the cluster binds it."""
    for _ in range(200):
        first = random.randint(20000, 32000 - count)
        if all(port_is_free(port) for port in range(first, first + count)):
            return first
    raise RuntimeError("no free block of loopback ports for the test WAL clusters")


# Two test runs in one checkout (a quick run of one file beside the suite) must not share the console's test
# catalog (SQLite corrupts it) or the WAL cluster's port: each run has its own, which pytest-xdist's workers inherit
# (pytest-django suffixes the catalog with the worker's name, the WAL cluster adds the worker's number to the port).
if "PYTEST_XDIST_WORKER" not in os.environ:
    _var = Path(__file__).resolve().parent.parent / "var"
    os.environ.setdefault("REPLADMIN_TEST_DB_PATH", str(_var / f"test-console-{os.getpid()}.sqlite3"))
    os.environ.setdefault("REPLADMIN_TEST_WAL_PG_PORT", str(free_ports(4)))

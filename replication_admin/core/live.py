"""Live reads for status pages: values read on the replicated servers themselves (a publisher's level, a log's
pending rows), each a bounded query, cached for LIVE_SECONDS in Django's cache so pages, the status API and
monitoring polls do not hammer the servers. A server that cannot be reached yields an error naming it and the cause
("server pg1 unreachable: nothing accepts connections at that host and port"), never a made-up value.

Before any query, each server is probed once per LIVE_SECONDS (in parallel, PROBE_TIMEOUT seconds at most: a TCP
connect to its host and port, or its SQLite file's presence), so a page over many dead servers stays fast.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyodbc
from django.core.cache import cache

from replication_admin.core import connections
from replication_admin.engine import dialects
from replication_admin.engine.dialects import AddressError
from replication_admin.models import Server

LIVE_SECONDS = 5
PROBE_TIMEOUT = 2.0
_MISSING = object()


@dataclass(frozen=True)
class Live:
    """A live value, or why it could not be read (`error`, one line)."""

    value: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def _key(*parts: object) -> str:
    return "repladmin-live:" + hashlib.sha256(repr(parts).encode()).hexdigest()


def unreachable(server: str, cause: str) -> str:
    return f"server {server} unreachable: {cause}"


def cause_of(exc: BaseException) -> str:
    """The one-line cause of a failed read."""
    if isinstance(exc, connections.ConnectionFailed):
        text = str(exc).split(": ", 1)[-1]
        return text + (f" ({exc.detail})" if exc.detail else "")
    if isinstance(exc, pyodbc.Error):
        return connections.driver_message(exc)
    return f"{type(exc).__name__}: {exc}"


def probe(server: Server, timeout: float = PROBE_TIMEOUT) -> str:
    """Why the server cannot be reached at all ("" when its host answers or its file is there)."""
    if server.odbc_dsn:
        return ""  # a DSN hides the address: the query itself will tell
    if dialects.get(server.dialect).file_based:
        try:
            connections.check_sqlite_file(server.database)
        except AddressError as exc:
            return str(exc)
        return ""
    try:
        with socket.create_connection((server.host, int(server.port or 0)), timeout=timeout):
            return ""
    except socket.gaierror:
        return "the host name cannot be resolved"
    except TimeoutError:
        return f"no answer from {server.host}:{server.port} within {timeout:g} s"
    except OSError as exc:
        if isinstance(exc, ConnectionRefusedError):
            return f"nothing accepts connections at {server.host}:{server.port}"
        return f"{server.host}:{server.port}: {exc.strerror or exc}"


def reachability(servers: Iterable[Server]) -> dict[str, str]:
    """For each server, "" when it answers, else the cause (probed at most once per LIVE_SECONDS, in parallel)."""
    by_name = {s.name: s for s in servers}
    keys = {name: _key("probe", name, s.host, s.port, s.database) for name, s in by_name.items()}
    known = cache.get_many(list(keys.values()))
    result: dict[str, str] = {name: known[key] for name, key in keys.items() if key in known}
    todo = [s for name, s in by_name.items() if name not in result]
    if todo:
        with ThreadPoolExecutor(max_workers=min(16, len(todo))) as pool:
            causes = list(pool.map(probe, todo))
        for server, cause in zip(todo, causes, strict=True):
            result[server.name] = cause
        cache.set_many({keys[s.name]: c for s, c in zip(todo, causes, strict=True)}, LIVE_SECONDS)
    return result


def read(server: Server, reach: dict[str, str], key: tuple, compute: Callable[[], Any]) -> Live:
    """`compute()` (a bounded read on `server`), cached for LIVE_SECONDS under `key`; an unreachable server
    (per `reach`, from reachability()) or a failed read gives a Live with the error instead."""
    cause = reach.get(server.name, "")
    if cause:
        return Live(error=unreachable(server.name, cause))
    cache_key = _key("read", server.name, *key)
    cached = cache.get(cache_key, _MISSING)
    if cached is not _MISSING:
        return cached
    try:
        result = Live(value=compute())
    except (connections.ConnectionFailed, AddressError) as exc:
        result = Live(error=unreachable(server.name, cause_of(exc)))
    except pyodbc.Error as exc:
        result = Live(error=f"server {server.name} could not be read: {cause_of(exc)}")
    cache.set(cache_key, result, LIVE_SECONDS)
    return result

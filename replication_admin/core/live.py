"""Live reads for status pages: values read on the replicated servers themselves (a publisher's level, a log's
pending rows), each a bounded query, cached for LIVE_SECONDS in Django's cache so pages, the status API and
monitoring polls do not hammer the servers. A server that cannot be reached yields an error naming it and the cause
("server pg1 unreachable: nothing accepts connections at that host and port"), never a made-up value.

Before any query, each server is probed once per LIVE_SECONDS (in parallel, PROBE_TIMEOUT seconds at most: a TCP
connect to its host and port, or its SQLite file's presence), so a page over many dead servers stays fast.

A server can also accept connections and then stop answering (a stalled link, a hung server): no driver timeout
ends that within seconds, so each read runs on a thread of its own and is given READ_TIMEOUT seconds; a read that
has not answered by then is reported ("no answer within 1.5 s") and its server counts as unreachable for
LIVE_SECONDS, so the page's other reads on it answer at once. (The abandoned thread ends when the driver gives up.)
A compute function therefore reads the servers only, never the catalog: the caller reads the catalog first.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyodbc
from django.core.cache import cache

from replication_admin.core import connections
from replication_admin.core.times import aware, naive_utc
from replication_admin.engine import dialects
from replication_admin.engine.bidir_sql import log_backlog_sql
from replication_admin.engine.dialects import AddressError
from replication_admin.models import Server

LIVE_SECONDS = 5
PROBE_TIMEOUT = 2.0
READ_TIMEOUT = 1.5
_MISSING = object()


@dataclass(frozen=True)
class Live:
    """A live value, or why it could not be read (`error`, one line), and when it was read (epoch seconds)."""

    value: Any = None
    error: str = ""
    read_at: float = field(default_factory=time.time)

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


def _probe_key(server: Server) -> str:
    return _key("probe", server.name, server.host, server.port, server.database)


def reachability(servers: Iterable[Server]) -> dict[str, str]:
    """For each server, "" when it answers, else the cause (probed at most once per LIVE_SECONDS, in parallel)."""
    by_name = {s.name: s for s in servers}
    keys = {name: _probe_key(s) for name, s in by_name.items()}
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


def read(
    server: Server,
    reach: dict[str, str],
    key: tuple[object, ...],
    compute: Callable[[], Any],
    changed_at: datetime | None = None,
) -> Live:
    """`compute()` (a bounded read on `server`), cached for LIVE_SECONDS under `key`; an unreachable server
    (per `reach`, from reachability()) or a failed read gives a Live with the error instead. `changed_at`: when the
    catalog says the value last changed (a sync's end): a cached read older than that is read again, since the cache
    is each process's own and the process that changed it cannot drop this one's copy."""
    cause = reach.get(server.name, "")
    if cause:
        return Live(error=unreachable(server.name, cause))
    cache_key = _key("read", server.name, server.host, server.port, server.database, *key)
    cached = cache.get(cache_key, _MISSING)
    if isinstance(cached, Live) and (changed_at is None or cached.read_at > changed_at.timestamp()):
        return cached
    outcome: list[Live] = []

    def run() -> None:
        try:
            outcome.append(Live(value=compute()))
        except (connections.ConnectionFailed, AddressError) as exc:
            outcome.append(Live(error=unreachable(server.name, cause_of(exc))))
        except pyodbc.Error as exc:
            outcome.append(Live(error=f"server {server.name} could not be read: {cause_of(exc)}"))
        except Exception as exc:  # reported on the page, never a made-up value
            outcome.append(Live(error=f"server {server.name} could not be read: {cause_of(exc)}"))

    reader = threading.Thread(target=run, name=f"live-read {server.name}", daemon=True)
    reader.start()
    reader.join(READ_TIMEOUT)
    if not outcome:
        stalled = f"no answer within {READ_TIMEOUT:g} s (the server or the link to it is stalled)"
        reach[server.name] = stalled
        cache.set(_probe_key(server), stalled, LIVE_SECONDS)
        return Live(error=unreachable(server.name, stalled))
    cache.set(cache_key, outcome[0], LIVE_SECONDS)
    return outcome[0]


@dataclass(frozen=True)
class Backlog:
    """Changes waiting in a log: how many, and when the oldest was made (None when there are none)."""

    rows: int = 0
    oldest: datetime | None = None

    def __add__(self, other: Backlog) -> Backlog:
        oldest = min((at for at in (self.oldest, other.oldest) if at is not None), default=None)
        return Backlog(self.rows + other.rows, oldest)

    def seconds(self, now: datetime) -> float:
        """How far behind in time: the age of the oldest waiting change (0 when nothing waits)."""
        return max(0.0, (now - self.oldest).total_seconds()) if self.oldest is not None else 0.0


def log_backlog(server: Server, table: str, since: datetime | None, not_from: str = "") -> Backlog:
    """The rows of `table`'s RLOG_ log on `server` newer than `since` (all without it) and not come from the server
    `not_from`, with the oldest one's time."""
    d = dialects.get(server.dialect)
    schema = connections.table_schema(server)
    text = log_backlog_sql(d, table, schema, naive_utc(since) if since else None, not_from)
    with connections.connect(server, readonly=True) as conn:
        rows, oldest = conn.cursor().execute(text).fetchone()
    return Backlog(int(rows or 0), aware(oldest) if rows else None)


def backlog_fields(read: Live | None) -> tuple[Backlog | None, bool, str]:
    """(the backlog, reachable, the reason it could not be read) of a live backlog read (None: nothing to read)."""
    if read is None:
        return None, True, ""
    return (read.value, True, "") if read.ok else (None, False, read.error)


def backlog_seconds(backlog: Backlog | None, now: datetime) -> float | None:
    """How far behind in time, rounded to the millisecond (None when the backlog could not be read)."""
    return None if backlog is None else round(backlog.seconds(now), 3)

"""Control plane: pyodbc connections to registered servers, clear connection errors, introspection,
and the JDBC endpoint Spark uses (derived from the same validated fields, never from free text)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyodbc
from django.conf import settings

from replication_admin.core import crypto
from replication_admin.engine import dialects
from replication_admin.engine.dialects import Address, AddressError, Dialect, JdbcEndpoint
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.models import Server

log = logging.getLogger(__name__)


def server_label(server: Server) -> str:
    """How messages name a server: its name and where it is ("pg_demo (127.0.0.1:5433)")."""
    if server.odbc_dsn:
        return f"{server.name} (DSN {server.odbc_dsn})"
    if dialects.get(server.dialect).file_based:
        return f"{server.name} ({server.database})"
    return f"{server.name} ({server.host}:{server.port})"


class ConnectionFailed(Exception):
    """A server could not be reached or refused us; `reason` is a short machine-readable cause."""

    def __init__(self, server: str, reason: str, message: str, detail: str = "", where: str = "") -> None:
        self.server = server
        self.reason = reason
        self.detail = detail
        super().__init__(f"server {where or server}: {message}")


class ConnectionLost(pyodbc.OperationalError):  # type: ignore[misc]  # pyodbc is untyped
    """A connection to a server broke while in use (a pyodbc error, so every handler of database errors
    still sees it); its message is one line naming the server and the driver's cause."""

    def __init__(self, server: Server, exc: BaseException) -> None:
        self.server = server.name
        self.cause = driver_message(exc)
        super().__init__("08S01", f"server {server_label(server)}: lost connection ({self.cause})")

    def __str__(self) -> str:
        return str(self.args[1])


class TableNotFound(LookupError):
    pass


# (reason, human message, patterns seen in driver messages)
_CLASSIFY = [
    (
        "authentication",
        "wrong user name or password",
        [r"password authentication failed", r"Access denied for user", r'role ".*" does not exist', r"28P01"],
    ),
    (
        "unknown_database",
        "the database does not exist",
        [r'database ".*" does not exist', r"Unknown database", r"3D000"],
    ),
    (
        "unknown_host",
        "the host name cannot be resolved",
        [
            r"could not translate host name",
            r"Unknown (MySQL|MariaDB)? ?server host",
            r"Name or service not known",
        ],
    ),
    (
        "unreachable",
        "connection refused (nothing accepts connections at that host and port)",
        [r"Connection refused", r"\(111\)"],
    ),
    (
        "unreachable",
        "nothing accepts connections at that host and port",
        [r"Connection refused", r"Can't connect to", r"No route to host", r"Network is unreachable"],
    ),
    (
        "timeout",
        "the server did not answer in time",
        [r"timeout expired", r"timed out", r"system error: 110", r"Lost connection to server at 'handshake"],
    ),
]


# SQLSTATEs and driver texts (ODBC, and JDBC as Spark reports it) of a connection that broke or could not be
# made: a fault of the network or of the server's availability, which a new connection may not have.
CONNECTION_FAULTS = (
    "08S01", "08001", "08003", "08004", "08006", "57P01", "57P03", "server has gone away", "Lost connection",
    "terminating connection", "server closed the connection", "no connection to the server",
    "could not receive data", "could not send data", "Connection refused", "Connection reset", "Broken pipe",
    "Communications link failure", "I/O error", "This connection has been closed", "Socket fail to connect",
    "Could not connect to address", "unexpected end of stream", "SQLNonTransientConnectionException",
    "SQLTransientConnectionException", "Can't connect to", "the database system is shutting down",
    "the database system is starting up", "SSL SYSCALL error", "Connection timed out",
)  # fmt: skip
# Connect failures worth another attempt (the server may be back in a moment); not a wrong password.
RETRYABLE_CONNECT = ("unreachable", "timeout")


# MariaDB Connector/J, when a statement's connection breaks under it, can fail again while cleaning up
# (a NullPointerException from its exception epilogue) and report only that: a lost connection too.
MARIADB_JDBC_BROKEN = re.compile(
    r"java\.lang\.NullPointerException[^\n]*\n(?:\s+at [^\n]*\n){0,12}?\s+at org\.mariadb\.jdbc\.[\w.$]*"
    r"executeExceptionEpilogue"
)


def is_connection_fault(exc: BaseException) -> bool:
    """Did a connection break, or could it not be made for a reason that may pass (not a wrong password)?"""
    if isinstance(exc, ConnectionLost):
        return True
    if isinstance(exc, ConnectionFailed):
        return exc.reason in RETRYABLE_CONNECT or (
            exc.reason == "error" and any(code in exc.detail for code in CONNECTION_FAULTS)
        )
    text = " ".join(str(a) for a in exc.args) if isinstance(exc, pyodbc.Error) else str(exc)
    return any(code in text for code in CONNECTION_FAULTS) or bool(MARIADB_JDBC_BROKEN.search(text))


def driver_message(exc: BaseException) -> str:
    """The database's own words from a pyodbc error, without driver prefixes and call names."""
    text = exc.args[1] if len(exc.args) > 1 else str(exc)
    text = re.sub(r"\s*\(-?\d+\)\s*\((SQLDriverConnect|SQLExecDirectW|SQLPrepareW|SQLExecute)\)\s*$", "", str(text))
    text = re.sub(r"^\[[^\]]*\]\s*(\[[^\]]*\]\s*)*", "", text)
    return " ".join(text.split())


def classify(server: str, exc: pyodbc.Error, where: str = "") -> ConnectionFailed:
    detail = driver_message(exc)
    for reason, message, patterns in _CLASSIFY:
        if any(re.search(p, detail, re.IGNORECASE) for p in patterns):
            return ConnectionFailed(server, reason, message, detail, where)
    return ConnectionFailed(server, "error", f"connection failed: {detail}", detail, where)


def table_schema(server: Server) -> str:
    """The schema a server's tables are qualified with: its own or its dialect's default (PostgreSQL's public),
    none where the dialect has no schemas."""
    return dialects.get(server.dialect).table_schema(server.schema)


def address_for(server: Server) -> Address:
    return Address(
        dialect=server.dialect,
        host=server.host,
        port=server.port,
        database=server.database,
        schema=server.schema,
        user=server.user,
        password=crypto.decrypt(server.password_encrypted),
        odbc_dsn=server.odbc_dsn,
        connect_timeout=settings.CONNECT_TIMEOUT,
        read_timeout=settings.READ_TIMEOUT,
    )


def check_sqlite_file(path: str, must_exist: bool = True) -> str:
    """A database file (of a file_based dialect: SQLite) must be under an allowed folder (REPLADMIN_SQLITE_DIRS)
    and, to connect, exist."""
    resolved = Path(os.path.realpath(path))
    allowed = [Path(os.path.realpath(d)) for d in settings.SQLITE_ALLOWED_DIRS]
    if not any(resolved == d or d in resolved.parents for d in allowed):
        raise AddressError(
            f"SQLite file {path!r} is outside the folders this console may use "
            f"({', '.join(str(d) for d in allowed)}; set REPLADMIN_SQLITE_DIRS)"
        )
    if must_exist and not resolved.is_file():
        raise AddressError(f"SQLite file {path!r} does not exist")
    return str(resolved)


def connection_string(server: Server) -> str:
    address = address_for(server)
    dialect = dialects.get(server.dialect)
    if dialect.file_based and not server.odbc_dsn:
        check_sqlite_file(address.database)
    return dialect.odbc_connection_string(address)


def jdbc_endpoint(server: Server, readonly: bool = False) -> JdbcEndpoint:
    """Spark's JDBC URL and properties; `readonly` sessions refuse writes (for reading sources)."""
    # Spark's statements (a sorted read of a whole table, a bulk insert batch) may be silent as long as a job runs.
    address = dataclasses.replace(address_for(server), read_timeout=settings.BULK_READ_TIMEOUT)
    dialect = dialects.get(server.dialect)
    if dialect.file_based:
        check_sqlite_file(address.database)
    return dialect.read_only_endpoint(address) if readonly else dialect.jdbc_endpoint(address)


def _session_setup(conn: pyodbc.Connection, dialect: Dialect, readonly: bool) -> None:
    """The driver's text encodings and the dialect's session statements (UTC, lock waits, read-only)."""
    if dialect.odbc_read_encoding:
        conn.setdecoding(pyodbc.SQL_CHAR, encoding=dialect.odbc_read_encoding)
        conn.setdecoding(pyodbc.SQL_WCHAR, encoding=dialect.odbc_read_encoding)
    if dialect.odbc_send_encoding:
        conn.setencoding(encoding=dialect.odbc_send_encoding)
    cur = conn.cursor()
    for statement in dialect.session_setup_sql(readonly):
        cur.execute(statement)
    cur.close()


# --- the read watchdog --------------------------------------------------------------------------------------
# Where the ODBC driver has no read timeout (psqlODBC: no option for it, and pyodbc's query timeout is refused),
# a link that stops forwarding without closing would hold a statement for ever: the kernel of whatever sits in
# between (a proxy, a NAT box) still acknowledges, so neither keepalives nor TCP_USER_TIMEOUT fire. The watchdog
# gives those connections the bound the other drivers have: every second it looks at each watched socket, and
# when a thread of this process is blocked waiting on it (poll or read on its descriptor, as
# /proc/self/task/*/syscall shows) while nothing was sent or received on it for READ_TIMEOUT seconds (TCP_INFO),
# it shuts the socket down. The driver call then fails at once with its own "connection lost" error (08S01),
# which is classified as a lost connection and retried like any other. (TCP_INFO alone cannot tell a request
# still unanswered from one answered within the same clock tick; the blocked thread can.)
# The driver does not tell which socket is a connection's: the sockets that appear during the connect and lead
# to the server's port are watched (one another thread opened to that port at the same moment may be watched
# too, under the same bound). A socket is known by its inode, so a reused descriptor is never touched. Linux
# only (x86_64 and aarch64 system call numbers); elsewhere the watchdog does nothing.

# struct tcp_info: milliseconds since the last data sent (offset 44) and since the last data received (52).
_TCP_INFO_SIZE = 104
_LAST_DATA_SENT = 44
_LAST_DATA_RECV = 52
# System calls a driver waits in: (poll-like calls with a pollfd array, calls with the descriptor first).
_WAIT_SYSCALLS = {"x86_64": ({7, 271}, {0, 45, 47}), "aarch64": ({73}, {63, 207, 212})}.get(
    platform.machine(), (set(), set())
)


@dataclass
class _Watched:
    fd: int
    label: str
    bound_ms: int


_watched: dict[str, _Watched] = {}  # socket inode ("socket:[123]") -> what to watch
_watch_lock = threading.Lock()
_watchdog: threading.Thread | None = None


def _sockets() -> dict[str, int]:
    """This process's sockets: inode -> descriptor."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith("socket:"):
                    found[target] = int(name)
    return found


def _with_socket(fd: int, inode: str, use: Callable[[socket.socket], Any]) -> Any:
    """Run `use` on descriptor `fd` while it is still socket `inode`; None when it is gone.

    The descriptor is borrowed, never duplicated or closed. By the time the watchdog looks, the driver may have
    closed the socket and the kernel given its number to another file: a catalog's SQLite file, say. Closing any
    descriptor of a file (a duplicate too) drops every POSIX lock this process holds on that file, the locks SQLite
    keeps its writers apart with, and the catalog is then corrupted by two writers at once. A borrowed number that
    is no longer a socket only makes the socket calls fail (ENOTSOCK)."""
    try:
        if os.readlink(f"/proc/self/fd/{fd}") != inode:
            return None
        sock = socket.socket(fileno=fd)  # not a socket (any more): OSError, and the number is left alone
    except OSError:
        return None
    try:
        if f"socket:[{os.fstat(sock.fileno()).st_ino}]" != inode:  # replaced by another socket meanwhile
            return None
        return use(sock)
    finally:
        sock.detach()  # the driver's descriptor stays open: it is the driver's to close


def _peer_port(sock: socket.socket) -> int | None:
    try:
        return int(sock.getpeername()[1]) if sock.family in (socket.AF_INET, socket.AF_INET6) else None
    except OSError:
        return None


def _watch(before: dict[str, int], server: Server, port: int | None) -> None:
    """Watch the sockets to `port` that appeared since `before` was taken."""
    global _watchdog
    bound_ms = settings.READ_TIMEOUT * 1000
    if bound_ms <= 0 or not _WAIT_SYSCALLS[0]:
        return
    for inode, fd in _sockets().items():
        if inode not in before and _with_socket(fd, inode, _peer_port) == port:
            with _watch_lock:
                _watched[inode] = _Watched(fd, server_label(server), bound_ms)
    with _watch_lock:
        if _watchdog is None or not _watchdog.is_alive():
            _watchdog = threading.Thread(target=_watch_loop, name="connection-read-watchdog", daemon=True)
            _watchdog.start()


def _waited_on() -> set[int]:
    """The descriptors threads of this process are blocked waiting on now."""
    polls, reads = _WAIT_SYSCALLS
    fds: set[int] = set()
    with contextlib.suppress(OSError):
        tasks = os.listdir("/proc/self/task")
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/syscall") as f:
                fields = f.read().split()
            number = int(fields[0])
            if number in reads:
                fds.add(int(fields[1], 16))
            elif number in polls and 0 < (count := int(fields[2], 16)) <= 64:
                with open("/proc/self/mem", "rb", buffering=0) as mem:
                    mem.seek(int(fields[1], 16))
                    raw = mem.read(8 * count)  # struct pollfd {int fd; short events; short revents}
                fds.update(struct.unpack_from("i", raw, 8 * i)[0] for i in range(len(raw) // 8))
        except (OSError, ValueError, IndexError, struct.error):
            continue  # a thread that ended, or is running ("running" instead of a number)
    return fds


def _silent_for(sock: socket.socket, bound_ms: int) -> bool:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    (sent_ago,) = struct.unpack_from("I", info, _LAST_DATA_SENT)
    (received_ago,) = struct.unpack_from("I", info, _LAST_DATA_RECV)
    return int(min(sent_ago, received_ago)) >= bound_ms


def check_stalled() -> int:
    """One round of the watchdog: shut down the watched sockets waited on in silence too long; how many."""
    with _watch_lock:
        watched = list(_watched.items())
    if not watched:
        return 0
    waited = _waited_on()
    shut = 0
    for inode, item in watched:

        def examine(sock: socket.socket, item: _Watched = item) -> bool:
            if item.fd not in waited or not _silent_for(sock, item.bound_ms):
                return False
            sock.shutdown(socket.SHUT_RDWR)  # the socket itself, not just this duplicate: the driver's wait ends
            return True

        try:
            outcome = _with_socket(item.fd, inode, examine)
        except OSError:
            outcome = None
        if outcome is None or outcome:
            with _watch_lock:
                _watched.pop(inode, None)
        if outcome:
            shut += 1
            log.warning(
                "connection to %s: the server sent nothing for %d s while a statement waited; closed as lost",
                item.label,
                item.bound_ms // 1000,
            )
    return shut


def _watch_loop() -> None:
    while True:
        time.sleep(1.0)
        with contextlib.suppress(Exception):  # the watchdog never dies of one odd socket
            check_stalled()


def _open(server: Server, conn_str: str, readonly: bool, autocommit: bool) -> pyodbc.Connection:
    dialect = dialects.get(server.dialect)
    watch = not dialect.odbc_read_timeout and not dialect.file_based and not server.odbc_dsn
    before = _sockets() if watch else {}
    try:
        conn = pyodbc.connect(conn_str, timeout=settings.CONNECT_TIMEOUT, autocommit=autocommit)
    except pyodbc.Error as exc:
        raise classify(server.name, exc, server_label(server)) from None
    if watch:
        _watch(before, server, server.port or dialect.default_port)
    try:
        _session_setup(conn, dialects.get(server.dialect), readonly)
    except pyodbc.Error as exc:
        with contextlib.suppress(pyodbc.Error):
            conn.close()
        if is_connection_fault(exc):
            raise ConnectionLost(server, exc) from None
        raise
    return conn


# How a failed connect is tried again: THE retry policy (core.transactions, which imports this module)
# installs itself here; until then, and outside its scope, a connect is tried once.
ConnectRetry = Callable[[Callable[[], pyodbc.Connection]], pyodbc.Connection]


def _once(open_: Callable[[], pyodbc.Connection]) -> pyodbc.Connection:
    return open_()


connect_retry: ConnectRetry = _once


def open_connection(server: Server, readonly: bool = False, autocommit: bool = True) -> pyodbc.Connection:
    try:
        conn_str = connection_string(server)
    except (AddressError, crypto.SecretError) as exc:
        raise ConnectionFailed(server.name, "configuration", str(exc)) from None
    return connect_retry(lambda: _open(server, conn_str, readonly, autocommit))


def _alive(conn: pyodbc.Connection) -> bool:
    """A cheap round trip: is the connection still there (the server up, nothing between us cut it)?"""
    try:
        conn.cursor().execute("SELECT 1").fetchall()
        if not conn.autocommit:
            conn.rollback()
        return True
    except pyodbc.Error:
        with contextlib.suppress(pyodbc.Error):
            conn.close()
        return False


# A pooled connection's key: the server's id and name, readonly, autocommit.
PoolKey = tuple[Any, str, bool, bool]


@dataclass
class _Pool:
    conns: dict[PoolKey, pyodbc.Connection] = field(default_factory=dict)
    used: dict[PoolKey, float] = field(default_factory=dict)  # key -> time.monotonic() of the last hand-back
    busy: dict[PoolKey, int] = field(default_factory=dict)  # key -> how many blocks hold it now (nested uses)

    def idle(self, key: PoolKey) -> bool:
        """Handed back and unused for longer than CONNECTION_CHECK_AFTER seconds: worth a ping."""
        return not self.busy.get(key) and time.monotonic() - self.used.get(key, 0.0) > settings.CONNECTION_CHECK_AFTER


_reused: ContextVar[_Pool | None] = ContextVar("reused_connections", default=None)


@contextmanager
def reuse() -> Iterator[None]:
    """Within this block, connect() hands out one connection per (server, mode) and closes them at the
    end: a refresh makes a dozen short control-plane calls, and each new connection costs milliseconds.
    A connection idle for more than CONNECTION_CHECK_AFTER seconds is pinged first, and replaced when dead."""
    pool = _Pool()
    token = _reused.set(pool)
    try:
        yield
    finally:
        _reused.reset(token)
        for conn in pool.conns.values():
            with contextlib.suppress(pyodbc.Error):
                conn.close()


def forget(server: Server) -> None:
    """Close this block's pooled connections to `server` (after an apply halted there): the next use opens a
    new session, which sees privileges granted meanwhile (MariaDB reads a database's grants when a session
    starts) and carries no session state of the failed attempts."""
    pool = _reused.get()
    if pool is None:
        return
    for key in [k for k in pool.conns if k[0] == server.pk and k[1] == server.name and not pool.busy.get(k)]:
        with contextlib.suppress(pyodbc.Error):
            pool.conns.pop(key).close()


def _lost(server: Server, exc: BaseException) -> BaseException | None:
    """The one-line ConnectionLost for a driver error that says the connection broke."""
    if isinstance(exc, pyodbc.Error) and not isinstance(exc, ConnectionLost) and is_connection_fault(exc):
        return ConnectionLost(server, exc)
    return None


@contextmanager
def connect(server: Server, readonly: bool = False, autocommit: bool = True) -> Iterator[pyodbc.Connection]:
    pool = _reused.get()
    if pool is None:
        conn = open_connection(server, readonly=readonly, autocommit=autocommit)
        try:
            yield conn
        except pyodbc.Error as exc:
            lost = _lost(server, exc)
            if lost is None:
                raise
            raise lost from exc
        finally:
            with contextlib.suppress(pyodbc.Error):
                conn.close()
        return
    key = (server.pk, server.name, readonly, autocommit)
    conn = pool.conns.get(key)
    if conn is not None and pool.idle(key) and not _alive(conn):
        log.info("a pooled connection to %s was dead; opening a new one", server_label(server))
        pool.conns.pop(key, None)
        conn = None
    if conn is None:
        conn = pool.conns[key] = open_connection(server, readonly=readonly, autocommit=autocommit)
    pool.busy[key] = pool.busy.get(key, 0) + 1
    try:
        yield conn
    except BaseException as exc:
        # A connection in an unknown state is not handed out again.
        if pool.conns.get(key) is conn:
            pool.conns.pop(key, None)
        with contextlib.suppress(pyodbc.Error):
            conn.rollback()
            conn.close()
        lost = _lost(server, exc)
        if lost is None:
            raise
        raise lost from exc
    else:
        if not autocommit:
            conn.rollback()  # whatever the caller did not commit does not leak into the next use
    finally:
        pool.busy[key] -= 1
        pool.used[key] = time.monotonic()


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str
    version: str = ""
    reason: str = ""
    elapsed_ms: int = 0


def test_connection(server: Server) -> CheckResult:
    started = time.monotonic()
    try:
        with connect(server, readonly=True) as conn:
            dialect = dialects.get(server.dialect)
            product = conn.getinfo(pyodbc.SQL_DBMS_NAME)
            if dialect.version_sql:
                version = dialect.reported_version(str(conn.cursor().execute(dialect.version_sql).fetchone()[0]))
            else:
                version = conn.getinfo(pyodbc.SQL_DBMS_VER)
                conn.cursor().execute("SELECT 1").fetchone()
    except ConnectionFailed as exc:
        elapsed = int((time.monotonic() - started) * 1000)
        message = str(exc) + (f" ({exc.detail})" if exc.detail else "")
        return CheckResult(ok=False, message=message, reason=exc.reason, elapsed_ms=elapsed)
    elapsed = int((time.monotonic() - started) * 1000)
    label = f"{product} {version}".strip()
    return CheckResult(ok=True, message=f"connected to {label} in {elapsed} ms", version=label, elapsed_ms=elapsed)


def list_tables(server: Server) -> list[str]:
    dialect = dialects.get(server.dialect)
    sql, params = dialect.tables_sql(server.schema)
    with connect(server, readonly=True) as conn:
        return [row[0] for row in conn.cursor().execute(sql, params).fetchall()]


def describe_table(server: Server, table: str, conn: pyodbc.Connection | None = None) -> TableInfo:
    dialect = dialects.get(server.dialect)
    sql, params = dialect.columns_sql(server.schema, table)

    def read(c: pyodbc.Connection) -> list[Any]:
        return list(c.cursor().execute(sql, params).fetchall())

    if conn is None:
        with connect(server, readonly=True) as own:
            rows = read(own)
    else:
        rows = read(conn)
    if not rows:
        raise TableNotFound(f"table {table!r} does not exist on server {server.name!r}")
    columns = tuple(
        Column(
            name=row[0],
            declared=row[1] or "",
            logical=dialect.parse_type(row[1] or ""),
            nullable=bool(row[2]),
            pk_position=int(row[3] or 0),
        )
        for row in rows
    )
    # MariaDB's catalog compares names without case: report the name the table really has.
    real = rows[0][4] if len(rows[0]) > 4 and rows[0][4] else table
    return TableInfo(
        name=real,
        columns=columns,
        schema=table_schema(server),
    )

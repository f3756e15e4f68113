"""Control plane: pyodbc connections to registered servers, clear connection errors, introspection,
and the JDBC endpoint Spark uses (derived from the same validated fields, never from free text)."""

from __future__ import annotations

import contextlib
import os
import re
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import pyodbc
from django.conf import settings

from replication_admin.core import crypto
from replication_admin.engine import dialects
from replication_admin.engine.dialects import Address, AddressError, JdbcEndpoint
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.models import Server

LOGIN_TIMEOUT = 10


class ConnectionFailed(Exception):
    """A server could not be reached or refused us; `reason` is a short machine-readable cause."""

    def __init__(self, server: str, reason: str, message: str, detail: str = "") -> None:
        self.server = server
        self.reason = reason
        self.detail = detail
        super().__init__(f"server {server!r}: {message}")


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
        "nothing accepts connections at that host and port",
        [r"Connection refused", r"Can't connect to", r"No route to host", r"Network is unreachable"],
    ),
    (
        "timeout",
        "the server did not answer in time",
        [r"timeout expired", r"timed out", r"system error: 110", r"Lost connection to server at 'handshake"],
    ),
]


def driver_message(exc: BaseException) -> str:
    """The database's own words from a pyodbc error, without driver prefixes and call names."""
    text = exc.args[1] if len(exc.args) > 1 else str(exc)
    text = re.sub(r"\s*\(-?\d+\)\s*\((SQLDriverConnect|SQLExecDirectW|SQLPrepareW|SQLExecute)\)\s*$", "", str(text))
    text = re.sub(r"^\[[^\]]*\]\s*(\[[^\]]*\]\s*)*", "", text)
    return " ".join(text.split())


def classify(server: str, exc: pyodbc.Error) -> ConnectionFailed:
    detail = driver_message(exc)
    for reason, message, patterns in _CLASSIFY:
        if any(re.search(p, detail, re.IGNORECASE) for p in patterns):
            return ConnectionFailed(server, reason, message, detail)
    return ConnectionFailed(server, "error", f"connection failed: {detail}", detail)


def table_schema(server: Server) -> str:
    """The schema a server's tables are qualified with: PostgreSQL's (default public), else none."""
    return (server.schema or "public") if server.dialect == "postgresql" else ""


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
    )


def check_sqlite_file(path: str, must_exist: bool = True) -> str:
    """A SQLite file must be under an allowed folder (REPLADMIN_SQLITE_DIRS) and, to connect, exist."""
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
    if server.dialect == "sqlite" and not server.odbc_dsn:
        check_sqlite_file(address.database)
    return dialects.get(server.dialect).odbc_connection_string(address)


def jdbc_endpoint(server: Server, readonly: bool = False) -> JdbcEndpoint:
    """Spark's JDBC URL and properties; `readonly` sessions refuse writes (for reading sources)."""
    address = address_for(server)
    if server.dialect == "sqlite":
        check_sqlite_file(address.database)
    dialect = dialects.get(server.dialect)
    return dialect.read_only_endpoint(address) if readonly else dialect.jdbc_endpoint(address)


def _session_setup(conn: pyodbc.Connection, dialect: str, readonly: bool) -> None:
    cur = conn.cursor()
    if dialect == "postgresql":
        cur.execute("SET TIME ZONE 'UTC'")
        if readonly:
            cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    elif dialect == "mysql":
        cur.execute("SET time_zone = '+00:00'")
        if readonly:
            cur.execute("SET SESSION TRANSACTION READ ONLY")
    elif dialect == "sqlite":
        cur.execute("PRAGMA busy_timeout = 30000")
        if readonly:
            cur.execute("PRAGMA query_only = 1")
    cur.close()


def open_connection(server: Server, readonly: bool = False, autocommit: bool = True) -> pyodbc.Connection:
    try:
        conn_str = connection_string(server)
    except (AddressError, crypto.SecretError) as exc:
        raise ConnectionFailed(server.name, "configuration", str(exc)) from None
    try:
        conn = pyodbc.connect(conn_str, timeout=LOGIN_TIMEOUT, autocommit=autocommit)
    except pyodbc.Error as exc:
        raise classify(server.name, exc) from None
    if server.dialect == "sqlite":
        # SQLite ODBC hands back text as UTF-8; tell pyodbc so non-ASCII survives.
        conn.setdecoding(pyodbc.SQL_CHAR, encoding="utf-8")
        conn.setdecoding(pyodbc.SQL_WCHAR, encoding="utf-8")
        conn.setencoding(encoding="utf-8")
    elif server.dialect == "mysql":
        # Sent as UTF-16, parameters longer than the driver's buffer come back mangled; UTF-8 does not.
        conn.setencoding(encoding="utf-8")
    _session_setup(conn, server.dialect, readonly)
    return conn


_reused: ContextVar[dict | None] = ContextVar("reused_connections", default=None)


@contextmanager
def reuse():
    """Within this block, connect() hands out one connection per (server, mode) and closes them at the
    end: a refresh makes a dozen short control-plane calls, and each new connection costs milliseconds."""
    pool: dict = {}
    token = _reused.set(pool)
    try:
        yield
    finally:
        _reused.reset(token)
        for conn in pool.values():
            with contextlib.suppress(pyodbc.Error):
                conn.close()


@contextmanager
def connect(server: Server, readonly: bool = False, autocommit: bool = True):
    pool = _reused.get()
    if pool is None:
        conn = open_connection(server, readonly=readonly, autocommit=autocommit)
        try:
            yield conn
        finally:
            conn.close()
        return
    key = (server.pk, server.name, readonly, autocommit)
    conn = pool.get(key)
    if conn is None:
        conn = pool[key] = open_connection(server, readonly=readonly, autocommit=autocommit)
    try:
        yield conn
    except BaseException:
        # A connection in an unknown state is not handed out again.
        pool.pop(key, None)
        with contextlib.suppress(pyodbc.Error):
            conn.rollback()
            conn.close()
        raise
    else:
        if not autocommit:
            conn.rollback()  # whatever the caller did not commit does not leak into the next use


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
            product = conn.getinfo(pyodbc.SQL_DBMS_NAME)
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

    def read(c: pyodbc.Connection) -> list:
        return c.cursor().execute(sql, params).fetchall()

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

"""Statements on a registered server, in transactions, under the ONE retry policy of the product.

Retried: deadlocks, lock wait timeouts, serialisation failures, lost connections and failed connects
(unreachable, timed out) — on the ODBC side and as Spark's JDBC reports them. Each attempt runs on a fresh
connection and runs the work again from its start, so the work must be a whole transaction. Attempts wait
exponentially longer with jitter (0.25 s, 0.5 s, 1 s … at most 8 s) and stop when RETRY_SECONDS (60) have
passed: within a job (`job_retries`, used by core.jobs.execute) that bound is the job's, shared by every
step's retries and by the job's own re-runs from the start. Anything else is the caller's to report.

The loop is tenacity's (`Retrying`): its stop, wait and before-sleep hooks say exactly this policy, and it is
the well-kept library for it, rather than one more hand-written loop per caller.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyodbc
from django.conf import settings
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.models import Server

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5  # kept for callers that bound their own re-reads (bidir's stale decisions)
WAIT_FIRST, WAIT_MAX, JITTER = 0.25, 8.0, 0.25
# SQLSTATEs, MariaDB error numbers and driver texts of errors that a new attempt can clear.
CONCURRENCY_FAILURES = ("40001", "40P01", "1213", "1205", "deadlock", "database is locked")
CONNECTION_LOST = connections.CONNECTION_FAULTS
DUPLICATE_KEY = ("23505", "1062", "UNIQUE constraint", "Duplicate entry")

T = TypeVar("T")


def _text(exc: BaseException) -> str:
    return " ".join(str(a) for a in exc.args)


def is_connection_fault(exc: BaseException) -> bool:
    return connections.is_connection_fault(exc)


def is_retryable(exc: BaseException) -> bool:
    """The retry policy: may the same work succeed when run again from its start?"""
    if isinstance(exc, connections.ConnectionFailed | connections.ConnectionLost):
        return connections.is_connection_fault(exc)
    if isinstance(exc, ReplicationError):
        return False  # a message for a person, already decided
    if is_spark_service_fault(exc):
        return True
    text = _text(exc) if isinstance(exc, pyodbc.Error) else str(exc)
    return any(code in text for code in CONCURRENCY_FAILURES) or connections.is_connection_fault(exc)


def is_duplicate_key(exc: BaseException) -> bool:
    text = _text(exc)
    return any(code in text for code in DUPLICATE_KEY)


# --- the bound and the log of a job's retries ---------------------------------------------------------------


@dataclass
class RetryScope:
    """A job's retries: one deadline for all of them, and the job's log for their lines."""

    deadline: float
    log: Callable[[str], None] | None = None
    spark_servers: dict[str, Server] = field(default_factory=dict)  # servers the job's Spark steps reach

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


_scope: ContextVar[RetryScope | None] = ContextVar("retry_scope", default=None)


@contextmanager
def retry_scope(log_line: Callable[[str], None] | None = None) -> Iterator[RetryScope]:
    scope = RetryScope(deadline=time.monotonic() + settings.RETRY_SECONDS, log=log_line)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def note_spark_server(server: Server) -> None:
    """A Spark step of this job reaches `server` (a JDBC failure that names no host is put down to it)."""
    scope = _scope.get()
    if scope is not None:
        scope.spark_servers[server.name] = server


def _remaining() -> float:
    scope = _scope.get()
    return scope.remaining() if scope is not None else float(settings.RETRY_SECONDS)


def _say(line: str) -> None:
    scope = _scope.get()
    log.warning("%s", line)
    if scope is not None and scope.log is not None:
        with contextlib.suppress(Exception):  # the log is a nicety; it must not stop the retry
            scope.log(line)


def retry_line(exc: BaseException, wait: float, again: str = "retrying") -> str:
    """The job-log line of one retry: what failed where, and when the next attempt starts."""
    where, cause = describe(exc)
    if isinstance(exc, connections.ConnectionFailed):
        what = f"connecting to server {where} failed ({cause})"
    elif is_connection_fault(exc):
        what = f"connection to server {where} lost ({cause})"
    else:
        what = f"server {where}: {cause}"
    return f"{what}; {again} in {wait:.1f} s"


def retrying(
    again: str = "retrying",
    stop_after: float | None = None,
    attempts: int | None = None,
    stop_when: Callable[[RetryCallState], bool] | None = None,
) -> Retrying:
    """THE policy as a tenacity loop: retryable errors, exponential backoff with jitter, the bounded time."""

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        if exc is not None:
            _say(retry_line(exc, wait, again))
            if is_spark_service_fault(exc):
                on_spark_service_fault(exc)

    stop: Any = stop_before_delay(_remaining() if stop_after is None else stop_after)
    if stop_when is not None:
        stop = stop_when
    return Retrying(
        retry=retry_if_exception(is_retryable),
        stop=stop if attempts is None else stop | stop_after_attempt(attempts),
        wait=wait_exponential_jitter(multiplier=WAIT_FIRST, max=WAIT_MAX, jitter=JITTER),
        before_sleep=before_sleep,
        reraise=True,
    )


def _retry_connect(open_: Callable[[], pyodbc.Connection]) -> pyodbc.Connection:
    """A failed connect inside a job is tried again (outside one, a person is waiting: once)."""
    if _scope.get() is None:
        return open_()
    return retrying()(open_)


connections.connect_retry = _retry_connect


def job_retries(run: Callable[[], T], log_line: Callable[[str], None]) -> T:
    """Run a whole job under the policy: a retryable error that its steps did not clear (or met in a step
    with no retry of its own) runs the job again from its start — jobs are idempotent — until the job's
    RETRY_SECONDS have passed. Every step's retries inside share that bound.

    The job's re-runs count the bound from the first fault that ended an attempt (and again from a fault that
    ends an attempt which ran longer than the bound): a long copy cut by a restart of the Spark service (or a lost
    connection) after minutes of work gets RETRY_SECONDS to find the service or server back, as a short job does."""
    with retry_scope(log_line) as scope:
        bound = float(settings.RETRY_SECONDS)
        attempt_started = [time.monotonic()]
        first_fault = [True]

        def attempt() -> T:
            attempt_started[0] = time.monotonic()
            return run()

        def stop(state: RetryCallState) -> bool:
            now = time.monotonic()
            if first_fault[0] or now - attempt_started[0] >= bound:
                first_fault[0] = False
                scope.deadline = now + bound  # a window from this fault, shared by the steps of the next attempts
            return now + (state.upcoming_sleep or 0.0) >= scope.deadline

        return retrying("running the job again from its start", stop_when=stop)(attempt)


# --- one line per error -------------------------------------------------------------------------------------

_JAVA = ("Py4JJavaError", "java.", "JVM stacktrace", "org.apache.spark", "SparkException")
# (pattern in a JDBC driver's words as Spark reports them, the cause as a person reads it)
_JAVA_CAUSES = [
    (r"refused", "connection refused"),
    (r"Communications link failure", "lost connection (communications link failure)"),
    (r"This connection has been closed", "lost connection (the connection has been closed)"),
    (r"I/O error[^\n]*", "lost connection ({0})"),
    (r"Connection reset", "lost connection (connection reset)"),
    (r"unexpected end of stream", "lost connection (unexpected end of stream)"),
    (r"Broken pipe", "lost connection (broken pipe)"),
    (connections.MARIADB_JDBC_BROKEN.pattern, "lost connection (the MariaDB driver failed on a broken connection)"),
    (r"Socket fail to connect|Could not connect to address|Can't connect to", "connection refused"),
    (r"timed out", "connection timed out"),
]
_HOST_PORT = [
    re.compile(r"host=([\w.\-]+)\)\(port=(\d+)"),  # MariaDB Connector/J
    re.compile(r"(?:to|at|connect to) ([\w.\-]+):(\d{2,5})"),  # PostgreSQL JDBC
]


# A Spark Connect client that cannot reach the Spark service (gRPC UNAVAILABLE), or whose session the service no
# longer has (it was restarted: the session changed or is unknown there, and pyspark then closes the client, whose
# next call says NO_ACTIVE_SESSION): retryable like a lost connection, on a new session (on_spark_service_fault),
# and named after the service, not after the job's database servers.
_SERVICE_DOWN = ("StatusCode.UNAVAILABLE", "failed to connect to all addresses", "Socket closed", "GOAWAY")
_SESSION_LOST = (
    "NO_ACTIVE_SESSION", "INVALID_HANDLE.SESSION_CHANGED", "INVALID_HANDLE.SESSION_NOT_FOUND",
    "INVALID_HANDLE.SESSION_CLOSED", "INVALID_HANDLE.OPERATION_ABANDONED", "SparkContext was shut down",
    "SparkContext has been shutdown", "Cannot call methods on a stopped SparkContext",
)  # fmt: skip


# Called (with the error) before a job's steps are retried after a fault of the Spark service: core/spark.py drops the
# process's cached sessions there, so that the retry opens a new one.
def _no_hook(exc: BaseException) -> None:
    return None


on_spark_service_fault: Callable[[BaseException], None] = _no_hook


def is_spark_service_fault(exc: BaseException) -> bool:
    if not type(exc).__module__.startswith(("pyspark", "grpc")):
        return False
    text = str(exc)[:4000]
    return any(marker in text for marker in _SERVICE_DOWN) or any(marker in text for marker in _SESSION_LOST)


def _service_cause(exc: BaseException) -> str:
    text = str(exc)
    for marker, cause in (("Connection refused", "connection refused"), ("Deadline", "timed out")):
        if marker in text:
            return f"unreachable ({cause})"
    lost = next((marker for marker in _SESSION_LOST if marker in text), "")
    if lost:
        return f"the job's session was lost (the service restarted: {lost})"
    return "unreachable"


def is_spark_error(exc: BaseException) -> bool:
    text = f"{type(exc).__module__}.{type(exc).__name__} " + str(exc)[:4000]
    return any(marker in text for marker in _JAVA) or type(exc).__module__.startswith(("py4j", "pyspark"))


def _spark_servers(text: str) -> list[Server]:
    for pattern in _HOST_PORT:
        for host, port in pattern.findall(text):
            found = list(Server.objects.filter(host=host, port=int(port)))
            if found:
                return found[:1]
    scope = _scope.get()
    return list(scope.spark_servers.values()) if scope is not None else []


def describe(exc: BaseException) -> tuple[str, str]:
    """(which server, what happened) of an error, each short; for the job's one-line error and its log."""
    if isinstance(exc, connections.ConnectionFailed):
        text = str(exc)
        where, _, cause = text.partition(": ")
        return where.removeprefix("server "), cause + (
            f" ({exc.detail})" if exc.detail and exc.reason == "error" else ""
        )
    if isinstance(exc, connections.ConnectionLost):
        where, _, cause = str(exc).partition(": ")
        return where.removeprefix("server "), cause
    if is_spark_service_fault(exc):
        return f"Spark service {settings.SPARK_REMOTE or '(embedded)'}", _service_cause(exc)
    if is_spark_error(exc):
        text = str(exc)
        servers = _spark_servers(text)
        where = " or ".join(connections.server_label(s) for s in servers) or "(unknown)"
        for pattern, cause in _JAVA_CAUSES:
            match = re.search(pattern, text)
            if match:
                return where, cause.format(match.group(0).strip())
        return where, f"Spark failed: {_java_first_line(text)}"
    if isinstance(exc, pyodbc.Error):
        return "(unknown)", connections.driver_message(exc)
    return "(unknown)", str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _java_first_line(text: str) -> str:
    """The innermost cause of a Java trace ("Caused by: X: message"), else its first line, cut short."""
    causes = re.findall(r"Caused by: ([\w.$]+(?:Exception|Error)[^\n]*)", text)
    line = causes[-1] if causes else next((ln for ln in text.splitlines() if ln.strip()), "")
    return " ".join(line.split())[:300]


def one_line(exc: BaseException) -> str | None:
    """A job's error in one line naming the server and the cause, for faults of connections and of Spark's
    JDBC reads and writes; None for the rest (their own messages stand)."""
    if isinstance(exc, connections.ConnectionFailed | connections.ConnectionLost):
        return str(exc)
    if is_spark_service_fault(exc):
        where, cause = describe(exc)
        return f"{where}: {cause}"
    if is_spark_error(exc):
        where, cause = describe(exc)
        return f"server {where}: {cause}" if is_connection_fault(exc) else cause
    return None


# --- transactions -------------------------------------------------------------------------------------------


def with_retries(server: Server, work: Callable[[Any], T], attempts: int | None = None) -> T:
    """Run work(cursor) in one transaction on `server` and commit it; retryable failures (a lost
    connection, a failed connect, a deadlock) roll back and run the work again on a new connection, with
    backoff, for the job's bounded time (`attempts`, when given, also bounds the count); any other error
    propagates."""

    def attempt() -> T:
        with connections.connect(server, autocommit=False) as conn:
            cursor = conn.cursor()
            try:
                result = work(cursor)
                conn.commit()
                return result
            except pyodbc.Error:
                with contextlib.suppress(pyodbc.Error):
                    conn.rollback()  # a lost connection cannot roll back; its transaction is gone anyway
                raise

    return retrying(attempts=attempts)(attempt)


def run_in_transaction(server: Server, statements: Sequence[str | tuple[str, Sequence[Any]]]) -> None:
    """Statements (SQL text, or (SQL, parameters)) in one transaction, under the retry policy."""

    def work(cursor: Any) -> None:
        for statement in statements:
            if isinstance(statement, tuple):
                text, params = statement
                cursor.execute(text, list(params)) if params else cursor.execute(text)
            else:
                cursor.execute(statement)

    with_retries(server, work)


def run_each(server: Server, statements: Sequence[str], ignore_errors: bool = False) -> None:
    """Statements one at a time in autocommit (DDL); with ignore_errors, a failing one is passed over."""
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        for statement in statements:
            try:
                cursor.execute(statement)
            except pyodbc.Error:
                if not ignore_errors:
                    raise


def run_with_undo(server: Server, statements: Sequence[str], undo: Sequence[str]) -> None:
    """DDL one statement at a time (MariaDB commits each); on a failure, undo what was made."""
    done = 0
    try:
        with connections.connect(server) as conn:
            cursor = conn.cursor()
            for statement in statements:
                cursor.execute(statement)
                done += 1
    except pyodbc.Error as exc:
        run_each(server, list(undo), ignore_errors=True)
        raise ReplicationError(
            f"creating the replication objects on {server.name} failed at step {done + 1}: "
            f"{connections.driver_message(exc)}"
        ) from None


def scalar(server: Server, query: str, params: Sequence[Any] | None = None) -> Any:
    with connections.connect(server, readonly=True) as conn:
        row = conn.cursor().execute(query, list(params or [])).fetchone()
        return row[0] if row else None


def error_message(exc: BaseException) -> str:
    """What a person reads of an error: one line for connection and Spark faults, the driver's own
    message for database errors."""
    line = one_line(exc)
    if line is not None:
        return line
    return connections.driver_message(exc) if isinstance(exc, pyodbc.Error) else str(exc)

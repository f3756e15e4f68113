"""Statements on a registered server, in transactions, under the ONE retry policy of the product.

Retried: deadlocks, lock wait timeouts, serialisation failures and lost connections (each attempt on a
fresh connection, the work run again from its start, so the work must be a whole transaction). Anything
else is the caller's to report.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pyodbc

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.models import Server

MAX_ATTEMPTS = 5
# SQLSTATEs, MariaDB error numbers and driver texts of errors that a new attempt can clear.
CONCURRENCY_FAILURES = ("40001", "40P01", "1213", "1205", "deadlock", "database is locked")
CONNECTION_LOST = (
    "08S01", "08001", "08003", "08006", "57P01", "server has gone away", "Lost connection",
    "terminating connection", "server closed the connection", "no connection to the server",
)  # fmt: skip
DUPLICATE_KEY = ("23505", "1062", "UNIQUE constraint", "Duplicate entry")

T = TypeVar("T")


def _text(exc: BaseException) -> str:
    return " ".join(str(a) for a in exc.args)


def is_retryable(exc: BaseException) -> bool:
    """The retry policy: may the same work succeed when run again from its start?"""
    text = _text(exc)
    return any(code in text for code in (*CONCURRENCY_FAILURES, *CONNECTION_LOST))


def is_duplicate_key(exc: BaseException) -> bool:
    text = _text(exc)
    return any(code in text for code in DUPLICATE_KEY)


def backoff(attempt: int) -> None:
    time.sleep(0.1 * attempt)


def with_retries(server: Server, work: Callable[[Any], T], attempts: int = MAX_ATTEMPTS) -> T:
    """Run work(cursor) in one transaction on `server` and commit it; retryable failures roll back and
    run the work again on a new connection; any other error propagates."""
    for attempt in range(1, attempts + 1):
        with connections.connect(server, autocommit=False) as conn:
            cursor = conn.cursor()
            try:
                result = work(cursor)
                conn.commit()
                return result
            except pyodbc.Error as exc:
                with contextlib.suppress(pyodbc.Error):
                    conn.rollback()  # a lost connection cannot roll back; its transaction is gone anyway
                if attempt < attempts and is_retryable(exc):
                    backoff(attempt)
                    continue
                raise
    raise AssertionError("unreachable")


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
    """What a person reads of an error: the driver's own message for database errors."""
    return connections.driver_message(exc) if isinstance(exc, pyodbc.Error) else str(exc)

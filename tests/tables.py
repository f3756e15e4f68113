"""Creating and filling test tables on registered servers, through the console's own connections."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal

from replication_admin.core import connections
from replication_admin.engine import dialects
from replication_admin.engine.dialects.sqlite import TIMESTAMP_FORMAT_PY
from replication_admin.engine.types import LogicalType
from replication_admin.models import Server


def execute(server: Server, sql: str, params: Sequence = ()) -> None:
    with connections.connect(server) as conn:
        conn.cursor().execute(sql, list(params))


def create_table(
    server: Server, table: str, columns: Sequence[tuple[str, LogicalType]], primary_key: Sequence[str]
) -> None:
    d = dialects.get(server.dialect)
    cols = [f"{d.quote(name)} {d.render_type(t)}{' NOT NULL' if name in primary_key else ''}" for name, t in columns]
    if primary_key:
        cols.append(f"PRIMARY KEY ({', '.join(d.quote(k) for k in primary_key)})")
    execute(server, f"CREATE TABLE {d.qualify(table)} ({', '.join(cols)})")


def _bind(server: Server, value):
    """Values as each dialect stores them (SQLite: the documented text formats).

    Timestamps go as text everywhere: pyodbc binds a datetime with no fraction digits through
    the MariaDB driver, and through any driver with fast_executemany, losing the microseconds."""
    if isinstance(value, datetime):
        return value.strftime(TIMESTAMP_FORMAT_PY)
    if dialects.get(server.dialect).text_timestamps:  # SQLite and its kind
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, Decimal):
            return str(value)
    return value


def insert_rows(server: Server, table: str, columns: Sequence[str], rows: Iterable[Sequence]) -> None:
    d = dialects.get(server.dialect)
    sql = (
        f"INSERT INTO {d.qualify(table)} ({', '.join(d.quote(c) for c in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    with connections.connect(server, autocommit=False) as conn:
        cur = conn.cursor()
        batch = [[_bind(server, v) for v in row] for row in rows]
        # fast_executemany rejects empty binary values, crashes the SQLite driver and sizes MariaDB
        # longtext buffers at 4 GB; it is only used for PostgreSQL.
        cur.fast_executemany = server.dialect == "postgresql" and not any(v == b"" for row in batch for v in row)
        if batch:
            cur.executemany(sql, batch)
        conn.commit()


def fetch_all(server: Server, sql: str, params: Sequence = ()) -> list:
    with connections.connect(server, readonly=True) as conn:
        return [tuple(r) for r in conn.cursor().execute(sql, list(params)).fetchall()]

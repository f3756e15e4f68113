"""The type matrix: one column per logical type a user meets, values at the edges of each, and how to
read them back from any dialect as comparable Python values."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from replication_admin.models import Server
from tests.tables import create_table, execute, fetch_all

TYPED_COLUMNS: list[tuple[str, LogicalType]] = [
    ("id", LogicalType("integer")),
    ("c_smallint", LogicalType("smallint")),
    ("c_integer", LogicalType("integer")),
    ("c_bigint", LogicalType("bigint")),
    ("c_numeric", LogicalType("numeric", precision=20, scale=6)),
    ("c_real", LogicalType("real")),
    ("c_double", LogicalType("double")),
    ("c_boolean", LogicalType("boolean")),
    ("c_varchar", LogicalType("varchar", length=40)),
    ("c_text", LogicalType("long_varchar")),
    ("c_varbinary", LogicalType("varbinary", length=16)),
    ("c_blob", LogicalType("long_varbinary")),
    ("c_date", LogicalType("date")),
    ("c_time", LogicalType("time")),
    ("c_timestamp", LogicalType("timestamp")),
    ("c_timestamptz", LogicalType("timestamptz")),
    ("c_json", LogicalType("json")),
    ("c_uuid", LogicalType("uuid")),
]
NAMES = [name for name, _ in TYPED_COLUMNS]
UTC = dt.UTC

# Values each type must carry exactly: NULL everywhere, the small edge, the large edge.
EMPTY: tuple = (1, *([None] * (len(TYPED_COLUMNS) - 1)))
LOW: tuple = (
    2, -32768, -2147483648, -9223372036854775808, Decimal("-99999999999999.999999"), -1.5, -2.2250738585072014e-308, False,
    "", "", b"", b"", dt.date(1970, 1, 1), dt.time(0, 0), dt.datetime(1970, 1, 1),
    dt.datetime(2024, 1, 1, tzinfo=UTC), {"a": [1, 2.5, "x"], "b": None}, "00000000-0000-0000-0000-000000000000",
)  # fmt: skip
HIGH: tuple = (
    3, 32767, 2147483647, 9223372036854775807, Decimal("99999999999999.999999"), 1e10, 1.0000000000000002,
    True, "it's \"q\" \\ ✓ 表😀", "表😀 " * 300 + "\n\t end", b"\x00\xff", bytes(range(256)) * 40,
    dt.date(9999, 12, 31), dt.time(23, 59, 59, 999999), dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 6, 30, 22, 30, 0, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    "just a string", "f47ac10b-58cc-4372-a567-0e02b2c3d479",
)  # fmt: skip
ROWS = [EMPTY, LOW, HIGH]
# 1 MB of text and of bytes (the snapshot matrix carries it through Spark and the change path).
BIG: tuple = tuple(
    v
    if name not in ("c_text", "c_blob")
    else ("0123456789abcdef" * 65536 + "表😀" if name == "c_text" else bytes(range(256)) * 4096)
    for name, v in zip(NAMES, (4, *HIGH[1:]), strict=True)
)


def _text_of(value: Any, logical: LogicalType, dialect: str) -> Any:
    """A Python value in the form an INSERT on `dialect` takes it."""
    if value is None:
        return None
    kind = logical.kind
    if kind == "json":
        return json.dumps(value)
    if kind == "timestamptz":
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + ("+00:00" if dialect == "postgresql" else "")
    if kind == "timestamp":
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if kind in {"date", "time"}:
        return value.isoformat() if kind == "date" else value.strftime("%H:%M:%S.%f")
    if kind == "numeric" and dialect == "sqlite":
        return str(value)
    if kind == "boolean" and not dialects.get(dialect).has_boolean:
        return int(value)
    return value


def create_typed(server: Server, table: str = "typed") -> None:
    create_table(server, table, TYPED_COLUMNS, ["id"])


def insert_typed(server: Server, rows: Sequence[tuple], table: str = "typed") -> None:
    d = dialects.get(server.dialect)
    sql = (
        f"INSERT INTO {d.quote(table)} ({', '.join(d.quote(n) for n in NAMES)}) "
        f"VALUES ({', '.join('?' for _ in NAMES)})"
    )
    for row in rows:
        execute(server, sql, [_text_of(v, t, server.dialect) for v, (_, t) in zip(row, TYPED_COLUMNS, strict=True)])


def _float32(value: Any) -> float:
    return struct.unpack("f", struct.pack("f", float(value)))[0]


def _bool(value: Any) -> bool:
    return str(value).strip().lower() in {"1", "t", "true"}


def _datetime(value: Any) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        value = dt.datetime.fromisoformat(str(value).strip())
    # Instants compare in UTC; a dialect without a zone type stores UTC.
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def _time(value: Any) -> str:
    text = value.strftime("%H:%M:%S.%f") if isinstance(value, dt.time) else str(value)
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction.ljust(6, '0')[:6]}"


def _date(value: Any) -> str:
    return value.isoformat()[:10] if isinstance(value, dt.date) else str(value)[:10]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


NORMALISE: dict[str, Callable[[Any], Any]] = {
    "smallint": int, "integer": int, "bigint": int, "numeric": lambda v: Decimal(str(v)), "real": _float32,
    "double": float, "boolean": _bool, "varchar": str, "long_varchar": str, "varbinary": bytes,
    "long_varbinary": bytes, "date": _date, "time": _time, "timestamp": _datetime, "timestamptz": _datetime,
    "json": _json, "uuid": lambda v: str(v).lower(),
}  # fmt: skip


def normalised(row: Sequence[Any]) -> tuple:
    return tuple(None if v is None else NORMALISE[t.kind](v) for v, (_, t) in zip(row, TYPED_COLUMNS, strict=True))


def expected(rows: Sequence[tuple]) -> dict[int, tuple]:
    out = {}
    for row in rows:
        values = [
            json.dumps(v) if t.kind == "json" and v is not None else v
            for v, (_, t) in zip(row, TYPED_COLUMNS, strict=True)
        ]
        out[row[0]] = normalised(values)
    return out


TEXT_CAST = {"postgresql": "text", "mysql": "char", "sqlite": "text"}


def stored(server: Server, table: str = "typed") -> dict[int, tuple]:
    """The rows as the database holds them (SQLite's ODBC driver reads the largest double as inf and
    times without their fraction, so SQLite files are read directly)."""
    d = dialects.get(server.dialect)
    # ODBC drivers read times without their fraction: times are read as text.
    items = [
        f"CAST({d.quote(n)} AS {TEXT_CAST[server.dialect]})" if t.kind == "time" else d.quote(n)
        for n, t in TYPED_COLUMNS
    ]
    select = f"SELECT {', '.join(items)} FROM {d.quote(table)}"
    if server.dialect == "sqlite":
        with contextlib.closing(sqlite3.connect(server.database)) as conn:
            got = conn.execute(select).fetchall()
    else:
        got = fetch_all(server, select)
    return {int(r[0]): normalised(r) for r in got}


def differences(want: dict[int, tuple], got: dict[int, tuple]) -> list[str]:
    """Each differing value as 'key column: expected != stored' (empty when equal)."""
    out = [f"keys {sorted(want)} != {sorted(got)}"] if sorted(want) != sorted(got) else []
    for key in sorted(set(want) & set(got)):
        for name, a, b in zip(NAMES, want[key], got[key], strict=True):
            if a != b:
                out.append(f"{key} {name}: {str(a)[:60]!r} != {str(b)[:60]!r}")
    return out

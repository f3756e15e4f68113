"""Values read through the control plane (pyodbc), made ready to bind on a destination.

The small-increment path applies log windows without Spark; it must store exactly what the Spark
path stores (jobs.snapshot_refresh.to_destination): timestamps as 'YYYY-MM-DD HH:MM:SS.ffffff'
(SQLite keeps that text; PostgreSQL and MariaDB parse it, which also avoids pyodbc binding datetimes
without their microseconds), decimals as their exact text, booleans as 0/1 where there is no boolean.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from replication_admin.engine import dialects
from replication_admin.engine.compare import family_of
from replication_admin.engine.types import LogicalType

TIMESTAMP_TEXT = "%Y-%m-%d %H:%M:%S.%f"


def _timestamp_text(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime(TIMESTAMP_TEXT)
    text = str(value).strip()
    try:
        return dt.datetime.fromisoformat(text).strftime(TIMESTAMP_TEXT)
    except ValueError:
        return text


def _time_text(value: object) -> str:
    text = value.isoformat() if isinstance(value, dt.time) else str(value)
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction[:6].ljust(6, '0')}"


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "t", "true", "y", "yes"}
    return bool(value)


def bind_value(value: Any, logical: LogicalType, dest_dialect: str) -> Any:
    """`value` as read from any source, in the form the destination stores it."""
    if value is None:
        return None
    family = family_of(logical)
    if family == "timestamp":
        return _timestamp_text(value)
    if family == "date":
        return value.isoformat() if isinstance(value, dt.date) else str(value).strip()[:10]
    if family == "time":
        return _time_text(value)
    if family == "decimal":
        return str(value) if not isinstance(value, float) else repr(value)
    if family == "boolean":
        truth = _truthy(value)
        return truth if dialects.get(dest_dialect).has_boolean else int(truth)
    if family == "integer":
        return int(value)
    if family == "float":
        return float(value)
    if family == "binary":
        return bytes(value) if not isinstance(value, str) else value.encode()
    return value if isinstance(value, str) else str(value)

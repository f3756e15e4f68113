"""Values read through the control plane (pyodbc), made ready to bind on a destination.

The small-increment path applies log windows without Spark; it must store exactly what the Spark
path stores (jobs.snapshot_refresh.to_destination): timestamps as 'YYYY-MM-DD HH:MM:SS.ffffff'
(SQLite keeps that text; PostgreSQL and MariaDB parse it, which also avoids pyodbc binding datetimes
without their microseconds), decimals as their exact text, booleans as 0/1 where there is no boolean.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from replication_admin.engine import dialects
from replication_admin.engine.compare import family_of
from replication_admin.engine.types import LogicalType

TIMESTAMP_TEXT = "%Y-%m-%d %H:%M:%S.%f"


def _timestamp_text(value: object) -> str:
    """An instant with a zone (timestamptz) as its UTC time: sessions and SQLite's text both hold UTC."""
    if not isinstance(value, dt.datetime):
        text = str(value).strip()
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError:
            return text
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    return value.strftime(TIMESTAMP_TEXT)


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _time_text(value: object) -> str:
    text = value.isoformat() if isinstance(value, dt.time) else str(value)
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction[:6].ljust(6, '0')}"


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "t", "true", "y", "yes"}
    return bool(value)


def _date_text(value: object) -> str:
    return value.isoformat() if isinstance(value, dt.date) else str(value).strip()[:10]


def _decimal_text(value: object) -> str:
    return str(value) if not isinstance(value, float) else repr(value)


def _bytes(value: object) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)  # type: ignore[call-overload]


def _text(value: object) -> str:
    return value if isinstance(value, str) else str(value)


def binder(logical: LogicalType, dest_dialect: str) -> Callable[[Any], Any]:
    """The function that puts a non-NULL value of `logical`'s type in the form the destination stores it
    (worked out once per column: applying a batch calls it for every value)."""
    family = family_of(logical)
    if family == "boolean":
        if dialects.get(dest_dialect).has_boolean:
            return _truthy
        return lambda value: int(_truthy(value))
    simple: dict[str, Callable[[Any], Any]] = {
        "timestamp": _timestamp_text,
        "date": _date_text,
        "time": _time_text,
        "decimal": _decimal_text,
        "integer": int,
        "float": float,
        "binary": _bytes,
        "json": _json_text,
    }
    return simple.get(family, _text)


def bind_value(value: Any, logical: LogicalType, dest_dialect: str) -> Any:
    """`value` as read from any source, in the form the destination stores it."""
    if value is None:
        return None
    return binder(logical, dest_dialect)(value)


def canonical_value(value: object, family: str) -> object:
    """One value of a column of `family` (engine.compare.family_of) as a comparison sees it, whichever dialect's image
    or driver it came from: numbers as decimals, truth values as booleans, times as UTC text (ordered as the times)."""
    if value is None:
        return None
    if family in ("integer", "decimal", "float"):
        try:
            return Decimal(str(int(value) if isinstance(value, bool) else value)).normalize()
        except InvalidOperation:
            return str(value)
    if family == "boolean":
        return str(value).lower() in ("1", "t", "true")
    if family == "timestamp":
        return _timestamp_text(value)
    if family == "date":
        return str(value)[:10]
    if family == "binary":
        return str(value.get("hex", "") if isinstance(value, dict) else value).lower().removeprefix("\\x")
    if family == "json":
        try:
            return json.dumps(json.loads(value) if isinstance(value, str) else value, sort_keys=True)
        except ValueError:
            return str(value)
    return str(value)


def same_value(a: object, b: object, logical: LogicalType) -> bool:
    """Whether two versions hold the same value of a column (10.50 and 10.5, 'T' or ' ' in a time, true and 1)."""
    family = family_of(logical)
    return canonical_value(a, family) == canonical_value(b, family)

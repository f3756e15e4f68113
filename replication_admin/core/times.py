"""Timestamps between the catalog (aware, UTC) and the replicated databases (naive UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


@overload
def aware(value: datetime | str) -> datetime: ...
@overload
def aware(value: None) -> None: ...
def aware(value: datetime | str | None) -> datetime | None:
    """A database's timestamp (naive means UTC; drivers may hand back text) as an aware datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip())
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def naive_utc(value: datetime) -> datetime:
    """The naive UTC form the replicated databases store."""
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def duration_text(seconds: float | None) -> str:
    """A length of time for people ("45 s", "3 min", "2 h 5 min", "1 d 4 h")."""
    if seconds is None:
        return ""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def iso(at: datetime | None) -> str | None:
    """`at` in UTC as ISO 8601, for the status API and the pages' data (None stays None)."""
    return at.astimezone(UTC).isoformat() if at else None

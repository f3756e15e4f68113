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

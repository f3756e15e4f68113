"""Virtuoso's scheduler rule (pure): which SYS_SCHEDULED_EVENT rows are due now.

An event runs when SE_DISABLED = 0, SE_START <= now, SE_INTERVAL > 0 and it has never completed or
its last completion is at least SE_INTERVAL minutes ago; due events run in SE_LAST_COMPLETED order
(never-completed first). An event that missed several intervals runs once, since its next time is
counted from the completion. A failed run leaves SE_LAST_COMPLETED alone, so it is tried again at
the next round.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class EventTimes:
    name: str
    start: datetime
    interval: int  # minutes
    last_completed: datetime | None
    disabled: int


def is_due(event: EventTimes, now: datetime) -> bool:
    if event.disabled or event.interval <= 0 or event.start > now:
        return False
    return event.last_completed is None or event.last_completed + timedelta(minutes=event.interval) <= now


def due_events(events: Iterable[EventTimes], now: datetime) -> list[EventTimes]:
    due = [e for e in events if is_due(e, now)]
    return sorted(due, key=lambda e: (e.last_completed is not None, e.last_completed or e.start, e.name))


def next_run(event: EventTimes, now: datetime) -> datetime | None:
    """When the event will next be due (now, if overdue); None when it never runs."""
    if event.disabled or event.interval <= 0:
        return None
    if event.last_completed is None:
        return max(event.start, now)
    return max(event.last_completed + timedelta(minutes=event.interval), event.start)

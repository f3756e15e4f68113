"""The scheduler's rule (pure): when a SYS_SCHEDULED_EVENT runs next, and whether it is due now.

An event's runs are anchored on its slots: SE_START + k · SE_INTERVAL minutes (k = 0, 1, 2 …). Each run
is handed out for one scheduled time, recorded in SE_LAST_SLOT when it is handed out (so two scheduler
ticks, on one host or on several, never hand out the same time twice), and SE_LAST_STARTED records when
it really began. An event is due when a slot has come that is later than the last one handed out:

- it runs for the LATEST slot that has come, so an event that missed several slots (after downtime, or
  while its previous run was still going) runs once, not once per missed slot (Virtuoso's rule);
- how long a run takes does not move the next slot: a run that started at 08:45:00 and took 50 s is
  followed by one at 08:46:00, not at 08:46:50 + the interval;
- a failed run (SE_LAST_ERROR set) is tried again a minute after it started when no slot comes sooner
  (Virtuoso retries an event that did not complete at every scheduler wake-up, SchedulerInterval = 1);
- disabled events, events without an interval and events whose SE_START has not come never run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

# A failed run is tried again this long after it started, unless a slot comes first.
RETRY_AFTER = timedelta(minutes=1)


@dataclass(frozen=True)
class EventTimes:
    name: str
    start: datetime
    interval: int  # minutes
    last_completed: datetime | None
    disabled: int
    last_slot: datetime | None = None  # the time the last run was handed out for
    last_started: datetime | None = None  # when the last run began
    failed: bool = False  # the last run failed (SE_LAST_ERROR is set)


def _step(event: EventTimes) -> timedelta:
    return timedelta(minutes=event.interval)


def slot_at(event: EventTimes, now: datetime) -> datetime | None:
    """The latest slot that has come at `now` (None before SE_START or without an interval)."""
    if event.interval <= 0 or event.start > now:
        return None
    step = _step(event)
    return event.start + ((now - event.start) // step) * step


def slot_after(event: EventTimes, moment: datetime) -> datetime:
    """The first slot strictly after `moment` (SE_START when `moment` is before it)."""
    if moment < event.start:
        return event.start
    step = _step(event)
    return event.start + ((moment - event.start) // step + 1) * step


def _retry_at(event: EventTimes) -> datetime | None:
    if not event.failed or event.last_started is None:
        return None
    retry = event.last_started + RETRY_AFTER
    return retry if event.last_slot is None or retry > event.last_slot else None


def due_at(event: EventTimes, now: datetime) -> datetime | None:
    """The scheduled time a run handed out now is for (a slot, or a failed run's retry); None when the
    event is not due. Of several missed slots only the latest is returned."""
    if event.disabled or event.interval <= 0:
        return None
    slot = slot_at(event, now)
    if slot is not None and (event.last_slot is None or slot > event.last_slot):
        return slot
    retry = _retry_at(event)
    if retry is not None and retry <= now and event.start <= now:
        return retry
    return None


def is_due(event: EventTimes, now: datetime) -> bool:
    return due_at(event, now) is not None


def due_events(events: Iterable[EventTimes], now: datetime) -> list[tuple[EventTimes, datetime]]:
    """The events due now with the time each run is for, the longest waiting first."""
    due = [(e, at) for e in events if (at := due_at(e, now)) is not None]
    return sorted(due, key=lambda pair: (pair[1], pair[0].name))


def due_from(event: EventTimes) -> datetime | None:
    """The first moment the event is due (its next slot after the last one handed out, or its failed run's
    retry); None when it never runs. `due_at(event, now)` is a time exactly when `now >= due_from(event)`, so
    the catalog keeps this in SE_NEXT_RUN and a scheduler tick reads only the rows whose time has come."""
    if event.disabled or event.interval <= 0:
        return None
    upcoming = slot_after(event, event.last_slot) if event.last_slot is not None else event.start
    retry = _retry_at(event)
    if retry is not None:
        upcoming = min(upcoming, max(retry, event.start))
    return upcoming


def next_run(event: EventTimes, now: datetime) -> datetime | None:
    """When the event's next run is handed out: `now` when it is due (overdue), else its next slot or
    retry; None when it never runs."""
    upcoming = due_from(event)
    return None if upcoming is None else max(upcoming, now)


def seconds_to_next(events: Iterable[EventTimes], now: datetime, longest: float) -> float:
    """How long a scheduler tick may sleep: until the earliest next run, at most `longest` seconds."""
    wait = longest
    for event in events:
        at = next_run(event, now)
        if at is not None:
            wait = min(wait, max((at - now).total_seconds(), 0.0))
    return wait

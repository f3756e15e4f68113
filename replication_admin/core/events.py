"""Handing a SYS_SCHEDULED_EVENT's run to a worker for one scheduled time: the scheduler's ticks and a person's
"run now" claim the time the same way, so two of them never hand out the same time twice.

A tick reads only the events whose time has come (SE_NEXT_RUN <= now, an indexed column every write keeps:
models/catalog.py), in batches of SCHEDULER_BATCH: on PostgreSQL with `SELECT … FOR UPDATE SKIP LOCKED`, so
ticks on several hosts take different rows instead of waiting on each other; on SQLite (one machine) in a plain
write transaction. Each claim moves SE_LAST_SLOT (compare-and-set, as a person's "run now") and SE_NEXT_RUN in
the same UPDATE, so the claimed row leaves the due set. How long the scheduler may sleep is one MIN(SE_NEXT_RUN)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min
from django_q.tasks import async_task

from replication_admin.engine.schedule import EventTimes, due_at, due_from
from replication_admin.models import ScheduledEvent


def claim(event: EventTimes, at: datetime) -> bool:
    """Take the scheduled time `at` for one run of the event; only one tick (or person), on any host, gets it."""
    rows = ScheduledEvent.objects.filter(name=event.name)
    rows = rows.filter(last_slot__isnull=True) if event.last_slot is None else rows.filter(last_slot=event.last_slot)
    return bool(rows.update(last_slot=at, next_run=due_from(dataclasses.replace(event, last_slot=at))))


def _due_rows(now: datetime, limit: int) -> list[ScheduledEvent]:
    rows = ScheduledEvent.objects.filter(next_run__lte=now).order_by("next_run", "name")
    if connection.features.has_select_for_update_skip_locked:
        rows = rows.select_for_update(skip_locked=True)
    return list(rows[:limit])


def claim_due(now: datetime, batch: int | None = None) -> list[tuple[EventTimes, datetime]]:
    """Claim every event due at `now`, a batch at a time (each batch one transaction), the longest waiting first;
    returns each claimed event with the time its run is for. A row whose SE_NEXT_RUN was stale (written by hand) is
    put right and left alone."""
    limit = max(1, batch or int(settings.SCHEDULER_BATCH))
    claimed: list[tuple[EventTimes, datetime]] = []
    seen: set[str] = set()
    while True:
        with transaction.atomic():
            rows = _due_rows(now, limit)
            for row in rows:
                times = row.times()
                at = due_at(times, now)
                if at is None:
                    ScheduledEvent.objects.filter(pk=row.pk).update(next_run=due_from(times))
                elif claim(times, at):
                    claimed.append((times, at))
        fresh = {row.name for row in rows} - seen
        seen |= fresh
        if len(rows) < limit or not fresh:  # the last batch, or only rows another claimer is moving
            return claimed


def seconds_to_next(now: datetime, longest: float) -> float:
    """How long a scheduler tick may sleep: until the earliest SE_NEXT_RUN (one MIN query), at most `longest`."""
    earliest: datetime | None = ScheduledEvent.objects.aggregate(at=Min("next_run"))["at"]
    if earliest is None:
        return longest
    return min(longest, max((earliest - now).total_seconds(), 0.0))


def hand_out(name: str, at: datetime) -> None:
    """Give the run claimed for `at` to a worker (run here in sync mode)."""
    async_task(
        "replication_admin.tasks.run_event", name, at, task_name=f"event-{name}"[:100], group="scheduler",
        sync=settings.JOBS_SYNC,
    )  # fmt: skip

"""Handing a SYS_SCHEDULED_EVENT's run to a worker for one scheduled time: the scheduler's ticks and a person's
"run now" claim the time the same way, so two of them never hand out the same time twice."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django_q.tasks import async_task

from replication_admin.engine.schedule import EventTimes
from replication_admin.models import ScheduledEvent


def claim(event: EventTimes, at: datetime) -> bool:
    """Take the scheduled time `at` for one run of the event; only one tick (or person), on any host, gets it."""
    rows = ScheduledEvent.objects.filter(name=event.name)
    rows = rows.filter(last_slot__isnull=True) if event.last_slot is None else rows.filter(last_slot=event.last_slot)
    return bool(rows.update(last_slot=at))


def hand_out(name: str, at: datetime) -> None:
    """Give the run claimed for `at` to a worker (run here in sync mode)."""
    async_task(
        "replication_admin.tasks.run_event", name, at, task_name=f"event-{name}"[:100], group="scheduler",
        sync=settings.JOBS_SYNC,
    )  # fmt: skip

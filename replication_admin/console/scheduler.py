"""The scheduler page: every SYS_SCHEDULED_EVENT with its last start, completion and error, whether it is
running now (its item lock is held by a live holder) and when it runs next (engine/schedule.py)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from replication_admin.core.web import SortFields, listing
from replication_admin.engine.schedule import due_at, next_run
from replication_admin.models import ReplLock, ScheduledEvent

EVENT_SORTS: dict[str, SortFields] = {
    "name": "name",
    "start": ("start", "name"),
    "interval": ("interval", "name"),
    "started": ("last_started", "name"),
    "completed": ("last_completed", "name"),
    "state": ("disabled", "name"),
    "server": ("server", "name"),
}
FAILING = Q(last_error__isnull=False) & ~Q(last_error="")
EVENT_STATES = {"enabled": Q(disabled=0), "disabled": Q(disabled=1), "failing": FAILING}


@require_GET
def scheduler(request: HttpRequest) -> HttpResponse:
    events = ScheduledEvent.objects.all()
    state = request.GET.get("state", "")
    if state in EVENT_STATES:
        events = events.filter(EVENT_STATES[state])
    else:
        state = ""
    events_listing = listing(request, events, sorts=EVENT_SORTS, default="name", search=("name", "sql", "server"))
    shown = list(events_listing.page)
    now = timezone.now()
    # A run holds the item lock event:<name>, renewed by its worker's heartbeat: alive means running now.
    locks = ReplLock.objects.filter(name__in=[f"event:{e.name}" for e in shown], expires_at__gt=now)
    running = {name.removeprefix("event:") for name in locks.values_list("name", flat=True)}
    events_listing.page.object_list = [_row(e, e.name in running, now) for e in shown]
    context = {
        "events": events_listing,
        "state": state,
        "states": list(EVENT_STATES),
        "filtered": bool(state or events_listing.q),
    }
    return render(request, "replication_admin/console/scheduler.html", context)


def _row(event: ScheduledEvent, running: bool, now: datetime) -> dict:
    times = event.times()
    # Due now: handed to a worker at the next tick (overdue, or its time has just come).
    return {"event": event, "running": running, "next_run": next_run(times, now), "due_for": due_at(times, now)}

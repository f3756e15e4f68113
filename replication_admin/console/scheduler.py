"""The scheduler page: every SYS_SCHEDULED_EVENT with its last start, completion and error, whether it is
running now (its item lock is held by a live holder) and when it runs next (engine/schedule.py); per event,
run now, pause / resume and its interval."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from replication_admin.console import actions as console_actions
from replication_admin.core.audit import Actor
from replication_admin.core.permissions import OPERATE
from replication_admin.core.web import SortFields, listing, requires
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
EVENT_STATES = {"enabled": Q(disabled=0), "paused": Q(disabled=1), "failing": FAILING}


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


def _event_action(request: HttpRequest, name: str, act: Callable[[Actor, ScheduledEvent], str]) -> HttpResponse:
    """Run a scheduler action as the signed-in user; its outcome in one line, back on the scheduler page (with
    the filters, sort and page it was on)."""
    event = get_object_or_404(ScheduledEvent, name=name)
    try:
        messages.success(request, act(Actor.from_request(request), event))
    except console_actions.EventError as exc:
        messages.error(request, str(exc))
    back = request.POST.get("next", "")
    return redirect(back if back.startswith("/scheduler/") and "//" not in back else "scheduler")


@require_POST
@requires(OPERATE, "event.run_now", lambda request, name: name)
def event_run_now(request: HttpRequest, name: str) -> HttpResponse:
    return _event_action(request, name, console_actions.do_run_event_now)


@require_POST
@requires(OPERATE, "event.pause", lambda request, name: name)
def event_pause(request: HttpRequest, name: str) -> HttpResponse:
    return _event_action(request, name, lambda actor, event: console_actions.do_pause_event(actor, event, True))


@require_POST
@requires(OPERATE, "event.resume", lambda request, name: name)
def event_resume(request: HttpRequest, name: str) -> HttpResponse:
    return _event_action(request, name, lambda actor, event: console_actions.do_pause_event(actor, event, False))


@require_POST
@requires(OPERATE, "event.interval", lambda request, name: name)
def event_interval(request: HttpRequest, name: str) -> HttpResponse:
    minutes = request.POST.get("interval", "")
    return _event_action(
        request, name, lambda actor, event: console_actions.do_set_event_interval(actor, event, minutes)
    )

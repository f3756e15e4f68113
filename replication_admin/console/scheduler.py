"""Read-only views over catalog tables that have no pages of their own yet."""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from replication_admin.core.web import SortFields, listing
from replication_admin.models import ScheduledEvent

EVENT_SORTS: dict[str, SortFields] = {
    "name": "name",
    "start": ("start", "name"),
    "interval": ("interval", "name"),
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
    context = {
        "events": events_listing,
        "state": state,
        "states": list(EVENT_STATES),
        "filtered": bool(state or events_listing.q),
    }
    return render(request, "replication_admin/console/scheduler.html", context)

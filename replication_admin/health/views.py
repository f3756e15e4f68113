"""The Health page: every process and service the product depends on, ok, down or unknown with its cause."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from replication_admin.core import heartbeats
from replication_admin.core.heartbeats import Kind
from replication_admin.health.selectors import BADGES, DOWN, components


@require_GET
def health_page(request: HttpRequest) -> HttpResponse:
    rows, uncovered = components(timezone.now())
    for c in rows:
        c["badge"] = BADGES[c["state"]]
    context = {
        "components": rows,
        "uncovered": uncovered,
        "down": sum(c["state"] == DOWN for c in rows),
        "stale_seconds": heartbeats.stale_seconds(Kind.WORKER),
        "scheduler_stale_seconds": heartbeats.stale_seconds(Kind.SCHEDULER),
    }
    return render(request, "replication_admin/health/health.html", context)

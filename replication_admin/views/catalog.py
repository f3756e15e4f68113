"""Read-only views over catalog tables that have no pages of their own yet."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from replication_admin.models import ScheduledEvent


@require_GET
def scheduler(request: HttpRequest) -> HttpResponse:
    return render(request, "replication_admin/scheduler.html", {"events": ScheduledEvent.objects.all()})

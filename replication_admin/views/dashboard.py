from __future__ import annotations

import json
from datetime import timedelta

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from replication_admin.models import (
    Alert,
    AuditEntry,
    JobRun,
    ReplAccount,
    ScheduledEvent,
    Server,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.views.helpers import is_htmx, render_page_or_partial, stacked_bars

OUTCOME_COLOURS = {"succeeded": "#2e7d32", "failed": "#c62828", "cancelled": "#757575"}


def job_outcomes_figure(days: int = 14) -> dict:
    """Plotly figure (as a dict) of finished jobs per day by outcome."""
    since = timezone.now() - timedelta(days=days)
    rows = (
        JobRun.objects.filter(finished_at__gte=since)
        .annotate(day=TruncDate("finished_at"))
        .values("day", "state")
        .annotate(n=Count("id"))
        .order_by("day")
    )
    series: dict[str, dict[str, int]] = {}
    for row in rows:
        series.setdefault(row["state"], {})[row["day"].isoformat()] = row["n"]
    traces = [
        {
            "type": "bar",
            "name": state,
            "x": list(points),
            "y": list(points.values()),
            "marker": {"color": OUTCOME_COLOURS.get(state, "#1565c0")},
        }
        for state, points in sorted(series.items())
    ]
    return stacked_bars(traces)


def overview_context() -> dict:
    day_ago = timezone.now() - timedelta(days=1)
    servers = list(Server.objects.all())
    context = {
        "servers": servers,
        "servers_failing": [s for s in servers if s.last_check_ok is False],
        "counts": {
            "snapshots": Snapshot.objects.count(),
            "publications": SnapshotPublication.objects.count() + ReplAccount.objects.count(),
            "subscriptions": SnapshotSubscription.objects.count(),
            "events": ScheduledEvent.objects.filter(disabled=0).count(),
        },
        "running": JobRun.objects.filter(state__in=[JobRun.State.QUEUED, JobRun.State.RUNNING]).count(),
        "failed_recent": JobRun.objects.filter(state=JobRun.State.FAILED, finished_at__gte=day_ago).count(),
        "recent_jobs": JobRun.objects.all()[:10],
        "recent_audit": AuditEntry.objects.all()[:8],
        "figure": json.dumps(job_outcomes_figure()),
        "alerts": list(Alert.objects.filter(acknowledged_at__isnull=True)[:20]),
    }
    return context


@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    return render_page_or_partial(request, "replication_admin/dashboard.html", "overview", overview_context())


@require_POST
def alert_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    """Acknowledge an alert; htmx gets the refreshed overview back, a plain form the dashboard."""
    from replication_admin.actions.alerts import do_acknowledge_alert
    from replication_admin.actions.audit import Actor, PermissionDenied
    from replication_admin.views.helpers import denied

    alert = get_object_or_404(Alert, pk=pk)
    try:
        do_acknowledge_alert(Actor.from_request(request), alert)
    except PermissionDenied as exc:
        return denied(request, exc)
    if is_htmx(request):
        return render(request, "replication_admin/dashboard.html#overview", overview_context())
    return redirect("dashboard")

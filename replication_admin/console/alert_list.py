"""The Alerts page: every alert, open, acknowledged or resolved, with filters by state and kind; operators
acknowledge open ones here as on the dashboard."""

from __future__ import annotations

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from replication_admin.core.alerts import OPEN
from replication_admin.core.web import SortFields, listing
from replication_admin.models import Alert

ALERT_SORTS: dict[str, SortFields] = {
    "last": ("last_seen_at", "id"),
    "created": ("created_at", "id"),
    "kind": ("kind", "-last_seen_at"),
    "target": ("target", "-last_seen_at"),
    "count": ("count", "-last_seen_at"),
}
# The states an alert is in, as the page's tabs name them; "all" is every alert.
STATES: dict[str, Q] = {
    "open": OPEN,
    "acknowledged": Q(acknowledged_at__isnull=False, resolved_at__isnull=True),
    "resolved": Q(resolved_at__isnull=False),
    "all": Q(),
}


def state_of(alert: Alert) -> str:
    if alert.resolved_at is not None:
        return "resolved"
    return "acknowledged" if alert.acknowledged_at is not None else "open"


@require_GET
def alert_list(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "open")
    if state not in STATES:
        state = "open"
    kind = request.GET.get("kind", "")
    if kind not in Alert.Kind.values:
        kind = ""
    alerts = Alert.objects.filter(STATES[state])
    if kind:
        alerts = alerts.filter(kind=kind)
    counted = Alert.objects.filter(kind=kind) if kind else Alert.objects.all()
    counts = counted.aggregate(**{name: Count("id", filter=q) for name, q in STATES.items()})
    alerts_listing = listing(request, alerts, sorts=ALERT_SORTS, default="-last", search=("target", "message"))
    context = {
        "page": alerts_listing.page,
        "alerts": alerts_listing,
        "rows": [(alert, state_of(alert)) for alert in alerts_listing.page],
        "state": state,
        "kind": kind,
        "kinds": Alert.Kind.choices,
        "states": [(name, counts[name]) for name in STATES],
        "filtered": bool(kind or alerts_listing.q),
    }
    return render(request, "replication_admin/console/alerts.html", context)

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from replication_admin.core.audit import MACHINE_VIAS, PEOPLE_VIAS
from replication_admin.core.web import SortFields, listing
from replication_admin.models import AuditEntry

AUDIT_SORTS: dict[str, SortFields] = {
    "at": "at",
    "user": ("username", "-at"),
    "via": ("via", "-at"),
    "action": ("action", "-at"),
    "target": ("target", "-at"),
    "outcome": ("outcome", "-at"),
}


# The origins the page filters by: people's actions (the default), everything, or one origin.
ORIGINS = ("people", "all", *PEOPLE_VIAS, *MACHINE_VIAS)


def machine_summary(since_hours: int = 24) -> dict[str, dict[str, int]]:
    """Per machine origin, its rows of the last `since_hours` hours: how many, and how many were not ok."""
    since = timezone.now() - timedelta(hours=since_hours)
    rows = (
        AuditEntry.objects.filter(at__gte=since, via__in=MACHINE_VIAS)
        .order_by()
        .values("via")
        .annotate(n=Count("id"), failed=Count("id", filter=Q(outcome=AuditEntry.Outcome.ERROR)))
    )
    return {r["via"]: {"n": r["n"], "failed": r["failed"]} for r in rows}


@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    entries = AuditEntry.objects.defer("user", "remote_addr")
    origin = request.GET.get("via", "people")
    if origin not in ORIGINS:
        origin = "people"
    if origin == "people":
        entries = entries.exclude(via__in=MACHINE_VIAS)
    elif origin != "all":
        entries = entries.filter(via=origin)
    who = request.GET.get("user", "").strip()
    action = request.GET.get("action", "").strip()
    outcome = request.GET.get("outcome", "").strip()
    if who:
        entries = entries.filter(username__icontains=who)
    if action:
        entries = entries.filter(action__startswith=action)
    if outcome in AuditEntry.Outcome.values:
        entries = entries.filter(outcome=outcome)
    entries_listing = listing(
        request, entries, sorts=AUDIT_SORTS, default="-at", search=("action", "target", "username")
    )
    context = {
        "page": entries_listing.page,
        "entries": entries_listing,
        "filters": {"user": who, "action": action, "outcome": outcome, "via": origin},
        "filtered": bool(who or action or outcome or entries_listing.q or origin != "people"),
        "outcomes": AuditEntry.Outcome.values,
        "origins": ORIGINS,
        "machine_summary": machine_summary() if origin == "people" else {},
    }
    return render(request, "replication_admin/console/audit.html", context)

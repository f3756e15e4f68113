from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

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


@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    entries = AuditEntry.objects.defer("user", "remote_addr")
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
        "filters": {"user": who, "action": action, "outcome": outcome},
        "filtered": bool(who or action or outcome or entries_listing.q),
        "outcomes": AuditEntry.Outcome.values,
    }
    return render(request, "replication_admin/console/audit.html", context)

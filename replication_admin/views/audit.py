from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from replication_admin.models import AuditEntry
from replication_admin.views.helpers import paginate


@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    entries = AuditEntry.objects.all()
    who = request.GET.get("user", "").strip()
    action = request.GET.get("action", "").strip()
    outcome = request.GET.get("outcome", "").strip()
    if who:
        entries = entries.filter(username__icontains=who)
    if action:
        entries = entries.filter(action__startswith=action)
    if outcome in AuditEntry.Outcome.values:
        entries = entries.filter(outcome=outcome)
    context = {
        "page": paginate(request, entries),
        "filters": {"user": who, "action": action, "outcome": outcome},
        "outcomes": AuditEntry.Outcome.values,
    }
    return render(request, "replication_admin/audit.html", context)

"""Small helpers shared by the views: htmx partial rendering, permission checks, pagination."""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import render

from replication_admin.actions.audit import Actor, PermissionDenied, record
from replication_admin.models import AuditEntry

PAGE_SIZE = 50


def is_htmx(request: HttpRequest) -> bool:
    """A request made by htmx that is not a history restore (which needs the whole page)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request


def render_page_or_partial(request: HttpRequest, template: str, partial: str, context: dict) -> HttpResponse:
    """The whole page for a normal request, only `template#partial` for an htmx refresh."""
    name = f"{template}#{partial}" if is_htmx(request) else template
    return render(request, name, context)


def paginate(request: HttpRequest, queryset, per_page: int = PAGE_SIZE) -> Page:
    return Paginator(queryset, per_page).get_page(request.GET.get("page"))


def denied(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return HttpResponseForbidden(f"Permission denied: {exc}")


def check_perm(request: HttpRequest, perm: str, action: str, target: str = "") -> bool:
    """True when the user holds `perm`; otherwise records the denial in the audit log."""
    if request.user.has_perm(perm):
        return True
    record(Actor.from_request(request), action, target, AuditEntry.Outcome.DENIED, {"missing_permission": perm})
    return False


def stacked_bars(traces: list[dict]) -> dict:
    """A plotly figure of stacked bars per day (the job outcome and conflict charts)."""
    return {
        "data": traces,
        "layout": {
            "barmode": "stack",
            "height": 220,
            "margin": {"l": 30, "r": 10, "t": 10, "b": 30},
            "legend": {"orientation": "h"},
            "xaxis": {"type": "date"},
        },
    }

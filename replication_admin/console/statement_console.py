"""The statement console: the statement language run from the browser (operators)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from replication_admin.console.forms import StatementForm
from replication_admin.core.audit import Actor, PermissionDenied
from replication_admin.core.web import HtmxHttpRequest, check_perm, denied
from replication_admin.engine.statements import StatementError
from replication_admin.statements import execute

OPERATE = "replication_admin.operate"


@require_http_methods(["GET", "POST"])
def statement_console(request: HtmxHttpRequest) -> HttpResponse:
    # Running statements is an operator's work; statements that create or drop also need edit, which
    # each statement's action checks (and audits) itself.
    if request.method == "POST" and not check_perm(request, OPERATE, "statement", "statement console"):
        return denied(request, PermissionDenied(f"{request.user.get_username()} may not run statements"))
    form = StatementForm(request.POST or None, initial=request.GET.dict())
    outcomes, error = None, None
    if request.method == "POST" and form.is_valid():
        try:
            outcomes = execute(
                Actor.from_request(request), form.cleaned_data["text"], context=form.cleaned_data["server"], wait=False
            )
        except StatementError as exc:
            error = exc
    context = {"form": form, "outcomes": outcomes, "error": error}
    if request.htmx:
        return render(request, "replication_admin/console/statements.html#results", context)
    return render(request, "replication_admin/console/statements.html", context)

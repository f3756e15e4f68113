"""The statement console: the statement language run from the browser (operators), with each user's history."""

from __future__ import annotations

import sqlglot
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from sqlglot import exp

from replication_admin.console.forms import StatementForm
from replication_admin.core.audit import Actor
from replication_admin.core.permissions import OPERATE
from replication_admin.core.web import HtmxHttpRequest, requires
from replication_admin.engine.statements import PlainSqlError, StatementError
from replication_admin.models import Server, StatementRun
from replication_admin.statements import execute

HISTORY_SHOWN = 20
HISTORY_KEPT = 50  # per user; older runs are deleted as new ones come


def remember(user_id: int | None, text: str, server: Server | None, ok: bool) -> None:
    """Keep the script in the user's history (the newest HISTORY_KEPT); a run with no user (none signed in) has
    none to keep it in."""
    if user_id is None:
        return
    StatementRun.objects.create(user_id=user_id, text=text, server=server.name if server else "", ok=ok)
    stale = StatementRun.objects.filter(user_id=user_id).values_list("pk", flat=True)[HISTORY_KEPT:]
    StatementRun.objects.filter(pk__in=list(stale)).delete()


def history(user_id: int | None) -> list[StatementRun]:
    return list(StatementRun.objects.filter(user_id=user_id)[:HISTORY_SHOWN]) if user_id is not None else []


def table_links(text: str, server: Server | None) -> list[tuple[str, str]]:
    """(name, page) of the tables a plain SQL statement reads, on the context server; none without one or when the
    text does not parse as SQL."""
    if server is None:
        return []
    try:
        trees = sqlglot.parse(text)
    except sqlglot.errors.SqlglotError:
        return []
    names = dict.fromkeys(t.name for tree in trees if tree is not None for t in tree.find_all(exp.Table) if t.name)
    return [(name, reverse("servers-table", args=[server.name, name])) for name in names]


@require_http_methods(["GET", "POST"])
# Running statements is an operator's work; statements that create or drop also need edit, which each statement's
# action checks (and audits) itself.
@requires(OPERATE, "statement", "statement console", says="run statements")
def statement_console(request: HtmxHttpRequest) -> HttpResponse:
    form = StatementForm(request.POST or None, initial=request.GET.dict())
    outcomes, error, links = None, None, []
    if request.method == "POST" and form.is_valid():
        text, server = form.cleaned_data["text"], form.cleaned_data["server"]
        try:
            outcomes = execute(Actor.from_request(request), text, context=server, wait=False)
        except StatementError as exc:
            error = exc
            if isinstance(exc, PlainSqlError):
                links = table_links(text, server)
        remember(request.user.pk, text, server, error is None and all(o.ok for o in outcomes or ()))
    context = {
        "form": form,
        "outcomes": outcomes,
        "error": error,
        "plain_sql": isinstance(error, PlainSqlError),
        "table_links": links,
        "history": history(request.user.pk),
    }
    if request.htmx:
        return render(request, "replication_admin/console/statements.html#results", context)
    return render(request, "replication_admin/console/statements.html", context)

"""The conflict resolver chains of a published table: a bi-directional publication's (SYS_SNAPSHOT_CR) or an
updateable transactional publication's (SYS_REPL_CR). One editor for both: adding, editing, moving and
removing resolvers, with the same checks, and dry runs of the chain over the table's recorded conflicts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.conflicts import actions as resolver_actions
from replication_admin.conflicts.forms import (
    DryRunForm,
    ResolverEditForm,
    ResolverForm,
    format_assignments,
    is_written,
    needs_column,
)
from replication_admin.conflicts.runs import DryRunResult
from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.core.jobs import result_of
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.web import is_htmx, requires
from replication_admin.engine.resolvers import CODE_NAMES, CUSTOM, DEFAULT_DECISION, ResolverError
from replication_admin.models import (
    JobRun,
    Server,
    SnapshotConflictResolver,
    SnapshotPublication,
    TpItem,
    TransactionalConflictResolver,
)
from replication_admin.models.catalog import CR_TYPES
from replication_admin.transactional import selectors as trx_selectors

SNAPSHOT, TRANSACTIONAL = "snapshot", "transactional"
# URL names: the chain's pages (by publication or item id) and a resolver's (by resolver id).
CHAIN_URLS = {SNAPSHOT: "publications", TRANSACTIONAL: "trx-items"}
RESOLVER_URLS = {SNAPSHOT: "publications-resolver", TRANSACTIONAL: "trx-resolver"}
MODELS = {SNAPSHOT: SnapshotConflictResolver, TRANSACTIONAL: TransactionalConflictResolver}


@dataclass
class Scope:
    """Whose chains the editor shows: a bi-directional publication's table or a transactional one's."""

    kind: str
    pk: int  # the SnapshotPublication's or the TpItem's
    item: str  # the chains' TABLE_NAME
    server: Server | None
    table: str
    back_url: str
    back_label: str

    @property
    def model(self):
        return MODELS[self.kind]

    @property
    def urls(self) -> dict[str, str]:
        prefix = CHAIN_URLS[self.kind]
        return {
            "page": reverse(f"{prefix}-resolvers", args=[self.pk]),
            "add": reverse(f"{prefix}-resolvers-add", args=[self.pk]),
            "dry_run": reverse(f"{prefix}-dry-run", args=[self.pk]),
        }

    def resolver_urls(self, resolver_pk: int) -> dict[str, str]:
        prefix = RESOLVER_URLS[self.kind]
        return {name: reverse(f"{prefix}-{name}", args=[resolver_pk]) for name in ("edit", "move", "remove")}


def _snapshot_scope(publication: SnapshotPublication) -> Scope:
    return Scope(
        kind=SNAPSHOT, pk=publication.pk, item=publication.item, server=publication.server, table=publication.table,
        back_url=reverse("publications-detail", args=[publication.pk]), back_label=f"publication {publication.item}",
    )  # fmt: skip


def _trx_scope(item: TpItem) -> Scope:
    table = trx_selectors.published_table_name(item)
    return Scope(
        kind=TRANSACTIONAL,
        pk=item.pk,
        item=f"{item.server}.{table}",
        server=Server.objects.filter(name=item.server).first(),
        table=table,
        back_url=reverse("trx-publications-detail", args=[item.server, item.acct]),
        back_label=f"transactional publication {item.acct} on {item.server}",
    )


def _scope(kind: str, pk: int) -> Scope:
    if kind == TRANSACTIONAL:
        return _trx_scope(get_object_or_404(TpItem, pk=pk, type=2))
    return _snapshot_scope(get_object_or_404(SnapshotPublication.objects.select_related("server"), pk=pk))


def _columns(scope: Scope) -> tuple[list, str]:
    """The published table's columns as resolvers see them, or the reason they cannot be read."""
    if scope.server is None:
        return [], f"server of {scope.item} is not registered"
    try:
        return list(resolver_actions.table_columns(scope.server, scope.table)), ""
    except (connections.ConnectionFailed, connections.TableNotFound, ReplicationError, ResolverError) as exc:
        return [], str(exc)


def _chains(scope: Scope) -> list[dict]:
    resolvers = list(scope.model.objects.filter(table_name=scope.item).order_by("type", "order", "id"))
    chains = []
    for code, label in CR_TYPES:
        chain = [r for r in resolvers if r.type == code]
        for r in chain:
            r.assignments_text = format_assignments(r.assignments)
            r.urls = scope.resolver_urls(r.pk)
        chains.append({
            "type": code, "label": label, "resolvers": chain,
            "default": DEFAULT_DECISION[code], "default_label": CODE_NAMES[DEFAULT_DECISION[code]],
        })  # fmt: skip
    return chains


def _form(scope: Scope, columns, data=None) -> ResolverForm:
    return ResolverForm(data, column_names=[c.name for c in columns], transactional=scope.kind == TRANSACTIONAL)


def _resolver_context(request: HttpRequest, scope: Scope, **extra) -> dict:
    columns, columns_error = extra.pop("columns", None) or _columns(scope)
    context = {
        "scope": scope,
        "urls": scope.urls,
        "chains": _chains(scope),
        "columns": columns,
        "columns_error": columns_error,
        "codes": sorted(CODE_NAMES.items()),
        "form": _form(scope, columns),
        **_dry_run_context(None),
    }
    context.update(extra)
    return context


def _dry_run_job(scope: Scope, job_id: str | None) -> JobRun | None:
    if not job_id or not job_id.isdigit():
        return None
    job = JobRun.objects.filter(pk=int(job_id), kind="resolver_dry_run").first()
    return job if job is not None and job.params.get("item") == scope.item else None


def _dry_run_context(job: JobRun | None, error: str = "") -> dict:
    """A dry run's job and, once it succeeded, its rows with the codes named."""
    rows = []
    result = result_of(job, DryRunResult) if job is not None and job.state == JobRun.State.SUCCEEDED else None
    for row in result.rows if result is not None else []:
        rows.append({
            "row": row,
            "recorded_label": CODE_NAMES.get(row.recorded_decision or 0, "?"),
            "label": CODE_NAMES.get(row.decision or 0, "?"),
        })  # fmt: skip
    return {"dry_run": job, "dry_result": result, "dry_rows": rows, "dry_run_error": error}


@require_GET
def resolver_page(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> HttpResponse:
    scope = _scope(kind, pk)
    dry_run = _dry_run_job(scope, request.GET.get("dry_run"))
    if is_htmx(request) and dry_run is not None:
        context = {"scope": scope, "urls": scope.urls, **_dry_run_context(dry_run)}
        return render(request, "replication_admin/conflicts/resolvers.html#dry-run", context)
    context = _resolver_context(request, scope, **_dry_run_context(dry_run))
    return render(request, "replication_admin/conflicts/resolvers.html", context)


def _editor(request: HttpRequest, scope: Scope, **extra) -> HttpResponse:
    """The resolver editor (chains and add form): only that part for htmx, else the whole page."""
    context = _resolver_context(request, scope, **extra)
    template = "replication_admin/conflicts/resolvers.html"
    return render(request, f"{template}#resolver-editor" if is_htmx(request) else template, context)


def _error_field(form, text: str) -> str | None:
    """The field an action's error message is about, to show it next to that field."""
    lowered = text.lower()
    cls = form.cleaned_data.get("resolver_class", CUSTOM)
    for words, field in (
        (("e-mail",), "notify"),
        (("resolver expression", "resolver needs an expression"), "expression"),
        (("assign",), "assignments"),
        (("column",), "column" if needs_column(cls) else None),
        (("class",), "resolver_class"),
        (("resolver type",), "type"),
    ):
        if any(w in lowered for w in words):
            return field if field in form.fields else None
    return None


def _resolver_error(form, exc: Exception) -> None:
    form.add_error(_error_field(form, str(exc)), str(exc))


def _scope_target(suffix: Callable[[HttpRequest], str]) -> Callable[..., str]:
    """The audit target of an action on a chain: its item, then `suffix(request)`."""

    def target(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> str:
        return f"{_scope(kind, pk).item}{suffix(request)}"

    return target


def _resolver_target(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> str:
    resolver = MODELS[kind]._default_manager.filter(pk=pk).first()
    return f"{resolver.table_name} {resolver.proc}" if resolver is not None else f"resolver #{pk}"


@require_POST
@requires(EDIT, "resolver.add", _scope_target(lambda request: f" {request.POST.get('type', '')}"))
def resolver_add(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> HttpResponse:
    scope = _scope(kind, pk)
    columns, columns_error = _columns(scope)
    form = _form(scope, columns, request.POST)
    if form.is_valid():
        d = form.cleaned_data
        custom = is_written(d["resolver_class"])
        try:
            resolver = resolver_actions.do_add_resolver(
                Actor.from_request(request), scope.item, columns, d["type"], d["resolver_class"],
                order=d["order"], column=d["column"] or None,
                expression=d["expression"] if custom else None,
                assignments=d["assignments"] if custom else None,
                notify=d["notify"] or "", model=scope.model,
            )  # fmt: skip
        except (ResolverError, ReplicationError) as exc:
            _resolver_error(form, exc)
        else:
            note = f"Added {resolver.proc} to the {resolver.get_type_display()} chain."
            if not is_htmx(request):
                messages.success(request, note)
                return redirect(scope.urls["page"])
            return _editor(request, scope, columns=(columns, columns_error), saved=note)
    return _editor(request, scope, columns=(columns, columns_error), form=form)


def _resolver(pk: int, kind: str):
    """The resolver and the scope of its chain."""
    resolver = get_object_or_404(MODELS[kind], pk=pk)
    if kind == TRANSACTIONAL:
        server, _, table = resolver.table_name.partition(".")
        item = trx_selectors.table_item(server, table)
        if item is None:
            raise Http404("The resolver's table is not published transactionally.")
        return resolver, _trx_scope(item)
    publication = SnapshotPublication.objects.filter(item=resolver.table_name).select_related("server").first()
    if publication is None:
        raise Http404("The resolver's table is not published bi-directionally.")
    return resolver, _snapshot_scope(publication)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "resolver.update", _resolver_target)
def resolver_edit(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> HttpResponse:
    resolver, scope = _resolver(pk, kind)
    columns, columns_error = _columns(scope)
    initial = {"expression": resolver.expression, "assignments": format_assignments(resolver.assignments),
               "notify": resolver.notify}  # fmt: skip
    form = ResolverEditForm(request.POST or None, initial=initial, column_names=[c.name for c in columns])
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            resolver_actions.do_update_resolver(
                Actor.from_request(request), resolver, d["expression"], d["assignments"], d["notify"] or "", columns
            )
        except (ResolverError, ReplicationError) as exc:
            _resolver_error(form, exc)
        else:
            messages.success(request, f"Saved {resolver.proc}.")
            if is_htmx(request):
                response = HttpResponse(status=204)
                response["HX-Redirect"] = scope.urls["page"]
                return response
            return redirect(scope.urls["page"])
    context = {"scope": scope, "urls": scope.urls, "resolver_urls": scope.resolver_urls(resolver.pk),
               "resolver": resolver, "form": form, "columns": columns, "columns_error": columns_error,
               "codes": sorted(CODE_NAMES.items())}  # fmt: skip
    template = "replication_admin/conflicts/resolver_edit.html"
    return render(request, f"{template}#edit-form" if is_htmx(request) else template, context)


@require_POST
@requires(EDIT, "resolver.move", _resolver_target)
def resolver_move(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> HttpResponse:
    resolver, scope = _resolver(pk, kind)
    direction = request.POST.get("direction", "")
    if direction not in ("up", "down"):
        return HttpResponse("direction is up or down", status=400)
    try:
        resolver_actions.do_move_resolver(Actor.from_request(request), resolver, direction)
    except (ResolverError, ReplicationError) as exc:
        messages.error(request, str(exc))
    if is_htmx(request):
        return _editor(request, scope)
    return redirect(scope.urls["page"])


@require_http_methods(["GET", "POST"])
@requires(EDIT, "resolver.remove", _resolver_target)
def resolver_remove(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> HttpResponse:
    resolver, scope = _resolver(pk, kind)
    if request.method == "POST":
        try:
            resolver_actions.do_remove_resolver(Actor.from_request(request), resolver)
        except (ResolverError, ReplicationError) as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Removed {resolver.proc}.")
        return redirect(scope.urls["page"])
    return render(request, "replication_admin/confirm.html", {
        "title": f"Remove resolver {resolver.proc}?",
        "body": f"The {resolver.get_type_display()} chain of {scope.item} no longer asks it; the resolvers "
                "after it move up. Conflicts already recorded keep their decision.",
        "action": "Remove resolver",
        "cancel_url": scope.urls["page"],
        "hidden": {},
    })  # fmt: skip


@require_POST
@requires(OPERATE, "job.resolver_dry_run", _scope_target(lambda request: " resolvers"))
def resolver_dry_run(request: HttpRequest, pk: int, kind: str = SNAPSHOT) -> HttpResponse:
    """Decide the recorded conflicts again with the chain as saved (or with the expression being edited added
    at the end of its type's chain) and show which decisions would change."""
    scope = _scope(kind, pk)
    form = DryRunForm(request.POST)
    proposed = None
    error = ""
    if not form.is_valid():
        error = "; ".join(" ".join(map(str, e)) for e in form.errors.values())
    elif (
        is_written(request.POST.get("resolver_class", CUSTOM))
        and form.cleaned_data["type"]
        and form.cleaned_data["expression"].strip()
    ):
        d = form.cleaned_data
        proposed = {"id": None, "name": "proposed", "cr_type": d["type"], "order": None,
                    "expression": d["expression"], "assignments": d["assignments"]}  # fmt: skip
    job = None
    if not error:
        try:
            job = resolver_actions.do_start_dry_run(
                Actor.from_request(request), scope.item, scope.server or scope.item.partition(".")[0], scope.table,
                proposed=proposed, kind=scope.kind,
            )  # fmt: skip
        except (ResolverError, ReplicationError) as exc:
            error = str(exc)
    if not is_htmx(request):
        if error:
            messages.error(request, f"Dry run not started: {error}")
            return redirect(scope.urls["page"])
        assert job is not None  # started, since there is no error
        return redirect(scope.urls["page"] + f"?dry_run={job.pk}")
    context = {"scope": scope, "urls": scope.urls, **_dry_run_context(job, error)}
    return render(request, "replication_admin/conflicts/resolvers.html#dry-run", context)

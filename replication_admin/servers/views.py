from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.core import connections
from replication_admin.core.audit import Actor, record
from replication_admin.core.introspection import COUNT_BOUND, split_tables, table_sizes
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.web import HtmxHttpRequest, SortFields, listing, render_page_or_partial, requires
from replication_admin.engine import dialects
from replication_admin.models import (
    AuditEntry,
    ReplAccount,
    ReplSubscriber,
    Server,
    Snapshot,
    SnapshotLog,
    SnapshotPublication,
    SnapshotSubscription,
    dialect_choices,
)
from replication_admin.servers import actions as server_actions
from replication_admin.servers.forms import ServerForm

MAX_TABLES_SHOWN = 500  # described one by one: a bigger schema is cut (its internal tables still listed)
SERVER_SORTS: dict[str, SortFields] = {
    "name": "name",
    "dialect": ("dialect", "name"),
    "location": ("host", "database", "name"),
    "status": ("last_check_ok", "name"),
    "checked": ("last_check_at", "name"),
}
SERVER_LIST_FIELDS = (
    "id", "name", "dialect", "host", "port", "database", "schema", "user", "odbc_dsn", "last_check_at",
    "last_check_ok", "last_check_error",
)  # fmt: skip


@require_GET
def server_list(request: HttpRequest) -> HttpResponse:
    servers = Server.objects.only(*SERVER_LIST_FIELDS)
    dialect = request.GET.get("dialect", "")
    if dialect in dict(dialect_choices()):
        servers = servers.filter(dialect=dialect)
    else:
        dialect = ""
    servers_listing = listing(
        request, servers, sorts=SERVER_SORTS, default="name",
        search=("name", "host", "database", "odbc_dsn", "description"),
    )  # fmt: skip
    context = {
        "servers": servers_listing,
        "dialect": dialect,
        "dialects": dialect_choices(),
        "filtered": bool(servers_listing.q or dialect),
    }
    return render_page_or_partial(request, "replication_admin/servers/servers.html", "server-rows", context)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "server.register", methods=("GET", "POST"))
def server_add(request: HttpRequest) -> HttpResponse:
    form = ServerForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            server = server_actions.do_register_server(Actor.from_request(request), form.server_data())
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Server {server.name} registered.")
            return redirect("servers-detail", name=server.name)
    return render(request, "replication_admin/servers/server_form.html", {"form": form, "server": None})


@require_http_methods(["GET", "POST"])
@requires(EDIT, "server.update", lambda request, name: name, methods=("GET", "POST"))
def server_edit(request: HttpRequest, name: str) -> HttpResponse:
    server = get_object_or_404(Server, name=name)
    form = ServerForm(request.POST or None, instance=server)
    if request.method == "POST" and form.is_valid():
        try:
            server = server_actions.do_update_server(Actor.from_request(request), server, form.server_data())
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Server {server.name} saved.")
            return redirect("servers-detail", name=server.name)
    return render(request, "replication_admin/servers/server_form.html", {"form": form, "server": server})


@require_POST
@requires(EDIT, "server.test", lambda request: request.POST.get("name", ""))
def server_test_form(request: HttpRequest) -> HttpResponse:
    """htmx: test the connection described by the form's current values, without saving anything."""
    existing = Server.objects.filter(name=request.GET.get("server", "")).first()
    form = ServerForm(request.POST, instance=existing)
    if not form.is_valid():
        errors = "; ".join(
            f"{'' if field == '__all__' else field + ': '}{' '.join(map(str, msgs))}"
            for field, msgs in form.errors.items()
        )
        result = connections.CheckResult(ok=False, message=f"Fix the form first: {errors}", reason="invalid")
    else:
        candidate = server_actions.transient_server(form.validated, existing)
        result = connections.test_connection(candidate)
        record(
            Actor.from_request(request),
            "server.test",
            form.validated.name,
            AuditEntry.Outcome.OK if result.ok else AuditEntry.Outcome.ERROR,
            {"message": result.message, "unsaved": True},
        )
    return render(request, "replication_admin/servers/server_form.html#connection-result", {"result": result})


@require_POST
@requires(OPERATE, "server.test", lambda request, name: name)
def server_check(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """htmx: test a registered server and store the outcome."""
    server = get_object_or_404(Server, name=name)
    result = server_actions.do_check_server(Actor.from_request(request), server)
    if request.htmx:
        return render(
            request, "replication_admin/servers/server_detail.html#status", {"server": server, "result": result}
        )
    messages.info(request, result.message)
    return redirect("servers-detail", name=server.name)


@dataclass(frozen=True)
class Use:
    """A replication that uses a server: what it is, its name, the server's part in it, and its page."""

    kind: str
    name: str
    role: str
    url: str


def server_uses(server: Server) -> list[Use]:
    """Every snapshot, snapshot log, bi-directional and transactional publication and subscription on `server`."""
    uses = [Use("snapshot", s.name, "source", reverse("snapshots-detail", args=[s.name]))
            for s in Snapshot.objects.filter(source_server=server).only("name")]  # fmt: skip
    uses += [Use("snapshot", s.name, "destination", reverse("snapshots-detail", args=[s.name]))
             for s in Snapshot.objects.filter(dest_server=server).only("name")]  # fmt: skip
    logs_url = reverse("snapshots-logs", args=[server.name])
    uses += [Use("snapshot log", log.rlog, f"on {log.table}", logs_url)
             for log in SnapshotLog.objects.filter(server=server)]  # fmt: skip
    uses += [Use("bi-directional publication", p.item, "publisher", p.get_absolute_url())
             for p in SnapshotPublication.objects.filter(server=server)]  # fmt: skip
    publications = dict(SnapshotPublication.objects.values_list("item", "pk"))
    uses += [
        Use("bi-directional subscription", sub.item, "subscriber",
            reverse("publications-detail", args=[publications[sub.item]]) if sub.item in publications else "")
        for sub in SnapshotSubscription.objects.filter(server=server.name)
    ]  # fmt: skip
    uses += [Use("transactional publication", str(a), "publisher", a.get_absolute_url())
             for a in ReplAccount.objects.filter(server=server.name)]  # fmt: skip
    uses += [Use("transactional subscription", f"{s.server}/{s.account}", "subscriber", s.get_absolute_url())
             for s in ReplSubscriber.objects.filter(subscriber=server.name)]  # fmt: skip
    return uses


@require_GET
def server_detail(request: HttpRequest, name: str) -> HttpResponse:
    server = get_object_or_404(Server, name=name)
    return render(
        request, "replication_admin/servers/server_detail.html", {"server": server, "uses": server_uses(server)}
    )


@require_GET
def server_tables(request: HttpRequest, name: str) -> HttpResponse:
    """The server's tables with their primary keys, rows and sizes, the product's own tables apart (loaded by htmx
    after the page, or alone)."""
    server = get_object_or_404(Server, name=name)
    tables: list = []
    internal: list = []
    error = ""
    try:
        with connections.connect(server, readonly=True) as conn:
            sql, params = dialects.get(server.dialect).tables_sql(server.schema)
            user_names, internal_names = split_tables([row[0] for row in conn.cursor().execute(sql, params)])
            user_names = user_names[:MAX_TABLES_SHOWN]
            sizes = table_sizes(server, conn, [*user_names, *internal_names])
            for table in user_names:
                tables.append((connections.describe_table(server, table, conn=conn), sizes.get(table)))
            internal = [(table, sizes.get(table)) for table in internal_names]
    except connections.ConnectionFailed as exc:
        error = str(exc) + (f" ({exc.detail})" if exc.detail else "")
    context = {
        "server": server,
        "tables": tables,
        "internal": internal,
        "error": error,
        "estimates": dialects.get(server.dialect).row_counts_are_estimates,
        "count_bound": COUNT_BOUND,
    }
    return render_page_or_partial(request, "replication_admin/servers/server_tables.html", "tables", context)


@require_GET
def server_table(request: HttpRequest, name: str, table: str) -> HttpResponse:
    server = get_object_or_404(Server, name=name)
    error = ""
    info = None
    try:
        info = connections.describe_table(server, table)
    except (connections.ConnectionFailed, connections.TableNotFound) as exc:
        error = str(exc)
    return render(
        request,
        "replication_admin/servers/server_table.html",
        {"server": server, "table": info, "error": error, "table_name": table},
    )


@require_http_methods(["GET", "POST"])
@requires(EDIT, "server.delete", lambda request, name: name)
def server_delete(request: HttpRequest, name: str) -> HttpResponse:
    server = get_object_or_404(Server, name=name)
    if request.method == "POST":
        try:
            server_actions.do_delete_server(Actor.from_request(request), server)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("servers-detail", name=name)
        messages.success(request, f"Server {name} removed from the registry.")
        return redirect("servers")
    return render(
        request,
        "replication_admin/confirm.html",
        {
            "title": f"Remove server {server.name}?",
            "body": "The registration and its stored password are deleted. Nothing on the server itself changes.",
            "action": "Remove server",
            "cancel_url": server.get_absolute_url(),
        },
    )

"""Snapshots, snapshot logs and the statement console."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.core.forms import ScheduleForm
from replication_admin.core.introspection import split_tables
from replication_admin.core.jobs import result_of
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.web import SortFields, listing, requires
from replication_admin.engine import dialects
from replication_admin.engine.objects import SnapshotLogObjects
from replication_admin.engine.snapshot_log import SnapshotLogError, rlog_name, snapshot_log
from replication_admin.engine.statements import quote_name
from replication_admin.models import (
    JobRun,
    ScheduledEvent,
    Server,
    Snapshot,
    SnapshotLog,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.snapshots import actions as snap
from replication_admin.snapshots.forms import SnapshotForm
from replication_admin.snapshots.selectors import last_refreshes, snapshot_states, validation_panel


def _snapshot(name: str) -> Snapshot:
    return get_object_or_404(Snapshot.objects.select_related("source_server", "dest_server"), name=name)


SNAPSHOT_SORTS: dict[str, SortFields] = {
    "name": "name",
    "type": ("is_incremental", "name"),
    "source": ("source_server_id", "source_table", "name"),
    "destination": ("dest_server_id", "dest_table"),
    "last_ts": ("last_ts", "name"),
}
SNAPSHOT_SEARCH = ("name", "source_table", "dest_table", "source_server__name", "dest_server__name")
LOG_SORTS: dict[str, SortFields] = {
    "source": "source",
    "server": ("server_id", "table"),
    "created": ("created_at", "source"),
}


def _last_refreshes(names: list[str]) -> dict[str, JobRun]:
    """The latest refresh job of each of these snapshots, in two queries."""
    last_ids = {r["last_job_id"]: name for name, r in last_refreshes(names).items()}
    jobs = JobRun.objects.filter(pk__in=last_ids).only("id", "state", "finished_at")
    return {last_ids[job.pk]: job for job in jobs}


@require_GET
def snapshot_list(request: HttpRequest) -> HttpResponse:
    snapshots = listing(request, Snapshot.objects.all(), sorts=SNAPSHOT_SORTS, default="name", search=SNAPSHOT_SEARCH)
    logs = listing(request, SnapshotLog.objects.all(), sorts=LOG_SORTS, default="source",
                   search=("source", "rlog"), prefix="log_")  # fmt: skip
    # Only the shown page's refreshes and schedules are looked up: the list stays fast with any number of snapshots.
    shown = list(snapshots.page)
    refreshes = _last_refreshes([s.name for s in shown])
    events = {e.name: e for e in ScheduledEvent.objects.filter(name__in=[snap.event_name(s) for s in shown])}
    states = {row["name"]: row for row in snapshot_states([s.name for s in shown])}
    snapshots.page.object_list = [
        (s, events.get(snap.event_name(s)), refreshes.get(s.name), states.get(s.name)) for s in shown
    ]
    context = {
        "snapshots": snapshots,
        "logs": logs,
        "servers": Server.objects.values_list("name", flat=True),
    }
    return render(request, "replication_admin/snapshots/snapshots.html", context)


@require_http_methods(["GET", "POST"])
@requires(
    EDIT,
    "snapshot.create",
    lambda request: f"{request.POST.get('dest_server', '')}.{request.POST.get('dest_table', '')}",
)
def snapshot_create(request: HttpRequest) -> HttpResponse:
    form = SnapshotForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        ticked = request.POST.getlist("column")
        if ticked and not d["columns"]:
            d["columns"] = _ticked_columns(d["source_server"], d["source_table"], ticked)
        actor = Actor.from_request(request)
        try:
            if d["kind"] == "incremental":
                snapshot = snap.do_create_inc_snapshot(
                    actor, d["source_server"], d["source_table"], d["columns"] or None, d["condition"] or None,
                    d["dest_server"], d["dest_table"],
                )  # fmt: skip
            else:
                snapshot = snap.do_create_noninc_snapshot(
                    actor, d["source_server"], d["query"], d["dest_server"], d["dest_table"]
                )
            job = snap.do_refresh_snapshot(actor, snapshot, nonincremental=d["kind"] != "incremental")
        except ReplicationError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Snapshot {snapshot.name} created; the first refresh is running.")
            return redirect("jobs-detail", pk=job.pk)
    return render(request, "replication_admin/snapshots/snapshot_form.html", {"form": form})


@require_GET
def snapshot_detail(request: HttpRequest, name: str) -> HttpResponse:
    snapshot = _snapshot(name)
    # Each job with its kind's typed result (None until it succeeded).
    jobs = [(job, result_of(job)) for job in JobRun.objects.filter(params__snapshot=snapshot.name).order_by("-id")[:20]]
    event = ScheduledEvent.objects.filter(name=snap.event_name(snapshot)).first()
    log = SnapshotLog.objects.filter(server=snapshot.source_server, table=snapshot.source_table).first()
    form = ScheduleForm(initial={"every_minutes": event.interval if event else None})
    status = next(iter(snapshot_states([snapshot.name])), None)
    context = {"snapshot": snapshot, "jobs": jobs, "event": event, "log": log, "schedule_form": form, "status": status,
               "validation": validation_panel(snapshot) if snapshot.is_incremental is not None else None}  # fmt: skip
    return render(request, "replication_admin/snapshots/snapshot_detail.html", context)


def _start(request: HttpRequest, name: str, start) -> HttpResponse:
    """Start a job on a snapshot and show its page, where the progress bar follows it."""
    job = start(Actor.from_request(request), _snapshot(name))
    return redirect("jobs-detail", pk=job.pk)


@require_POST
@requires(OPERATE, "job.snapshot_refresh", lambda request, name: f"UPDATE SNAPSHOT {name}")
def snapshot_refresh(request: HttpRequest, name: str) -> HttpResponse:
    full = request.POST.get("mode") == "full"
    return _start(request, name, lambda actor, s: snap.do_refresh_snapshot(actor, s, nonincremental=full))


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "job.snapshot_repair", lambda request, name: f"repair {name}")
def snapshot_repair(request: HttpRequest, name: str) -> HttpResponse:
    if request.method == "POST":
        return _start(request, name, snap.do_repair_snapshot)
    snapshot = _snapshot(name)
    body = (
        f"The rows of {snapshot.dest_server_id}.{snapshot.dest_table} are compared with the source of "
        f"{snapshot.name} ({snapshot.source_server_id}): rows that are not in the source are deleted, rows that "
        "differ are overwritten with the source's values and missing rows are inserted. Changes made only on the "
        "destination are lost."
    )
    return render(request, "replication_admin/confirm.html", {
        "title": f"Repair snapshot {snapshot.name}?",
        "body": body,
        "action": "Repair differences",
        "cancel_url": reverse("snapshots-detail", args=[snapshot.name]),
        "hidden": {},
    })  # fmt: skip


@require_POST
@requires(OPERATE, "snapshot.schedule", lambda request, name: name)
def snapshot_schedule(request: HttpRequest, name: str) -> HttpResponse:
    snapshot = _snapshot(name)
    form = ScheduleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The interval is a whole number of minutes, 1 to 525600 (empty to stop).")
        return redirect("snapshots-detail", name=name)
    event = snap.do_schedule_snapshot(Actor.from_request(request), snapshot, form.cleaned_data["every_minutes"])
    messages.success(request, f"Refreshing every {event.interval} minute(s)." if event else "Schedule removed.")
    return redirect("snapshots-detail", name=name)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "snapshot.drop", lambda request, name: name)
def snapshot_drop(request: HttpRequest, name: str) -> HttpResponse:
    snapshot = _snapshot(name)
    with_delete = request.GET.get("delete") == "1" or request.POST.get("delete") == "1"
    if request.method == "POST":
        try:
            message = snap.do_drop_snapshot(Actor.from_request(request), snapshot, with_delete)
        except ReplicationError as exc:
            messages.error(request, str(exc))
            return redirect("snapshots-detail", name=name)
        messages.success(request, message)
        return redirect("snapshots")
    body = (
        "The definition is removed from SYS_SNAPSHOT"
        + (f" and the table {snapshot.dest_table} is dropped on {snapshot.dest_server_id}." if with_delete else ".")
        + " The source and its snapshot log are not touched."
    )
    return render(request, "replication_admin/confirm.html", {
        "title": f"Drop snapshot {snapshot.name}{' with delete' if with_delete else ''}?",
        "body": body,
        "action": "Drop snapshot" + (" and its table" if with_delete else ""),
        "cancel_url": reverse("snapshots-detail", args=[snapshot.name]),
        "hidden": {"delete": "1" if with_delete else "0"},
    })  # fmt: skip


# --- snapshot logs --------------------------------------------------------------------------------------


@require_GET
def snapshot_logs(request: HttpRequest, server: str) -> HttpResponse:
    """Each user table of the server with its snapshot log: the catalog's (SYS_SNAPSHOT_LOG), or an RLOG_ table
    found on the server (a bi-directional publication's or subscription's log, which has no catalog row). Names
    are matched whatever case the server folded them to. The product's own tables are listed apart."""
    srv = get_object_or_404(Server, name=server)
    logs = {log.table.lower(): log for log in SnapshotLog.objects.filter(server=srv)}
    publications = {p.table.lower(): p for p in SnapshotPublication.objects.filter(server=srv)}
    subscribed = {
        p.table.lower(): p
        for p in SnapshotPublication.objects.filter(
            item__in=SnapshotSubscription.objects.filter(server=srv.name).values("item")
        )
    }
    rows: list[LogRow] = []
    internal: list[str] = []
    error = ""
    try:
        tables, internal = split_tables(connections.list_tables(srv))
        on_server = {name.lower(): name for name in internal}
        for table in tables:
            key = table.lower()
            rlog = on_server.get(rlog_name(table).lower())
            rows.append(LogRow(table, logs.get(key), rlog, publications.get(key) or subscribed.get(key)))
    except connections.ConnectionFailed as exc:
        error = str(exc)
    context = {"server": srv, "rows": rows, "internal": internal, "error": error, "servers": Server.objects.all()}
    return render(request, "replication_admin/snapshots/snapshot_logs.html", context)


@dataclass(frozen=True)
class LogRow:
    """A table on the snapshot logs page: its catalog log, the RLOG_ table on the server, and the bi-directional
    publication whose log that is when the catalog has none."""

    table: str
    log: SnapshotLog | None
    rlog: str | None
    publication: SnapshotPublication | None


# What dropping or purging a snapshot log does, for its confirmation page (creating one needs none).
LOG_CONFIRMATIONS = {
    "drop": (
        "Drop the snapshot log of {source}?",
        "The triggers on {source} and the log table {rlog} are dropped on {server}, with the changes logged in it. "
        "Incremental snapshots of {table} copy everything until a new log exists. The table itself stays.",
        "Drop snapshot log",
    ),
    "purge": (
        "Purge the snapshot log of {source}?",
        "The rows of {rlog} on {server} that every snapshot of {table} has replayed (older than the oldest last "
        "refresh, less the tolerance offset) are deleted. Rows not replayed yet stay.",
        "Purge snapshot log",
    ),
}


@require_http_methods(["GET", "POST"])
@requires(
    lambda request, server, action: OPERATE if action == "purge" else EDIT,
    lambda request, server, action: f"snapshot_log.{action}",
    lambda request, server, action: f"{server}.{request.POST.get('table', '')}",
)
def snapshot_log_action(request: HttpRequest, server: str, action: str) -> HttpResponse:
    srv = get_object_or_404(Server, name=server)
    if request.method == "GET":
        return _snapshot_log_confirm(request, srv, action)
    table = request.POST.get("table", "")
    actor = Actor.from_request(request)
    try:
        if action == "create":
            log = snap.do_create_snapshot_log(actor, srv, table)
            messages.success(request, f"Created {log.rlog} and its triggers.")
        elif action == "drop":
            messages.success(request, snap.do_drop_snapshot_log(actor, srv, table))
        elif action == "purge":
            deleted = snap.do_purge_snapshot_log(actor, srv, table)
            messages.success(request, f"Purged {deleted} log row(s) every snapshot has replayed.")
        else:
            return HttpResponse(status=404)
    except ReplicationError as exc:
        messages.error(request, str(exc))
    return redirect("snapshots-logs", server=srv.name)


def _snapshot_log_confirm(request: HttpRequest, srv: Server, action: str) -> HttpResponse:
    """GET: the confirmation page of dropping or purging a table's snapshot log (`?table=`)."""
    if action not in LOG_CONFIRMATIONS:
        return HttpResponseNotAllowed(["POST"])
    table = request.GET.get("table", "")
    log = SnapshotLog.objects.filter(server=srv, table=table).first()
    if log is None:
        messages.error(request, f"There is no snapshot log for {srv.name}.{table}.")
        return redirect("snapshots-logs", server=srv.name)
    title, body, button = LOG_CONFIRMATIONS[action]
    names = {"source": log.source, "rlog": rlog_name(log.table), "server": srv.name, "table": log.table}
    return render(request, "replication_admin/confirm.html", {
        "title": title.format(**names),
        "body": body.format(**names),
        "action": button,
        "cancel_url": reverse("snapshots-logs", args=[srv.name]),
        "hidden": {"table": log.table},
    })  # fmt: skip


# --- statement console ----------------------------------------------------------------------------------


@require_GET
def snapshot_log_ddl(request: HttpRequest, server: str, table: str) -> HttpResponse:
    """The snapshot log of a table as DDL for every dialect, for servers the console does not reach."""
    srv = get_object_or_404(Server, name=server)
    scripts: list[tuple[str, SnapshotLogObjects | None, str, tuple[str, str, str]]] = []
    error = ""
    try:
        info = connections.describe_table(srv, table)
        for dialect in dialects.DIALECTS.values():
            try:
                objects = snapshot_log(dialect, info)
                texts = (dialect.script(objects.create), dialect.script(objects.drop), dialect.script_hint)
                scripts.append((dialect.label, objects, "", texts))
            except SnapshotLogError as exc:
                scripts.append((dialect.label, None, str(exc), ("", "", "")))
    except (connections.ConnectionFailed, connections.TableNotFound) as exc:
        error = str(exc)
    context = {"server": srv, "table": table, "scripts": scripts, "error": error}
    return render(request, "replication_admin/snapshots/snapshot_log_ddl.html", context)


def _ticked_columns(server: Server, table: str, ticked: list[str]) -> str:
    """The column list from the picker's checkboxes: empty (the whole table) when all are ticked."""
    try:
        info = connections.describe_table(server, table)
    except (connections.ConnectionFailed, connections.TableNotFound):
        return ", ".join(quote_name(c) for c in ticked)
    non_key = [c.name for c in info.non_key_columns]
    chosen = [c for c in non_key if c in ticked]
    return "" if chosen == non_key else ", ".join(quote_name(c) for c in chosen) or quote_name(info.primary_key[0].name)

"""Bi-directional snapshot replication: publications, their subscribers, initial copies, syncs and the
conflict resolver chain of each published table."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.contrib import messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.bidir import actions as bidir
from replication_admin.bidir.forms import (
    DropSubscriptionForm,
    InitCopyForm,
    PublicationForm,
    SubscribeForm,
)
from replication_admin.bidir.selectors import bidir_status_rows, validation_panel
from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.core.forms import ScheduleForm
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.web import render_page_or_partial, requires
from replication_admin.engine import dialects
from replication_admin.engine.bidir_sql import (
    BidirError,
    add_rowguid_ddl,
    bidir_script,
    check_rowguid,
    fill_rowguid_sql,
    table_with_rowguid,
)
from replication_admin.engine.dialects import IdentifierError
from replication_admin.engine.objects import SnapshotLogError, SnapshotLogObjects
from replication_admin.engine.refresh_sql import create_table_ddl
from replication_admin.models import (
    JobRun,
    ScheduledEvent,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)

ACTIVE_INIT_STATES = ("staging", "copying")


def _publication(pk: int) -> SnapshotPublication:
    return get_object_or_404(SnapshotPublication.objects.select_related("server"), pk=pk)


def _item(pk: int) -> str:
    """A publication's item, as the audit log names it (for a refusal)."""
    return SnapshotPublication.objects.filter(pk=pk).values_list("item", flat=True).first() or f"publication #{pk}"


def _server_item(pk: int, between: str) -> str:
    """A subscription's server and item, as the audit log names it (for a refusal)."""
    sub = SnapshotSubscription.objects.filter(pk=pk).first()
    return f"{sub.server}{between}{sub.item}" if sub is not None else f"subscription #{pk}"


# --- publications ---------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@requires(EDIT, "bidir.publish", lambda request: f"{request.POST.get('server', '')}.{request.POST.get('table', '')}")
def publication_create(request: HttpRequest) -> HttpResponse:
    form = PublicationForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        try:
            publication = bidir.do_create_publication(
                Actor.from_request(request), form.cleaned_data["server"], form.cleaned_data["table"].strip()
            )
        except ReplicationError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Published {publication.item}. Add subscribers, then copy the rows to them.")
            return redirect("publications-detail", pk=publication.pk)
    return render(request, "replication_admin/bidir/publication_form.html", {"form": form})


def _jobs(publication: SnapshotPublication, subscriptions: list[SnapshotSubscription]) -> list[JobRun]:
    """The publication's latest syncs and initial copies, newest first."""
    mine = Q(kind="bidir_sync", params__publication=publication.pk)
    if subscriptions:
        mine |= Q(kind="bidir_init", params__subscription__in=[s.pk for s in subscriptions])
    return list(JobRun.objects.filter(mine).order_by("-id")[:20])


def _subscription_rows(subscriptions: list[SnapshotSubscription], jobs: list[JobRun]) -> list[dict]:
    """Each subscription with its initial copy's progress and its latest initial-copy job."""
    latest: dict[int, JobRun] = {}
    for job in jobs:
        if job.kind == "bidir_init":
            latest.setdefault(job.params.get("subscription"), job)
    missing = [s.pk for s in subscriptions if s.pk not in latest]
    if missing:
        for job in JobRun.objects.filter(kind="bidir_init", params__subscription__in=missing).order_by("-id"):
            latest.setdefault(job.params.get("subscription"), job)
    rows = []
    for sub in subscriptions:
        total = sub.init_rows_total or 0
        if sub.init_state == "done":
            percent = 100
        elif total:
            percent = max(0, min(100, int(100 * sub.init_rows_done / total)))
        else:
            percent = 0
        rows.append({"sub": sub, "percent": percent, "job": latest.get(sub.pk)})
    return rows


@require_GET
def publication_detail(request: HttpRequest, pk: int) -> HttpResponse:
    publication = _publication(pk)
    subscriptions = list(bidir.subscriptions_of(publication))
    jobs = _jobs(publication, subscriptions)
    rows = _subscription_rows(subscriptions, jobs)
    status = next((p for p in bidir_status_rows([publication.item]) if p["server"] == publication.server_id), None)
    states = {s["server"]: s for s in status["subscribers"]} if status else {}
    for row in rows:
        row["status"] = states.get(row["sub"].server)
    active = any(r["sub"].init_state in ACTIVE_INIT_STATES for r in rows) or any(not j.finished for j in jobs)
    event = ScheduledEvent.objects.filter(name=bidir.publication_event_name(publication)).first()
    context = {
        "publication": publication,
        "status": status,
        "rows": rows,
        "jobs": jobs,
        "active": active,
        "event": event,
        "schedule_form": ScheduleForm(initial={"every_minutes": event.interval if event else None}),
        "subscribe_form": SubscribeForm(publication=publication),
        "resolver_count": SnapshotConflictResolver.objects.filter(table_name=publication.item).count(),
        "validation": validation_panel(subscriptions),
    }
    return render_page_or_partial(request, "replication_admin/bidir/publication_detail.html", "subscribers", context)


@dataclass(frozen=True)
class SubscriberScript:
    """What a subscriber of one dialect the console does not reach runs by hand (publication_ddl)."""

    label: str
    objects: SnapshotLogObjects | None
    create: str = ""  # the script of a new copy: its CREATE TABLE with the ROWGUID column, then the objects
    existing: str = ""  # for a table that is there already: its ROWGUID column and values, before the objects
    drop: str = ""
    problem: str = ""
    hint: str = ""  # how the server's tool runs the script


@require_GET
def publication_ddl(request: HttpRequest, pk: int) -> HttpResponse:
    """The objects a bi-directional subscriber on SQL Server, Oracle or DB2 needs, as DDL text to run there."""
    publication = _publication(pk)
    subscriber = request.GET.get("subscriber", "").strip()[:128] or "remote"  # a server name's length at most
    scripts: list[SubscriberScript] = []
    error = ""
    table = None
    if publication.server is None:
        error = f"{publication.item} has no publisher server registered"
    else:
        try:
            table = connections.describe_table(publication.server, publication.table or publication.item)
        except (connections.ConnectionFailed, connections.TableNotFound) as exc:
            error = str(exc)
    for d in dialects.DIALECTS.values():
        if table is None or not d.bidir_text:
            continue
        try:
            copy = dataclasses.replace(table_with_rowguid(table), schema="", indexes=())
            columns = [(c.name, c.logical) for c in copy.columns]
            bare = dataclasses.replace(table, schema="", indexes=())
            existing = () if check_rowguid(bare) else (add_rowguid_ddl(d, bare), fill_rowguid_sql(d, bare, subscriber))
            objects = bidir_script(d, copy, subscriber, publication.server_id or "")
            create = create_table_ddl(d, copy.name, "", columns, [c.name for c in copy.primary_key])
            scripts.append(SubscriberScript(
                d.label, objects, d.script([create, *objects.create]), d.script(existing), d.script(objects.drop),
                hint=d.script_hint,
            ))  # fmt: skip
        except (BidirError, SnapshotLogError, IdentifierError, KeyError) as exc:
            scripts.append(SubscriberScript(d.label, None, problem=str(exc)))
    context = {"publication": publication, "subscriber": subscriber, "scripts": scripts, "error": error}
    return render(request, "replication_admin/bidir/publication_ddl.html", context)


@require_http_methods(["GET", "POST"])
@requires(EDIT, "bidir.unpublish", lambda request, pk: _item(pk))
def publication_drop(request: HttpRequest, pk: int) -> HttpResponse:
    publication = _publication(pk)
    if request.method == "POST":
        try:
            message = bidir.do_drop_publication(Actor.from_request(request), publication)
        except ReplicationError as exc:
            messages.error(request, str(exc))
            return redirect("publications-detail", pk=publication.pk)
        messages.success(request, message)
        return redirect("publications")
    count = bidir.subscriptions_of(publication).count()
    body = (
        f"{publication.item} stops being published: its SYS_SNAPSHOT_PUB row, its resolvers and its schedule are "
        "removed" + (f", and so are its {count} subscription(s)" if count else "") + ". The table on "
        f"{publication.server_id} and the copies on the subscribers stay, with their rows."
    )
    return render(request, "replication_admin/confirm.html", {
        "title": f"Drop publication {publication.item}?",
        "body": body,
        "action": "Drop publication",
        "cancel_url": reverse("publications-detail", args=[publication.pk]),
        "hidden": {},
    })  # fmt: skip


@require_POST
@requires(OPERATE, "job.bidir_sync", lambda request, pk: f"REPL_UPDATE_SNAPSHOT {_item(pk)}")
def publication_sync(request: HttpRequest, pk: int) -> HttpResponse:
    publication = _publication(pk)
    try:
        job = bidir.do_sync_publication(Actor.from_request(request), publication)
    except ReplicationError as exc:
        messages.error(request, str(exc))
        return redirect("publications-detail", pk=publication.pk)
    messages.success(request, f"Sync of {publication.item} started (job #{job.pk}).")
    return redirect("publications-detail", pk=publication.pk)


@require_POST
@requires(OPERATE, "bidir.schedule", lambda request, pk: _item(pk))
def publication_schedule(request: HttpRequest, pk: int) -> HttpResponse:
    publication = _publication(pk)
    form = ScheduleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The interval is a whole number of minutes, 1 to 525600 (empty to stop).")
        return redirect("publications-detail", pk=publication.pk)
    try:
        event = bidir.do_schedule_publication(
            Actor.from_request(request), publication, form.cleaned_data["every_minutes"]
        )
    except ReplicationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Syncing every {event.interval} minute(s)." if event else "Schedule removed.")
    return redirect("publications-detail", pk=publication.pk)


@require_POST
@requires(EDIT, "bidir.subscribe", lambda request, pk: f"{request.POST.get('server', '')} <- {_item(pk)}")
def publication_subscribe(request: HttpRequest, pk: int) -> HttpResponse:
    publication = _publication(pk)
    form = SubscribeForm(request.POST, publication=publication)
    if not form.is_valid():
        messages.error(request, "Choose a registered server that is neither the publisher nor already subscribed.")
        return redirect("publications-detail", pk=publication.pk)
    try:
        sub = bidir.do_create_subscription(Actor.from_request(request), publication, form.cleaned_data["server"])
    except ReplicationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{sub.server} subscribed to {publication.item}. Start its initial copy next.")
    return redirect("publications-detail", pk=publication.pk)


# --- subscriptions --------------------------------------------------------------------------------------


def _subscription(pk: int) -> tuple[SnapshotSubscription, SnapshotPublication | None]:
    sub = get_object_or_404(SnapshotSubscription, pk=pk)
    publication = SnapshotPublication.objects.filter(item=sub.item, type=sub.type).select_related("server").first()
    return sub, publication


def _back(sub: SnapshotSubscription, publication: SnapshotPublication | None) -> HttpResponse:
    return redirect("publications-detail", pk=publication.pk) if publication else redirect("subscriptions")


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "job.bidir_init", lambda request, pk: "REPL_INIT_SNAPSHOT " + _server_item(pk, " "))
def subscription_init(request: HttpRequest, pk: int) -> HttpResponse:
    sub, publication = _subscription(pk)
    if request.method == "GET":
        return _init_confirm(request, sub, publication)
    form = InitCopyForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Rows per commit is a whole number from 1 to 10,000,000.")
        return _back(sub, publication)
    try:
        job = bidir.do_init_subscription(
            Actor.from_request(request), sub, rows_per_commit=form.cleaned_data["rows_per_commit"]
        )
    except ReplicationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Initial copy to {sub.server} started (job #{job.pk}).")
    return _back(sub, publication)


def _init_confirm(
    request: HttpRequest, sub: SnapshotSubscription, publication: SnapshotPublication | None
) -> HttpResponse:
    """GET: the confirmation page of a (new) initial copy, which empties the subscriber's table first."""
    form = InitCopyForm(request.GET)
    rows = form.cleaned_data["rows_per_commit"] if form.is_valid() else sub.init_rows_per_commit or 100
    table = publication.table if publication and publication.table else sub.item
    source = f"{publication.server_id}.{publication.table}" if publication else sub.item
    body = (
        f"Every row of the table {table} on {sub.server} is deleted, with its changes that no sync has collected "
        f"yet, and the table is filled again with the rows of {source}, committing every {rows} rows. Changes "
        f"made on {sub.server} since its last sync are lost."
    )
    return render(request, "replication_admin/confirm.html", {
        "title": f"Copy {sub.item} to {sub.server} again?",
        "body": body,
        "action": "Start the initial copy",
        "cancel_url": publication.get_absolute_url() if publication else reverse("subscriptions"),
        "hidden": {"rows_per_commit": rows},
    })  # fmt: skip


@require_http_methods(["GET", "POST"])
@requires(EDIT, "bidir.unsubscribe", lambda request, pk: _server_item(pk, " <- "))
def subscription_drop(request: HttpRequest, pk: int) -> HttpResponse:
    sub, publication = _subscription(pk)
    form = DropSubscriptionForm(request.POST or request.GET or None)
    drop_table = bool(form.is_valid() and form.cleaned_data["drop_table"])
    if request.method == "POST":
        try:
            message = bidir.do_drop_subscription(Actor.from_request(request), sub, drop_table=drop_table)
        except ReplicationError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, message)
        return _back(sub, publication)
    table = publication.table if publication and publication.table else sub.item
    body = (
        f"{sub.server} stops receiving {sub.item} and its changes are no longer collected"
        + (
            f"; its table {table} is dropped on {sub.server}, with its rows."
            if drop_table
            else f"; its table {table} stays."
        )
        + " Changes it made that no sync has collected yet are lost to the publisher."
    )
    return render(request, "replication_admin/confirm.html", {
        "title": f"Drop the subscription of {sub.server} to {sub.item}{' and its table' if drop_table else ''}?",
        "body": body,
        "action": "Drop subscription" + (" and table" if drop_table else ""),
        "cancel_url": publication.get_absolute_url() if publication else reverse("subscriptions"),
        "hidden": {"drop_table": "on" if drop_table else ""},
    })  # fmt: skip

"""The compare pages: start a compare of two tables (the tables offered as the server is chosen) or of a
snapshot with its source; on a finished compare, repair the keys chosen among its listed differences, or compare
again."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.bidir import actions as bidir_actions
from replication_admin.bidir.actions import BidirError
from replication_admin.compare import actions, selectors
from replication_admin.compare.forms import CompareForm
from replication_admin.compare.key_repair import RepairRefused
from replication_admin.compare.runs import Compare, RepairKeys
from replication_admin.compare.validation import BidirValidate, SnapshotValidate, TrxValidate
from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.core.introspection import source_tables
from replication_admin.core.jobs import JobError
from replication_admin.core.permissions import OPERATE
from replication_admin.core.web import requires
from replication_admin.models import (
    JobRun,
    ReplSubscriber,
    Server,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
    subscription_label,
)
from replication_admin.snapshots.actions import SnapshotError
from replication_admin.transactional.selectors import TrxError

SHOWN_KEYS = 20  # keys named on the confirmation page; the rest are counted


def _chosen(values: list[str]) -> list[int]:
    """Row positions from the form: checkboxes (`row`, one each) or the confirmation's list (`rows`, comma-joined)."""
    chosen = []
    for value in values:
        for part in value.split(","):
            if part.strip().isdigit():
                chosen.append(int(part))
    return chosen


def _job_target(prefix: str = "") -> Callable[..., str]:
    return lambda request, pk: prefix + (JobRun.objects.filter(pk=pk).values_list("target", flat=True).first() or "")


@require_http_methods(["GET", "POST"])
@requires(OPERATE, f"job.{RepairKeys.kind}", _job_target("repair keys: "))
def compare_repair(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the confirmation naming how many keys and which; POST: start the repair (its job's page follows it)."""
    job = get_object_or_404(JobRun, pk=pk)
    data = request.POST if request.method == "POST" else request.GET
    chosen = _chosen(data.getlist("row") + data.getlist("rows"))
    try:
        if request.method == "POST":
            repair = actions.do_repair_keys(Actor.from_request(request), job, chosen)
            return redirect("jobs-detail", pk=repair.pk)
        rows = selectors.compared_rows(job, chosen)
    except RepairRefused as exc:
        messages.error(request, f"Not repaired: {exc}.")
        return redirect("jobs-detail", pk=pk)
    except ValueError as exc:  # a row that is not listed, or not a finished compare
        messages.error(request, f"{exc}.")
        return redirect("jobs-detail", pk=pk)
    named = "; ".join(", ".join(f"{n}={v}" for n, v in row.key.items()) for row in rows[:SHOWN_KEYS])
    more = f" and {len(rows) - SHOWN_KEYS} more" if len(rows) > SHOWN_KEYS else ""
    body = (
        f"{len(rows)} key(s) of {job.target} ({named}{more}): the destination's row of each becomes the source's row "
        "as it is now (inserted or overwritten), and a key the source no longer has is deleted on the destination, "
        "all in one transaction. Changes made only on the destination to these rows are lost."
    )
    return render(request, "replication_admin/confirm.html", {
        "title": f"Repair {len(rows)} key(s)?",
        "body": body,
        "action": f"Repair {len(rows)} key(s)",
        "cancel_url": reverse("jobs-detail", args=[pk]),
        "hidden": {"rows": ",".join(str(i) for i in sorted(set(chosen)))},
    })  # fmt: skip


@require_POST
@requires(OPERATE, f"job.{Compare.kind}", _job_target())
def compare_again(request: HttpRequest, pk: int) -> HttpResponse:
    """The same compare as a new job (from a compare or from a repair of its keys)."""
    job = get_object_or_404(JobRun, pk=pk, kind__in=[Compare.kind, RepairKeys.kind])
    try:
        again = actions.do_compare_again(Actor.from_request(request), job)
    except JobError as exc:  # a compare recorded without its tables
        messages.error(request, f"Not compared again: {exc}.")
        return redirect("jobs-detail", pk=pk)
    return redirect("jobs-detail", pk=again.pk)


def _check_table(form: CompareForm, side: str) -> None:
    server: Server = form.cleaned_data[f"{side}_server"]
    table = form.cleaned_data[f"{side}_table"]
    try:
        connections.describe_table(server, table)
    except (connections.ConnectionFailed, connections.TableNotFound) as exc:
        form.add_error(f"{side}_table", str(exc))


def _tables_target(request: HttpRequest) -> str:
    post = request.POST
    left, right = (f"{post.get(f'{s}_server', '')}.{post.get(f'{s}_table', '')}" for s in ("left", "right"))
    return f"{left} ↔ {right}"


@require_http_methods(["GET", "POST"])
@requires(OPERATE, f"job.{Compare.kind}", _tables_target)
def compare_start(request: HttpRequest) -> HttpResponse:
    form = CompareForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        _check_table(form, "left")
        _check_table(form, "right")
        if form.is_valid():
            d = form.cleaned_data
            try:
                job = actions.do_start_compare(
                    Actor.from_request(request),
                    d["left_server"],
                    d["left_table"],
                    d["right_server"],
                    d["right_table"],
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                return redirect("jobs-detail", pk=job.pk)
    return render(
        request, "replication_admin/compare/compare_form.html", {"form": form, "servers": Server.objects.all()}
    )


@require_POST
@requires(OPERATE, f"job.{Compare.kind}", lambda request, name: f"snapshot {name}")
def snapshot_compare(request: HttpRequest, name: str) -> HttpResponse:
    """Compare a snapshot's destination with its source query; the job's page follows it."""
    snapshot = get_object_or_404(Snapshot, name=name)
    job = actions.do_compare_snapshot(Actor.from_request(request), snapshot)
    return redirect("jobs-detail", pk=job.pk)


@require_GET
def table_options(request: HttpRequest) -> HttpResponse:
    """htmx: <option>s of the tables of the chosen server, for a datalist. The server comes from the form's own
    select (hx-include sends it under its field name, named by `server_field`), or from `server`."""
    field = request.GET.get("server_field", "server")
    if not field.endswith("server"):  # only a form's server select is read
        field = "server"
    server = Server.objects.filter(name=request.GET.get(field, "")).first()
    tables: list[str] = []
    error = ""
    if server is not None:
        try:
            tables = source_tables(server)
        except connections.ConnectionFailed as exc:
            error = str(exc)
    return render(
        request, "replication_admin/compare/compare_form.html#table-options", {"tables": tables, "error": error}
    )


def _sub_target(request: HttpRequest, subscriber: str, server: str, account: str) -> str:
    return subscription_label(subscriber, server, account)


@require_POST
@requires(OPERATE, f"job.{TrxValidate.kind}", _sub_target)
def subscription_validate(request: HttpRequest, subscriber: str, server: str, account: str) -> HttpResponse:
    """Validate the subscription's tables now (or the one chosen): one job followed on its page, several on the
    subscription's page."""
    sub = get_object_or_404(ReplSubscriber, subscriber=subscriber, server=server, account=account)
    try:
        started = actions.do_validate(Actor.from_request(request), sub, request.POST.get("table") or None)
    except TrxError as exc:
        messages.error(request, f"Not validated: {exc}.")
        return redirect(sub)
    if len(started) == 1:
        return redirect("jobs-detail", pk=started[0].pk)
    messages.success(request, f"Validating {len(started)} table(s): jobs {', '.join(f'#{j.pk}' for j in started)}.")
    return redirect(sub)


def _bidir_target(request: HttpRequest, pk: int) -> str:
    subscription = SnapshotSubscription.objects.filter(pk=pk).first()
    return bidir_actions.subscription_label(subscription) if subscription else f"bi-directional subscription #{pk}"


def _started(request: HttpRequest, start: Callable[[Actor], JobRun], back: Callable[[], HttpResponse]) -> HttpResponse:
    """Start one validation and follow it on its job's page; a refusal is said in one line on `back`'s page."""
    try:
        job = start(Actor.from_request(request))
    except (BidirError, SnapshotError, TrxError) as exc:
        messages.error(request, f"Not validated: {exc}.")
        return back()
    return redirect("jobs-detail", pk=job.pk)


@require_POST
@requires(OPERATE, f"job.{BidirValidate.kind}", _bidir_target)
def bidir_subscription_validate(request: HttpRequest, pk: int) -> HttpResponse:
    """Validate a bi-directional subscription's table now, followed on the job's page."""
    subscription = get_object_or_404(SnapshotSubscription, pk=pk)

    def back() -> HttpResponse:
        publication = SnapshotPublication.objects.filter(item=subscription.item, type=subscription.type).first()
        return redirect(publication) if publication is not None else redirect("subscriptions")

    return _started(request, lambda actor: actions.do_validate_bidir(actor, subscription), back)


@require_POST
@requires(OPERATE, f"job.{SnapshotValidate.kind}", lambda request, name: f"snapshot {name}")
def snapshot_validate(request: HttpRequest, name: str) -> HttpResponse:
    """Validate an incremental snapshot now, followed on the job's page."""
    snapshot = get_object_or_404(Snapshot, name=name)
    return _started(
        request, lambda actor: actions.do_validate_snapshot(actor, snapshot),
        lambda: redirect("snapshots-detail", name=snapshot.name),
    )  # fmt: skip


def _validation_again(job: JobRun) -> Callable[[Actor], JobRun] | str:
    """How to start the same validation again, or why it cannot be (not a validation; its item is gone)."""
    params = job.params
    if job.kind == BidirValidate.kind:
        subscription = SnapshotSubscription.objects.filter(pk=params.get("bidir") or 0).first()
        if subscription is None:
            return "the subscription no longer exists"
        return lambda actor: actions.do_validate_bidir(actor, subscription)
    if job.kind == SnapshotValidate.kind:
        snapshot = Snapshot.objects.filter(name=params.get("snapshot") or "").first()
        if snapshot is None:
            return "the snapshot no longer exists"
        return lambda actor: actions.do_validate_snapshot(actor, snapshot)
    if job.kind != TrxValidate.kind:
        return f"job #{job.pk} is not a validation"
    sub = ReplSubscriber.objects.filter(pk=params.get("subscription") or 0).first()
    if sub is None:
        return "the subscription no longer exists"
    return lambda actor: actions.do_validate(actor, sub, params.get("table") or "")[0]


@require_POST
@requires(OPERATE, f"job.{TrxValidate.kind}", _job_target())
def validate_again(request: HttpRequest, pk: int) -> HttpResponse:
    """The validation of the same table as a new job (the same slice again after drift: a repair's check)."""
    job = get_object_or_404(JobRun, pk=pk)
    again = _validation_again(job)
    if isinstance(again, str):
        messages.error(request, f"Not validated: {again}.")
        return redirect("jobs-detail", pk=pk)
    return _started(request, again, lambda: redirect("jobs-detail", pk=pk))

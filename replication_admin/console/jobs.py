from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.console import actions as console_actions
from replication_admin.console.forms import CompareForm, JobFilterForm
from replication_admin.core import connections
from replication_admin.core import jobs as job_actions
from replication_admin.core.audit import Actor, PermissionDenied
from replication_admin.core.introspection import source_tables
from replication_admin.core.web import SortFields, denied, listing, render_page_or_partial
from replication_admin.models import JobRun, Server, Snapshot

JOB_SORTS: dict[str, SortFields] = {
    "id": "id",
    "kind": ("kind", "-id"),
    "target": ("target", "-id"),
    "state": ("state", "-id"),
    "created": ("created_at", "id"),
    "by": ("created_by__username", "-id"),
}
# The columns the list shows: the log, result and params of thousands of jobs stay in the database.
JOB_LIST_FIELDS = (
    "id", "kind", "target", "state", "progress_done", "progress_total", "created_at", "started_at", "finished_at",
    "created_by__username",
)  # fmt: skip


@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = JobRun.objects.select_related("created_by").only(*JOB_LIST_FIELDS)
    filters = JobFilterForm(request.GET or None)
    if filters.is_valid():
        if filters.cleaned_data["state"]:
            jobs = jobs.filter(state=filters.cleaned_data["state"])
        if filters.cleaned_data["kind"]:
            jobs = jobs.filter(kind=filters.cleaned_data["kind"])
    jobs_listing = listing(request, jobs, sorts=JOB_SORTS, default="-id", search=("kind", "target"))
    active = any(not j.finished for j in jobs_listing.page)
    filtered = any(request.GET.get(name) for name in ("state", "kind", "q"))
    context = {"page": jobs_listing.page, "jobs": jobs_listing, "filters": filters, "active": active,
               "filtered": filtered}  # fmt: skip
    return render_page_or_partial(request, "replication_admin/console/jobs.html", "job-rows", context)


@require_GET
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(JobRun, pk=pk)
    context = {"job": job, "attempts": attempt_chain(job)}
    return render_page_or_partial(request, "replication_admin/console/job_detail.html", "job-status", context)


def attempt_chain(job: JobRun, limit: int = 20) -> list[JobRun]:
    """The attempts of the request `job` belongs to, first to last (a lost attempt is followed by a retry)."""
    first = job
    while first.retry_of_id is not None and limit:
        first = JobRun.objects.only("pk", "state", "retry_of").get(pk=first.retry_of_id)
        limit -= 1
    chain = [first]
    while limit:
        nxt = JobRun.objects.only("pk", "state", "retry_of").filter(retry_of=chain[-1]).first()
        if nxt is None:
            break
        chain.append(nxt)
        limit -= 1
    return chain


@require_http_methods(["GET", "POST"])
def job_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(JobRun, pk=pk)
    if request.method == "GET":
        if job.finished:
            messages.warning(request, "The job had already finished.")
            return redirect("jobs-detail", pk=pk)
        body = (
            f"Job #{job.pk} ({job.kind}: {job.target}) is cancelled: a queued job never runs, a running one stops at "
            "its next progress report without finishing its work. Start it again to have it done."
        )
        return render(request, "replication_admin/confirm.html", {
            "title": f"Cancel job #{job.pk}?",
            "body": body,
            "action": "Cancel job",
            "cancel_url": reverse("jobs-detail", args=[job.pk]),
            "hidden": {},
        })  # fmt: skip
    try:
        cancelled = job_actions.do_cancel_job(Actor.from_request(request), job)
    except PermissionDenied as exc:
        return denied(request, exc)
    if not cancelled:
        messages.warning(request, "The job had already finished.")
    return redirect("jobs-detail", pk=pk)


def _check_table(form: CompareForm, side: str) -> None:
    server: Server = form.cleaned_data[f"{side}_server"]
    table = form.cleaned_data[f"{side}_table"]
    try:
        connections.describe_table(server, table)
    except (connections.ConnectionFailed, connections.TableNotFound) as exc:
        form.add_error(f"{side}_table", str(exc))


@require_http_methods(["GET", "POST"])
def compare_start(request: HttpRequest) -> HttpResponse:
    form = CompareForm(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        _check_table(form, "left")
        _check_table(form, "right")
        if form.is_valid():
            d = form.cleaned_data
            try:
                job = console_actions.do_start_compare(
                    Actor.from_request(request),
                    d["left_server"],
                    d["left_table"],
                    d["right_server"],
                    d["right_table"],
                )
            except PermissionDenied as exc:
                return denied(request, exc)
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                return redirect("jobs-detail", pk=job.pk)
    return render(
        request, "replication_admin/console/compare_form.html", {"form": form, "servers": Server.objects.all()}
    )


@require_POST
def snapshot_compare(request: HttpRequest, name: str) -> HttpResponse:
    """Compare a snapshot's destination with its source query; the job's page follows it."""
    snapshot = get_object_or_404(Snapshot, name=name)
    try:
        job = console_actions.do_compare_snapshot(Actor.from_request(request), snapshot)
    except PermissionDenied as exc:
        return denied(request, exc)
    return redirect("jobs-detail", pk=job.pk)


@require_GET
def column_options(request: HttpRequest) -> HttpResponse:
    """htmx: checkboxes for the columns of the chosen table (key columns are always copied)."""
    server = Server.objects.filter(name=request.GET.get("source_server", "")).first()
    table = request.GET.get("source_table", "")
    info, error = None, ""
    if server is not None and table:
        try:
            info = connections.describe_table(server, table)
        except (connections.ConnectionFailed, connections.TableNotFound) as exc:
            error = str(exc)
    chosen = set(request.GET.getlist("column"))
    return render(
        request,
        "replication_admin/snapshots/snapshot_form.html#column-options",
        {"info": info, "error": error, "chosen": chosen},
    )


@require_GET
def table_options(request: HttpRequest) -> HttpResponse:
    """htmx: <option>s of the tables of the chosen server, for a datalist."""
    server = Server.objects.filter(name=request.GET.get("server", "")).first()
    tables: list[str] = []
    error = ""
    if server is not None:
        try:
            tables = source_tables(server)
        except connections.ConnectionFailed as exc:
            error = str(exc)
    return render(
        request, "replication_admin/console/compare_form.html#table-options", {"tables": tables, "error": error}
    )

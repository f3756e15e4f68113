from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.contrib import messages
from django.db.models import Count, Max, Min, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.console.forms import JobFilterForm
from replication_admin.core import connections
from replication_admin.core import jobs as job_actions
from replication_admin.core.audit import Actor
from replication_admin.core.jobs import Subject, job_subject, result_of
from replication_admin.core.permissions import OPERATE
from replication_admin.core.web import SortFields, listing, render_page_or_partial, requires
from replication_admin.models import JobRun, Server

JOB_SORTS: dict[str, SortFields] = {
    "id": "id",
    "kind": ("kind", "-id"),
    "target": ("target", "-id"),
    "item": ("item", "-id"),
    "state": ("state", "-id"),
    "created": ("created_at", "id"),
    "by": ("created_by__username", "-id"),
}
# The columns the list shows: the log, result and timings of thousands of jobs stay in the database.
JOB_LIST_FIELDS = (
    "id", "kind", "target", "item", "params", "state", "error", "progress_done", "progress_total", "created_at",
    "started_at", "finished_at", "created_by__username", "result",
)  # fmt: skip
FAILURE_GROUPS = 10  # the failures panel shows this many groups of identical failures, the latest first
ITEM_CHOICES = 500  # the item filter offers the objects of this many latest jobs


@dataclass
class FailureGroup:
    """Failed jobs of one kind on one object with the same error: how many, since when, and the latest."""

    kind: str
    item: str
    target: str
    error: str
    count: int
    first_at: datetime
    last_at: datetime
    latest: JobRun
    subject: Subject | None
    refusal: str | None  # why the latest cannot be retried (None: it can)
    rerun: JobRun | None  # the job that ran the latest again
    succeeded_since: bool  # a later job of the same kind on the same object succeeded


def _filtered_jobs(request: HttpRequest) -> tuple[JobFilterForm, QuerySet[JobRun], bool]:
    kinds = {kind: runner.label for kind, runner in job_actions.RUNNERS.items()}
    kinds.update({k: k for k in JobRun.objects.order_by().values_list("kind", flat=True).distinct() if k not in kinds})
    latest_items = JobRun.objects.exclude(item="").order_by("-id").values_list("item", flat=True)[:ITEM_CHOICES]
    filters = JobFilterForm(request.GET or None, kinds=kinds, items=sorted(set(latest_items)))
    jobs = JobRun.objects.all()
    if filters.is_valid():
        for name, field in (("state", "state"), ("kind", "kind"), ("item", "item")):
            if filters.cleaned_data[name]:
                jobs = jobs.filter(**{field: filters.cleaned_data[name]})
    filtered = any(request.GET.get(name) for name in ("state", "kind", "item", "q"))
    return filters, jobs, filtered


def _latest_per_object(jobs: list[JobRun], **where) -> dict[tuple[str, str], int]:
    """The highest id among the jobs of each (kind, object) of `jobs` (that match `where`): the object is the
    item, or the target of jobs queued before jobs recorded their item."""
    kinds = {j.kind for j in jobs}
    latest: dict[tuple[str, str], int] = {}
    items = {j.item for j in jobs if j.item}
    if items:
        by_item = JobRun.objects.filter(kind__in=kinds, item__in=items, **where).order_by().values("kind", "item")
        latest.update({(k, i): m for k, i, m in by_item.annotate(m=Max("id")).values_list("kind", "item", "m")})
    targets = {j.target for j in jobs if not j.item}
    if targets:
        by_target = JobRun.objects.filter(kind__in=kinds, item="", target__in=targets, **where).order_by()
        grouped = by_target.values("kind", "target").annotate(m=Max("id")).values_list("kind", "target", "m")
        latest.update({(k, t): m for k, t, m in grouped})
    return latest


def _object_key(job: JobRun) -> tuple[str, str]:
    return (job.kind, job.item or job.target)


class _Subjects:
    """The object of each job, looked up once per kind and parameters on a page."""

    def __init__(self) -> None:
        self._known: dict[str, Subject | None] = {}

    def of(self, job: JobRun) -> Subject | None:
        key = f"{job.kind} {json.dumps(job.params, sort_keys=True, default=str)}"
        if key not in self._known:
            self._known[key] = job_subject(job.kind, job.params)
        return self._known[key]


def failure_groups(jobs: QuerySet[JobRun], subjects: _Subjects) -> list[FailureGroup]:
    """The failed jobs among `jobs` grouped by kind, object and error text, the group failing last first."""
    rows = list(
        jobs.filter(state=JobRun.State.FAILED)
        .order_by()
        .values("kind", "item", "target", "error")
        .annotate(count=Count("id"), first_at=Min("created_at"), last_at=Max("created_at"), latest=Max("id"))
        .order_by("-latest")[:FAILURE_GROUPS]
    )
    latest = JobRun.objects.in_bulk([r["latest"] for r in rows])
    following = job_actions.followers(list(latest.values()))
    succeeded = _latest_per_object(list(latest.values()), state=JobRun.State.SUCCEEDED)
    groups = []
    for row in rows:
        job = latest[row["latest"]]
        groups.append(FailureGroup(
            kind=row["kind"], item=row["item"], target=row["target"], error=row["error"], count=row["count"],
            first_at=row["first_at"], last_at=row["last_at"], latest=job, subject=subjects.of(job),
            refusal=job_actions.rerun_refusal(job, following.get(job.pk)), rerun=following.get(job.pk),
            succeeded_since=succeeded.get(_object_key(job), 0) > job.pk,
        ))  # fmt: skip
    return groups


@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    filters, jobs, filtered = _filtered_jobs(request)
    jobs_listing = listing(
        request, jobs.select_related("created_by").only(*JOB_LIST_FIELDS), sorts=JOB_SORTS, default="-id",
        search=("kind", "target", "item"),
    )  # fmt: skip
    shown = list(jobs_listing.page)
    subjects = _Subjects()
    # A job already run again (by the reaper or a person), or followed by a later job on the same object, offers
    # no Retry: the later one does.
    finished = [j for j in shown if j.state in job_actions.RERUNNABLE]
    following = job_actions.followers(finished)
    latest = _latest_per_object(finished)
    rows = [
        {
            "job": j,
            "subject": subjects.of(j),
            "retryable": j in finished and j.pk not in following and latest.get(_object_key(j), 0) <= j.pk,
        }
        for j in shown
    ]
    active = any(not j.finished for j in shown)
    context = {"page": jobs_listing.page, "jobs": jobs_listing, "rows": rows, "filters": filters, "active": active,
               "filtered": filtered, "failures": failure_groups(jobs, subjects)}  # fmt: skip
    return render_page_or_partial(request, "replication_admin/console/jobs.html", "job-rows", context)


@require_GET
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(JobRun.objects.select_related("rerun_of"), pk=pk)
    context = {
        "job": job,
        "result": result_of(job),  # its kind's typed result (None until it succeeded)
        "attempts": attempt_chain(job),
        "subject": job_subject(job.kind, job.params),
        "reruns": list(job.reruns.order_by("pk").only("pk", "state")),
        "refusal": job_actions.rerun_refusal(job) if job.finished else None,
    }
    return render_page_or_partial(request, "replication_admin/console/job_detail.html", "job-status", context)


def _job_label(request: HttpRequest, pk: int) -> str:
    job = JobRun.objects.filter(pk=pk).first()
    return str(job) if job is not None else f"job #{pk}"


@require_POST
@requires(OPERATE, "job.retry", _job_label)
def job_retry(request: HttpRequest, pk: int) -> HttpResponse:
    """Run a failed or cancelled job again with the same parameters; its page follows the new one."""
    job = get_object_or_404(JobRun, pk=pk)
    try:
        retry = job_actions.do_retry_job(Actor.from_request(request), job)
    except job_actions.JobError as exc:
        messages.error(request, str(exc))
        return redirect("jobs-detail", pk=pk)
    if retry.rerun_of_id == job.pk:
        messages.success(request, f"Job #{job.pk} runs again as job #{retry.pk}.")
    else:
        messages.success(request, f"The same job was already queued as job #{retry.pk}; it does this one's work.")
    return redirect("jobs-detail", pk=retry.pk)


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
@requires(OPERATE, "job.cancel", _job_label)
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
    cancelled = job_actions.do_cancel_job(Actor.from_request(request), job)
    if not cancelled:
        messages.warning(request, "The job had already finished.")
    return redirect("jobs-detail", pk=pk)


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

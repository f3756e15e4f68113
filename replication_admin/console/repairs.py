"""Pages that act on a finished compare: repair the keys chosen among its listed differences, compare again."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from replication_admin.console import actions as console_actions
from replication_admin.console.key_repair import RepairRefused
from replication_admin.core.audit import Actor, PermissionDenied
from replication_admin.core.jobs import JobError
from replication_admin.core.web import denied
from replication_admin.models import JobRun

SHOWN_KEYS = 20  # keys named on the confirmation page; the rest are counted


def _chosen(values: list[str]) -> list[int]:
    """Row positions from the form: checkboxes (`row`, one each) or the confirmation's list (`rows`, comma-joined)."""
    chosen = []
    for value in values:
        for part in value.split(","):
            if part.strip().isdigit():
                chosen.append(int(part))
    return chosen


@require_http_methods(["GET", "POST"])
def compare_repair(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the confirmation naming how many keys and which; POST: start the repair (its job's page follows it)."""
    job = get_object_or_404(JobRun, pk=pk)
    data = request.POST if request.method == "POST" else request.GET
    chosen = _chosen(data.getlist("row") + data.getlist("rows"))
    try:
        if request.method == "POST":
            repair = console_actions.do_repair_keys(Actor.from_request(request), job, chosen)
            return redirect("jobs-detail", pk=repair.pk)
        rows = console_actions.compared_rows(job, chosen)
    except PermissionDenied as exc:
        return denied(request, exc)
    except RepairRefused as exc:
        messages.error(request, f"Not repaired: {exc}.")
        return redirect("jobs-detail", pk=pk)
    except ValueError as exc:  # a row that is not listed, or not a finished compare
        messages.error(request, f"{exc}.")
        return redirect("jobs-detail", pk=pk)
    named = "; ".join(", ".join(f"{n}={v}" for n, v in row["key"].items()) for row in rows[:SHOWN_KEYS])
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
def compare_again(request: HttpRequest, pk: int) -> HttpResponse:
    """The same compare as a new job (from a compare or from a repair of its keys)."""
    job = get_object_or_404(JobRun, pk=pk, kind__in=["compare", "compare_repair"])
    try:
        again = console_actions.do_compare_again(Actor.from_request(request), job)
    except PermissionDenied as exc:
        return denied(request, exc)
    except JobError as exc:  # a compare recorded without its tables
        messages.error(request, f"Not compared again: {exc}.")
        return redirect("jobs-detail", pk=pk)
    return redirect("jobs-detail", pk=again.pk)

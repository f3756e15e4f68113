"""The conflict inbox: every row version that lost a conflict on a publisher (REPL_CONFLICT), to inspect,
export and re-apply."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from replication_admin.conflicts import actions as resolver_actions
from replication_admin.conflicts.forms import ConflictFilterForm
from replication_admin.conflicts.selectors import (
    RECENT_DAYS,
    STATS_DAYS,
    conflict_statistics,
    conflicts_by_subscription_figure,
    conflicts_per_day_figure,
)
from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.web import (
    Chart,
    HtmxHttpRequest,
    Listing,
    chart_table,
    paginate,
    render_page_or_partial,
    requires,
    sort_queryset,
    text_filter,
    window_words,
)
from replication_admin.models import (
    ConflictBackup,
    SnapshotConflictResolver,
    SnapshotPublication,
    TransactionalConflictResolver,
)
from replication_admin.transactional import selectors as trx_selectors

LIST_FIELDS = (
    "id", "kind", "created_at", "item", "table_name", "source", "origin", "conflict_type", "operation",
    "decision", "resolver", "primary_key", "reapplied_at", "dismissed_at", "chosen",
)  # fmt: skip
# The query parameters of the inbox's filter, carried by "all matching the filter" to the bulk confirmation.
FILTER_PARAMS = ("q", "item", "table", "type", "decision", "status", "since", "until")
# Ties keep the newest (highest id) first when sorting descending, the oldest when ascending.
CONFLICT_SORTS = {
    "id": "id",
    "created": "created_at",
    "item": "item",
    "table": "table_name",
    "type": "conflict_type",
    "operation": "operation",
    "source": "source",
    "decision": "decision",
    "resolver": "resolver",
}
CONFLICT_SEARCH = ("item", "table_name", "source", "origin", "resolver")
CSV_HEADER = [
    "id", "created_at", "item", "table", "source", "origin", "type", "operation", "decision", "resolver",
    "primary_key", "winning_row", "losing_row",
]  # fmt: skip
CSV_FIELDS = (
    "id", "created_at", "item", "table_name", "source", "origin", "conflict_type", "operation", "decision",
    "resolver", "primary_key", "winning_row", "losing_row",
)  # fmt: skip


def _filtered(request: HttpRequest) -> tuple[ConflictFilterForm, QuerySet[ConflictBackup], str]:
    """The filter form (items offered: every publication and every item with conflicts) and what it and the
    text filter select."""
    items = set(SnapshotPublication.objects.values_list("item", flat=True))
    items.update(ConflictBackup.objects.order_by("item").values_list("item", flat=True).distinct())
    filters = ConflictFilterForm(request.GET, items=sorted(items))
    conflicts, text = text_filter(request, filters.filter(ConflictBackup.objects.all()), CONFLICT_SEARCH)
    return filters, conflicts, text


@require_GET
def conflict_list(request: HtmxHttpRequest) -> HttpResponse:
    filters, conflicts, text = _filtered(request)
    ordered, sort = sort_queryset(request, conflicts.only(*LIST_FIELDS), CONFLICT_SORTS, "-created")
    page = paginate(request, ordered)
    query = request.GET.copy()
    for name in ("page", "sort"):
        query.pop(name, None)
    figure = conflicts_per_day_figure(conflicts)
    context = {
        "filters": filters,
        "filter_params": [(k, v) for k in FILTER_PARAMS for v in request.GET.getlist(k) if v],
        "page": page,
        "conflicts": Listing(page, sort, text),
        "query": query.urlencode(),
        "filtered": any(v for k, v in query.items()),
        "any_conflicts": bool(page.object_list) or ConflictBackup.objects.exists(),
        "figure": figure,
        "figure_table": chart_table(figure, "Day"),
    }
    if not request.htmx:
        publications = dict(SnapshotPublication.objects.values_list("item", "pk"))
        context["snapshot_resolvers"] = [
            (r, publications.get(r.table_name)) for r in SnapshotConflictResolver.objects.all()
        ]
        context["transactional_resolvers"] = [
            (r, trx_selectors.table_item(*r.table_name.partition(".")[::2]))
            for r in TransactionalConflictResolver.objects.all()
        ]
    return render_page_or_partial(request, "replication_admin/conflicts/conflicts.html", "conflict-results", context)


class _Echo:
    """A file-like object that hands back what csv.writer writes, for streaming."""

    def write(self, value: str) -> str:
        return value


def _json(value: Any) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False, default=str)


@require_GET
def conflict_statistics_page(request: HttpRequest) -> HttpResponse:
    """Conflicts per subscription and type (today, this week, this month, kept, held) and per day, and the
    retention of their backups."""
    last = timezone.localdate()
    first = last - timedelta(days=STATS_DAYS - 1)
    figure = conflicts_by_subscription_figure(first, last)
    context = {
        "stats": conflict_statistics(),
        "chart": Chart(figure, x_title="Day"),
        "window": window_words(figure, timedelta(days=STATS_DAYS), f"last {STATS_DAYS} days", timezone.now()),
        "days": STATS_DAYS,
        "week_days": RECENT_DAYS,
        "retention": resolver_actions.retention_days(),
        "max_days": resolver_actions.MAX_RETENTION_DAYS,
    }
    return render(request, "replication_admin/conflicts/statistics.html", context)


@require_POST
@requires(EDIT, "conflict.retention", lambda request: request.POST.get("days", ""))
def conflict_retention(request: HttpRequest) -> HttpResponse:
    try:
        days = int(request.POST.get("days", ""))
    except ValueError:
        messages.error(request, f"The retention is a number of days, not {request.POST.get('days', '')!r}.")
        return redirect("conflicts-statistics")
    try:
        messages.success(request, resolver_actions.do_set_conflict_retention(Actor.from_request(request), days))
    except ReplicationError as exc:
        messages.error(request, str(exc))
    return redirect("conflicts-statistics")


@require_GET
def conflict_export(request: HttpRequest) -> StreamingHttpResponse:
    """The conflicts the current filter selects, newest first, as CSV (streamed: any number of rows)."""
    _, conflicts, _ = _filtered(request)
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(CSV_HEADER)
        for row in conflicts.values_list(*CSV_FIELDS).iterator(chunk_size=2000):
            (pk, created, item, table, source, origin, ctype, operation, decision, resolver, key, won, lost) = row
            yield writer.writerow([
                pk, created.astimezone(UTC).isoformat(), item, table, source, origin, ctype, operation, decision,
                resolver, _json(key), _json(won), _json(lost),
            ])  # fmt: skip

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="conflicts.csv"'
    return response


_ABSENT = object()


def compare_rows(left: dict | None, right: dict | None, order=None) -> list[dict]:
    """Every column of either row, in the left row's order then the right's (or `order`'s), with whether the
    values differ."""
    left, right = left or {}, right or {}
    result = []
    names = list(dict.fromkeys([*left, *right]))
    for name in order(names) if order is not None else names:
        a, b = left.get(name, _ABSENT), right.get(name, _ABSENT)
        result.append({
            "name": name,
            "left": None if a is _ABSENT else a, "left_absent": a is _ABSENT,
            "right": None if b is _ABSENT else b, "right_absent": b is _ABSENT,
            "differs": a != b,
        })  # fmt: skip
    return result


@require_GET
def conflict_detail(request: HttpRequest, pk: int) -> HttpResponse:
    conflict = get_object_or_404(ConflictBackup.objects.select_related("job"), pk=pk)
    context = {
        "conflict": conflict,
        "versions": compare_rows(conflict.winning_row, conflict.losing_row, conflict.in_column_order),
        "arrivals": compare_rows(conflict.publisher_row, conflict.incoming_row, conflict.in_column_order),
        "publication": SnapshotPublication.objects.filter(item=conflict.item).first(),
        "resolver_row": SnapshotConflictResolver.objects.filter(pk=conflict.resolver_id).first()
        if conflict.resolver_id
        else None,
        "editable": _editable(conflict),
    }
    return render(request, "replication_admin/conflicts/detail.html", context)


def _editable(conflict: ConflictBackup) -> list[tuple[str, object]]:
    """A held conflict's columns a person may edit (not the key, not ROWGUID), with the subscriber's values."""
    if conflict.decision != ConflictBackup.HELD:
        return []
    start = conflict.incoming_row or conflict.publisher_row or {}
    key = set(conflict.primary_key or {})
    return [(n, start.get(n)) for n in conflict.columns if n not in key and n.upper() != "ROWGUID"]


def _conflict_target(request: HttpRequest, pk: int) -> str:
    """How the audit log names a conflict: `conflict #12 (item)`."""
    item = ConflictBackup.objects.filter(pk=pk).values_list("item", flat=True).first()
    return f"conflict #{pk} ({item or ''})"


@require_POST
@requires(OPERATE, "conflict.decide", _conflict_target)
def conflict_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """A person's pick for a held conflict: the publisher's version, the subscriber's, or the edited one."""
    conflict = get_object_or_404(ConflictBackup, pk=pk)
    try:
        choice = int(request.POST.get("choice", ""))
    except ValueError:
        choice = 0
    edited = {k[4:]: str(v) for k, v in request.POST.items() if k.startswith("col:")}
    return _acted(request, conflict, lambda actor: resolver_actions.do_decide_held(actor, conflict, choice, edited))


def _acted(request: HttpRequest, conflict: ConflictBackup, call) -> HttpResponse:
    """Run an inbox action as the signed-in user: its note or error as a message, back on the conflict's page."""
    try:
        message = call(Actor.from_request(request))
    except ReplicationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, message)
    return redirect("conflicts-detail", pk=conflict.pk)


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "conflict.reapply", _conflict_target, says="re-apply")
def conflict_reapply(request: HttpRequest, pk: int) -> HttpResponse:
    """Write the losing version onto the publisher as a new change; the next sync sends it everywhere."""
    conflict = get_object_or_404(ConflictBackup, pk=pk)
    if request.method == "POST":
        return _acted(request, conflict, lambda actor: resolver_actions.do_reapply_conflict(actor, conflict))
    if conflict.reapplied_at:
        messages.warning(request, f"Already re-applied by {conflict.reapplied_by or 'someone'}.")
        return redirect("conflicts-detail", pk=conflict.pk)
    key = ", ".join(f"{k}={v}" for k, v in (conflict.primary_key or {}).items())
    body = (
        f"The losing version of {conflict.table_name} ({key}) is written on the publisher {conflict.publisher} "
        "as a new change, replacing the row there (or deleting it, when the losing version was a delete). "
        "The next sync sends it to every subscriber."
    )
    return render(request, "replication_admin/confirm.html", {
        "title": f"Re-apply the losing version of conflict #{conflict.pk}?",
        "body": body,
        "action": "Re-apply the losing version",
        "cancel_url": reverse("conflicts-detail", args=[conflict.pk]),
        "hidden": {},
    })  # fmt: skip


def _bulk_selection(request: HttpRequest, source) -> tuple[list[ConflictBackup], bool]:
    """The conflicts a bulk action is for: the ticked ones, or every one the filter selects ("all"), newest first,
    at most BULK_LIMIT; and whether the filter selected more than that."""
    if source.get("all") == "1":
        _, conflicts, _ = _filtered(request)
    else:
        ids = [int(i) for i in source.getlist("id") if i.isdigit()]
        if source.get("ids"):
            ids += [int(i) for i in source["ids"].split(",") if i.isdigit()]
        conflicts = ConflictBackup.objects.filter(pk__in=ids)
    chosen = list(conflicts.order_by("-created_at", "-id")[: resolver_actions.BULK_LIMIT + 1])
    return chosen[: resolver_actions.BULK_LIMIT], len(chosen) > resolver_actions.BULK_LIMIT


@require_http_methods(["GET", "POST"])
@requires(OPERATE, "conflict.bulk", lambda request: f"{request.POST.get('action', '')} of selected conflicts")
def conflict_bulk(request: HttpRequest) -> HttpResponse:
    """Re-apply or dismiss many conflicts: a GET (the inbox's selection) shows one confirmation naming how many and
    which; its POST handles exactly those, each as its own page would."""
    source = request.POST if request.method == "POST" else request.GET
    action = source.get("action", "")
    if action not in resolver_actions.BULK_ACTIONS:
        messages.error(request, "Choose re-apply or dismiss for the selected conflicts.")
        return redirect("conflicts")
    back = reverse("conflicts") + (f"?{source['back']}" if source.get("back") else "")
    if request.method == "POST":
        chosen, _ = _bulk_selection(request, source)
        try:
            outcome = resolver_actions.do_bulk_conflicts(Actor.from_request(request), action, [c.pk for c in chosen])
        except ReplicationError as exc:
            messages.error(request, str(exc))
            return redirect(back)
        verb = "re-applied" if action == "reapply" else "dismissed"
        line = f"{len(outcome.done)} conflict{'s' if len(outcome.done) != 1 else ''} {verb}"
        if outcome.left_out:
            line += f"; {len(outcome.left_out)} left as they were (held for a person or already handled)"
        messages.success(request, line + ".")
        for pk, error in outcome.failed:
            messages.error(request, f"conflict #{pk}: {error}")
        return redirect(back)
    if request.GET.get("all") != "1" and not request.GET.getlist("id"):
        messages.warning(request, "Tick the conflicts to handle first, or choose all that match the filter.")
        return redirect(back)
    chosen, more = _bulk_selection(request, request.GET)
    rows = [(c, resolver_actions.bulk_left_out(c, action)) for c in chosen]
    acting = [c for c, reason in rows if reason is None]
    left_out = len(rows) - len(acting)
    verb = resolver_actions.BULK_ACTIONS[action]
    what = (
        "The losing version of each is written on its publisher as a new change (as its own page's re-apply does); "
        "the next sync sends it to every subscriber."
        if action == "reapply"
        else "Each is marked dismissed: handled without applying it, kept for the record (filter by status to see "
        "them), and it may still be re-applied from its page."
    )
    if left_out:
        what += (
            f" {left_out} of those chosen are left as they are: held conflicts wait for a person to pick their version"
            " on their own page, and handled ones are not handled twice."
        )
    if more:
        what += f" The filter selects more than {resolver_actions.BULK_LIMIT}: the newest {len(rows)} are shown."
    return render(request, "replication_admin/confirm.html", {
        "title": f"{verb.capitalize()} {len(acting)} conflict{'s' if len(acting) != 1 else ''}?",
        "body": what,
        "action": f"{verb.capitalize()} {len(acting)} conflict{'s' if len(acting) != 1 else ''}",
        "cancel_url": back,
        "hidden": {"action": action, "ids": ",".join(str(c.pk) for c in acting), "back": source.get("back", "")},
        "rows_template": "replication_admin/conflicts/bulk_rows.html",
        "rows": rows,
        "disabled": not acting,
    })  # fmt: skip

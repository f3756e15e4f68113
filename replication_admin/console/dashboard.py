from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from replication_admin.bidir.selectors import bidir_states
from replication_admin.conflicts.selectors import conflicts_per_day_figure, recent_conflicts
from replication_admin.console.actions import do_acknowledge_alert
from replication_admin.console.status_api import snapshot_rows, trx_rows
from replication_admin.console.topology import DASHBOARD_DRAWN_SERVERS, topology
from replication_admin.core.alerts import open_alerts
from replication_admin.core.audit import MACHINE_VIAS, Actor
from replication_admin.core.permissions import OPERATE
from replication_admin.core.times import duration_text
from replication_admin.core.web import (
    Chart,
    is_htmx,
    line_chart,
    local_stamp,
    per_day_counts,
    render_page_or_partial,
    requires,
    stacked_bars,
    window_words,
)
from replication_admin.engine import health
from replication_admin.models import (
    Alert,
    AuditEntry,
    ConflictBackup,
    JobRun,
    LevelSample,
    ReplAccount,
    ScheduledEvent,
    Server,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.snapshots.selectors import refresh_result

OUTCOME_COLOURS = {"succeeded": "#2e7d32", "failed": "#c62828", "cancelled": "#757575"}
ITEMS_SHOWN = 50
STATE_BADGES = health.BADGES
STATE_LABELS = health.LABELS  # the status API's values, as a DBA reads them
RESOLVED_SHOWN = 10
KIND_ORDER = ("snapshot", "bi-directional publication", "bi-directional subscription", "transactional subscription")
MAX_LAG_SAMPLES = 5000  # newest REPL_LEVEL_HISTORY rows drawn in the lag chart
MAX_REFRESH_JOBS = 1000  # newest refresh jobs drawn in the refresh charts
DASHBOARD_SUB_FIELDS = ("server", "item", "type", "init_state", "last_sync_at", "last_error")


def chart_days(days: int) -> tuple[date, date, datetime]:
    """The last `days` days in the console's time zone, today included: first, last and the first one's midnight."""
    last = timezone.localdate()
    first = last - timedelta(days=days - 1)
    return first, last, timezone.make_aware(datetime.combine(first, time.min))


def job_outcomes_figure(days: int = 14) -> dict:
    """Plotly figure (as a dict) of finished jobs per day by outcome."""
    first, last, since = chart_days(days)
    series: dict[str, dict[str, int]] = {}
    for day, state, n in per_day_counts(JobRun.objects.filter(finished_at__gte=since), "finished_at", "state"):
        series.setdefault(state, {})[day.isoformat()] = n
    traces = [
        {
            "type": "bar",
            "name": state,
            "x": list(points),
            "y": list(points.values()),
            "marker": {"color": OUTCOME_COLOURS.get(state, "#1565c0")},
        }
        for state, points in sorted(series.items())
    ]
    return stacked_bars(traces, first, last)


def age(at: datetime | None, now: datetime) -> str:
    """How long ago `at` was, for people ("3 min ago")."""
    if at is None:
        return "never"
    seconds = (now - at).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} d ago"


def _parse(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso) if iso else None


def _item(
    kind: str,
    name: str,
    detail: str,
    route: tuple,
    state: str,
    at: datetime | None,
    *,
    ends: tuple[str | None, str | None],
    lag_seconds: float | None = None,
    pending: int | None = None,
    unit: str = "row",
) -> dict:
    """An item; its page is the URL pattern and arguments in `route`, reversed only for the items shown. `at` is
    its last success; a not-initialised item has none to show (whatever ran before its initial copy). `ends` are
    the servers it replicates from and to; `lag_seconds` how far behind in time, `pending` the changes waiting."""
    labels = health.SNAPSHOT_LABELS if kind == "snapshot" else STATE_LABELS
    return {"kind": kind, "name": name, "detail": detail, "route": route, "state": state,
            "badge": STATE_BADGES.get(state, ""), "label": labels.get(state, state),
            "title": health.EXPLANATIONS.get(state, ""), "at": None if state == health.NEVER else at,
            "source": ends[0], "destination": ends[1], "lag_seconds": lag_seconds,
            "lag": duration_text(lag_seconds) if lag_seconds is not None else "", "pending": pending,
            "pending_text": "" if pending is None else f"{pending} {unit}{'' if pending == 1 else 's'}"}  # fmt: skip


def replication_items(now: datetime, shown: int | None = None) -> list[dict]:
    """Every snapshot, bi-directional subscription and transactional subscription with its state (the status API's
    rules and builders), how far behind it is, the time of its last success and its page; the most urgent first.
    With `shown`, only the first `shown` items get their page's URL and age (the others are only counted)."""
    items = []
    for s in snapshot_rows(now):
        at = _parse(s["last_success_at"]) or _parse(s["last_ts"])
        detail = " · ".join(filter(None, [f"{s['dest_server']}.{s['dest_table']}", s["last_error"]]))
        items.append(_item("snapshot", s["name"], detail, ("snapshots-detail", s["name"]), s["state"], at,
                           ends=(s["source_server"], s["dest_server"]), lag_seconds=s["lag_seconds"],
                           pending=s["pending_rows"]))  # fmt: skip
    for pub, pub_state, subs in bidir_states(DASHBOARD_SUB_FIELDS):
        route: tuple[object, ...] = ("publications-detail", pub.pk)
        detail = pub.last_sync_error or f"{pub.server_id}.{pub.table}"
        items.append(_item("bi-directional publication", pub.item, detail, route, pub_state, pub.last_sync_at,
                           ends=(pub.server_id, pub.server_id)))  # fmt: skip
        for sub, state in subs:
            detail = sub["last_error"] or sub["live_error"] or ("" if sub["init_state"] == "done"
                                                                 else f"init {sub['init_state']}")  # fmt: skip
            backlog = sub["backlog"]
            items.append(_item("bi-directional subscription", f"{pub.item} ↔ {sub['server']}", detail, route, state,
                               sub["last_sync_at"], ends=(pub.server_id, sub["server"]),
                               lag_seconds=None if backlog is None else backlog.seconds(now),
                               pending=sub["pending_rows"]))  # fmt: skip
    for account in trx_rows(now):
        for sub in account["subscribers"]:
            route = ("trx-subscriptions-detail", sub["subscriber"], account["server"], account["account"])
            detail = " · ".join(filter(None, [sub["sync_state"], sub["lag_text"] if sub["lag_transactions"] is None
                                              else "", sub["last_error"]]))  # fmt: skip
            name = f"{sub['subscriber']} ← {account['server']}/{account['account']}"
            items.append(_item("transactional subscription", name, detail, route, sub["state"],
                               _parse(sub["last_sync_at"]), ends=(account["server"], sub["subscriber"]),
                               lag_seconds=sub["lag_seconds"], pending=sub["lag_transactions"],
                               unit="transaction"))  # fmt: skip
    severity = {state: -n for n, state in enumerate(health.STATES)}
    kinds = {kind: n for n, kind in enumerate(KIND_ORDER)}
    items.sort(key=lambda i: (severity[i["state"]], kinds[i["kind"]], i["name"]))
    for item in items[:shown]:  # reversing thousands of URLs nobody sees would cost more than the rest
        item["url"] = reverse(item["route"][0], args=item["route"][1:])
        item["age"] = age(item["at"], now)
        # Broken since its last success: the first screen answers "since when" without opening the item.
        broken = item["badge"] == "bad" and item["at"] is not None
        item["broken_for"] = duration_text((now - item["at"]).total_seconds()) if broken else ""
    return items


def items_context(now: datetime) -> dict:
    items = replication_items(now, shown=ITEMS_SHOWN)
    graph = topology(items, rows_shown=ITEMS_SHOWN, max_drawn=DASHBOARD_DRAWN_SERVERS)
    counts = {state: 0 for state in reversed(health.STATES)}
    for item in items:
        counts[item["state"]] += 1
    worst = health.worst(i["state"] for i in items)
    return {
        "items": items[:ITEMS_SHOWN],
        "items_total": len(items),
        "items_state": STATE_LABELS.get(worst, worst),
        "items_badge": STATE_BADGES[worst],
        "items_counts": [(STATE_LABELS.get(state, state), STATE_BADGES[state], n) for state, n in counts.items() if n],
        "legend": [(STATE_LABELS[state], STATE_BADGES[state], health.EXPLANATIONS[state]) for state in health.STATES],
        **graph,
    }


def lag_figure(now: datetime, hours: int = 24) -> dict:
    """Lag of each transactional subscriber over the last `hours` (REPL_LEVEL_HISTORY), one line per subscriber."""
    samples = (
        LevelSample.objects.filter(at__gte=now - timedelta(hours=hours))
        .order_by("-at")
        .values_list("server", "account", "subscriber", "at", "lag")[:MAX_LAG_SAMPLES]
    )
    lines: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
    for server, account, subscriber, at, lag in reversed(list(samples)):
        lines.setdefault((server, account, subscriber), []).append((local_stamp(at), lag))
    traces = [
        {"type": "scatter", "mode": "lines+markers", "name": f"{subscriber} ({server}/{account})",
         "x": [x for x, _ in points], "y": [y for _, y in points]}
        for (server, account, subscriber), points in sorted(lines.items())
    ]  # fmt: skip
    return line_chart(traces, "lag (transactions)", since=now - timedelta(hours=hours), until=now)


def _refresh_duration(timings: dict | None, started: datetime | None, finished: datetime | None) -> float | None:
    total = (timings or {}).get("total")
    if isinstance(total, int | float) and not isinstance(total, bool):
        return float(total)
    return (finished - started).total_seconds() if started and finished else None


def refresh_figures(now: datetime, days: int = 7) -> tuple[dict, dict]:
    """Duration and throughput (rows/s) of the snapshot refreshes finished in the last `days`, a line per snapshot."""
    jobs = (
        JobRun.objects.filter(
            kind="snapshot_refresh", state__in=JobRun.FINISHED, finished_at__gte=now - timedelta(days=days)
        )
        .order_by("-finished_at")
        .values_list("params", "started_at", "finished_at", "timings", "result")[:MAX_REFRESH_JOBS]
    )
    durations: dict[str, list[tuple[str, float]]] = {}
    throughput: dict[str, list[tuple[str, float]]] = {}
    for params, started, finished, timings, result in reversed(list(jobs)):
        name = str((params or {}).get("snapshot", "?"))
        seconds = _refresh_duration(timings, started, finished)
        if seconds is None:
            continue
        stamp = local_stamp(finished)
        durations.setdefault(name, []).append((stamp, round(seconds, 3)))
        refreshed = refresh_result(result)
        rows = refreshed.moved if refreshed is not None else None
        if rows is not None and seconds > 0:
            throughput.setdefault(name, []).append((stamp, round(rows / seconds, 1)))

    def lines(series: dict[str, list[tuple[str, float]]]) -> list[dict]:
        return [
            {"type": "scatter", "mode": "lines+markers", "name": name, "x": [x for x, _ in points],
             "y": [y for _, y in points]}
            for name, points in sorted(series.items())
        ]  # fmt: skip

    since = now - timedelta(days=days)
    return (
        line_chart(lines(durations), "duration (s)", since=since, until=now),
        line_chart(lines(throughput), "rows/s", since=since, until=now),
    )


def charts_context(now: datetime) -> dict:
    duration, throughput = refresh_figures(now)
    first, last, since = chart_days(14)
    conflicts = conflicts_per_day_figure(ConflictBackup.objects.filter(created_at__gte=since), first, last)
    lag, jobs = lag_figure(now), job_outcomes_figure()
    titles = {
        "lag": window_words(lag, timedelta(hours=24), "last 24 hours", now),
        "conflicts": window_words(conflicts, timedelta(days=14), "last 14 days", now),
        "refresh": window_words(duration, timedelta(days=7), "last 7 days", now),
        "jobs": window_words(jobs, timedelta(days=14), "last 14 days", now),
    }
    return {
        "titles": titles,
        "lag_chart": Chart(lag),
        "duration_chart": Chart(duration),
        "throughput_chart": Chart(throughput),
        "conflicts_chart": Chart(conflicts, x_title="Day"),
        "jobs_chart": Chart(jobs, x_title="Day"),
    }


def overview_context() -> dict:
    now = timezone.now()
    day_ago = now - timedelta(days=1)
    servers = list(Server.objects.all())
    context = {
        "servers": servers,
        "servers_failing": [s for s in servers if s.last_check_ok is False],
        "counts": {
            "snapshots": Snapshot.objects.count(),
            "publications": SnapshotPublication.objects.count() + ReplAccount.objects.count(),
            "subscriptions": SnapshotSubscription.objects.count(),
            "events": ScheduledEvent.objects.filter(disabled=0).count(),
        },
        "running": JobRun.objects.filter(state__in=[JobRun.State.QUEUED, JobRun.State.RUNNING]).count(),
        "failed_recent": JobRun.objects.filter(state=JobRun.State.FAILED, finished_at__gte=day_ago).count(),
        "held_conflicts": ConflictBackup.objects.filter(decision=ConflictBackup.HELD).count(),
        "recent_conflicts": recent_conflicts(now),
        "open_alert_count": open_alerts().count(),
        "recent_jobs": JobRun.objects.all()[:10],
        "recent_audit": AuditEntry.objects.exclude(via__in=MACHINE_VIAS)[:8],  # people's, not the scheduler's
        "alerts": list(open_alerts()[:20]),
        "resolved_alerts": list(
            Alert.objects.filter(resolved_at__isnull=False).order_by("-resolved_at")[:RESOLVED_SHOWN]
        ),
        **items_context(now),
    }
    return context


@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    return render_page_or_partial(request, "replication_admin/console/dashboard.html", "overview", overview_context())


@require_GET
def dashboard_charts(request: HttpRequest) -> HttpResponse:
    """The charts, asked for by the dashboard once it is shown (alone, they make a page of their own)."""
    context = charts_context(timezone.now())
    if is_htmx(request):
        return render(request, "replication_admin/console/dashboard.html#charts", context)
    return render(request, "replication_admin/console/dashboard_charts.html", context)


@require_GET
def topology_page(request: HttpRequest) -> HttpResponse:
    """Who replicates to whom (see console/topology.py); the graph alone for htmx's refresh."""
    context = {**topology(replication_items(timezone.now())), "standalone": True}
    return render_page_or_partial(request, "replication_admin/console/topology.html", "graph", context)


def _alert_target(request: HttpRequest, pk: int) -> str:
    alert = Alert.objects.filter(pk=pk).first()
    return f"alert #{pk} {alert.kind} {alert.target}" if alert is not None else f"alert #{pk}"


@require_POST
@requires(OPERATE, "alert.acknowledge", _alert_target)
def alert_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    """Acknowledge an alert; htmx gets the refreshed overview back, a plain form the dashboard."""
    alert = get_object_or_404(Alert, pk=pk)
    do_acknowledge_alert(Actor.from_request(request), alert)
    if is_htmx(request):
        return render(request, "replication_admin/console/dashboard.html#overview", overview_context())
    back = request.POST.get("next", "")  # the Alerts page sends its own address, filters kept
    if url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(back)
    return redirect("dashboard")

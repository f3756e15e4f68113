"""Small helpers shared by the views: htmx partial rendering, the one permission check of views (`requires`) and
what pages may offer (`may`), and the sorting, text filter and pagination every list table shares (`listing`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import wraps
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Case, Count, DateField, F, Max, Min, Q, QuerySet, Value, When
from django.db.models.expressions import OrderBy
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import render
from django.utils import timezone
from django_htmx.middleware import HtmxDetails

from replication_admin.core import permissions
from replication_admin.core.audit import Actor, PermissionDenied, record
from replication_admin.models import AuditEntry

PAGE_SIZE = 50
MAX_DAY_BUCKETS = 400  # past this many days per_day_counts lets the database truncate each row's time
MAX_QUERY_LENGTH = 200  # longer text filters are cut: nobody types more, and LIKE over it is wasted work

ViewFunc = Callable[..., HttpResponse]

# A sort key's field or fields, in the order they sort by ("-field" sorts that field the other way round).
SortFields = str | tuple[str, ...]


class HtmxHttpRequest(HttpRequest):
    """A request as views see it: django_htmx's middleware sets `htmx` on every request."""

    htmx: HtmxDetails


def is_htmx(request: HttpRequest) -> bool:
    """A request made by htmx that is not a history restore (which needs the whole page)."""
    htmx: HtmxDetails | None = getattr(request, "htmx", None)
    return htmx is not None and bool(htmx) and not htmx.history_restore_request


def render_page_or_partial(request: HttpRequest, template: str, partial: str, context: dict[str, Any]) -> HttpResponse:
    """The whole page for a normal request, only `template#partial` for an htmx refresh."""
    name = f"{template}#{partial}" if is_htmx(request) else template
    return render(request, name, context)


def paginate(
    request: HttpRequest, queryset: QuerySet[Any] | Sequence[Any], per_page: int = PAGE_SIZE, param: str = "page"
) -> Page[Any]:
    return Paginator(queryset, per_page).get_page(request.GET.get(param))


def _flip(field: str) -> str:
    return field[1:] if field.startswith("-") else f"-{field}"


def sort_queryset(
    request: HttpRequest,
    queryset: QuerySet[Any],
    allowed: Mapping[str, SortFields],
    default: str,
    param: str = "sort",
) -> tuple[QuerySet[Any], str]:
    """`queryset` ordered by `?sort=key` (ascending) or `?sort=-key` (descending), and the sort applied.

    `allowed` maps each public key to its field(s); a key it lacks falls back to `default`. The request only picks
    a key: the fields come from `allowed`, so user input never reaches order_by. The primary key ends every
    ordering, so pages do not overlap when the sorted values tie."""
    sort = request.GET.get(param, "").strip()
    if sort.removeprefix("-") not in allowed:
        sort = default
    descending = sort.startswith("-")
    fields = allowed[sort.removeprefix("-")]
    order = [fields] if isinstance(fields, str) else list(fields)
    order.append("pk")
    return queryset.order_by(*(_nulls_lowest(_flip(f) if descending else f) for f in order)), sort


def _nulls_lowest(field: str) -> OrderBy:
    """Empty values sort as the lowest on every catalog engine (SQLite's rule; PostgreSQL's is the opposite)."""
    if field.startswith("-"):
        return F(field[1:]).desc(nulls_last=True)
    return F(field).asc(nulls_first=True)


def text_filter(
    request: HttpRequest, queryset: QuerySet[Any], fields: Iterable[str], param: str = "q"
) -> tuple[QuerySet[Any], str]:
    """The rows where any of `fields` contains `?q=` (case-insensitive), and the text searched for."""
    text = request.GET.get(param, "").strip()[:MAX_QUERY_LENGTH]
    if not text:
        return queryset, ""
    match = Q()
    for field in fields:
        match |= Q(**{f"{field}__icontains": text})
    return queryset.filter(match), text


@dataclass(frozen=True)
class Listing:
    """One list table: its page of rows, the sort and text filter applied, and the names of its query parameters.
    A page with two tables gives the second a prefix (`trx_sort`, `trx_q`, `trx_page`), so each sorts, filters
    and pages on its own while the links keep the other's state."""

    page: Page[Any]
    sort: str
    q: str
    prefix: str = ""

    @property
    def sort_param(self) -> str:
        return f"{self.prefix}sort"

    @property
    def q_param(self) -> str:
        return f"{self.prefix}q"

    @property
    def page_param(self) -> str:
        return f"{self.prefix}page"


def listing(
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    sorts: Mapping[str, SortFields],
    default: str,
    search: Iterable[str] = (),
    prefix: str = "",
    per_page: int = PAGE_SIZE,
) -> Listing:
    """Text-filter, sort and paginate `queryset` from the request (see sort_queryset and text_filter)."""
    queryset, text = text_filter(request, queryset, search, param=f"{prefix}q") if search else (queryset, "")
    queryset, sort = sort_queryset(request, queryset, sorts, default, param=f"{prefix}sort")
    return Listing(paginate(request, queryset, per_page, param=f"{prefix}page"), sort, text, prefix)


def denied(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return HttpResponseForbidden(f"Permission denied: {exc}")


class _May:
    """What the signed-in user may do, as pages ask it: `{% if may.operate %}` (the names of
    core.permissions.BY_NAME); each answered once per request."""

    def __init__(self, request: HttpRequest) -> None:
        self._request = request
        self._known: dict[str, bool] = {}

    def __getitem__(self, name: str) -> bool:
        if name not in permissions.BY_NAME:
            raise KeyError(name)
        if name not in self._known:
            user = getattr(self._request, "user", None)
            self._known[name] = bool(user is not None and user.has_perm(permissions.BY_NAME[name]))
        return self._known[name]


def may(request: HttpRequest) -> dict[str, Any]:
    """Context processor: `may` in every page."""
    return {"may": _May(request)}


def requires(
    perm: Callable[..., str] | str,
    action: Callable[..., str] | str,
    target: Callable[..., str] | str = "",
    methods: Iterable[str] = ("POST",),
    says: str = "",
) -> Callable[[ViewFunc], ViewFunc]:
    """The permission check of every view that changes something: a request of one of `methods` by a user
    without `perm` (a name of core.permissions; or a function of the request and the view's arguments, for a
    view whose actions need different ones) gets a 403 ("<user> may not <says, else the action> (needs <perm>:
    <what that permission is>)", as an action's own refusal says it) and an audit row (`denied`, the missing
    permission in its detail) of `action` on `target`, each a text or a function of the request and the view's
    arguments; other requests (the confirmation pages a GET shows) go through."""
    checked = {m.upper() for m in methods}

    def decorate(view: ViewFunc) -> ViewFunc:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            needs = perm(request, *args, **kwargs) if callable(perm) else perm
            if request.method in checked and not request.user.has_perm(needs):
                what = action(request, *args, **kwargs) if callable(action) else action
                on = target(request, *args, **kwargs) if callable(target) else target
                actor = Actor.from_request(request)
                record(actor, what, on, AuditEntry.Outcome.DENIED, {"missing_permission": needs})
                needed = permissions.DESCRIPTIONS.get(needs, needs)
                refusal = f"{actor.username} may not {says or what} (needs {needs}: {needed})"
                return denied(request, PermissionDenied(refusal))
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def _day_of(field: str, ends: list[tuple[date, datetime]]) -> Case | Value:
    """The day of `field` among consecutive days, each with the midnight that ends it: a binary search in nested
    CASEs, so each row is compared with a few midnights, not with every one."""
    if len(ends) == 1:
        return Value(ends[0][0])
    half = len(ends) // 2
    before = When(**{f"{field}__lt": ends[half - 1][1]}, then=_day_of(field, ends[:half]))
    return Case(before, default=_day_of(field, ends[half:]), output_field=DateField())


def per_day_counts(queryset: QuerySet[Any], field: str, by: str) -> list[tuple[date, Any, int]]:
    """(local day, value of `by`, rows) for the rows of `queryset`, by day in the console's time zone then `by`.

    The day of each row is found by comparing `field` with the midnights of the days spanned, in SQL: TruncDate
    would do the same, but on SQLite it calls back into Python for every row, which is slow for thousands."""
    queryset = queryset.filter(**{f"{field}__isnull": False})
    span = queryset.aggregate(first=Min(field), last=Max(field))
    if span["first"] is None:
        return []
    tz = timezone.get_current_timezone()
    first, last = span["first"].astimezone(tz).date(), span["last"].astimezone(tz).date()
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    if len(days) > MAX_DAY_BUCKETS:
        day: TruncDate | Case | Value = TruncDate(field)
    else:
        ends = [(d, timezone.make_aware(datetime.combine(d + timedelta(days=1), time.min), tz)) for d in days]
        day = _day_of(field, ends)
    rows = queryset.order_by().annotate(day=day).values("day", by).annotate(n=Count("pk")).order_by("day", by)
    return [(r["day"], r[by], r["n"]) for r in rows]


STAMP = "%Y-%m-%d %H:%M:%S"  # plotly reads it as a local time, so charts show the console's time zone
DAY = timedelta(days=1)
BAR_WIDTH = DAY.total_seconds() * 1000 * 0.8  # in ms on a date axis; plotly makes a lone bar a hairline
MIN_BAR_DAYS = 3  # a bar chart spans this many days at least, so one day of data is a bar, not a wall
MIN_LINE_SPAN = timedelta(minutes=1)  # plotly otherwise zooms one point down to milliseconds
# A windowed line chart spans ten minutes at least: its points fill the chart rather than sit against its right edge.
MIN_WINDOWED_SPAN = timedelta(minutes=10)
LINE_PAD = 0.02  # of the span, before the first point (and after the last, with no window): markers stay whole
# Above the plot, left-aligned, growing upwards into the top margin: it never covers the axes or the dates.
LEGEND_ABOVE = {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"}


def local_stamp(at: datetime) -> str:
    """A time in the console's time zone, to the second."""
    return timezone.localtime(at).strftime(STAMP)


def _day_axis(first: date, last: date) -> dict[str, Any]:
    """A date axis of whole days from `first` to `last`, each bar centred on its day (plotly otherwise zooms a
    single day down to milliseconds)."""
    axis: dict[str, Any] = {
        "type": "date",
        "range": [
            (datetime.combine(first, time.min) - DAY / 2).strftime(STAMP),
            (datetime.combine(last, time.min) + DAY / 2).strftime(STAMP),
        ],
        "tickformat": "%b %d",
    }
    span = (last - first).days
    if span <= 31:  # a label every day, or every other day when a day's label would not fit
        axis["dtick"] = DAY.total_seconds() * 1000 * (1 if span <= 7 else 2)
    return axis


def fitted_days(days: list[date], first: date | None, last: date | None) -> tuple[date, date] | None:
    """The days a bar chart shows: from its first day with data (not the start of its window, which would squash
    the bars against the right edge) to `last` (by default its last day with data), MIN_BAR_DAYS at least but
    never before `first`."""
    if not days:
        return (first, last) if first and last else None
    last = last or max(days)
    start = min(min(days), last - timedelta(days=MIN_BAR_DAYS - 1))
    return (max(start, first) if first else start), last


SMALL_COUNT = 10  # a count axis up to this high gets a tick at every whole number


def stacked_bars(traces: list[dict[str, Any]], first: date | None = None, last: date | None = None) -> dict[str, Any]:
    """A plotly figure of stacked bars per day (the job outcome and conflict charts) in the window from `first` to
    `last`, its axis fitted to the days with bars (fitted_days). Its legend always shows, even for one trace: it
    says what the bars count."""
    days = [date.fromisoformat(x) for trace in traces for x in trace["x"]]
    shown = fitted_days(days, first, last)
    for trace in traces:
        trace.setdefault("width", BAR_WIDTH)
    stacks: dict[str, float] = {}
    for trace in traces:
        for x, y in zip(trace["x"], trace["y"], strict=False):
            stacks[x] = stacks.get(x, 0) + (y or 0)
    # The bars count things: whole-number ticks (plotly would put a 0.5 between 0 and 1 on a short axis).
    yaxis: dict[str, Any] = {"rangemode": "tozero", "tickformat": ",d"}
    if max(stacks.values(), default=0) <= SMALL_COUNT:
        yaxis["dtick"] = 1
    return {
        "data": traces,
        "layout": {
            "barmode": "stack",
            "height": 240,
            "margin": {"l": 40, "r": 10, "t": 30, "b": 30},
            "showlegend": True,
            "legend": LEGEND_ABOVE,
            "xaxis": _day_axis(*shown) if shown else {"type": "date"},
            "yaxis": yaxis,
        },
    }


def _line_range(stamps: list[str], since: datetime | None, until: datetime | None) -> list[str] | None:
    """The x range of a line chart: from a little before its first point to `until` (or its last point), MIN_LINE_SPAN
    at least, and for a chart of a window (`since`) MIN_WINDOWED_SPAN at least, never before `since`."""
    if not stamps:
        return [local_stamp(since), local_stamp(until or timezone.now())] if since is not None else None
    first, last = (datetime.strptime(x, STAMP) for x in (min(stamps), max(stamps)))
    if since is None:  # the points alone, with room for the end markers: centred in a minute at least
        spare = max(MIN_LINE_SPAN - (last - first), timedelta()) / 2 + (last - first) * LINE_PAD
        return [(first - spare).strftime(STAMP), (last + spare).strftime(STAMP)]
    window_start = datetime.strptime(local_stamp(since), STAMP)
    end = max(datetime.strptime(local_stamp(until or timezone.now()), STAMP), last)
    shortest = MIN_WINDOWED_SPAN
    start = min(first, end - shortest)
    start = max(start - (end - start) * LINE_PAD, window_start)
    return [start.strftime(STAMP), end.strftime(STAMP)]


# Lines whose highest points differ by more than this factor do not share an axis: each group of alike lines gets a
# panel of its own (at most MAX_PANELS, the biggest on top), so that a lag of 3 is not drawn flat under one of 5,000.
SCALE_RATIO = 20
MAX_PANELS = 3
PANEL_HEIGHT = 150


def magnitude_groups(traces: list[dict[str, Any]]) -> list[list[int]]:
    """The traces' indexes in groups of alike scale, the largest first (see SCALE_RATIO); lines that never rise
    above 0 join the last group."""
    highest = [max((y for y in t["y"] if y is not None), default=0) for t in traces]
    groups: list[list[int]] = []
    for i in sorted(range(len(traces)), key=lambda i: -highest[i]):
        lead = highest[groups[-1][0]] if groups else None
        if lead is None or (highest[i] > 0 and highest[i] * SCALE_RATIO < lead and len(groups) < MAX_PANELS):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def line_chart(
    traces: list[dict[str, Any]], y_title: str, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Any]:
    """A plotly figure of lines over time (levels, lag, refresh durations). Its x axis starts at the first point (a
    window from `since` to `until` squashes points that start late against the right edge) and ends at `until`,
    or at the last point when no window is given (_line_range). Lines of very different scales are drawn in
    panels of their own, one above the other on the same time axis (magnitude_groups)."""
    xaxis: dict[str, Any] = {"type": "date"}
    shown = _line_range([x for trace in traces for x in trace["x"]], since, until)
    if shown:
        xaxis["range"] = shown
    layout: dict[str, Any] = {
        "height": 260,
        "margin": {"l": 50, "r": 10, "t": 30, "b": 30},
        "showlegend": True,  # even one line is named: which subscriber or snapshot it is
        "legend": LEGEND_ABOVE,
        "xaxis": xaxis,
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
    }
    groups = magnitude_groups(traces)
    if len(groups) > 1:
        panels = len(groups)
        layout["height"] = 110 + PANEL_HEIGHT * panels
        for n, group in enumerate(groups):
            name = "yaxis" if n == 0 else f"yaxis{n + 1}"
            top = 1 - n / panels
            layout[name] = {"title": {"text": y_title}, "rangemode": "tozero", "anchor": "x",
                            "domain": [max(top - 1 / panels + 0.06, 0), top]}  # fmt: skip
            for i in group:
                traces[i]["yaxis"] = "y" if n == 0 else f"y{n + 1}"
        xaxis["anchor"] = f"y{panels}"
    return {"data": traces, "layout": layout}


def window_words(figure: dict[str, Any], window: timedelta, full: str, now: datetime) -> str:
    """What a chart's title says of its time span: `full` ("last 24 hours") when its axis shows most of the
    window, else where its data starts ("since 20:39", "since Nov 24"): the axis is fitted to the data, and a
    title claiming a day over a few minutes of points reads wrong."""
    layout = figure.get("layout", {})
    shown = layout.get("xaxis", {}).get("range")
    if not shown:
        return full
    start = datetime.strptime(shown[0], STAMP)
    local_now = datetime.strptime(local_stamp(now), STAMP)
    if local_now - start >= window * 0.9:
        return full
    if "barmode" in layout:  # bars per day: the axis starts half a day before the first one
        return f"since {(start + timedelta(hours=12)).strftime('%b %d')}"
    if start.date() == local_now.date():
        return f"since {start.strftime('%H:%M')}"
    return f"since {start.strftime('%b %d %H:%M')}"


@dataclass(frozen=True)
class ChartTable:
    """A chart's data as a table, for screen readers and for reading exact values: a row per x value (a day or a
    time) and a column per trace; or, when that grid would be mostly empty cells (many traces, each with points
    at its own times, as a thousand snapshots' refreshes), a row per point naming its trace (`by_point`), so the
    table grows with the points, not with points times traces."""

    x_title: str
    columns: list[str]
    rows: list[tuple[str, list[Any]]]
    by_point: bool = False


def chart_table(figure: Mapping[str, Any], x_title: str = "Time") -> ChartTable:
    """The same data as `figure`'s traces, as a table (ChartTable); in the grid, an x value a trace lacks is an
    empty cell."""
    traces = figure["data"]
    names = [str(trace.get("name", "")) for trace in traces]
    values: dict[str, dict[int, Any]] = {}
    points = 0
    for n, trace in enumerate(traces):
        for x, y in zip(trace["x"], trace["y"], strict=True):
            values.setdefault(x, {})[n] = y
            points += 1
    if len(values) * len(traces) > 2 * points:
        by_point = [(x, [names[n], y]) for x in sorted(values) for n, y in sorted(values[x].items())]
        return ChartTable(x_title, ["Series", "Value"], by_point, by_point=True)
    rows = [(x, [values[x].get(n, "") for n in range(len(traces))]) for x in sorted(values)]
    return ChartTable(x_title, names, rows)


@dataclass(frozen=True)
class Chart:
    """A figure as a page draws it (`json`, for plotly) and reads it (`table`, the table view)."""

    figure: dict[str, Any]
    x_title: str = "Time"

    @property
    def json(self) -> str:
        return json.dumps(self.figure)

    @property
    def table(self) -> ChartTable:
        return chart_table(self.figure, self.x_title)

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from replication_admin.core.jobs import counts_of, runs_figure
from replication_admin.core.times import duration_text
from replication_admin.core.web import STAMP, Chart, local_stamp
from replication_admin.core.words import key_label, plain
from replication_admin.engine import health
from replication_admin.engine.resolvers import default_rules_text
from replication_admin.models import JobRun

register = template.Library()


@register.simple_tag
def default_conflict_rules() -> str:
    """What happens to a conflict no resolver decides (engine/resolvers.py: one statement for every page)."""
    return default_rules_text()


@register.inclusion_tag("partials/run_counts.html")
def run_counts(job: JobRun) -> dict[str, object]:
    """A job's counts in the same words on every page: read, written, pulled, pushed, conflicts, skipped."""
    counts, unit = counts_of(job)
    return {"counts": list(counts.items()), "unit": unit}


@register.inclusion_tag("partials/run_chart.html")
def runs_chart(jobs: list[JobRun] | list[tuple[JobRun, object]]) -> dict[str, object]:
    """The chart of the counts of an item's runs, on its page under its jobs (a page's rows may pair each job
    with its result)."""
    runs = [j[0] if isinstance(j, tuple) else j for j in jobs]
    return {"chart": Chart(runs_figure(runs), x_title="Run")}


@register.filter(name="plain")
def plain_filter(value: object) -> str:
    """A value in plain words (core/words.py), not Python's repr."""
    return plain(value)


@register.filter
def duration(seconds: float | None) -> str:
    return duration_text(seconds)


@register.filter
def when(value: datetime | None) -> str:
    """A time in the console's time zone, with the UTC value on hover."""
    if not value:
        return "—"
    utc = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>', utc.isoformat(), utc.strftime(STAMP), local_stamp(value)
    )


@register.filter
def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


@register.filter
def status_badge(ok: bool | None) -> str:
    label, css = {None: ("not checked", ""), True: ("reachable", "ok"), False: ("failing", "bad")}[ok]
    return format_html('<span class="badge {}">{}</span>', css, label)


@register.simple_tag
def state_badge(row: dict | None, snapshot: bool = False) -> str:
    """An item's state as every page shows it (engine/health.py's words and colours): the badge, its explanation
    on hover, and the one-line reason beside it when it is not ok. `row`: a status row (state, last_error)."""
    if not row:
        return format_html('<span class="badge" data-state="">{}</span>', "unknown")
    state = row["state"]
    labels = health.SNAPSHOT_LABELS if snapshot else health.LABELS
    badge = format_html(
        '<span class="badge {}" title="{}" data-state="{}">{}</span>',
        health.BADGES.get(state, ""),
        health.EXPLANATIONS.get(state, ""),
        state,
        labels.get(state, state),
    )
    reason = row.get("last_error") or ""
    if state == health.OK or not reason:
        return badge
    return format_html('{} <span class="state-reason">{}</span>', badge, reason.splitlines()[0])


@register.filter
def keytext(key: dict) -> str:
    """{'OrderID': '10248', 'ProductID': '11'} -> 'OrderID=10248, ProductID=11'."""
    return key_label(key)


def _query(request, drop: tuple[str, ...] = (), **values: object) -> str:
    """The request's query string without `drop`, with `values` set (last, so they read well in the URL). Safe
    as it is: urlencode percent-encodes every character HTML would need escaped."""
    params = request.GET.copy()
    for name in (*drop, *values):
        params.pop(name, None)
    for name, value in values.items():
        params[name] = str(value)
    return mark_safe("?" + params.urlencode())  # noqa: S308


@register.simple_tag(takes_context=True)
def page_url(context, number: int, page_param: str = "page") -> str:
    """The current URL's query string on page `number` of a list (its other filters, sorts and pages kept)."""
    return _query(context["request"], (), **{page_param: number})


@register.simple_tag(takes_context=True)
def sort_header(context, listing, key: str, label: str, css: str = "", hint: str = "") -> str:
    """A table's column header that sorts the listing by `key` ("-key": the first click sorts descending), shows
    the direction with an arrow and toggles it on the next click. The other query parameters are kept; the page
    starts again at 1. A plain link: the whole page reloads, so filter forms pick up the new sort. `hint`: the
    catalog's name of the column, shown on hover (the label is in words)."""
    first_descending = key.startswith("-")
    key = key.removeprefix("-")
    active = listing.sort.removeprefix("-") == key
    descending = listing.sort.startswith("-")
    toggled = key if descending else f"-{key}"
    next_sort = toggled if active else (f"-{key}" if first_descending else key)
    url = _query(context["request"], drop=(listing.page_param,), **{listing.sort_param: next_sort})
    classes = " ".join(filter(None, ["sortable", css, f"sorted-{'desc' if descending else 'asc'}" if active else ""]))
    aria = format_html(' aria-sort="{}"', "descending" if descending else "ascending") if active else ""
    arrow = format_html(' <span class="arrow">{}</span>', "▼" if descending else "▲") if active else ""
    title = format_html(' title="{}"', hint) if hint else ""  # the catalog's name of the column, on hover
    return format_html(
        '<th class="{}"{}{}><a href="{}" data-sort="{}">{}{}</a></th>', classes, aria, title, url, key, label, arrow
    )


@register.simple_tag(takes_context=True)
def kept_params(context, *own: str) -> str:
    """Hidden inputs for the query parameters a filter form does not own (another table's sort and filter, the
    sort of its own table), so submitting it keeps them; the pages restart at 1."""
    request = context["request"]
    inputs = [
        format_html('<input type="hidden" name="{}" value="{}">', name, value)
        for name, values in request.GET.lists()
        if name not in own and not name.endswith("page")
        for value in values
    ]
    return format_html_join("", "{}", ((i,) for i in inputs))


SHORT_VALUE = 60  # characters of a compared value shown before it is folded


@register.simple_tag
def compared_cell(values: dict, column: str, families: dict | None) -> str:
    """One side's value of `column` in a compare's listed row."""
    return compared_value(values.get(column), (families or {}).get(column, ""))


def compared_value(value: object, family: str = "") -> str:
    """A value of a compare's listed rows, safely: NULL apart from the empty string, binary as 0x-hex, a long value
    folded (its whole stored text a click away), one cut by the compare saying its full length."""
    if value is None:
        return mark_safe('<span class="value-null">NULL</span>')
    length = None
    if isinstance(value, dict):
        length, value = value.get("length"), value.get("text", "")
    text = str(value)
    if text == "":
        return mark_safe('<span class="value-empty" title="an empty string, not NULL">\'\' (empty)</span>')
    if family == "binary":
        text = "0x" + text
    cut = format_html(' <span class="muted">(first {} of {} characters)</span>', len(text), length) if length else ""
    if len(text) <= SHORT_VALUE and not length:
        return format_html('<span class="value">{}</span>', text)
    return format_html(
        '<details class="value-long"><summary>{}…</summary><span class="value">{}</span>{}</details>',
        text[:SHORT_VALUE],
        text,
        cut,
    )

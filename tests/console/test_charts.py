"""Charts fitted to their data (no window squashing the points against the right edge), legends above the plot where
they cover neither the axes nor the dates, and a table view of the same numbers under every chart."""

from __future__ import annotations

import html
import re
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.web import LEGEND_ABOVE, chart_table, line_chart, local_stamp, stacked_bars
from replication_admin.models import ConflictBackup, JobRun, LevelSample
from tests.console.test_dashboard import figure

TODAY = date(2026, 11, 24)
BUNDLE = Path(settings.BASE_DIR) / "static" / "vendor" / "plotly-basic-3.7.0.min.js"
BASIC_BUNDLE_TRACES = {"scatter", "bar", "pie"}  # the trace types plotly's basic partial bundle has


def bars(*days_counts: tuple[date, int], name: str = "failed") -> dict:
    return {"type": "bar", "name": name, "x": [d.isoformat() for d, _ in days_counts], "y": [n for _, n in days_counts]}


def test_a_fourteen_day_bar_chart_starts_at_its_first_day_with_bars_not_at_the_start_of_its_window():
    fig = stacked_bars([bars((TODAY - timedelta(days=5), 2), (TODAY, 1))], TODAY - timedelta(days=13), TODAY)
    assert fig["layout"]["xaxis"]["range"] == ["2026-11-18 12:00:00", "2026-11-24 12:00:00"]


def test_a_bar_chart_of_one_day_spans_three_days_and_never_starts_before_its_window():
    fig = stacked_bars([bars((TODAY, 4))], TODAY - timedelta(days=13), TODAY)
    assert fig["layout"]["xaxis"]["range"] == ["2026-11-21 12:00:00", "2026-11-24 12:00:00"]
    one_day_window = stacked_bars([bars((TODAY, 4))], TODAY, TODAY)
    assert one_day_window["layout"]["xaxis"]["range"] == ["2026-11-23 12:00:00", "2026-11-24 12:00:00"]


def test_a_bar_chart_of_one_trace_still_shows_its_legend_above_the_plot():
    fig = stacked_bars([bars((TODAY, 4), name="Update (U)")], TODAY - timedelta(days=13), TODAY)
    assert fig["layout"]["showlegend"] is True
    assert fig["layout"]["legend"] == LEGEND_ABOVE
    assert LEGEND_ABOVE["orientation"] == "h" and LEGEND_ABOVE["yanchor"] == "bottom" and LEGEND_ABOVE["y"] > 1


def test_a_week_long_line_chart_starts_just_before_its_first_point_and_ends_at_its_window_end():
    until = timezone.now()
    points = [local_stamp(until - timedelta(hours=h)) for h in (10, 5, 1)]
    fig = line_chart([{"x": points, "y": [1, 2, 3]}], "duration (s)", since=until - timedelta(days=7), until=until)
    start, end = (datetime.fromisoformat(x) for x in fig["layout"]["xaxis"]["range"])
    first = datetime.fromisoformat(points[0])
    assert first - timedelta(hours=1) < start < first  # a little room for the first marker, not seven days
    assert end == datetime.fromisoformat(local_stamp(until))
    assert fig["layout"]["legend"] == LEGEND_ABOVE


def test_a_line_chart_of_one_recent_point_spans_ten_minutes_not_its_whole_window():
    until = timezone.now()
    point = local_stamp(until - timedelta(minutes=2))
    fig = line_chart([{"x": [point], "y": [5]}], "lag", since=until - timedelta(hours=24), until=until)
    start, end = (datetime.fromisoformat(x) for x in fig["layout"]["xaxis"]["range"])
    assert timedelta(minutes=10) <= end - start <= timedelta(minutes=11)


def test_a_line_chart_never_starts_before_its_window():
    until = timezone.now()
    since = until - timedelta(hours=24)
    fig = line_chart([{"x": [local_stamp(since + timedelta(seconds=1))], "y": [5]}], "lag", since=since, until=until)
    assert fig["layout"]["xaxis"]["range"][0] == local_stamp(since)


def test_the_table_view_holds_every_point_of_every_trace_a_row_per_x_value():
    fig = line_chart(
        [
            {"name": "s1", "x": ["2026-11-24 03:00:00", "2026-11-24 04:00:00"], "y": [7, 2]},
            {"name": "pub (publisher)", "x": ["2026-11-24 04:00:00", "2026-11-24 05:00:00"], "y": [120, 125]},
        ],
        "level",
    )
    table = chart_table(fig)
    assert table.columns == ["s1", "pub (publisher)"]
    assert table.rows == [
        ("2026-11-24 03:00:00", [7, ""]),
        ("2026-11-24 04:00:00", [2, 120]),
        ("2026-11-24 05:00:00", ["", 125]),
    ]


def table_view(page: str, chart_id: str) -> list[list[str]]:
    """The rows (header first) of the table view that follows the chart `chart_id` in the page."""
    after = page[page.index(f'id="{chart_id}"') :]
    table = after[after.index("<table") : after.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    return [[html.unescape(c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)] for row in rows]


@pytest.mark.django_db
def test_every_dashboard_chart_has_a_table_view_of_the_numbers_it_draws(viewer_client):
    now = timezone.now()
    for minutes, lag in ((40, 9), (20, 3)):
        LevelSample.objects.create(server="pub", account="acc", subscriber="s1", at=now - timedelta(minutes=minutes),
                                   level=100, publisher_level=110, lag=lag)  # fmt: skip
    JobRun.objects.create(kind="compare", target="a", state=JobRun.State.FAILED, finished_at=now, error="x")
    JobRun.objects.create(kind="compare", target="a", state=JobRun.State.FAILED, finished_at=now, error="x")
    JobRun.objects.create(kind="compare", target="a", state=JobRun.State.SUCCEEDED, finished_at=now)
    ConflictBackup.objects.create(
        kind="snapshot", item="demo.t", table_name="t", publisher="demo", source="branch", change_guid="branch@1",
        origin="branch", primary_key={"id": 1}, conflict_type="U", operation="U", decision=3, resolver="default",
    )  # fmt: skip
    page = viewer_client.get(reverse("dashboard-charts")).content.decode()
    for chart_id in ("lag-chart", "conflicts-chart", "job-chart"):
        fig = figure(page, chart_id)
        rows = table_view(page, chart_id)
        assert rows[0][1:] == [trace["name"] for trace in fig["data"]], chart_id
        drawn = {
            (x, trace["name"]): str(y) for trace in fig["data"] for x, y in zip(trace["x"], trace["y"], strict=True)
        }
        shown = {(row[0], rows[0][1 + n]): cell for row in rows[1:] for n, cell in enumerate(row[1:]) if cell}
        assert shown == drawn, chart_id
        assert {trace["type"] for trace in fig["data"]} <= BASIC_BUNDLE_TRACES, chart_id
    assert table_view(page, "job-chart") == [
        ["Day", "failed", "succeeded"],
        [timezone.localdate().isoformat(), "2", "1"],
    ]
    assert "<summary>Table view</summary>" in page


def test_the_pages_load_the_vendored_basic_bundle_with_its_licence_header_and_not_the_full_plotly():
    header = BUNDLE.read_text()[:300]
    assert "plotly.js (basic - minified) v3.7.0" in header and "Licensed under the MIT license" in header
    assert BUNDLE.stat().st_size < 1_500_000  # the full bundle is 4.85 MB
    partial = render_to_string("partials/plotly.html")
    assert "/static/vendor/plotly-basic-3.7.0.min.js" in partial and "plotly.min.js" not in partial
    assert 'id="plotly.js-style-global"' in partial  # plotly finds its rules here and injects no <style>


def test_a_table_view_of_many_traces_at_their_own_times_has_a_row_per_point_not_a_mostly_empty_grid():
    # A thousand snapshots, each refreshed three times at its own moments: a grid would be 3,000 rows of 1,000 cells.
    traces = [
        {"name": f"copy{n:04}", "x": [f"2026-11-24 0{hour}:{n // 60:02}:{n % 60:02}" for hour in (3, 4, 5)],
         "y": [n, n + 1, n + 2]}
        for n in range(1000)
    ]  # fmt: skip
    table = chart_table(line_chart(traces, "duration (s)"))
    assert table.by_point and table.columns == ["Series", "Value"]
    assert len(table.rows) == 3000 and all(len(cells) == 2 for _, cells in table.rows)
    assert table.rows[:2] == [("2026-11-24 03:00:00", ["copy0000", 0]), ("2026-11-24 03:00:01", ["copy0001", 1])]
    assert ("2026-11-24 05:16:39", ["copy0999", 1001]) in table.rows


def test_lines_of_very_different_scales_get_panels_of_their_own_and_alike_lines_share_one():
    stamps = ["2026-11-24 03:00:00", "2026-11-24 03:01:00"]
    alike = line_chart([{"name": "a", "x": stamps, "y": [10, 40]}, {"name": "b", "x": stamps, "y": [5, 30]}], "lag")
    assert "yaxis2" not in alike["layout"] and not any("yaxis" in t for t in alike["data"])
    apart = line_chart(
        [
            {"name": "small", "x": stamps, "y": [1, 3]},
            {"name": "big", "x": stamps, "y": [4000, 5000]},
            {"name": "idle", "x": stamps, "y": [0, 0]},
            {"name": "big too", "x": stamps, "y": [900, 1200]},
        ],
        "lag",
    )
    axes = {t["name"]: t["yaxis"] for t in apart["data"]}
    assert axes == {"big": "y", "big too": "y", "small": "y2", "idle": "y2"}  # 5,000 and 1,200 are alike
    layout = apart["layout"]
    assert layout["yaxis"]["domain"][0] > layout["yaxis2"]["domain"][1]  # the biggest on top
    assert layout["xaxis"]["anchor"] == "y2"  # one time axis, under the lowest panel

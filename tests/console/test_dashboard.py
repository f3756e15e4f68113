"""The dashboard answers "is replication working?": every item with its state (the status API's rules), the age of
its last success and a link to its page, the most urgent first; charts of lag, refreshes and conflicts; and a
fixed number of queries whatever the number of items."""

from __future__ import annotations

import html
import json
import re
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.web import line_chart, local_stamp, stacked_bars
from replication_admin.models import (
    ConflictBackup,
    JobRun,
    LevelSample,
    ReplAccount,
    ReplSubscriber,
    Server,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
)

pytestmark = pytest.mark.django_db


def refresh(snapshot: str, state: str, hours_ago: float, total: float | None = None, result: dict | None = None):
    finished = timezone.now() - timedelta(hours=hours_ago)
    return JobRun.objects.create(
        kind="snapshot_refresh", target=snapshot, params={"snapshot": snapshot}, state=state,
        started_at=finished - timedelta(seconds=4), finished_at=finished,
        timings={"total": total} if total is not None else {}, result=result,
    )  # fmt: skip


@pytest.fixture
def catalog(db) -> dict:
    """A failing and an ok snapshot, a bi-directional publication with an ok subscription, and a transactional
    publication with an invalid, a lagging and an ok subscriber."""
    now = timezone.now()
    demo = Server.objects.create(name="demo", dialect="sqlite", database="/tmp/demo.sqlite3")
    Snapshot.objects.create(name="demo.bad", query="SELECT * FROM s1", dest_server=demo, dest_table="bad")
    Snapshot.objects.create(name="demo.good", query="SELECT * FROM s2", dest_server=demo, dest_table="good")
    refresh("demo.bad", JobRun.State.SUCCEEDED, 3)
    refresh("demo.bad", JobRun.State.FAILED, 1)
    refresh("demo.good", JobRun.State.SUCCEEDED, 2, total=2.0, result={"rows": 100})
    publication = SnapshotPublication.objects.create(item="demo.t", server=demo, table="t", last_sync_at=now)
    SnapshotSubscription.objects.create(server="branch", item="demo.t", init_state="done", last_sync_at=now)
    ReplAccount.objects.create(server="pub", account="acc", level=120, count=120)
    common = {"server": "pub", "account": "acc", "init_state": "done"}
    ReplSubscriber.objects.create(**common, subscriber="s_invalid", level=100, count=100, valid=0)
    ReplSubscriber.objects.create(**common, subscriber="s_lagging", level=110, count=110, state=ReplSubscriber.OFF,
                                  last_sync_at=now - timedelta(hours=1))  # fmt: skip
    ReplSubscriber.objects.create(**common, subscriber="s_ok", level=120, count=120, state=ReplSubscriber.IN_SYNC,
                                  last_sync_at=now - timedelta(minutes=3))  # fmt: skip
    return {"publication": publication}


def items_of(response) -> list[dict]:
    return response.context["items"]


def by_name(items: list[dict]) -> dict[str, dict]:
    return {i["name"]: i for i in items}


def figure(page: str, element_id: str) -> dict:
    match = re.search(rf'id="{element_id}" class="chart" data-figure="([^"]*)"', page)
    assert match, element_id
    return json.loads(html.unescape(match.group(1)))


def test_each_kind_of_item_is_shown_with_its_state_badge_and_a_link_to_its_page(viewer_client, catalog):
    response = viewer_client.get(reverse("dashboard"))
    items = by_name(items_of(response))
    page = response.content.decode()
    expected = {
        "demo.bad": ("failing", reverse("snapshots-detail", args=["demo.bad"])),
        "demo.good": ("ok", reverse("snapshots-detail", args=["demo.good"])),
        # demo's SQLite file is not there: the publication's live read says so instead of "ok"
        "demo.t": ("unreachable", catalog["publication"].get_absolute_url()),
        "demo.t ↔ branch": ("unreachable", catalog["publication"].get_absolute_url()),
        "s_invalid ← pub/acc": ("invalid", reverse("trx-subscriptions-detail", args=["s_invalid", "pub", "acc"])),
        "s_lagging ← pub/acc": ("lagging", reverse("trx-subscriptions-detail", args=["s_lagging", "pub", "acc"])),
        "s_ok ← pub/acc": ("ok", reverse("trx-subscriptions-detail", args=["s_ok", "pub", "acc"])),
    }
    assert {name: (i["state"], i["url"]) for name, i in items.items()} == expected
    for _state, url in expected.values():
        assert f'href="{url}"' in page
    assert page.count('class="item-row') == len(expected)
    # each state badge explains itself in its title
    assert re.search(
        r'<span class="badge bad" title="[^"]*the last refresh or sync failed[^"]*" data-state="failing">failing</span>',
        page,
    )
    assert re.search(r'<span class="badge bad" title="[^"]+" data-state="[a-z_]+">invalid: needs re-init</span>', page)
    assert re.search(r'<span class="badge warn" title="[^"]+" data-state="[a-z_]+">lagging</span>', page)
    items_panel = page.split('id="items"', 1)[1].split('id="topology', 1)[0]
    assert len(re.findall(r'<span class="badge ok" title="[^"]+" data-state="[a-z_]+">ok</span>', items_panel)) == 2
    assert '<span class="badge ok">2 ok</span>' in page and '<span class="badge bad">2 unreachable</span>' in page
    assert '<span class="badge bad">1 invalid: needs re-init</span>' in page


def test_the_age_of_the_last_success_is_shown_with_the_exact_time(viewer_client, catalog):
    response = viewer_client.get(reverse("dashboard"))
    items = by_name(items_of(response))
    assert items["s_ok ← pub/acc"]["age"] == "3 min ago"
    assert items["s_lagging ← pub/acc"]["age"] == "1 h ago"
    assert items["demo.bad"]["age"] == "3 h ago"  # its last successful refresh, before the failed one
    assert items["s_invalid ← pub/acc"]["at"] is None
    page = response.content.decode()
    assert "3 min ago" in page
    assert re.search(r'<span class="age" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^"]*">3 min ago</span>', page)
    assert "<time datetime=" in page


def test_failing_and_invalid_items_come_first_then_lagging_then_ok(viewer_client, catalog):
    states = [i["state"] for i in items_of(viewer_client.get(reverse("dashboard")))]
    assert states == ["failing", "invalid", "unreachable", "unreachable", "lagging", "ok", "ok"]


def test_the_overview_refresh_carries_the_items_but_not_the_charts(viewer_client, catalog):
    page = viewer_client.get(reverse("dashboard"), HTTP_HX_REQUEST="true").content.decode()
    assert page.lstrip().startswith('<div id="overview"')
    assert 'id="items"' in page and "s_lagging" in page
    assert "data-figure" not in page


def test_the_page_asks_for_its_charts_in_a_second_request_which_htmx_gets_as_a_fragment(viewer_client, catalog):
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert (
        f'hx-get="{reverse("dashboard-charts")}" hx-trigger="load"' in page and 'class="chart" data-figure' not in page
    )
    fragment = viewer_client.get(reverse("dashboard-charts"), HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="charts" data-loaded="1">') and "<html" not in fragment
    assert {"lag-chart", "conflicts-chart", "duration-chart", "throughput-chart", "job-chart"} <= set(
        re.findall(r'id="([a-z-]+-chart)"', fragment)
    )


def test_an_empty_catalog_says_what_to_create_next(viewer_client):
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert "Nothing is replicated yet" in page
    assert f'href="{reverse("setup")}"' in page
    assert f'href="{reverse("snapshots-new")}"' in page
    assert f'href="{reverse("publications-new")}"' in page
    assert f'href="{reverse("trx-publications-new")}"' in page


def test_at_most_fifty_items_are_listed_with_a_link_to_all_of_them(viewer_client):
    demo = Server.objects.create(name="demo", dialect="sqlite", database="/tmp/demo.sqlite3")
    Snapshot.objects.bulk_create(
        Snapshot(name=f"demo.t{i:02}", query="SELECT 1", dest_server=demo, dest_table=f"t{i:02}") for i in range(60)
    )
    response = viewer_client.get(reverse("dashboard"))
    assert len(items_of(response)) == 50
    page = response.content.decode()
    assert page.count('class="item-row') == 50
    assert "of all 60 items" in page
    assert f'href="{reverse("snapshots")}"' in page


def test_the_lag_chart_has_a_line_per_subscriber_from_the_last_24_hours(viewer_client, catalog):
    now = timezone.now()
    for minutes, lag in ((30, 7), (20, 5), (10, 2)):
        LevelSample.objects.create(server="pub", account="acc", subscriber="s_lagging", at=now - timedelta(minutes=minutes),
                                   level=110, publisher_level=120, lag=lag)  # fmt: skip
    LevelSample.objects.create(server="pub", account="acc", subscriber="s_ok", at=now - timedelta(minutes=5),
                               level=120, publisher_level=120, lag=0)  # fmt: skip
    LevelSample.objects.create(server="pub", account="acc", subscriber="s_ok", at=now - timedelta(hours=30),
                               level=90, publisher_level=120, lag=30)  # fmt: skip
    fig = figure(viewer_client.get(reverse("dashboard-charts")).content.decode(), "lag-chart")
    lines = {t["name"]: t["y"] for t in fig["data"]}
    assert lines == {"s_lagging (pub/acc)": [7, 5, 2], "s_ok (pub/acc)": [0]}
    # The axis starts just before the first sample, not 24 hours back (which squashes the lines to the right), up to
    # now; the legend is above the plot, clear of the axis' dates.
    since, until = (datetime.fromisoformat(x) for x in fig["layout"]["xaxis"]["range"])
    local_now = timezone.localtime(now).replace(tzinfo=None)
    assert local_now - timedelta(minutes=31) <= since <= local_now - timedelta(minutes=30)
    assert abs(until - timezone.localtime(now).replace(tzinfo=None)) < timedelta(minutes=1)
    assert fig["layout"]["legend"]["yanchor"] == "bottom" and fig["layout"]["legend"]["y"] > 1


def test_the_refresh_charts_give_durations_and_rows_per_second_of_the_last_week(viewer_client, catalog):
    refresh("demo.good", JobRun.State.SUCCEEDED, 1, result={"changes": 40})  # no total: finished - started = 4 s
    refresh("demo.good", JobRun.State.SUCCEEDED, 24 * 8, total=1.0, result={"rows": 5})  # too old
    page = viewer_client.get(reverse("dashboard-charts")).content.decode()
    durations = {t["name"]: t["y"] for t in figure(page, "duration-chart")["data"]}
    throughput = {t["name"]: t["y"] for t in figure(page, "throughput-chart")["data"]}
    assert durations == {"demo.bad": [4.0, 4.0], "demo.good": [2.0, 4.0]}
    assert throughput == {"demo.good": [50.0, 10.0]}


def test_the_conflicts_chart_counts_the_last_fourteen_days_by_type(viewer_client, catalog):
    for n, (conflict_type, days_ago) in enumerate((("U", 0), ("U", 0), ("I", 1), ("D", 20))):
        row = ConflictBackup.objects.create(
            kind="snapshot", item="demo.t", table_name="t", publisher="demo", source="branch",
            change_guid=f"branch@{n}", origin="branch", primary_key={"id": n}, conflict_type=conflict_type,
            operation=conflict_type, decision=3, resolver="default",
        )  # fmt: skip
        ConflictBackup.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    fig = figure(viewer_client.get(reverse("dashboard-charts")).content.decode(), "conflicts-chart")
    totals = {t["name"]: sum(t["y"]) for t in fig["data"]}
    assert sorted(totals.values()) == [1, 2]
    assert all("(D)" not in name for name in totals)
    # From the first day with conflicts, three days at least, up to today: a label every day; the legend always shows.
    today = timezone.localdate()
    assert fig["layout"]["xaxis"]["range"] == [
        f"{today - timedelta(days=3)} 12:00:00",
        f"{today} 12:00:00",
    ]
    assert fig["layout"]["xaxis"]["dtick"] == 86_400_000
    assert fig["layout"]["showlegend"] is True
    assert all(t["width"] == 0.8 * 86_400_000 for t in fig["data"])


def test_the_job_outcomes_chart_is_still_drawn(viewer_client, catalog):
    fig = figure(viewer_client.get(reverse("dashboard-charts")).content.decode(), "job-chart")
    assert {t["name"]: sum(t["y"]) for t in fig["data"]} == {"failed": 1, "succeeded": 2}


def add_items(n: int) -> None:
    demo, _ = Server.objects.get_or_create(name="demo", defaults={"dialect": "sqlite", "database": "/tmp/d.sqlite3"})
    start = Snapshot.objects.count()
    Snapshot.objects.bulk_create(
        Snapshot(name=f"demo.n{i:03}", query="SELECT 1", dest_server=demo, dest_table=f"n{i:03}")
        for i in range(start, start + n)
    )
    JobRun.objects.bulk_create(
        JobRun(kind="snapshot_refresh", target=f"demo.n{i:03}", params={"snapshot": f"demo.n{i:03}"},
               state=JobRun.State.SUCCEEDED, started_at=timezone.now(), finished_at=timezone.now())
        for i in range(start, start + n)
    )  # fmt: skip
    ReplAccount.objects.get_or_create(server="big", account="acc", defaults={"level": 500, "count": 500})
    SnapshotPublication.objects.get_or_create(item="demo.big", defaults={"server": demo, "table": "big"})
    first = ReplSubscriber.objects.filter(server="big").count()
    ReplSubscriber.objects.bulk_create(
        ReplSubscriber(server="big", account="acc", subscriber=f"sub{i:03}", level=i, count=i, init_state="done")
        for i in range(first, first + n)
    )
    SnapshotSubscription.objects.bulk_create(
        SnapshotSubscription(server=f"branch{i:03}", item="demo.big", init_state="done")
        for i in range(first, first + n)
    )
    LevelSample.objects.bulk_create(
        LevelSample(server="big", account="acc", subscriber=f"sub{i:03}", at=timezone.now(), level=i,
                    publisher_level=500, lag=500 - i)
        for i in range(first, first + n)
    )  # fmt: skip


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "overview refresh"])
def test_the_number_of_queries_does_not_grow_with_fifty_snapshots_and_fifty_subscriptions(
    viewer_client, catalog, django_assert_max_num_queries, htmx
):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    add_items(1)
    with CaptureQueriesContext(connection) as one:
        assert viewer_client.get(reverse("dashboard"), **headers).status_code == 200
    add_items(49)
    # + 1: the live followers (an in-sync subscription no follower serves reads "follower down"); + 6: the tables
    # each kind of item needs and the servers holding them (core/presence.py), the snapshot logs, the subscriptions'
    # schedules and their gaps; + 2: the open alerts counted, the conflicts of today and the week per publication;
    # + 2: the open drift alerts of the subscriptions and of the snapshots (a drifted copy is not ok)
    with django_assert_max_num_queries(30 + 1 + 6 + 2 + 2), CaptureQueriesContext(connection) as fifty:
        response = viewer_client.get(reverse("dashboard"), **headers)
    assert response.status_code == 200
    assert len(fifty) == len(one)
    page = response.content.decode()
    assert page.count('class="item-row') == 50
    # 2 + 50 snapshots, 1 + 1 + 1 + 50 bi-directional publications and subscriptions, 3 + 50 transactional
    assert "of all 158 items" in page


def test_a_line_chart_of_one_sample_spans_a_minute_around_it_and_longer_ones_their_points_with_room_for_markers():
    one = line_chart([{"x": ["2026-11-24 03:51:58"], "y": [0]}], "lag")
    assert one["layout"]["xaxis"]["range"] == ["2026-11-24 03:51:28", "2026-11-24 03:52:28"]
    hour = line_chart([{"x": ["2026-11-24 03:00:00"], "y": [1]}, {"x": ["2026-11-24 04:00:00"], "y": [2]}], "lag")
    assert hour["layout"]["xaxis"]["range"] == ["2026-11-24 02:58:48", "2026-11-24 04:01:12"]  # 2% spare
    assert "range" not in line_chart([], "lag")["layout"]["xaxis"]


def test_a_count_chart_ticks_whole_numbers_only():
    one = stacked_bars([{"type": "bar", "name": "failed", "x": ["2026-11-24"], "y": [1]}])
    assert one["layout"]["yaxis"]["dtick"] == 1 and one["layout"]["yaxis"]["tickformat"] == ",d"
    many = stacked_bars([{"type": "bar", "name": "ok", "x": ["2026-11-24"], "y": [7]},
                         {"type": "bar", "name": "failed", "x": ["2026-11-24"], "y": [40]}])  # fmt: skip
    assert "dtick" not in many["layout"]["yaxis"] and many["layout"]["yaxis"]["tickformat"] == ",d"


def test_chart_titles_say_where_their_data_starts_when_it_covers_little_of_the_window(viewer_client, catalog):
    now = timezone.now()
    for minutes in (12, 6, 1):
        LevelSample.objects.create(server="pub", account="acc", subscriber="s_ok", at=now - timedelta(minutes=minutes),
                                   level=120, publisher_level=121, lag=1)  # fmt: skip
    response = viewer_client.get(reverse("dashboard-charts"))
    titles = response.context["titles"]
    lag = figure(response.content.decode(), "lag-chart")
    # Minutes of data, not a day: the time it starts, with its day when that is not today (just after midnight).
    start_text = lag["layout"]["xaxis"]["range"][0]
    first = datetime.strptime(start_text[:16], "%Y-%m-%d %H:%M")
    today = datetime.strptime(local_stamp(timezone.now())[:10], "%Y-%m-%d").date()
    assert titles["lag"] == (f"since {first:%H:%M}" if first.date() == today else f"since {first:%b %d %H:%M}")
    assert "last 24 hours" not in response.content.decode().split('id="lag-chart"')[0].rsplit("<h2>", 1)[1]
    # The job bars (a few days shown of 14): the title names the first day the axis shows.
    start = datetime.strptime(figure(response.content.decode(), "job-chart")["layout"]["xaxis"]["range"][0],
                              "%Y-%m-%d %H:%M:%S")  # fmt: skip
    assert titles["jobs"] == f"since {(start + timedelta(hours=12)).strftime('%b %d')}"
    old = now - timedelta(hours=23)
    LevelSample.objects.create(server="pub", account="acc", subscriber="s_ok", at=old, level=100, publisher_level=101,
                               lag=1)  # fmt: skip
    assert viewer_client.get(reverse("dashboard-charts")).context["titles"]["lag"] == "last 24 hours"

"""Every job kind reports its run's counts in the same words (read, written, pulled, pushed, conflicts, skipped), on
the job page, in the jobs list and in its item's history, and charts them with conflicts on an axis of their own."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

import replication_admin.tasks  # noqa: F401  (registers every job kind)
from replication_admin.core.jobs import RUN_COUNTS, RUNNERS, counts_of, runs_figure
from replication_admin.models import JobRun, Server, Snapshot
from tests.console.test_dashboard import refresh

pytestmark = pytest.mark.django_db


def shown(page: str) -> list[dict[str, int]]:
    """Each run-counts element of a page, as {name: count}."""
    found = []
    for block in re.findall(r'<span class="run-counts">(.*?)</span>(?: <span class="muted">|</span>|$)', page, re.S):
        found.append({k: int(v) for k, v in re.findall(r'data-count="(\w+)">\w+ <b>(\d+)</b>', block)})
    return found


def test_every_kinds_counts_are_among_the_shared_words_in_their_order():
    assert RUNNERS, "no job kind registered"
    for runner in RUNNERS.values():
        shapes = [runner.result_type, *runner.result_type.modes.values()]
        for shape in shapes:
            counts = shape().counts()
            assert list(counts) == [name for name in RUN_COUNTS if name in counts], shape


def test_a_refresh_shows_its_counts_on_its_page_in_the_jobs_list_and_in_its_snapshots_history(viewer_client):
    server = Server.objects.create(name="wh", dialect="sqlite", database="/tmp/x.sqlite3")
    Snapshot.objects.create(name="wh.copy", query="SELECT 1", dest_server=server, dest_table="copy")
    full = refresh("wh.copy", JobRun.State.SUCCEEDED, 2, result={"mode": "full", "rows": 1200})
    incremental = refresh("wh.copy", JobRun.State.SUCCEEDED, 1, result={"mode": "incremental", "changes": 7})
    failed = refresh("wh.copy", JobRun.State.FAILED, 0.5)
    assert counts_of(full) == ({"read": 1200, "written": 1200}, "rows")
    assert counts_of(failed) == ({}, "")

    job_page = viewer_client.get(reverse("jobs-detail", args=[incremental.pk])).content.decode()
    assert 'id="job-counts"' in job_page and shown(job_page) == [{"read": 7, "written": 7}]
    listed = viewer_client.get(reverse("jobs")).content.decode()
    assert {"read": 1200, "written": 1200} in shown(listed) and {"read": 7, "written": 7} in shown(listed)
    history = viewer_client.get(reverse("snapshots-detail", args=["wh.copy"])).content.decode()
    assert shown(history) == [{"read": 7, "written": 7}, {"read": 1200, "written": 1200}]  # newest first
    assert 'id="runs-chart"' in history


def test_the_chart_of_runs_draws_rows_left_and_conflicts_on_their_own_axis_oldest_run_first():
    sync = JobRun.objects.create(kind="bidir_sync", target="t", params={"publication": 1}, state="succeeded",
                                 result={"mode": "sync", "subscribers": {"b": {"read": 900000, "pulled": 899990,
                                                                               "conflicts": 3, "pushed": 12}}})  # fmt: skip
    init = JobRun.objects.create(kind="bidir_init", target="t", params={"subscription": 1}, state="succeeded",
                                 result={"mode": "init", "rows": 5, "inserted": 5})  # fmt: skip
    figure = runs_figure([sync, init])
    by_name = {t["name"]: t for t in figure["data"]}
    assert list(by_name) == ["read", "written", "pulled", "pushed", "conflicts"]
    assert by_name["conflicts"]["yaxis"] == "y2" and "yaxis" not in by_name["read"]
    assert by_name["conflicts"]["x"] == [f"#{sync.pk}"] and by_name["conflicts"]["y"] == [3]
    assert by_name["read"]["x"] == [f"#{sync.pk}", f"#{init.pk}"]  # oldest first
    assert figure["layout"]["yaxis2"]["side"] == "right" and figure["layout"]["yaxis2"]["dtick"] == 1

"""Jobs for operators: Retry of a failed or cancelled job (same parameters, audited, linked back), the object each
job works on, identical failures grouped with a count, the last error always shown, filters by state, kind and item."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from replication_admin.compare.actions import do_start_compare
from replication_admin.core.audit import Actor
from replication_admin.core.jobs import RUNNERS, job_subject
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    AuditEntry,
    JobRun,
    ReplSubscriber,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
)
from tests.tables import create_table

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_compare(make_server, jobs_sync):
    """A compare job that really failed through the queue: the left table does not exist."""
    shop, replica = make_server("sqlite", "shop"), make_server("sqlite", "replica")
    create_table(replica, "customers", [("id", LogicalType("integer"))], ["id"])
    job = do_start_compare(Actor.command(), shop, "customers", replica, "customers")
    job.refresh_from_db()
    assert job.state == JobRun.State.FAILED and "customers" in job.error
    return job


def failed(kind: str, target: str, error: str, item: str = "", **params) -> JobRun:
    return JobRun.objects.create(
        kind=kind, target=target, item=item, params=params, state=JobRun.State.FAILED, error=error
    )


def test_an_operator_retries_a_failed_job_with_the_same_parameters_and_the_new_job_links_back(
    failed_compare, operator_client
):
    response = operator_client.post(reverse("jobs-retry", args=[failed_compare.pk]))

    retry = JobRun.objects.exclude(pk=failed_compare.pk).get()
    assert response.status_code == 302 and response["Location"] == reverse("jobs-detail", args=[retry.pk])
    assert (retry.kind, retry.target, retry.params) == (
        failed_compare.kind,
        failed_compare.target,
        failed_compare.params,
    )
    assert retry.rerun_of_id == failed_compare.pk and retry.retry_of_id is None
    assert retry.created_by.username == "operator" and retry.trigger == JobRun.Trigger.PERSON
    assert retry.state == JobRun.State.FAILED  # ran through the same queue path, and the table is still missing
    audit = AuditEntry.objects.get(action="job.retry", username="operator")
    assert audit.outcome == "ok" and audit.detail["job"] == failed_compare.pk and audit.detail["retry"] == retry.pk
    assert AuditEntry.objects.filter(action="job.compare", username="operator", detail__job=retry.pk).exists()

    page = operator_client.get(reverse("jobs-detail", args=[retry.pk])).content.decode()
    assert f'href="{reverse("jobs-detail", args=[failed_compare.pk])}"' in page and "Retry of" in page
    original = operator_client.get(reverse("jobs-detail", args=[failed_compare.pk])).content.decode()
    assert "Retried as" in original and f"job #{retry.pk}" in original
    assert 'id="job-retry"' not in original  # run again already: its retry offers the next Retry


def test_an_editor_may_retry_a_cancelled_job(failed_compare, editor_client):
    JobRun.objects.filter(pk=failed_compare.pk).update(state=JobRun.State.CANCELLED)
    assert editor_client.post(reverse("jobs-retry", args=[failed_compare.pk])).status_code == 302
    assert JobRun.objects.filter(rerun_of=failed_compare).count() == 1


def test_a_viewer_may_not_retry_and_the_refusal_is_audited(failed_compare, viewer_client):
    page = viewer_client.get(reverse("jobs-detail", args=[failed_compare.pk])).content.decode()
    assert 'id="job-retry"' not in page
    response = viewer_client.post(reverse("jobs-retry", args=[failed_compare.pk]))
    assert response.status_code == 403 and b"needs replication_admin.operate" in response.content
    assert JobRun.objects.count() == 1
    assert AuditEntry.objects.filter(action="job.retry", username="viewer", outcome="denied").exists()


@pytest.mark.parametrize("state", ["running", "queued", "succeeded"])
def test_a_job_that_has_not_failed_is_not_retried_and_the_refusal_is_one_audited_line(operator_client, state):
    job = JobRun.objects.create(
        kind="compare", target="a ↔ b", state=state, params={"right_server": "b", "right_table": "t"}
    )
    response = operator_client.post(reverse("jobs-retry", args=[job.pk]), follow=True)
    assert JobRun.objects.count() == 1
    assert f"job #{job.pk} is {state}: only a failed or cancelled job is retried" in response.content.decode()
    refusal = AuditEntry.objects.get(action="job.retry", username="operator")
    assert refusal.outcome == "error" and "only a failed or cancelled job" in refusal.detail["refused"]


def test_a_job_of_a_kind_that_cannot_be_run_again_is_refused(operator_client):
    job = failed("retired_kind", "something", "it broke")
    response = operator_client.post(reverse("jobs-retry", args=[job.pk]), follow=True)
    assert "retired_kind jobs are not run again from the console" in response.content.decode()
    assert JobRun.objects.count() == 1
    assert AuditEntry.objects.filter(action="job.retry", outcome="error").count() == 1


def test_a_job_already_run_again_is_not_retried_twice(failed_compare, operator_client):
    operator_client.post(reverse("jobs-retry", args=[failed_compare.pk]))
    response = operator_client.post(reverse("jobs-retry", args=[failed_compare.pk]), follow=True)
    assert JobRun.objects.filter(rerun_of=failed_compare).count() == 1
    assert "was already run again as job #" in response.content.decode()


def test_every_job_kind_links_to_the_object_it_works_on(viewer_client, make_server):
    demo = make_server("sqlite", "demo")
    branch = make_server("sqlite", "branch")
    Snapshot.objects.create(
        name="branch.t_copy", query="SELECT * FROM t", source_server=demo, dest_server=branch, dest_table="t_copy"
    )
    publication = SnapshotPublication.objects.create(item="demo.t", server=demo, table="t")
    subscription = SnapshotSubscription.objects.create(server="branch", item="demo.t")
    trx = ReplSubscriber.objects.create(server="demo", account="acct", subscriber="branch")
    params = {
        "snapshot_refresh": {"snapshot": "branch.t_copy"},
        "snapshot_repair": {"snapshot": "branch.t_copy"},
        "compare": {"right_server": "branch", "right_table": "t_copy", "left_server": "demo", "left_table": "t"},
        "bidir_init": {"subscription": subscription.pk},
        "bidir_sync": {"publication": publication.pk},
        "trx_init": {"subscription": trx.pk},
        "trx_sync": {"subscription": trx.pk},
        "resolver_dry_run": {"item": "demo.t", "server": "demo", "table": "t"},
    }
    expected = {
        "snapshot_refresh": reverse("snapshots-detail", args=["branch.t_copy"]),
        "snapshot_repair": reverse("snapshots-detail", args=["branch.t_copy"]),
        "compare": reverse("servers-table", args=["branch", "t_copy"]),
        "bidir_init": publication.get_absolute_url(),
        "bidir_sync": publication.get_absolute_url(),
        "trx_init": trx.get_absolute_url(),
        "trx_sync": trx.get_absolute_url(),
        "resolver_dry_run": reverse("publications-resolvers", args=[publication.pk]),
    }
    assert set(RUNNERS) >= set(params), "a job kind without a link to its object"
    for kind in params:
        subject = job_subject(kind, params[kind])
        assert subject is not None and subject.url == expected[kind], kind
        job = JobRun.objects.create(kind=kind, target=f"{kind} target", params=params[kind], item=subject.name)
        page = viewer_client.get(reverse("jobs-detail", args=[job.pk])).content.decode()
        assert f'id="job-subject" href="{expected[kind]}"' in page, kind
    listed = viewer_client.get(reverse("jobs")).content.decode()
    for url in set(expected.values()):
        assert f'class="job-subject" href="{url}"' in listed
    snapshot_compare = job_subject("compare", {"snapshot": "branch.t_copy", "right_server": "b", "right_table": "t"})
    assert snapshot_compare.url == reverse("snapshots-detail", args=["branch.t_copy"])


def test_a_job_queued_by_its_action_records_the_object_it_works_on(failed_compare):
    assert failed_compare.item == "table replica.customers"


def test_fifteen_identical_failures_are_one_group_with_their_count_times_and_the_latest(viewer_client, operator_client):
    for _ in range(15):
        latest = failed(
            "snapshot_refresh", "UPDATE SNAPSHOT w.c", "server w is unreachable", "snapshot w.c", snapshot="w.c"
        )
    failed("snapshot_refresh", "UPDATE SNAPSHOT w.c", "table t is gone", "snapshot w.c", snapshot="w.c")
    failed("snapshot_refresh", "UPDATE SNAPSHOT w.d", "server w is unreachable", "snapshot w.d", snapshot="w.d")
    JobRun.objects.create(kind="snapshot_refresh", target="UPDATE SNAPSHOT w.e", state="succeeded")

    page = operator_client.get(reverse("jobs")).content.decode()
    panel = page[page.index('id="job-failures"') : page.index('id="job-list"')]
    groups = re.findall(r'class="failure-group" data-kind="(\w+)" data-count="(\d+)"', panel)
    assert sorted(int(n) for _, n in groups) == [1, 1, 15]
    unreachable = panel[panel.index('data-count="15"') :]
    unreachable = unreachable[: unreachable.index("</tr>")]
    assert "server w is unreachable" in unreachable and f"#{latest.pk}</a>" in unreachable
    assert reverse("jobs-retry", args=[latest.pk]) in unreachable
    assert reverse("snapshots-detail", args=["w.c"]) in unreachable
    # The viewer sees the same groups, without a Retry button.
    viewer_page = viewer_client.get(reverse("jobs")).content.decode()
    assert 'data-count="15"' in viewer_page and "jobs-retry" not in viewer_page and "/retry/" not in viewer_page


def test_a_failed_job_shows_its_error_in_the_list_and_prominently_on_its_page(failed_compare, viewer_client):
    JobRun.objects.filter(pk=failed_compare.pk).update(log="")
    page = viewer_client.get(reverse("jobs-detail", args=[failed_compare.pk])).content.decode()
    error = re.search(r'<div class="result bad job-last-error" id="job-error">([^<]+)</div>', page)
    assert error is not None and "customers" in error.group(1)
    assert "nothing logged yet" not in page and "(the job logged nothing; its error is shown above)" in page
    listed = viewer_client.get(reverse("jobs")).content.decode()
    assert f'<div class="job-error">{failed_compare.error[:40]}' in listed.replace("&#x27;", "'")


def test_the_jobs_are_filtered_by_state_kind_and_item_and_the_filters_stay_in_the_paging_links(viewer_client):
    for n in range(60):
        failed(
            "snapshot_refresh", f"UPDATE SNAPSHOT w.c{n % 2}", "gone", f"snapshot w.c{n % 2}", snapshot=f"w.c{n % 2}"
        )
    JobRun.objects.create(kind="compare", target="x", item="snapshot w.c0", state="failed", error="gone")
    JobRun.objects.create(kind="snapshot_refresh", target="y", item="snapshot w.c0", state="succeeded")

    def listed(**query) -> tuple[set[int], str]:
        page = viewer_client.get(reverse("jobs"), query).content.decode()
        return {int(pk) for pk in re.findall(r'<tr data-job="(\d+)"', page)}, page

    shown, page = listed(state="failed", kind="snapshot_refresh", item="snapshot w.c0")
    expected = JobRun.objects.filter(state="failed", kind="snapshot_refresh", item="snapshot w.c0")
    assert len(shown) == 30 and shown == set(expected.values_list("pk", flat=True))
    assert '<option value="snapshot w.c0" selected>' in page
    shown, page = listed(item="snapshot w.c0")
    assert len(shown) == 32
    shown, page = listed(kind="snapshot_refresh")
    assert len(shown) == 50 and "page 1 of 2" in page
    next_link = re.search(r'href="([^"]+)" rel="next"', page).group(1).replace("&amp;", "&")
    assert "kind=snapshot_refresh" in next_link and "page=2" in next_link
    sort_link = re.search(r'href="([^"]+)" data-sort="state"', page).group(1).replace("&amp;", "&")
    assert "kind=snapshot_refresh" in sort_link


def test_the_list_offers_retry_only_on_the_latest_failure_of_an_object(operator_client):
    older = failed("snapshot_refresh", "UPDATE SNAPSHOT w.c", "gone", "snapshot w.c", snapshot="w.c")
    latest = failed("snapshot_refresh", "UPDATE SNAPSHOT w.c", "gone", "snapshot w.c", snapshot="w.c")
    other = failed("snapshot_refresh", "UPDATE SNAPSHOT w.d", "gone", "snapshot w.d", snapshot="w.d")
    page = operator_client.get(reverse("jobs")).content.decode()
    listed = page[page.index('id="job-list"') :]
    assert reverse("jobs-retry", args=[latest.pk]) in listed and reverse("jobs-retry", args=[other.pk]) in listed
    assert reverse("jobs-retry", args=[older.pk]) not in listed

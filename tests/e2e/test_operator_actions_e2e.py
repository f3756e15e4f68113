"""In the browser, as an operator on call: a refresh that failed because its source server was unreachable is seen
grouped with its error, the cause is fixed and Retry brings the rows; the scheduler's run now, pause / resume and
interval; the conflict inbox's bulk re-apply and dismiss with one confirmation."""

from __future__ import annotations

import os
import re
import time

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from replication_admin.bidir import actions as bidir_actions
from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, ConflictBackup, JobRun, ScheduledEvent, Snapshot, SnapshotSubscription
from replication_admin.servers.actions import do_register_server
from replication_admin.snapshots.actions import do_refresh_snapshot, do_schedule_snapshot
from replication_admin.statements import execute
from tests.conftest import server_data, wait_for_job
from tests.e2e.test_console import PASSWORD, log_in
from tests.tables import create_table, fetch_all, insert_rows

COLUMNS = [("OrderID", LogicalType("integer")), ("Freight", LogicalType("numeric", precision=10, scale=2))]


def orders_snapshot(sqlite_path):
    """shop.Orders (100 rows, with its snapshot log) copied by the incremental snapshot wh.orders_copy, whose first
    refresh has run on the worker."""
    shop_file = sqlite_path("shop")
    shop = do_register_server(Actor.command(), server_data("sqlite", "shop", shop_file))
    wh = do_register_server(Actor.command(), server_data("sqlite", "wh", sqlite_path("wh")))
    create_table(shop, "Orders", COLUMNS, ["OrderID"])
    insert_rows(shop, "Orders", ["OrderID", "Freight"], [(10000 + i, f"{i}.50") for i in range(100)])
    outcomes = execute(
        Actor.command(), "create snapshot log for Orders; create snapshot wh.orders_copy from Orders", context=shop
    )
    assert all(o.ok for o in outcomes), [o.message for o in outcomes]
    first = JobRun.objects.get(kind="snapshot_refresh")
    assert wait_for_job(first.pk).state == JobRun.State.SUCCEEDED
    assert fetch_all(wh, "SELECT count(*) FROM orders_copy") == [(100,)]
    # The replay-log purge scheduled with the snapshot log stays out of the way.
    ScheduledEvent.objects.filter(name="purge_rplogs").update(last_slot=timezone.now())
    return shop, wh, shop_file


@pytest.mark.browser
@pytest.mark.spark
def test_an_operator_sees_a_grouped_failure_fixes_the_cause_retries_and_the_rows_arrive(
    live_server, qcluster, page, shot, sqlite_path
):
    admin = User.objects.create_superuser("admin", password=PASSWORD)
    shop, wh, shop_file = orders_snapshot(sqlite_path)
    insert_rows(shop, "Orders", ["OrderID", "Freight"], [(20000 + i, "9.99") for i in range(7)])
    snapshot = Snapshot.objects.get()

    os.rename(shop_file, shop_file + ".away")  # the source server's database is unreachable
    failed = []
    for _ in range(3):
        job = do_refresh_snapshot(Actor(user=admin), snapshot)
        failed.append(wait_for_job(job.pk))
    assert {j.state for j in failed} == {JobRun.State.FAILED}
    assert len({j.error for j in failed}) == 1 and "shop" in failed[0].error

    log_in(page, live_server.url)
    page.click("header nav a:has-text('Jobs')")
    group = page.locator("#job-failures tr.failure-group").first
    assert group.get_attribute("data-count") == "3"
    text = group.inner_text()
    assert "\u00d73" in text and failed[0].error[:60] in text and "snapshot wh.orders_copy" in text
    assert group.locator("a.job-subject").get_attribute("href") == f"/snapshots/{snapshot.name}/"
    shot(page, "grouped-failure")

    page.click(f"#job-list tr[data-job='{failed[-1].pk}'] a:has-text('#{failed[-1].pk}')")
    page.wait_for_selector("#job-status[data-state='failed']")
    assert failed[0].error[:60] in page.inner_text("#job-error")
    assert "nothing logged yet" not in page.inner_text("#job-status")
    shot(page, "failed-job-page")

    os.rename(shop_file + ".away", shop_file)  # fixed: the database is back
    page.go_back()
    page.locator("#job-failures tr.failure-group").first.locator("button.retry").click()
    page.wait_for_selector("#job-rerun-of")
    assert f"job #{failed[-1].pk}" in page.inner_text("#job-rerun-of")
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=180_000)
    shot(page, "retried-job-succeeded")

    retry = JobRun.objects.get(rerun_of=failed[-1])
    assert retry.params == failed[-1].params and retry.created_by == admin
    assert fetch_all(wh, 'SELECT count(*) FROM orders_copy WHERE "OrderID" >= 20000') == [(7,)]
    assert fetch_all(wh, "SELECT count(*) FROM orders_copy") == [(107,)]
    assert AuditEntry.objects.filter(action="job.retry", username="admin", detail__retry=retry.pk).exists()

    page.click("header nav a:has-text('Jobs')")
    group = page.locator("#job-failures tr.failure-group").first
    assert f"retried as #{retry.pk}" in group.inner_text() and "succeeded" in group.inner_text()
    shot(page, "jobs-after-retry")


@pytest.mark.browser
@pytest.mark.spark
def test_an_operator_runs_a_scheduled_refresh_now_pauses_resumes_and_changes_its_interval(
    live_server, qcluster, page, shot, sqlite_path
):
    User.objects.create_superuser("admin", password=PASSWORD)
    shop, wh, _ = orders_snapshot(sqlite_path)
    event = do_schedule_snapshot(Actor.command(), Snapshot.objects.get(), 60)
    ScheduledEvent.objects.filter(pk=event.pk).update(last_slot=event.start)  # its first slot has run
    insert_rows(shop, "Orders", ["OrderID", "Freight"], [(30000 + i, "1.00") for i in range(5)])
    refreshes = set(JobRun.objects.filter(kind="snapshot_refresh").values_list("pk", flat=True))

    log_in(page, live_server.url)
    page.goto(live_server.url + "/scheduler/")
    row = page.locator(f"#event-rows tr[data-event='{event.name}']")
    shot(page, "scheduler")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # every action on screen
    row.locator("button.run-now").click()
    page.wait_for_selector("ul.messages li:has-text('was handed to a worker')")
    shot(page, "run-now")

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not JobRun.objects.filter(kind="snapshot_refresh").exclude(pk__in=refreshes):
        time.sleep(0.5)
    job = JobRun.objects.filter(kind="snapshot_refresh").exclude(pk__in=refreshes).get()
    page.goto(live_server.url + "/jobs/")
    page.click(f"#job-list tr[data-job='{job.pk}'] a:has-text('#{job.pk}')")
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=180_000)
    shot(page, "run-now-job-finished")
    assert fetch_all(wh, 'SELECT count(*) FROM orders_copy WHERE "OrderID" >= 30000') == [(5,)]
    ran = ScheduledEvent.objects.get(pk=event.pk)
    assert ran.last_slot > event.start and ran.last_completed is not None

    page.goto(live_server.url + "/scheduler/")
    row = page.locator(f"#event-rows tr[data-event='{event.name}']")
    row.locator("button.pause").click()
    page.wait_for_selector("ul.messages li:has-text('is paused')")
    row = page.locator(f"#event-rows tr[data-event='{event.name}']")
    assert "paused" in row.locator(".event-state").inner_text() and "never" in row.locator(".next-run").inner_text()
    assert ScheduledEvent.objects.get(pk=event.pk).disabled == 1
    shot(page, "paused")

    row.locator("button.resume").click()
    page.wait_for_selector("ul.messages li:has-text('is resumed')")
    row = page.locator(f"#event-rows tr[data-event='{event.name}']")
    assert "enabled" in row.locator(".event-state").inner_text()
    row.locator("input[name=interval]").fill("15")
    row.locator(".interval-form button").click()
    page.wait_for_selector("ul.messages li:has-text('runs every 15 minutes')")
    row = page.locator(f"#event-rows tr[data-event='{event.name}']")
    assert row.locator("input[name=interval]").input_value() == "15"  # edited where it is shown
    assert ScheduledEvent.objects.get(pk=event.pk).interval == 15
    shot(page, "interval-changed")
    actions = set(AuditEntry.objects.filter(username="admin", target=event.name).values_list("action", flat=True))
    assert {"event.run_now", "event.pause", "event.resume", "event.interval"} <= actions


@pytest.mark.browser
def test_an_operator_re_applies_and_dismisses_conflicts_in_bulk_with_one_confirmation(
    live_server, page, shot, sqlite_path
):
    User.objects.create_superuser("admin", password=PASSWORD)
    command = Actor.command()
    demo = do_register_server(command, server_data("sqlite", "demo", sqlite_path("demo")))
    branch = do_register_server(command, server_data("sqlite", "branch", sqlite_path("branch")))
    create_table(demo, "b", [("id", LogicalType("integer")), ("v", LogicalType("varchar", length=10))], ["id"])
    publication = bidir_actions.do_create_publication(command, demo, "b")
    subscription = bidir_actions.do_create_subscription(command, publication, branch)
    SnapshotSubscription.objects.filter(pk=subscription.pk).update(init_state="done")
    insert_rows(demo, "b", ["id", "v"], [(i, f"kept {i}") for i in range(1, 9)])
    guids = {row[0]: row[1] for row in fetch_all(demo, 'SELECT id, "ROWGUID" FROM b')}
    for i in range(1, 9):
        won, lost = {"id": i, "v": f"kept {i}", "ROWGUID": guids[i]}, {"id": i, "v": f"lost {i}", "ROWGUID": guids[i]}
        ConflictBackup.objects.create(
            item=publication.item, table_name="b", publisher="demo", source="branch", change_guid=f"branch@{i}",
            origin="branch", primary_key={"id": i}, conflict_type="U", operation="U",
            decision=ConflictBackup.HELD if i == 8 else 3, resolver="default",
            publisher_row=won, incoming_row=lost, winning_row=won, losing_row=lost,
        )  # fmt: skip
    by_key = {c.primary_key["id"]: c.pk for c in ConflictBackup.objects.all()}

    log_in(page, live_server.url)
    page.goto(live_server.url + "/conflicts/?status=open")
    assert "7 conflicts match" in page.inner_text("#conflict-count")
    for key in (1, 2, 3):
        page.check(f"#conflict-rows input.pick[value='{by_key[key]}']")
    shot(page, "inbox-selected")
    page.click("#bulk-reapply")
    page.wait_for_selector("h1:has-text('Re-apply 3 conflicts?')")
    listed = page.locator("#bulk-rows tbody tr")
    assert listed.count() == 3
    shot(page, "reapply-confirmation")
    page.click("form button.btn.danger")
    page.wait_for_selector("ul.messages li:has-text('3 conflicts re-applied')")
    assert "4 conflicts match" in page.inner_text("#conflict-count")  # back on the open ones
    shot(page, "reapplied")
    assert dict(fetch_all(demo, "SELECT id, v FROM b")) == {
        **{i: f"kept {i}" for i in range(1, 9)},
        1: "lost 1",
        2: "lost 2",
        3: "lost 3",
    }

    page.goto(live_server.url + "/conflicts/")
    page.check("#pick-page")  # every row on the page: the held one is left out on the confirmation
    assert page.locator("#conflict-rows input.pick:checked").count() == 8
    page.click("#bulk-dismiss")
    page.wait_for_selector("h1:has-text('Dismiss 4 conflicts?')")
    left_out = page.locator("#bulk-rows tr.left-out")
    assert left_out.count() == 4 and "held for a person" in page.inner_text("#bulk-rows")
    shot(page, "dismiss-confirmation")
    page.click("form button.btn.danger")
    page.wait_for_selector("ul.messages li:has-text('4 conflicts dismissed')")
    shot(page, "dismissed")

    dismissed = set(ConflictBackup.objects.filter(dismissed_at__isnull=False).values_list("pk", flat=True))
    assert dismissed == {by_key[k] for k in (4, 5, 6, 7)}
    assert ConflictBackup.objects.get(pk=by_key[8]).dismissed_at is None
    page.goto(live_server.url + "/conflicts/?status=dismissed")
    assert "4 conflicts match" in page.inner_text("#conflict-count")
    assert re.findall(r"dismissed", page.inner_text("#conflict-rows")).__len__() == 4
    shot(page, "dismissed-filter")
    assert AuditEntry.objects.filter(action="conflict.dismiss", username="admin", outcome="ok").count() == 4

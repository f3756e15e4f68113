"""In headless Chromium: an operator validates a drifted subscription from its page, a real worker runs the job, its
page lists the keys that differ, the operator repairs them from there and validates again: the slice is equal, the
drift alert resolved, and the subscription's drift chart shows both validations. The same for an incremental
snapshot whose destination was written by hand: failing on its page until the key is repaired."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.core.audit import Actor
from replication_admin.models import Alert, JobRun, RegistryEntry, ReplSubscriber, Validation
from replication_admin.statements import execute
from tests.conftest import wait_for_job
from tests.e2e.test_console import PASSWORD, log_in
from tests.e2e.test_trx_reload_e2e import rows
from tests.transactional.test_trx_replication import run, sql

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]


def test_an_operator_validates_a_subscription_repairs_its_drift_from_the_job_and_validates_again(
    live_server, qcluster, page, shot, make_server
):
    User.objects.create_superuser("admin", password=PASSWORD)
    pub, sub = make_server("postgresql", "pub"), make_server("mysql", "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    sql(pub, *[f"INSERT INTO items VALUES ({i}, 'item {i}')" for i in range(1, 41)])
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop')")
    copied = run(sub, "REPL_INIT_COPY ('pub', 'shop')")[0]
    assert wait_for_job(copied.job_id).state == JobRun.State.SUCCEEDED
    subscription = ReplSubscriber.objects.get(subscriber="sub")
    ReplSubscriber.objects.filter(pk=subscription.pk).update(validate_slices=1)
    sql(sub, "UPDATE items SET name = 'drifted' WHERE id = 12", "DELETE FROM items WHERE id = 30")

    log_in(page, live_server.url)
    page.goto(live_server.url + subscription.get_absolute_url())
    assert page.inner_text("#trx-validation-none") == "Not validated yet."
    page.select_option("#trx-validate-table", "items")
    page.click("#trx-validate")
    page.wait_for_selector("#validation-verdict:has-text('drift')", timeout=180_000)
    job = JobRun.objects.get(kind="trx_validate")
    assert "the whole table" in page.inner_text("#validation-facts")
    assert page.eval_on_selector_all(".compare-rows tbody.difference", "rows => rows.map(r => r.dataset.key)") == [
        "id=12", "id=30",
    ]  # fmt: skip
    assert Alert.objects.filter(kind="validation_drift", resolved_at__isnull=True).count() == 1
    shot(page, "drift")

    page.check("#select-all")
    page.click("#repair-selected")
    page.wait_for_selector("h1:has-text('Repair 2 key(s)?')")
    page.click("button:has-text('Repair 2 key(s)')")
    repair = JobRun.objects.filter(kind="compare_repair")
    page.wait_for_selector("#job-state:has-text('succeeded')", timeout=120_000)
    assert wait_for_job(repair.get().pk).state == JobRun.State.SUCCEEDED
    assert rows(sub, "items") == rows(pub, "items")  # by content: every key and value

    page.goto(live_server.url + f"/jobs/{job.pk}/")
    page.click("#validate-again")
    page.wait_for_selector("#validation-verdict:has-text('equal')", timeout=180_000)
    assert not Alert.objects.filter(kind="validation_drift", resolved_at__isnull=True).exists()
    assert list(Validation.objects.order_by("at").values_list("verdict", "drift")) == [("drift", 2), ("equal", 0)]

    page.goto(live_server.url + subscription.get_absolute_url())
    assert page.get_attribute("#trx-validation-rows tr[data-table='items']", "data-verdict") == "equal"
    page.wait_for_selector("#trx-drift-chart .main-svg")
    page.click("#trx-validation summary:has-text('Table view')")
    table = page.inner_text("#trx-validation .chart-table").splitlines()
    assert "items" in table[2].lower() and [line.split("\t")[-1] for line in table[3:]] == ["2", "0"]
    shot(page, "validated")


def test_an_operator_validates_a_snapshot_whose_destination_was_written_by_hand_and_sees_it_failing_until_repaired(
    live_server, qcluster, page, shot, make_server
):
    User.objects.create_superuser("admin", password=PASSWORD)
    source, dest = make_server("postgresql", "src"), make_server("sqlite", "dst")
    sql(source, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    sql(source, *[f"INSERT INTO items VALUES ({i}, 'item {i}')" for i in range(1, 31)])
    for text in ("create snapshot log for items", "create snapshot dst.items from src.items"):
        assert all(o.ok for o in execute(Actor.command(), text, context=source, wait=True)), text
    RegistryEntry.objects.update_or_create(key="repl_validate_slices", defaults={"value": "1"})
    sql(dest, "UPDATE items SET name = 'by hand' WHERE id = 4")
    sql(source, "UPDATE items SET name = 'logged' WHERE id = 5")  # in flight: the validation's refresh brings it

    log_in(page, live_server.url)
    page.goto(live_server.url + "/snapshots/dst.items/")
    assert page.inner_text("#snapshot-validation-none") == "Not validated yet."
    page.click("#validate-now")
    page.wait_for_selector("#validation-verdict:has-text('drift')", timeout=180_000)
    assert page.eval_on_selector_all(".compare-rows tbody.difference", "rows => rows.map(r => r.dataset.key)") == [
        "id=4"
    ]
    assert "refreshed incrementally" in page.inner_text("#validation-facts")
    page.goto(live_server.url + "/snapshots/dst.items/")
    assert page.get_attribute("#snapshot-state .badge", "data-state") == "failing"
    assert page.get_attribute("#snapshot-validation-rows tbody tr", "data-verdict") == "drift"
    page.wait_for_selector("#snapshot-drift-chart .main-svg")
    shot(page, "snapshot-drift")

    job = JobRun.objects.get(kind="snapshot_validate")
    page.goto(live_server.url + f"/jobs/{job.pk}/")
    page.check("#select-all")
    page.click("#repair-selected")
    page.click("button:has-text('Repair 1 key(s)')")
    page.wait_for_selector("#job-state:has-text('succeeded')", timeout=120_000)
    assert rows(dest, "items") == rows(source, "items")  # by content: the hand-written row and the logged one
    page.goto(live_server.url + f"/jobs/{job.pk}/")
    page.click("#validate-again")
    page.wait_for_selector("#validation-verdict:has-text('equal')", timeout=180_000)
    page.goto(live_server.url + "/snapshots/dst.items/")
    assert page.get_attribute("#snapshot-state .badge", "data-state") == "ok"
    assert not Alert.objects.filter(kind="validation_drift", resolved_at__isnull=True).exists()

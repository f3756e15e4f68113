"""In headless Chromium, with a real django-q2 worker and a real follower (`manage.py replfollow`): the transactional
wizard taken with its defaults — the publication named after its table, the subscriber kept in sync — ends in
running replication: a row committed on the publisher afterwards reaches the subscriber with no one asking."""

from __future__ import annotations

import time

import pytest

from replication_admin.core import heartbeats
from replication_admin.engine.types import LogicalType
from replication_admin.models import ReplSubscriber, ScheduledEvent
from tests.e2e.test_bidir_e2e import sign_in
from tests.e2e.test_walkthrough import next_step
from tests.tables import create_table, execute, fetch_all, insert_rows
from tests.transactional import test_follower_down
from tests.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.live_db, pytest.mark.spark]

follower = test_follower_down.follower  # the fixture: `manage.py replfollow` processes, killed at the end


def wait_until(what: str, check, timeout: float = 180.0):
    """Poll `check` until it answers something true; a guard against hanging, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while not (answer := check()):
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.2)
    return answer


def test_the_transactional_wizard_with_its_defaults_ends_in_replication_that_runs_by_itself(
    live_server, qcluster, follower, page, shot, make_server
):
    make_user("editor", "edit", "operate")
    shop = make_server("postgresql", "shop")
    branch = make_server("postgresql", "branch")
    create_table(shop, "Order Details", [("id", LogicalType("integer")), ("qty", LogicalType("integer"))], ["id"])
    insert_rows(shop, "Order Details", ["id", "qty"], [(1, 10), (2, 20)])
    follower()

    sign_in(page, live_server.url, "editor")
    page.click("header nav a:has-text('Set up')")
    page.wait_for_selector("#wizard-step[data-step='publisher']")
    page.check("input[name='use'][value='existing']")
    page.select_option("#id_existing", "shop")
    next_step(page, "subscriber")
    page.check("input[name='use'][value='existing']")
    page.select_option("#id_existing", "branch")
    next_step(page, "mode")
    page.check("input[name='mode'][value='trx']")
    next_step(page, "tables")
    page.check("input[name='tables'][value='Order Details']")
    page.fill("#id_account", "")  # no name given: the wizard names it
    next_step(page, "schedule")
    assert page.locator("input[name='sync_mode'][value='in_sync']").is_checked()  # the default
    shot(page, "sync-modes")
    next_step(page, "review")
    assert "REPL_PUBLISH ('order_details', 'order_details.log')" in page.inner_text("#review-statements")
    assert "In sync" in page.inner_text("#review-schedule")
    shot(page, "review")
    page.click("#wizard-confirm")
    page.wait_for_url("**/setup/started/")

    sub = wait_until(
        "the subscription in sync",
        lambda: ReplSubscriber.objects.filter(
            subscriber="branch", state=ReplSubscriber.IN_SYNC, init_state="done"
        ).first(),
    )
    assert sub.account == "order_details" and sub.follow
    wait_until("a live follower serving it", lambda: heartbeats.live_followers().holds(sub.pk))
    execute(shop, 'INSERT INTO "Order Details" (id, qty) VALUES (3, 30)')
    execute(shop, 'UPDATE "Order Details" SET qty = 11 WHERE id = 1')
    rows = wait_until(
        "the change at the subscriber",
        lambda: (
            (r := sorted(fetch_all(branch, 'SELECT id, qty FROM "Order Details"'))) == [(1, 11), (2, 20), (3, 30)] and r
        ),
    )
    assert rows == [(1, 11), (2, 20), (3, 30)]
    assert not ScheduledEvent.objects.filter(sql__icontains="REPL_SYNC").exists()  # nothing scheduled: followed
    page.goto(live_server.url + sub.get_absolute_url())
    shot(page, "subscription")

"""In headless Chromium: the dashboard's open-alerts tile leads to the Alerts page; an admin acknowledges an alert
there, stays on the filtered view, and finds it under "acknowledged" with their name; resolved alerts keep how
their cause cleared."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.core.alerts import raise_alert, resolve_alerts
from replication_admin.models import Alert
from tests.e2e.test_console import PASSWORD, log_in

pytestmark = [pytest.mark.browser]


def test_an_admin_follows_the_tile_acknowledges_an_alert_and_finds_it_in_the_history(live_server, page, shot):
    User.objects.create_superuser("admin", password=PASSWORD)
    raise_alert(Alert.Kind.APPLY_HALTED, "pub/acc → s1", "apply halted at level 12: duplicate key (id)=(7)")
    raise_alert(Alert.Kind.FOLLOWER_DOWN, "pub/acc → s2", "no live follower serves it")
    raise_alert(Alert.Kind.JOB_FAILED, "snapshot demo.Orders", "server demo unreachable")
    resolve_alerts(Alert.Kind.JOB_FAILED, "snapshot demo.Orders", "job #9 succeeded")
    log_in(page, live_server.url)
    assert page.locator("#open-alerts .n").inner_text() == "2"
    shot(page, "dashboard-tile")
    page.click("#open-alerts")
    page.wait_for_selector("#alert-rows")
    assert page.locator("#alert-rows tbody tr").count() == 2
    assert page.locator("#alert-states a[data-state='open'] .badge").inner_text() == "2"
    page.select_option("#id_alert_kind", "apply_halted")
    page.click("#alert-filters button[type=submit]")
    page.wait_for_url("**kind=apply_halted**")
    assert page.locator("#alert-rows tbody tr").count() == 1
    shot(page, "alerts-filtered")
    page.click("#alert-rows button.ack")
    page.wait_for_url("**kind=apply_halted**")
    assert page.locator("#alert-rows").count() == 0  # nothing open of that kind is left
    page.click("#alert-states a[data-state='acknowledged']")
    row = page.locator("#alert-rows tbody tr")
    assert row.count() == 1 and "by admin" in row.inner_text()
    page.click("#alert-states a[data-state='resolved']")
    page.wait_for_url("**state=resolved**")
    # The kind filter is kept across tabs: the resolved job alert is of another kind.
    assert page.locator("#alert-rows").count() == 0
    page.goto(live_server.url + "/alerts/?state=resolved")
    assert "job #9 succeeded" in page.locator("#alert-rows").inner_text()
    shot(page, "alerts-resolved")
    assert Alert.objects.get(kind="apply_halted").acknowledged_by == "admin"

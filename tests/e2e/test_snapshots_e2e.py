"""In the browser: run statements in the console, refresh a snapshot and watch it, compare it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import JobRun, Snapshot
from replication_admin.servers.actions import do_register_server
from tests.conftest import server_data
from tests.e2e.test_console import PASSWORD, log_in
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]


def test_a_dba_creates_a_snapshot_in_the_statement_console_refreshes_and_compares_it(
    live_server, qcluster, page, shot, sqlite_path, live_database
):
    User.objects.create_superuser("admin", password=PASSWORD)
    shop = do_register_server(Actor.command(), server_data("sqlite", "shop", sqlite_path("shop")))
    wh = do_register_server(Actor.command(), server_data("postgresql", "wh", live_database("postgresql")))
    columns = [("OrderID", LogicalType("integer")), ("Freight", LogicalType("numeric", precision=10, scale=2))]
    create_table(shop, "Orders", columns, ["OrderID"])
    insert_rows(shop, "Orders", ["OrderID", "Freight"], [(10248 + i, f"{i}.25") for i in range(500)])

    log_in(page, live_server.url)
    page.click("header nav a:has-text('Statements')")
    page.select_option("#id_server", "shop")
    page.fill(
        "#id_text",
        "create snapshot log for Orders;\ncreate snapshot wh.orders_copy from Orders where 'OrderID < 10500'",
    )
    page.click("#run-statements")
    page.wait_for_selector("#results table")
    results = page.inner_text("#results")
    assert (
        "created snapshot log shop.RLOG_Orders" in results and "created incremental snapshot wh.orders_copy" in results
    )
    shot(page, "statement-console")

    page.click("#results a")  # the queued first refresh
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=180_000)
    assert fetch_all(wh, "SELECT count(*) FROM orders_copy") == [(252,)]

    insert_rows(shop, "Orders", ["OrderID", "Freight"], [(10000, "1.00")])
    page.goto(live_server.url + "/snapshots/")
    page.click("#snapshot-rows a:has-text('wh.orders_copy')")
    page.evaluate("window.__stayed = true")
    page.click("#refresh-now")
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=120_000)
    assert "1 change" in page.inner_text("#job-log") or "applied 1 change" in page.inner_text("#job-status")
    shot(page, "refreshed")

    page.go_back()
    page.click("#compare-source")
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=120_000)
    assert "equal" in page.inner_text("#compare-result")
    shot(page, "compared")
    snapshot = Snapshot.objects.get()
    assert snapshot.last_ts is not None
    assert JobRun.objects.filter(kind="snapshot_refresh", state="succeeded").count() == 2

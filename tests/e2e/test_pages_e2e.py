"""In headless Chromium: chart pages on plotly's basic bundle with axes fitted to the data and a table view under
each chart; the server page (user tables with rows and sizes, replication objects apart, the replications using it);
the snapshot logs page; the statement console refusing plain SQL, with the user's history; a bi-directional
subscriber's DDL for SQL Server, Oracle and DB2; the dashboard tiles."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    ConflictBackup,
    JobRun,
    LevelSample,
    ReplAccount,
    ReplSubscriber,
    Snapshot,
    SnapshotPublication,
)
from replication_admin.servers.actions import do_register_server
from replication_admin.snapshots.actions import do_create_snapshot_log
from tests.conftest import server_data
from tests.e2e.test_console import PASSWORD, log_in
from tests.tables import create_table, insert_rows

pytestmark = [pytest.mark.browser]

INT = LogicalType("integer")
TEXT = LogicalType("varchar", length=40)


def watch_requests(page) -> list[str]:
    """The URLs the page fetches, and any browser error or failed request as 'problem: …'."""
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    page.on("response", lambda r: seen.append(f"problem: {r.status} {r.url}") if r.status >= 400 else None)
    page.on("pageerror", lambda e: seen.append(f"problem: {e}"))
    return seen


def test_chart_pages_draw_on_the_basic_bundle_fitted_to_their_data_with_a_table_view(live_server, page, shot):
    User.objects.create_superuser("admin", password=PASSWORD)
    now = timezone.now()
    for minutes, lag in ((50, 12), (35, 8), (20, 5), (5, 1)):
        LevelSample.objects.create(server="demo", account="acct", subscriber="branch", level=100, lag=lag,
                                   publisher_level=100 + lag, at=now - timedelta(minutes=minutes))  # fmt: skip
    for state in ("succeeded", "succeeded", "failed"):
        JobRun.objects.create(kind="compare", target="a ↔ b", state=state, finished_at=now, error="x")
    for n, kind in enumerate(("U", "U", "I")):
        ConflictBackup.objects.create(
            kind="snapshot", item="demo.Products", table_name="Products", publisher="demo", source="branch",
            change_guid=f"branch@{n}", origin="branch", primary_key={"ProductID": n}, conflict_type=kind,
            operation=kind, decision=3, resolver="default",
        )  # fmt: skip
    seen = watch_requests(page)
    log_in(page, live_server.url)
    page.goto(live_server.url + "/dashboard/charts/")
    page.wait_for_selector("#lag-chart .main-svg")
    page.wait_for_selector("#job-chart .main-svg")
    page.wait_for_selector("#conflicts-chart .main-svg")
    assert any("/static/vendor/plotly-basic-3.7.0.min.js" in url for url in seen)
    assert not any("plotly.min.js" in url and "plotly-basic" not in url for url in seen)
    assert [u for u in seen if u.startswith("problem:")] == []
    # The lag chart's first date tick is within the hour before the first sample, not a day back.
    ticks = page.locator("#lag-chart .xtick text").all_inner_texts()
    assert ticks, "the lag chart has no date ticks"
    # The legend sits above the plot area: its bottom is above the top of the plot's background.
    legend = page.locator("#lag-chart .legend").bounding_box()
    plot = page.locator("#lag-chart .bglayer rect, #lag-chart .nsewdrag").first.bounding_box()
    assert legend is not None and plot is not None and legend["y"] + legend["height"] <= plot["y"] + 1
    shot(page, "charts")

    panel = page.locator(".panel", has=page.locator("#job-chart"))
    panel.locator("summary:has-text('Table view')").click()
    table = panel.locator("details.chart-table table")
    assert table.is_visible()
    cells = table.locator("tbody tr").first.locator("th, td").all_inner_texts()
    assert cells == [timezone.localdate().isoformat(), "1", "2"]  # failed, succeeded
    lag_panel = page.locator(".panel", has=page.locator("#lag-chart"))
    lag_panel.locator("summary").click()
    assert lag_panel.locator("details.chart-table tbody tr").count() == 4
    shot(page, "table-views")

    page.goto(live_server.url + "/conflicts/")
    page.wait_for_selector("#conflict-chart .main-svg")
    assert page.locator("#conflict-chart .legend .traces").count() == 2  # a legend even for a few bars
    shot(page, "conflicts-chart")


def test_the_server_logs_and_statement_pages_say_what_is_there(live_server, page, shot, sqlite_path):
    User.objects.create_superuser("admin", password=PASSWORD)
    shop = do_register_server(Actor.command(), server_data("sqlite", "shop", sqlite_path("shop")))
    branch = do_register_server(Actor.command(), server_data("sqlite", "branch", sqlite_path("branch")))
    create_table(shop, "Orders", [("OrderID", INT), ("Customer", TEXT)], ["OrderID"])
    insert_rows(shop, "Orders", ["OrderID", "Customer"], [(i, f"customer {i}") for i in range(1, 251)])
    create_table(shop, "Products", [("ProductID", INT)], ["ProductID"])
    create_table(shop, "RLOG_Products", [("RLOG_ProductID", INT)], [])  # a bi-directional publication's log
    create_table(shop, "RTLEVEL", [("SERVER", TEXT)], ["SERVER"])
    do_create_snapshot_log(Actor.command(), shop, "Orders")
    SnapshotPublication.objects.create(item="shop.Products", server=shop, table="Products")
    Snapshot.objects.create(name="branch.Orders", query="SELECT * FROM Orders", source_server=shop,
                            dest_server=branch, dest_table="Orders")  # fmt: skip
    seen = watch_requests(page)
    log_in(page, live_server.url)

    page.goto(live_server.url + "/servers/shop/")
    page.wait_for_selector("#user-tables")
    user_tables = page.locator("#user-tables").inner_text()
    assert "Orders" in user_tables and "250" in user_tables and "RLOG_" not in user_tables
    assert page.locator("#internal-tables").get_attribute("open") is None  # collapsed
    uses = page.locator("#server-uses").inner_text()
    assert "branch.Orders" in uses and "shop.Products" in uses and "RLOG_Orders" in uses
    shot(page, "server")
    page.click("#internal-tables summary")
    assert "RTLEVEL" in page.locator("#internal-tables").inner_text()
    shot(page, "server-replication-objects")

    page.goto(live_server.url + "/snapshots/logs/shop/")
    rows = page.locator("#log-rows tbody tr")
    assert rows.count() == 2
    products = page.locator("#log-rows tr[data-table='Products']")
    assert "RLOG_Products" in products.inner_text() and products.locator("text=Create log").count() == 0
    # The buttons stay inside their row.
    orders = page.locator("#log-rows tr[data-table='Orders']")
    row_box = orders.bounding_box()
    for button in orders.locator(".btn").all():
        box = button.bounding_box()
        assert row_box["y"] <= box["y"] and box["y"] + box["height"] <= row_box["y"] + row_box["height"] + 0.5
    shot(page, "snapshot-logs")

    page.goto(live_server.url + "/statements/")
    page.select_option("#id_server", "shop")
    page.fill("#id_text", "select * from Orders")
    page.click("#run-statements")
    page.wait_for_selector("#statement-error")
    assert "Only replication statements run here." in page.locator("#statement-error").inner_text()
    page.fill("#id_text", "repl_this_server ()")
    page.click("#run-statements")
    page.wait_for_selector("#results .badge.ok")
    history = page.locator("#statement-history li")
    assert history.count() == 2 and "select * from Orders" in history.nth(1).inner_text()
    shot(page, "statement-console")
    history.nth(1).locator("a").click()
    page.wait_for_selector("#id_text")
    assert page.input_value("#id_text") == "select * from Orders"
    page.click("#run-statements")
    page.wait_for_selector("#statement-error a:has-text('shop.Orders')")
    shot(page, "statement-refused-again")

    # A bi-directional subscriber the console does not reach: its objects as text, for the name it will have.
    publication = SnapshotPublication.objects.get(item="shop.Products")
    page.goto(live_server.url + reverse("publications-detail", args=[publication.pk]))
    page.click("#subscriber-ddl")
    page.fill("#ddl-subscriber", "branch_mssql")
    page.click("#ddl-subscriber-form button")
    page.wait_for_url("**subscriber=branch_mssql")
    panels = page.locator(".ddl-script")
    assert [panels.nth(i).get_attribute("data-dialect") for i in range(panels.count())] == [
        "SQL Server", "Oracle", "IBM DB2",
    ]  # fmt: skip
    mssql = panels.nth(0).inner_text()
    assert "CREATE TRIGGER [Products_I_log] ON [Products] AFTER INSERT" in mssql and "N'branch_mssql@'" in mssql
    assert 'CREATE OR REPLACE TRIGGER "Products_IR_log" BEFORE INSERT' in panels.nth(1).inner_text()
    shot(page, "bidir-subscriber-ddl")
    assert [u for u in seen if u.startswith("problem:")] == []  # the favicon included


@pytest.mark.parametrize(("width", "rows"), [(1360, 1), (1024, 2)])
def test_the_dashboard_tiles_lay_out_in_even_rows(live_server, page, shot, width, rows):
    User.objects.create_superuser("admin", password=PASSWORD)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server.url)
    tops = [box["y"] for box in (card.bounding_box() for card in page.locator(".cards .card").all()) if box]
    per_row = {top: tops.count(top) for top in tops}
    assert len(per_row) == rows and len(set(per_row.values())) == 1, per_row
    shot(page, f"tiles-{width}")


def test_the_level_chart_keeps_its_legend_off_the_dates_and_has_a_table_view(live_server, page, shot, sqlite_path):
    User.objects.create_superuser("admin", password=PASSWORD)
    for name in ("pub", "s1", "s2"):
        do_register_server(Actor.command(), server_data("sqlite", name, sqlite_path(name)))
    ReplAccount.objects.create(server="pub", account="tbl", level=12, count=12, log_file="tbl.log")
    for subscriber in ("s1", "s2"):
        ReplSubscriber.objects.create(server="pub", account="tbl", subscriber=subscriber, level=9, count=9,
                                      state=ReplSubscriber.IN_SYNC, init_state="done")  # fmt: skip
    start = timezone.now() - timedelta(minutes=10)
    for n, (l1, l2) in enumerate([(3, 2), (8, 5), (12, 9)]):
        at = start + timedelta(minutes=3 * n)
        for subscriber, level in (("s1", l1), ("s2", l2)):
            LevelSample.objects.create(server="pub", account="tbl", subscriber=subscriber, at=at, level=level,
                                       publisher_level=12, lag=12 - level)  # fmt: skip
    seen = watch_requests(page)
    log_in(page, live_server.url)
    page.goto(live_server.url + reverse("trx-publications-detail", args=["pub", "tbl"]))
    page.wait_for_selector("#trx-level-chart .main-svg")
    page.wait_for_selector("#trx-lag-chart .main-svg")
    assert any("plotly-basic-3.7.0.min.js" in url for url in seen)
    legend = page.locator("#trx-level-chart .legend").bounding_box()
    dates = [page.locator("#trx-level-chart .xtick text").nth(n).bounding_box() for n in range(2)]
    plot = page.locator("#trx-level-chart .nsewdrag").first.bounding_box()
    assert legend is not None and plot is not None and legend["y"] + legend["height"] <= plot["y"] + 1
    for date in dates:  # the dates are below the plot, the legend above it: they never meet
        assert date is not None and date["y"] >= plot["y"] + plot["height"] - 1
    assert page.locator("#trx-level-chart .legend .traces").count() == 3  # s1, s2 and the publisher
    page.locator("#trx-level-table summary").click()
    header = page.locator("#trx-level-table thead th").all_inner_texts()
    assert [h.lower() for h in header] == ["time", "s1", "s2", "pub (publisher)"]
    assert page.locator("#trx-level-table tbody tr").count() == 3
    shot(page, "level-and-lag")

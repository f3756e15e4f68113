"""End to end in headless Chromium: compare two tables from the page, read the differing values side by side,
choose some keys, confirm, repair them, compare again: the chosen keys are equal now (in the databases too) and
the others still differ. The jobs run on a real worker, as in production."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun
from replication_admin.servers.actions import do_register_server
from tests.conftest import server_data
from tests.e2e.test_console import PASSWORD, log_in
from tests.tables import create_table, execute, fetch_all, insert_rows

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]

COLUMNS = [("id", LogicalType("integer")), ("customer", LogicalType("varchar", length=40)),
           ("note", LogicalType("long_varchar"))]  # fmt: skip
NAMES = [c for c, _ in COLUMNS]


def orders(server) -> dict[int, tuple]:
    return {int(r[0]): (r[1], r[2]) for r in fetch_all(server, 'SELECT id, customer, note FROM "Orders"')}


def listed_keys(page) -> list[str]:
    return page.eval_on_selector_all("#compare-result tbody.difference", "rows => rows.map(r => r.dataset.key)")


def test_an_operator_compares_sees_the_values_repairs_chosen_keys_and_compares_again(
    live_server, qcluster, page, shot, sqlite_path, live_database
):
    User.objects.create_superuser("admin", password=PASSWORD)
    shop = do_register_server(Actor.command(), server_data("sqlite", "shop", sqlite_path("shop")))
    replica = do_register_server(Actor.command(), server_data("postgresql", "replica", live_database("postgresql")))
    rows = [(i, f"customer {i}", f"note {i}") for i in range(1, 21)]
    for server in (shop, replica):
        create_table(server, "Orders", COLUMNS, ["id"])
        insert_rows(server, "Orders", NAMES, rows)
    execute(shop, 'UPDATE "Orders" SET note = NULL WHERE id = 4')
    execute(shop, 'UPDATE "Orders" SET customer = ? WHERE id = 6', ["Ünïcode <b>not bold</b> " + "long " * 40])
    execute(replica, "UPDATE \"Orders\" SET note = '' WHERE id = 4")  # NULL on the source, '' here
    execute(replica, "UPDATE \"Orders\" SET customer = 'renamed' WHERE id IN (3, 8)")
    execute(replica, 'DELETE FROM "Orders" WHERE id IN (5, 9)')
    insert_rows(replica, "Orders", NAMES, [(77, "stray", None)])

    log_in(page, live_server.url)
    page.goto(live_server.url + "/jobs/compare/")
    page.select_option("#id_left_server", "shop")
    page.fill("#id_left_table", "Orders")
    page.select_option("#id_right_server", "replica")
    page.fill("#id_right_table", "Orders")
    page.click("#start-compare")
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=180_000)
    assert page.inner_text("#compare-heading") == "shop.Orders ↔ replica.Orders"
    assert listed_keys(page) == ["id=3", "id=4", "id=5", "id=6", "id=8", "id=9", "id=77"]
    assert "7 key(s)" in page.inner_text("#difference-count")

    def cell(key: str, side: str) -> str:
        return page.inner_text(f"#compare-result tbody[data-key='{key}'] td[data-side='{side}']")

    assert (cell("id=3", "left"), cell("id=3", "right")) == ("customer 3", "renamed")
    assert (cell("id=4", "left"), cell("id=4", "right")) == ("NULL", "'' (empty)")
    assert cell("id=5", "right") == "no row" and cell("id=77", "left") == "no row"
    # Markup in a value is text, and a long value is folded with the whole of it a click away.
    assert page.locator("#compare-result tbody[data-key='id=6'] b").count() == 0
    folded = page.locator("#compare-result tbody[data-key='id=6'] td[data-side='left'] details")
    assert folded.count() == 1 and len(folded.locator("summary").inner_text()) <= 61
    shot(page, "values-side-by-side")
    folded.locator("summary").click()
    assert "long " * 40 in folded.inner_text()

    page.check("#select-all")
    assert page.inner_text("#selected-count") == "7 selected"
    page.uncheck("#select-all")
    assert page.inner_text("#selected-count") == "none selected"
    assert page.is_disabled("#repair-selected")
    for key in ("id=3", "id=4", "id=5", "id=77"):
        page.check(f"#compare-result tbody[data-key='{key}'] input[name=row]")
    assert page.inner_text("#selected-count") == "4 selected"
    shot(page, "keys-chosen")

    page.click("#repair-selected")
    page.wait_for_selector("h1:has-text('Repair 4 key(s)?')")
    assert "id=3; id=4; id=5; id=77" in page.inner_text("main")
    shot(page, "confirm-repair")
    page.click("button:has-text('Repair 4 key(s)')")
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=180_000)
    assert "2 updated, 1 inserted, 1 deleted" in page.inner_text("#repair-result")
    shot(page, "repaired")

    repaired_at = page.url
    page.click("#compare-again")
    page.wait_for_url(lambda url: url != repaired_at)  # the new compare's page
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=180_000)
    assert page.inner_text("#compare-heading") == "shop.Orders ↔ replica.Orders"
    assert listed_keys(page) == ["id=6", "id=8", "id=9"]
    shot(page, "compared-again")

    source, dest = orders(shop), orders(replica)
    for key in (3, 4, 5):
        assert dest[key] == source[key], key
    assert dest[4] == ("customer 4", None) and 77 not in dest
    assert dest[8] == ("renamed", "note 8") and 9 not in dest and dest[6] != source[6]
    assert JobRun.objects.filter(kind="compare_repair", state="succeeded").count() == 1
    repair = AuditEntry.objects.get(action="job.compare_repair")
    assert repair.username == "admin" and sorted(repair.detail["keys"]) == [["3"], ["4"], ["5"], ["77"]]

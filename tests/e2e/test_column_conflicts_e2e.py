"""In headless Chromium: an editor has a table's conflicts decided by column from the publication's page; a
subscriber's update meets the publisher's: its other column merges, the conflicting one is decided, and the conflict's
page shows that column's versions and what was merged."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.models import ConflictBackup, TpItem
from tests.e2e.test_console import PASSWORD, log_in
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]


def test_an_editor_decides_conflicts_by_column_and_reads_the_columns_versions(
    live_server, page, shot, make_server, jobs_sync, spark
):
    User.objects.create_superuser("admin", password=PASSWORD)
    pub, sub = make_server("postgresql", "pub"), make_server("mysql", "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), qty integer)",
        "INSERT INTO items VALUES (1, 'item 1', 10)")  # fmt: skip
    run(pub, "repl_publish ('shop', 'shop.log', 1); repl_pub_add ('shop', 'items', 2, 0, null)")
    run(sub, "repl_server ('pub', 'pub'); repl_subscribe ('pub', 'shop'); repl_init_copy ('pub', 'shop')")

    log_in(page, live_server.url)
    page.goto(live_server.url + "/publications/trx/pub/shop/")
    cell = "#trx-item-rows tr[data-item='items'] td[data-column-conflicts]"
    assert "conflicts by row" in page.inner_text(cell)
    page.click(f"[data-toggle-column-conflicts='{TpItem.objects.get().pk}']")
    page.wait_for_selector(f"{cell}[data-column-conflicts='1']")
    assert "conflicts by column" in page.inner_text(cell)
    assert TpItem.objects.get().column_conflicts

    sql(pub, "UPDATE items SET name = 'publisher' WHERE id = 1")
    sql(sub, "UPDATE items SET name = 'subscriber', qty = 3 WHERE id = 1")
    run(sub, "repl_sync ('pub', 'shop')")
    assert (value(pub, "SELECT name FROM items"), value(pub, "SELECT qty FROM items")) == ("publisher", 3)

    page.goto(live_server.url + f"/conflicts/{ConflictBackup.objects.get().pk}/")
    versions = page.locator("#column-versions tbody tr")
    assert versions.count() == 1 and versions.first.get_attribute("data-column") == "name"
    cells = versions.first.locator("td").all_inner_texts()
    assert cells == ["name", "item 1", "publisher", "subscriber", "publisher's"]
    assert "merged without conflict: qty" in page.inner_text("body")
    shot(page, "column-versions")

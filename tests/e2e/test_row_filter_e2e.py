"""In headless Chromium: an editor gives a copied subscription's table a row filter and a column list from its page;
a real worker reloads the copy with them, which then holds only those rows and columns; a filter the apply could not
evaluate is refused with its reason on the page, and the filter in force stays."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.core import connections
from replication_admin.models import JobRun, ReplAccount, ReplSubscriber
from tests.conftest import wait_for_job
from tests.e2e.test_console import PASSWORD, log_in
from tests.transactional.test_trx_replication import run, sql

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]


def fetch(server, query: str) -> list[tuple]:
    with connections.connect(server) as conn:
        return [tuple(r) for r in conn.cursor().execute(query).fetchall()]


def test_an_editor_filters_a_copied_table_from_the_subscription_page(live_server, qcluster, page, shot, make_server):
    User.objects.create_superuser("admin", password=PASSWORD)
    pub, sub = make_server("postgresql", "pub"), make_server("mysql", "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, region varchar(4), secret varchar(20))")
    sql(pub, *[f"INSERT INTO items VALUES ({i}, '{'EU' if i % 3 else 'US'}', 'pin {i}')" for i in range(1, 31)])
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop')")
    assert wait_for_job(run(sub, "REPL_INIT_COPY ('pub', 'shop')")[0].job_id).state == JobRun.State.SUCCEEDED
    assert len(fetch(sub, "SELECT id FROM items")) == 30

    log_in(page, live_server.url)
    page.goto(live_server.url + ReplSubscriber.objects.get().get_absolute_url())
    assert "every row" in page.inner_text("#trx-row-filter-rows tr[data-table='items']")
    page.select_option("#trx-filter-table", "items")
    page.fill("#trx-filter-condition", "region = 'US'")
    page.fill("#trx-filter-columns", "region")
    page.click("#trx-filter-save")
    page.wait_for_selector(".messages :text('is reloaded with it')")
    reload = JobRun.objects.get(kind="trx_reload")
    assert wait_for_job(reload.pk).state == JobRun.State.SUCCEEDED
    assert fetch(sub, "SELECT id, region, secret FROM items ORDER BY id") == [
        (i, "US", None) for i in range(3, 31, 3)
    ]  # the rows of the filter, the column left out emptied
    row = page.inner_text("#trx-row-filter-rows tr[data-table='items']")
    assert "WHERE \"region\" = 'US'" in row and "key, region" in row
    shot(page, "filtered")

    page.fill("#trx-filter-condition", "upper(region) = 'US'")
    page.click("#trx-filter-save")
    page.wait_for_selector(".messages :text('cannot use')")
    assert ReplSubscriber.objects.get().row_filters["items"]["condition"] == "\"region\" = 'US'"
    assert JobRun.objects.filter(kind="trx_reload").count() == 1

    # The publication's filter: the subscription keeps its own (no reload) until its own is cleared.
    page.goto(live_server.url + ReplAccount.objects.get().get_absolute_url())
    assert "sub" in page.inner_text("#trx-item-filter-rows tr[data-table='items'] td.own")
    page.fill("#trx-item-filter-condition", "region = 'EU'")
    page.click("#trx-item-filter-save")
    page.wait_for_selector(".messages :text('for every subscriber but sub')")
    assert JobRun.objects.filter(kind="trx_reload").count() == 1
    assert "WHERE \"region\" = 'EU'" in page.inner_text("#trx-item-filter-rows tr[data-table='items']")
    page.goto(live_server.url + ReplSubscriber.objects.get().get_absolute_url())
    page.fill("#trx-filter-condition", "")
    page.fill("#trx-filter-columns", "")
    page.click("#trx-filter-save")
    page.wait_for_selector(".messages :text('is reloaded with it')")
    assert wait_for_job(JobRun.objects.filter(kind="trx_reload").latest("pk").pk).state == JobRun.State.SUCCEEDED
    assert [r[0] for r in fetch(sub, "SELECT id FROM items ORDER BY id")] == [i for i in range(1, 31) if i % 3]
    assert "the publication's" in page.inner_text("#trx-row-filter-rows tr[data-table='items'] td.origin")
    shot(page, "following the publication")

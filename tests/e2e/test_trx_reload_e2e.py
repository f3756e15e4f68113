"""In headless Chromium: an operator reloads one drifted table of a transactional subscriber from its page (choose the
table, confirm), a real worker runs the job, and the subscriber's copy is the publisher's again, its level kept and
its other table untouched."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.core import connections
from replication_admin.models import AuditEntry, JobRun, ReplSubscriber
from replication_admin.transactional.lookups import server_named
from replication_admin.transactional.positions import subscriber_position
from tests.conftest import wait_for_job
from tests.e2e.test_console import PASSWORD, log_in
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]


def rows(server, table: str) -> list[tuple]:
    with connections.connect(server) as conn:
        return [tuple(r) for r in conn.cursor().execute(f"SELECT id, name FROM {table} ORDER BY id").fetchall()]


def test_an_operator_reloads_one_drifted_table_of_a_subscriber_from_its_page(
    live_server, qcluster, page, shot, make_server
):
    User.objects.create_superuser("admin", password=PASSWORD)
    pub, sub = make_server("postgresql", "pub"), make_server("mysql", "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))",
        "CREATE TABLE orders (id integer PRIMARY KEY, note varchar(40))")  # fmt: skip
    sql(
        pub,
        *[f"INSERT INTO items VALUES ({i}, 'item {i}')" for i in range(1, 31)],
        "INSERT INTO orders VALUES (1, 'o')",
    )
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null); "
             "REPL_PUB_ADD ('shop', 'orders', 2, 0, null)")  # fmt: skip
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop')")
    copied = run(sub, "REPL_INIT_COPY ('pub', 'shop')")[0]
    assert wait_for_job(copied.job_id).state == JobRun.State.SUCCEEDED
    sql(sub, "DELETE FROM items WHERE id BETWEEN 5 AND 9", "UPDATE items SET name = 'drifted' WHERE id = 20",
        "UPDATE orders SET note = 'kept' WHERE id = 1")  # fmt: skip
    subscription = ReplSubscriber.objects.get(subscriber="sub")
    level = subscriber_position(server_named("sub"), "pub", "shop")

    log_in(page, live_server.url)
    page.goto(live_server.url + subscription.get_absolute_url())
    assert page.eval_on_selector_all("#trx-reload-table option", "os => os.map(o => o.value)") == ["items", "orders"]
    page.select_option("#trx-reload-table", "items")
    page.click("#trx-reload")
    page.wait_for_selector("h1:has-text('Reload items on sub from pub/shop?')")
    assert "its other tables are kept" in page.inner_text(".panel")
    shot(page, "confirm-reload")
    page.click("button:has-text('Reload')")
    page.wait_for_selector(".messages li.success")
    assert "Reload of items on sub started" in page.inner_text(".messages")
    job = JobRun.objects.filter(kind="trx_reload").get()
    assert wait_for_job(job.pk).state == JobRun.State.SUCCEEDED, JobRun.objects.get(pk=job.pk).error
    assert rows(sub, "items") == rows(pub, "items")  # by content: every key and value
    assert value(sub, "SELECT note FROM orders WHERE id = 1") == "kept"  # the other table untouched
    assert subscriber_position(server_named("sub"), "pub", "shop") == level
    assert AuditEntry.objects.filter(action="job.trx_reload", username="admin").exists()
    page.goto(live_server.url + subscription.get_absolute_url())
    listed = page.get_by_role("row", name=f"#{job.pk} trx_reload")
    assert "trx_reload" in listed.inner_text() and "succeeded" in listed.inner_text()
    shot(page, "after-reload")

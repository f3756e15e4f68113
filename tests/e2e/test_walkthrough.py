"""A DBA's first session, in the browser: the setup wizard publishes a SQLite table bi-directionally to a new
PostgreSQL server and the initial copy finishes; a row changed on the subscriber syncs back; a conflict is found in
the inbox, compared and its loser re-applied; a resolver is written, edited and dry-run; a transactional subscriber
that became invalid is re-initialised and marked valid; a viewer can run nothing. Every step leaves a screenshot
under test-artifacts/."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    Alert,
    AuditEntry,
    ConflictBackup,
    JobRun,
    ReplSubscriber,
    Server,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.servers.actions import do_register_server
from replication_admin.statements import execute as run_statements
from tests.conftest import PG, server_data, wait_for_job
from tests.e2e.test_bidir_e2e import job_badge, sign_in, started_job, wait_until_idle
from tests.tables import create_table, execute, fetch_all, insert_rows
from tests.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]

ITEMS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=10, scale=2)),
]
ITEM_ROWS = [(1, "pen", "1.50"), (2, "ink", "3.20"), (3, "pad", "2.75"), (4, "clip", "0.10"), (5, "ruler", "1.95")]
ORDERS = [("id", LogicalType("integer")), ("qty", LogicalType("integer"))]


def items_of(server) -> list[tuple[int, str, Decimal]]:
    rows = fetch_all(server, "SELECT id, name, price FROM items ORDER BY id")
    return [(int(i), n, Decimal(str(p))) for i, n, p in rows]


def orders_of(server) -> list[tuple[int, int]]:
    return [(int(i), int(q)) for i, q in fetch_all(server, "SELECT id, qty FROM orders ORDER BY id")]


def job_after(last_pk: int, kind: str, timeout: float = 20.0) -> JobRun:
    """The job a click just queued (the newest of its kind after `last_pk`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = JobRun.objects.filter(pk__gt=last_pk, kind=kind).order_by("pk").first()
        if job is not None:
            return job
        time.sleep(0.2)
    raise AssertionError(f"no {kind} job was queued")


def next_step(page, expected: str) -> None:
    page.click("#wizard-next")
    page.wait_for_selector(f"#wizard-step[data-step='{expected}']")


def test_a_dba_sets_up_replication_with_the_wizard_and_runs_it_from_the_console(
    live_server, qcluster, page, shot, sqlite_path, live_database
):
    make_user("editor", "edit", "operate")
    make_user("viewer")
    actor = Actor.command()
    shop = do_register_server(actor, server_data("sqlite", "shop", sqlite_path("shop")))
    create_table(shop, "items", ITEMS, ["id"])
    insert_rows(shop, "items", ["id", "name", "price"], [(i, n, Decimal(p)) for i, n, p in ITEM_ROWS])
    create_table(shop, "notes", [("body", LogicalType("varchar", length=40))], [])
    branch_database = live_database("postgresql")

    # --- the wizard: publisher, a new subscriber, the mode, the table, a resolver, no schedule ------------------
    sign_in(page, live_server.url, "editor")
    page.click("header nav a:has-text('Set up')")
    page.wait_for_selector("#wizard-step[data-step='publisher']")
    page.check("input[name='use'][value='existing']")
    page.select_option("#id_existing", "shop")
    shot(page, "wizard-publisher")
    next_step(page, "subscriber")

    page.check("input[name='use'][value='new']")
    for field, value in {"name": "branch", "host": PG["host"], "port": str(PG["port"]), "database": branch_database,
                         "user": PG["user"]}.items():  # fmt: skip
        page.fill(f"#id_new-{field}", value)
    page.select_option("#id_new-dialect", "postgresql")
    page.click("#wizard-test")
    page.wait_for_selector("#connection-result")
    assert "connected to PostgreSQL" in page.inner_text("#connection-result")
    assert page.input_value("#id_new-database") == branch_database  # what was typed stays in the form
    shot(page, "wizard-subscriber-tested")
    next_step(page, "mode")
    assert not Server.objects.filter(name="branch").exists()  # registered only on confirmation

    modes = page.inner_text("#modes")
    assert "Bi-directional snapshot" in modes and "Updateable transactional" in modes and "primary key" in modes
    page.check("input[name='mode'][value='bidir']")
    shot(page, "wizard-mode")
    next_step(page, "tables")

    page.check("input[name='tables'][value='notes']")
    page.click("#wizard-next")
    page.wait_for_selector("#wizard-error")
    assert "table notes has no primary key" in page.inner_text("#wizard-error")
    shot(page, "wizard-refuses-a-table-without-key")
    page.uncheck("input[name='tables'][value='notes']")
    page.check("input[name='tables'][value='items']")
    page.fill("#id_rows_per_commit", "2")
    next_step(page, "resolvers")

    page.select_option("#id_cls_I", "pub_wins")
    shot(page, "wizard-resolvers")
    next_step(page, "schedule")
    next_step(page, "review")

    page.click("#wizard-back")  # back keeps what was chosen
    page.wait_for_selector("#wizard-step[data-step='schedule']")
    page.click("#stepper a:has-text('Resolvers')")
    page.wait_for_selector("#wizard-step[data-step='resolvers']")
    assert page.input_value("#id_cls_I") == "pub_wins"
    next_step(page, "schedule")
    next_step(page, "review")
    statements = page.inner_text("#review-statements")
    assert "REPL_CREATE_SNAPSHOT_PUB ('shop.items', 2)" in statements
    assert "REPL_ADD_SNAPSHOT_CR ('shop.items', 'pub_wins', 'I', 10, 'pub_wins')" in statements
    assert "REPL_INIT_SNAPSHOT ('branch', 'shop.items', 2, 2)" in statements
    assert "register branch" in page.inner_text("#wizard-step")
    assert SnapshotPublication.objects.count() == 0 and not Server.objects.filter(name="branch").exists()
    shot(page, "wizard-review")

    page.click("#wizard-confirm")
    page.wait_for_selector("#wizard-progress")
    page.evaluate("window.__stayed = true")  # the progress updates in place, without a page load
    page.wait_for_selector("#wizard-progress[data-active='0']", timeout=180_000)
    assert page.evaluate("window.__stayed") is True
    copy_job = JobRun.objects.get(kind="bidir_init")
    bar = page.locator(f".job-progress[data-job='{copy_job.pk}']")
    assert bar.get_attribute("data-state") == "succeeded", copy_job.error
    assert bar.locator("[role=progressbar]").get_attribute("aria-valuenow") == "100"
    shot(page, "wizard-initial-copy-done")
    branch = Server.objects.get(name="branch")
    assert items_of(branch) == items_of(shop) == [(i, n, Decimal(p)) for i, n, p in ITEM_ROWS]
    subscription = SnapshotSubscription.objects.get()
    assert (subscription.server, subscription.init_state, subscription.init_rows_per_commit) == ("branch", "done", 2)

    # --- a row changed on the subscriber, then "sync now" ----------------------------------------------------
    execute(branch, "UPDATE items SET name = 'INK' WHERE id = 2")
    page.click("#wizard-links a:has-text('Publication shop.items')")
    page.wait_for_selector("h1:has-text('Publication shop.items')")
    page.click("#sync-now")
    page.wait_for_selector("ul.messages:has-text('Sync of shop.items started')")
    first_sync = started_job(page)
    wait_until_idle(page)
    assert job_badge(page, first_sync) == "succeeded", JobRun.objects.get(pk=first_sync.pk).error
    assert items_of(shop)[1] == (2, "INK", Decimal("3.20")) and items_of(shop) == items_of(branch)
    shot(page, "subscriber-change-synced")

    # --- a conflict: the inbox, the comparison, the loser re-applied ------------------------------------------
    execute(shop, "UPDATE items SET price = 9.99 WHERE id = 3")
    execute(branch, "UPDATE items SET price = 4.44 WHERE id = 3")
    page.click("#sync-now")
    page.wait_for_selector("ul.messages:has-text('Sync of shop.items started')")
    wait_until_idle(page)
    conflict = ConflictBackup.objects.get()
    assert (conflict.conflict_type, conflict.decision, conflict.primary_key) == ("U", 3, {"id": 3})
    assert items_of(shop)[2][2] == items_of(branch)[2][2] == Decimal("9.99")

    page.click("header nav a:has-text('Conflicts')")
    page.wait_for_selector("#conflict-rows")
    row = page.locator("#conflict-rows tbody tr")
    assert row.count() == 1 and "id=3" in row.inner_text() and "3 · publisher wins" in row.inner_text()
    shot(page, "conflict-inbox")
    page.click(f"#conflict-rows a:has-text('#{conflict.pk}')")
    page.wait_for_selector("#winner-loser")
    price_cells = page.locator("#winner-loser tr[data-column='price'] td")
    assert Decimal(price_cells.nth(1).inner_text().strip()) == Decimal("9.99")
    assert Decimal(price_cells.nth(2).inner_text().strip()) == Decimal("4.44")
    assert page.locator("#winner-loser tr[data-column='price']").get_attribute("class") == "diff"
    shot(page, "conflict-compared")
    page.click("#reapply")
    page.wait_for_selector(f"h1:has-text('Re-apply the losing version of conflict #{conflict.pk}?')")
    page.click("main form button:has-text('Re-apply the losing version')")
    page.wait_for_selector("#reapplied")
    assert items_of(shop)[2][2] == Decimal("4.44")
    shot(page, "loser-reapplied")

    # --- a resolver written, edited, and dry-run against the recorded conflict --------------------------------
    page.goto(f"{live_server.url}/publications/{SnapshotPublication.objects.get().pk}/resolvers/")
    page.wait_for_selector("h1:has-text('Conflict resolvers of shop.items')")
    page.wait_for_load_state()
    page.select_option("#id_type", "U")
    page.select_option("#id_resolver_class", "custom")
    page.fill("#id_expression", "CASE WHEN pub.price > new.price THEN 3 ELSE 1 END")
    page.click("#add-resolver-button")
    page.wait_for_selector("#resolver-saved")
    resolver = SnapshotConflictResolver.objects.get(type="U")
    page.click("#dry-run-chain")
    page.wait_for_selector("#dry-run[data-state='succeeded']", timeout=180_000)
    assert page.inner_text("#dry-run-summary").startswith("0 of 1 recorded decision would change")
    shot(page, "resolver-dry-run-unchanged")

    page.click(f"#chain-U tr[data-resolver='{resolver.pk}'] a:has-text('edit')")
    page.wait_for_selector(f"h1:has-text('Resolver {resolver.proc}')")
    page.fill("#id_expression", "CASE WHEN pub.price < new.price THEN 3 ELSE 1 END")
    shot(page, "resolver-edit")
    page.click("#resolver-edit-form button:has-text('Save')")
    page.wait_for_selector(f"ul.messages:has-text('Saved {resolver.proc}.')")  # back on the resolvers page
    resolver.refresh_from_db()
    assert "pub.price < new.price" in resolver.expression
    page.wait_for_load_state()
    page.click("#dry-run-chain")
    page.wait_for_selector("#dry-run[data-state='succeeded']", timeout=180_000)
    assert page.inner_text("#dry-run-summary").startswith("1 of 1 recorded decision would change")
    cells = page.locator("#dry-run-rows tbody tr").nth(0).locator("td")
    assert cells.nth(4).inner_text().strip() == "1 · subscriber wins"
    conflict.refresh_from_db()
    assert conflict.decision == 3  # a dry run changes nothing
    shot(page, "resolver-dry-run-changed")

    # --- a transactional subscriber that became invalid: re-initialise, mark valid, sync ----------------------
    depot = do_register_server(actor, server_data("mysql", "depot", live_database("mysql")))
    create_table(shop, "orders", ORDERS, ["id"])
    insert_rows(shop, "orders", ["id", "qty"], [(1, 10), (2, 20)])
    assert all(o.ok for o in run_statements(actor, "REPL_PUBLISH ('sales', 'sales.log'); "
                                                   "REPL_PUB_ADD ('sales', 'orders', 2, 0)", context=shop))  # fmt: skip
    ran = run_statements(actor, "REPL_SERVER ('shop', 'shop'); REPL_SUBSCRIBE ('shop', 'sales'); "
                                "REPL_INIT_COPY ('shop', 'sales')", context=depot, wait=False)  # fmt: skip
    assert wait_for_job(ran[-1].job_id).state == JobRun.State.SUCCEEDED
    execute(shop, "INSERT INTO orders (id, qty) VALUES (3, 30)")
    # The publisher was restored from a backup older than what depot applied: depot's level is now ahead.
    execute(depot, "UPDATE RTLEVEL SET LVL = LVL + 5, N = N + 5")
    sync = run_statements(actor, "REPL_SYNC ('shop', 'sales')", context=depot, wait=False)[-1]
    assert wait_for_job(sync.job_id).state == JobRun.State.FAILED
    sub = ReplSubscriber.objects.get(subscriber="depot")
    assert sub.valid == 0

    page.click("header nav a:has-text('Dashboard')")
    page.wait_for_selector("#alerts")
    assert "depot is no longer valid for shop/sales" in page.inner_text("#alerts")
    assert Alert.objects.filter(kind="subscriber_invalid").exists()
    page.wait_for_selector("#job-chart .main-svg")  # the charts arrive in their own request and are drawn
    assert page.locator("#conflicts-chart .main-svg").count() >= 1
    shot(page, "dashboard-alert-invalid")
    page.goto(live_server.url + sub.get_absolute_url())
    page.wait_for_selector("#trx-sub-valid[data-valid='0']")
    page.click("#trx-reinit")
    page.wait_for_selector("h1:has-text('Re-initialise depot from shop/sales?')")
    last_job = JobRun.objects.latest("pk").pk
    page.click("main form button:has-text('Re-initialise')")
    reinit = job_after(last_job, "trx_init")
    assert wait_for_job(reinit.pk).state == JobRun.State.SUCCEEDED, reinit.error
    assert orders_of(depot) == [(1, 10), (2, 20), (3, 30)]
    page.goto(live_server.url + sub.get_absolute_url())
    page.wait_for_selector("#trx-sub-valid[data-valid='0']")
    page.click("button.set-valid")
    page.wait_for_selector("#trx-sub-valid[data-valid='1']")
    assert ReplSubscriber.objects.get(pk=sub.pk).valid == 1
    shot(page, "subscriber-marked-valid")
    execute(shop, "INSERT INTO orders (id, qty) VALUES (4, 40)")
    last_job = JobRun.objects.latest("pk").pk
    page.click("#trx-sync-now")
    latest = job_after(last_job, "trx_sync")
    assert wait_for_job(latest.pk).state == JobRun.State.SUCCEEDED, latest.error
    assert orders_of(depot) == orders_of(shop) == [(1, 10), (2, 20), (3, 30), (4, 40)]

    # --- a viewer sees everything and can run nothing ---------------------------------------------------------
    page.click("header .who button:has-text('Log out')")
    sign_in(page, live_server.url, "viewer")
    publication = SnapshotPublication.objects.get()
    page.goto(f"{live_server.url}/publications/{publication.pk}/")
    page.wait_for_selector("h1:has-text('Publication shop.items')")
    assert page.locator("#sync-now").count() == 0 and page.locator(".init-form").count() == 0
    page.goto(live_server.url + sub.get_absolute_url())
    page.wait_for_selector("#trx-sub-valid")
    assert page.locator("#trx-sync-now").count() == 0 and page.locator("button.set-invalid").count() == 0
    page.goto(f"{live_server.url}/setup/publisher/")
    assert "edit permission" in page.inner_text("body")
    shot(page, "viewer-refused-wizard")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    jobs_before = JobRun.objects.count()
    for path, data in [
        (f"/publications/{publication.pk}/sync/", {}),
        ("/subscriptions/trx/depot/shop/sales/sync/", {}),
        ("/subscriptions/trx/depot/shop/sales/valid/", {"valid": "0"}),
        (f"/conflicts/{conflict.pk}/reapply/", {}),
        ("/statements/", {"server": "depot", "text": "REPL_SYNC ('shop', 'sales')"}),
        ("/setup/review/", {"action": "confirm"}),
    ]:
        response = page.request.post(live_server.url + path, form=data, headers={"X-CSRFToken": token})
        assert response.status == 403, f"a viewer could POST {path}: {response.status}"
    assert JobRun.objects.count() == jobs_before and ReplSubscriber.objects.get(pk=sub.pk).valid == 1
    assert AuditEntry.objects.filter(username="viewer", outcome="denied").count() >= 6
    shot(page, "viewer-done")

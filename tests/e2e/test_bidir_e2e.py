"""In the browser: publish a table bi-directionally, subscribe a server, copy, sync, meet a conflict in the
inbox, re-apply its loser, write resolvers in the editor and dry-run them; a viewer may not sync."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.servers.actions import do_register_server
from tests.conftest import server_data
from tests.tables import create_table, execute, fetch_all, insert_rows
from tests.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]

PASSWORD = "pw-for-tests-only"  # make_user's
COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=10, scale=2)),
]
ROWS = [(1, "pen", "1.50"), (2, "ink", "3.20"), (3, "pad", "2.75"), (4, "clip", "0.10"), (5, "ruler", "1.95")]
HIGHLIGHT = "rgb(255, 244, 214)"  # table.rowdiff tr.diff td in console.css


def sign_in(page, base_url: str, username: str) -> None:
    page.goto(base_url + "/")
    assert "/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("h1:has-text('Is replication working?')")


def price_of(server, key: int) -> Decimal:
    return Decimal(str(fetch_all(server, f"SELECT price FROM items WHERE id = {key}")[0][0]))


def rows_of(server) -> list[tuple[int, str, Decimal]]:
    return [
        (int(i), n, Decimal(str(p))) for i, n, p in fetch_all(server, "SELECT id, name, price FROM items ORDER BY id")
    ]


def started_job(page) -> JobRun:
    """The job a "… started (job #N)." message names."""
    match = re.search(r"job #(\d+)", page.inner_text("ul.messages"))
    assert match, page.inner_text("ul.messages")
    return JobRun.objects.get(pk=int(match.group(1)))


def wait_until_idle(page, timeout: float = 180_000) -> None:
    """The subscriber table polls while a copy or sync runs and stops once every job has finished."""
    page.wait_for_selector("#subscribers[data-active='0']", timeout=timeout)


def counts_shown(counts) -> dict[str, int]:
    """The counts a run-counts element shows (partials/run_counts.html), by name."""
    parts = counts.locator(".run-count")
    return {
        parts.nth(i).get_attribute("data-count"): int(parts.nth(i).locator("b").inner_text().replace(",", ""))
        for i in range(parts.count())
    }


def job_badge(page, job: JobRun) -> str:
    row = page.locator("#publication-jobs tbody tr", has=page.locator(f"a[href='/jobs/{job.pk}/']"))
    return row.locator(".badge").inner_text()


def test_an_editor_publishes_copies_syncs_resolves_a_conflict_and_a_viewer_may_not_sync(
    live_server, qcluster, page, shot, sqlite_path, live_database
):
    make_user("editor", "edit", "operate")
    make_user("viewer")
    shop = do_register_server(Actor.command(), server_data("sqlite", "shop", sqlite_path("shop")))
    branch = do_register_server(Actor.command(), server_data("postgresql", "branch", live_database("postgresql")))
    create_table(shop, "items", COLUMNS, ["id"])
    insert_rows(shop, "items", ["id", "name", "price"], [(i, n, Decimal(p)) for i, n, p in ROWS])

    # --- publish from the publications page ---------------------------------------------------------------
    sign_in(page, live_server.url, "editor")
    page.click("header nav a:has-text('Publications')")
    page.wait_for_selector("#new-publication")
    assert "No bi-directional publications" in page.inner_text("main")
    page.select_option("#publication-form #id_server", "shop")
    page.fill("#publication-form #id_table", "items")
    shot(page, "new-publication")
    page.click("#create-publication")
    page.wait_for_selector("h1:has-text('Publication shop.items')")
    assert "Published shop.items" in page.inner_text("ul.messages")
    publication = SnapshotPublication.objects.get()
    assert (publication.item, publication.server_id, publication.table) == ("shop.items", "shop", "items")
    assert "No subscribers yet" in page.inner_text("#subscribers")
    shot(page, "published")

    # --- add the subscriber -------------------------------------------------------------------------------
    page.select_option("#add-subscriber select[name='server']", "branch")
    page.click("#subscribe")
    page.wait_for_selector("#subscriber-rows tr[data-server='branch']")
    assert "branch subscribed to shop.items" in page.inner_text("ul.messages")
    row = page.locator("tr[data-server='branch']")
    assert row.get_attribute("data-state") == "none" and "not copied" in row.inner_text()
    subscription = SnapshotSubscription.objects.get()
    assert (subscription.server, subscription.item, subscription.init_state) == ("branch", "shop.items", "none")
    shot(page, "subscribed")

    # --- the initial copy, followed on the page -------------------------------------------------------------
    row.locator("input[name='rows_per_commit']").fill("2")
    row.locator("button:has-text('Initial copy')").click()
    page.wait_for_selector("ul.messages:has-text('Initial copy to branch started')")
    init_job = started_job(page)
    assert page.get_attribute("#subscribers", "data-active") == "1"
    # A marker on the window survives htmx swaps but not a page load: the progress updates in place.
    page.evaluate("window.__stayed = true")
    shot(page, "copy-started")
    page.wait_for_selector("tr[data-server='branch'][data-state='done']", timeout=180_000)
    wait_until_idle(page)
    assert page.evaluate("window.__stayed") is True
    row = page.locator("tr[data-server='branch']")
    assert row.locator(".badge.init-done").inner_text() == "copied"
    assert row.locator("[role=progressbar]").get_attribute("aria-valuenow") == "100"
    assert "5 / 5 rows · 100%" in row.inner_text() and "2 per commit" in row.inner_text()
    assert job_badge(page, init_job) == "succeeded"
    shot(page, "copied")
    subscription.refresh_from_db()
    assert (subscription.init_state, subscription.init_rows_done, subscription.init_rows_per_commit) == ("done", 5, 2)
    assert rows_of(branch) == rows_of(shop) == [(i, n, Decimal(p)) for i, n, p in ROWS]

    # --- the same row changed on both sides, then "sync now" ------------------------------------------------
    execute(shop, "UPDATE items SET price = 9.99 WHERE id = 2")
    execute(branch, "UPDATE items SET price = 4.44 WHERE id = 2")
    page.click("#sync-now")
    page.wait_for_selector("ul.messages:has-text('Sync of shop.items started')")
    sync_job = started_job(page)
    wait_until_idle(page)
    assert job_badge(page, sync_job) == "succeeded", JobRun.objects.get(pk=sync_job.pk).error
    shot(page, "synced-with-conflict")
    # The facts above the subscribers followed the sync without a reload.
    assert page.inner_text("#publication-last-sync") != "never"
    # Its counts, in its row and on its page: branch's one change read and pulled (settled on the publisher: it
    # lost its conflict), the publisher's row pushed back to branch; and the chart of the publication's runs.
    row = page.locator("#publication-jobs tbody tr", has=page.locator(f"a[href='/jobs/{sync_job.pk}/']"))
    expected = {"read": 1, "pulled": 1, "pushed": 1, "conflicts": 1}
    assert counts_shown(row.locator(".run-counts")) == expected
    page.wait_for_selector("#runs-chart .main-svg")
    assert page.locator("#runs-chart .legendtext").all_text_contents() == [
        "read",
        "written",
        "pulled",
        "pushed",
        "conflicts",
    ]  # the initial copy read and wrote; the sync
    shot(page, "sync-counts-chart")
    page.goto(f"{live_server.url}/jobs/{sync_job.pk}/")
    assert counts_shown(page.locator("#job-counts")) == expected
    shot(page, "sync-job-counts")
    page.goto(live_server.url + publication.get_absolute_url())
    page.wait_for_selector("#sync-now")
    # No resolver: the publisher wins an update conflict, and its row goes back to the subscriber.
    assert price_of(shop, 2) == Decimal("9.99") and price_of(branch, 2) == Decimal("9.99")
    conflict = ConflictBackup.objects.get()
    assert (conflict.item, conflict.source, conflict.conflict_type, conflict.decision, conflict.resolver) == (
        "shop.items",
        "branch",
        "U",
        3,
        "default",
    )
    assert conflict.primary_key == {"id": 2}

    # --- the conflict inbox ---------------------------------------------------------------------------------
    page.click("header nav a:has-text('Conflicts')")
    page.wait_for_selector("#conflict-rows")
    page.wait_for_selector("#conflict-chart .main-svg")  # the per-day chart is drawn once the scripts ran
    page.select_option("#conflict-filters select[name='item']", "shop.items")
    page.wait_for_url(lambda url: "item=shop.items" in url)  # htmx pushes the filtered URL
    page.wait_for_selector("#conflict-chart .main-svg")  # and draws the chart of what it selects
    rows = page.locator("#conflict-rows tbody tr")
    assert rows.count() == 1
    listed = rows.nth(0).inner_text()
    assert f"#{conflict.pk}" in listed and "branch" in listed and "3 · publisher wins" in listed and "id=2" in listed
    assert "1 conflict match" in page.inner_text("#conflict-results")
    shot(page, "conflict-inbox")
    # Its statistics: one update conflict of shop.items from branch today, charted by subscription.
    page.click("#statistics-link")
    page.wait_for_selector("#conflict-stats-chart .main-svg")
    stats = page.locator('#conflict-stats tr[data-subscription="shop.items branch"][data-type="U"] td.num')
    assert stats.all_inner_texts() == ["1", "1", "1", "1", "0"]  # today, 7 days, 30 days, kept, held
    assert page.locator("#conflict-stats-chart .legendtext").all_text_contents() == ["shop.items ← branch"]
    shot(page, "conflict-statistics")
    page.go_back()
    page.wait_for_selector("#conflict-rows")

    page.click(f"#conflict-rows a:has-text('#{conflict.pk}')")
    page.wait_for_selector("#winner-loser")
    assert f"Conflict #{conflict.pk}" in page.inner_text("h1") and "update conflict on items" in page.inner_text("h1")
    assert "3 · publisher wins" in page.inner_text("#conflict-decision")
    differing = page.locator("#winner-loser tr.diff")
    assert [differing.nth(i).get_attribute("data-column") for i in range(differing.count())] == ["price", "ROWGUID"]
    winner, loser = (
        page.locator("#winner-loser tr[data-column='price'] td").nth(i).inner_text().strip() for i in (1, 2)
    )
    assert Decimal(winner) == Decimal("9.99") and Decimal(loser) == Decimal("4.44")
    same = page.locator("#winner-loser tr[data-column='name'] td")
    assert same.nth(1).inner_text().strip() == same.nth(2).inner_text().strip() == "ink"

    def background(selector: str) -> str:
        return page.eval_on_selector(selector, "el => getComputedStyle(el).backgroundColor")

    assert background("#winner-loser tr[data-column='price'] td:nth-child(2)") == HIGHLIGHT
    assert background("#winner-loser tr[data-column='name'] td:nth-child(2)") != HIGHLIGHT
    shot(page, "conflict-detail")

    # --- re-apply the loser, sync again ---------------------------------------------------------------------
    page.click("#reapply")
    page.wait_for_selector(f"h1:has-text('Re-apply the losing version of conflict #{conflict.pk}?')")
    shot(page, "reapply-confirm")
    page.click("main form button:has-text('Re-apply the losing version')")
    page.wait_for_selector("#reapplied")
    assert "Re-applied by editor" in page.inner_text("#reapplied")
    assert page.locator("#reapply").count() == 0
    assert price_of(shop, 2) == Decimal("4.44")  # written on the publisher as a new change
    shot(page, "reapplied")

    page.click("#conflict-facts a:has-text('shop.items')")
    page.wait_for_selector("h1:has-text('Publication shop.items')")
    page.click("#sync-now")
    page.wait_for_selector("ul.messages:has-text('Sync of shop.items started')")
    second_sync = started_job(page)
    wait_until_idle(page)
    assert job_badge(page, second_sync) == "succeeded", JobRun.objects.get(pk=second_sync.pk).error
    shot(page, "synced-again")
    assert price_of(shop, 2) == price_of(branch, 2) == Decimal("4.44")
    assert rows_of(branch) == rows_of(shop)
    assert ConflictBackup.objects.count() == 1  # the re-applied version met no conflict
    conflict.refresh_from_db()
    assert conflict.reapplied_at is not None and conflict.reapplied_by == "editor"

    # --- the resolver editor: an expression that is not one expression, then a good one and a dry run -------
    page.click("#resolvers-link")
    page.wait_for_selector("h1:has-text('Conflict resolvers of shop.items')")
    page.wait_for_load_state()  # htmx is ready to send the form
    assert "then the default: 3 · publisher wins" in page.inner_text("#chain-U")
    page.select_option("#id_type", "U")
    page.select_option("#id_resolver_class", "custom")
    page.fill("#id_expression", "3; drop table items")
    page.evaluate("window.__stayed = true")
    page.click("#add-resolver-button")
    error = page.locator("#id_expression_error")  # Django's error list for the field, right after it
    error.wait_for()
    assert "must be one expression: ';' is not allowed" in error.inner_text()
    assert page.get_attribute("#id_expression", "aria-invalid") == "true"
    assert page.evaluate("window.__stayed") is True  # shown in place, next to the field
    assert page.input_value("#id_expression") == "3; drop table items"  # what was typed is kept
    assert not SnapshotConflictResolver.objects.exists()
    assert fetch_all(shop, "SELECT count(*) FROM items") == [(5,)]
    shot(page, "resolver-invalid")

    expression = "CASE WHEN pub.price < new.price THEN 3 ELSE 1 END"
    page.fill("#id_expression", expression)
    page.click("#add-resolver-button")
    page.wait_for_selector("#resolver-saved")
    resolver = SnapshotConflictResolver.objects.get()
    assert (resolver.table_name, resolver.type, resolver.resolver_class) == ("shop.items", "U", "custom")
    assert "pub.price < new.price" in resolver.expression
    assert f"Added {resolver.proc} to the update chain." in page.inner_text("#resolver-saved")
    chain = page.locator(f"#chain-U tr[data-resolver='{resolver.pk}']").inner_text()
    assert resolver.proc in chain and "pub.price < new.price" in chain
    shot(page, "resolver-added")

    page.click("#dry-run-chain")
    page.wait_for_selector("#dry-run[data-state='succeeded']", timeout=180_000)
    summary = page.inner_text("#dry-run-summary")
    # The recorded conflict: publisher 9.99, incoming 4.44 -> the new resolver lets the subscriber win.
    assert summary.startswith("1 of 1 recorded decision would change"), summary
    dry_rows = page.locator("#dry-run-rows tbody tr")
    assert dry_rows.count() == 1
    changed = dry_rows.nth(0)
    assert changed.get_attribute("class") == "changed"
    cells = [changed.locator("td").nth(i).inner_text().strip() for i in range(6)]
    assert cells == [f"#{conflict.pk}", "U", "3 · publisher wins", "default", "1 · subscriber wins", resolver.proc]
    dry_run = JobRun.objects.filter(kind="resolver_dry_run").get()
    assert dry_run.state == "succeeded" and dry_run.result["changed"] == 1
    conflict.refresh_from_db()
    assert conflict.decision == 3  # a dry run changes nothing
    shot(page, "dry-run")

    # --- a viewer sees the publication but may not sync it --------------------------------------------------
    page.click("header .who button:has-text('Log out')")
    sign_in(page, live_server.url, "viewer")
    page.goto(f"{live_server.url}/publications/{publication.pk}/")
    page.wait_for_selector("h1:has-text('Publication shop.items')")
    assert page.locator("#sync-now").count() == 0
    assert page.locator("#add-subscriber").count() == 0
    assert page.locator(".init-form").count() == 0
    assert "copied" in page.inner_text("tr[data-server='branch']")
    shot(page, "viewer-publication")
    syncs = JobRun.objects.filter(kind="bidir_sync").count()
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{live_server.url}/publications/{publication.pk}/sync/", headers={"X-CSRFToken": token}
    )
    assert response.status == 403 and "may not" in response.text()
    assert JobRun.objects.filter(kind="bidir_sync").count() == syncs == 2
    assert AuditEntry.objects.filter(username="viewer", action="job.bidir_sync", outcome="denied").exists()

    page.goto(f"{live_server.url}/conflicts/{conflict.pk}/")
    page.wait_for_selector("#winner-loser")
    assert page.locator("#reapply").count() == 0
    shot(page, "viewer-conflict")

    done = set(AuditEntry.objects.filter(username="editor", outcome="ok").values_list("action", flat=True))
    assert {"bidir.publish", "bidir.subscribe", "job.bidir_init", "job.bidir_sync", "conflict.reapply"} <= done
    assert "resolver.add" in done

"""In the browser: a transactional publication with two subscribers, its level and lag charts, and a subscriber
set invalid then valid again in place."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest
from django.utils import timezone

from replication_admin.core.audit import Actor
from replication_admin.models import (
    AuditEntry,
    LevelSample,
    ReplAccount,
    ReplSubscriber,
    SkippedTransaction,
    TpItem,
    TransactionalConflictResolver,
)
from replication_admin.servers.actions import ServerData, do_register_server
from tests.users import make_user

pytestmark = [pytest.mark.browser]

PASSWORD = "pw-for-tests-only"  # make_user's


def sign_in(page, base_url: str, username: str) -> None:
    page.goto(base_url + "/")
    assert "/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("h1:has-text('Is replication working?')")


def publication_with_two_subscribers() -> ReplAccount:
    account = ReplAccount.objects.create(server="shop", account="sales", level=40, count=40, log_file="sales.log",
                                         created_at=timezone.now())  # fmt: skip
    for name, level, state in (("branch", 40, ReplSubscriber.IN_SYNC), ("kiosk", 31, ReplSubscriber.OFF)):
        ReplSubscriber.objects.create(server="shop", account="sales", subscriber=name, level=level, count=level,
                                      state=state, init_state="done", last_sync_at=timezone.now())  # fmt: skip
    SkippedTransaction.objects.create(server="shop", account="sales", subscriber="kiosk", level=17, count=17,
                                      error="value too long for type character varying(40)")  # fmt: skip
    start = timezone.now() - timedelta(minutes=30)
    for n in range(7):
        at = start + timedelta(minutes=5 * n)
        published = 10 + 5 * n
        for name, behind in (("branch", n % 2), ("kiosk", 3 + n)):
            level = max(0, published - behind)
            LevelSample.objects.create(server="shop", account="sales", subscriber=name, at=at, level=level,
                                       publisher_level=published, lag=published - level)  # fmt: skip
    return account


def test_the_publication_page_charts_levels_and_sets_a_subscriber_invalid_and_valid_in_place(live_server, page, shot):
    make_user("editor", "edit", "operate")
    account = publication_with_two_subscribers()

    sign_in(page, live_server.url, "editor")
    page.click("header nav a:has-text('Publications')")
    page.wait_for_selector("#trx-publication-rows")
    page.click("#trx-publication-rows a:has-text('sales')")
    page.wait_for_selector("h1:has-text('Transactional publication sales on shop')")
    assert page.url == live_server.url + account.get_absolute_url()

    # Both charts are drawn by plotly, with a line per subscriber (and the publisher's level).
    page.wait_for_selector("#trx-level-chart .main-svg")
    page.wait_for_selector("#trx-lag-chart .main-svg")
    assert page.locator("#trx-level-chart .scatterlayer .trace").count() == 3
    assert page.locator("#trx-lag-chart .scatterlayer .trace").count() == 2
    legend = page.text_content("#trx-level-chart g.legend") or ""
    assert "branch" in legend and "kiosk" in legend and "shop (publisher)" in legend
    kiosk = page.locator("tr[data-subscriber='kiosk']")
    assert kiosk.locator("td.lag").inner_text() == "9" and kiosk.locator("td.gaps summary").inner_text() == "1 skipped"
    kiosk.locator("td.gaps summary").click()
    assert "value too long" in kiosk.locator("td.gaps table").inner_text()
    shot(page, "publication")

    # Set invalid, then valid: the subscribers table is swapped in place, the page is not reloaded.
    page.evaluate("window.__stayed = true")
    branch = page.locator("tr[data-subscriber='branch']")
    assert branch.get_attribute("data-valid") == "1" and branch.locator("td.valid").inner_text() == "valid"
    branch.locator("button:has-text('Set invalid')").click()
    page.wait_for_selector("tr[data-subscriber='branch'][data-valid='0']")
    assert page.evaluate("window.__stayed") is True
    branch = page.locator("tr[data-subscriber='branch']")
    assert branch.locator("td.valid").inner_text() == "invalid"
    assert "branch is marked invalid for shop/sales" in page.inner_text("#trx-subscribers ul.messages")
    assert ReplSubscriber.objects.get(subscriber="branch").valid == 0
    page.wait_for_selector("#trx-level-chart .main-svg")  # still drawn after the swap
    shot(page, "set-invalid")

    branch.locator("button:has-text('Set valid')").click()
    page.wait_for_selector("tr[data-subscriber='branch'][data-valid='1']")
    assert page.evaluate("window.__stayed") is True
    assert page.locator("tr[data-subscriber='branch'] td.valid").inner_text() == "valid"
    assert ReplSubscriber.objects.get(subscriber="branch").valid == 1
    assert page.locator("#trx-level-chart .scatterlayer .trace").count() == 3
    shot(page, "set-valid")

    # The subscription's own page charts only its samples.
    page.click("tr[data-subscriber='kiosk'] a:has-text('kiosk')")
    page.wait_for_selector("h1:has-text('Subscription of kiosk to shop/sales')")
    page.wait_for_selector("#trx-level-chart .main-svg")
    assert page.locator("#trx-level-chart .scatterlayer .trace").count() == 2  # kiosk and the publisher
    assert page.inner_text("#trx-sub-lag") == "9 transactions"
    assert "value too long" in page.inner_text("#trx-gap-rows")
    shot(page, "subscription")

    actions = list(
        AuditEntry.objects.filter(username="editor", action__startswith="trx.mark_")
        .order_by("id")
        .values_list("action", "outcome")
    )
    assert actions == [("trx.mark_invalid", "ok"), ("trx.mark_valid", "ok")]


def test_an_editor_sets_the_ack_policy_and_writes_a_transactional_resolver_checked_in_place(
    live_server, page, shot, tmp_path, settings
):
    """An updateable publication's page: the acknowledgement policy saved, then the table's resolver editor,
    where a string-valued expression is refused next to its field and a good one joins the chain in place."""
    make_user("editor", "edit", "operate")
    path = tmp_path / "shop.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR(40), price DECIMAL_TEXT(10, 2))")
    settings.SQLITE_ALLOWED_DIRS = [*settings.SQLITE_ALLOWED_DIRS, str(tmp_path)]
    do_register_server(Actor.command(), ServerData(name="shop", dialect="sqlite", database=str(path)))
    account = ReplAccount.objects.create(server="shop", account="sales", is_updateable=1, log_file="sales.log",
                                         created_at=timezone.now())  # fmt: skip
    item = TpItem.objects.create(server="shop", acct="sales", type=2, item="DB.DBA.items", is_copy=0)

    sign_in(page, live_server.url, "editor")
    page.goto(live_server.url + account.get_absolute_url())
    page.select_option("#trx-ack-form select[name=ack_policy]", "quorum")
    page.fill("#trx-ack-form input[name=ack_timeout]", "5")
    page.click("#trx-ack-form button:has-text('Save')")
    page.wait_for_selector("#trx-ack-policy:has-text('a majority of the in-sync subscribers')")
    account.refresh_from_db()
    assert (account.ack_policy, account.ack_timeout) == ("quorum", 5.0)
    shot(page, "ack-policy")

    page.click(f"a[data-resolvers='{item.pk}']")
    page.wait_for_selector("h1:has-text('Conflict resolvers of shop.items')")
    page.evaluate("window.__stayed = true")
    page.select_option("#resolver-form select[name=type]", "U")
    page.select_option("#resolver-form select[name=resolver_class]", "custom")
    page.fill("#resolver-form textarea[name=expression]", "new.name")
    page.click("#add-resolver-button")
    page.wait_for_selector("#resolver-form .errorlist:has-text('returns text (new.name)')")
    assert page.evaluate("window.__stayed") is True and not TransactionalConflictResolver.objects.exists()
    shot(page, "refused-expression")

    page.fill("#resolver-form textarea[name=expression]", "CASE WHEN new.price < pub.price THEN 1 ELSE 3 END")
    page.click("#add-resolver-button")
    page.wait_for_selector("#chain-U tr[data-resolver]")
    assert page.evaluate("window.__stayed") is True
    resolver = TransactionalConflictResolver.objects.get()
    assert (resolver.table_name, resolver.type) == ("shop.items", "U")
    assert "CASE WHEN new.price &lt; pub.price" in page.inner_html(
        "#chain-U"
    ) or "new.price < pub.price" in page.inner_text("#chain-U")
    shot(page, "resolver-added")


def test_an_editor_sets_a_subscriptions_profile_and_sees_which_values_are_its_own(live_server, page, shot):
    make_user("editor", "edit", "operate")
    publication_with_two_subscribers()
    ReplAccount.objects.filter(server="shop", account="sales").update(max_backlog=700)
    sub = ReplSubscriber.objects.get(subscriber="kiosk")
    sign_in(page, live_server.url, "editor")
    page.goto(live_server.url + sub.get_absolute_url())
    rows = page.locator("#trx-profile-rows")
    assert "the registry (repl_apply_batch)" in rows.locator("[data-setting='apply_batch']").inner_text()
    assert "the publication" in rows.locator("[data-setting='max_backlog']").inner_text()
    page.fill("#trx-profile-form #id_apply_batch", "25")
    page.fill("#trx-profile-form #id_alert_lag", "5")
    page.click("#trx-profile-form button:has-text('Save profile')")
    page.wait_for_selector(".messages li.success")
    assert "apply_batch 25, alert_lag 5" in page.inner_text(".messages")
    batch = page.locator("#trx-profile-rows [data-setting='apply_batch']").inner_text()
    assert "25" in batch and "this subscription" in batch
    assert "this subscription" in page.locator("#trx-profile-rows [data-setting='alert_lag']").inner_text()
    sub.refresh_from_db()
    assert (sub.apply_batch, sub.alert_lag, sub.max_backlog) == (25, 5, None)
    shot(page, "subscription-profile")

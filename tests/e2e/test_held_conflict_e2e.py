"""In the browser: a transactional conflict held by the `manual` resolver shows on the dashboard and in the inbox,
an operator edits the version every copy gets, and the copies converge on it."""

from __future__ import annotations

import pytest

from replication_admin.core.audit import Actor
from replication_admin.models import Alert, AuditEntry, ConflictBackup
from replication_admin.servers.actions import do_register_server
from replication_admin.statements import execute
from tests.conftest import server_data
from tests.tables import execute as run_sql
from tests.tables import fetch_all
from tests.users import make_user

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.live_db]

PASSWORD = "pw-for-tests-only"  # make_user's


def run(text: str, context) -> None:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes if not o.ok]


def sign_in(page, base_url: str, username: str) -> None:
    page.goto(base_url + "/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("h1:has-text('Is replication working?')")


def name_of(server, key: int) -> str:
    return str(fetch_all(server, f"SELECT name FROM items WHERE id = {key}")[0][0])


def test_an_operator_decides_a_held_conflict_in_the_inbox_and_every_copy_gets_the_edited_version(
    live_server, page, shot, live_database, jobs_sync, spark
):
    make_user("operator", "operate")
    pub = do_register_server(Actor.command(), server_data("postgresql", "pub", live_database("postgresql")))
    sub = do_register_server(Actor.command(), server_data("mysql", "sub", live_database("mysql")))
    run_sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), qty integer)")
    run_sql(pub, "INSERT INTO items (id, name, qty) VALUES (1, 'pen', 5), (2, 'ink', 7)")
    run("repl_publish ('shop', 'shop.log', 1); repl_pub_add ('shop', 'items', 2, 0, null)", pub)
    run("repl_server ('pub', 'pub'); repl_subscribe ('pub', 'shop'); repl_init_copy ('pub', 'shop')", sub)
    run("REPL_ADD_CR ('items', 'U', 'hold', 10, 'manual')", pub)
    run_sql(pub, "UPDATE items SET name = 'pen (publisher)' WHERE id = 1")
    run_sql(sub, "UPDATE items SET name = 'pen (branch)' WHERE id = 1")
    run("repl_sync ('pub', 'shop')", sub)
    conflict = ConflictBackup.objects.get(decision=ConflictBackup.HELD)
    assert (name_of(pub, 1), name_of(sub, 1)) == ("pen (publisher)", "pen (branch)")

    sign_in(page, live_server.url, "operator")
    card = page.locator("#held-conflicts")
    assert card.locator(".n").inner_text() == "1" and "decide in the inbox" in card.inner_text()
    assert "conflict held for a person" in page.inner_text("#alerts")
    shot(page, "dashboard-held")

    card.click()
    page.wait_for_selector(f"a[href='/conflicts/{conflict.pk}/']")
    assert "4 · held for a person to decide" in page.inner_text("main")
    shot(page, "inbox-held")

    page.click(f"a[href='/conflicts/{conflict.pk}/']")
    page.wait_for_selector("#decide-panel")
    held = page.inner_text("#publisher-incoming")
    assert "pen (publisher)" in held and "pen (branch)" in held
    shot(page, "held-versions")

    page.fill("#edit-form input[name='col:name']", "pen (agreed)")
    page.click("#use-edited")
    page.wait_for_selector("ul.messages:has-text('an edited version goes to every copy')")
    assert "2 · subscriber wins, origin changed" in page.inner_text("#conflict-decision")
    shot(page, "decided")

    run("repl_sync ('pub', 'shop')", sub)
    assert name_of(pub, 1) == name_of(sub, 1) == "pen (agreed)"
    decided = ConflictBackup.objects.get(pk=conflict.pk)
    assert (decided.chosen, decided.decided_by, decided.chosen_row) == (
        2,
        "operator",
        {"name": "pen (agreed)", "qty": 5},
    )
    assert AuditEntry.objects.filter(action="conflict.decide", username="operator").exists()
    assert not Alert.objects.filter(kind="conflict_held", resolved_at=None).exists()
    page.goto(live_server.url + "/")
    assert page.locator("#held-conflicts .n").inner_text() == "0"
    shot(page, "dashboard-after")

"""Updateable transactional subscriptions: subscribers' changes go back to the publisher, conflicts are
decided there by SYS_REPL_CR resolvers, and every node ends with the same rows."""

from __future__ import annotations

from decimal import Decimal

import pytest

from replication_admin.conflicts.actions import do_reapply_conflict, do_update_resolver
from replication_admin.conflicts.chains import table_columns
from replication_admin.console.actions import do_create_notification_channel, do_set_conflict_notify_email
from replication_admin.core.audit import Actor
from replication_admin.models import ConflictBackup, JobRun, ReplSubscriber, TransactionalConflictResolver
from replication_admin.statements import execute
from replication_admin.transactional import sync as trx_sync
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import run, sql, value
from tests.webhook import webhook


@pytest.fixture(params=["postgresql", "pgwal"])
def nodes(request, make_server, jobs_sync, spark):
    pub = make_server(request.param, "pub")
    my = make_server("mysql", "my")
    pg = make_server("postgresql", "pg")
    sql(
        pub,
        "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), price numeric(10, 2), qty integer)",
        *[f"INSERT INTO items (id, name, price, qty) VALUES ({i}, 'item {i}', {i}0.00, 10)" for i in range(1, 6)],
    )
    run(pub, "repl_publish ('shop', 'shop.log', 1); repl_pub_add ('shop', 'items', 2, 0, null)")
    for sub in (my, pg):
        run(sub, "repl_server ('pub', 'pub'); repl_subscribe ('pub', 'shop'); repl_init_copy ('pub', 'shop')")
    return pub, my, pg


def sync_all(*subs) -> None:
    for _ in range(2):  # a change pushed by a later subscriber reaches the earlier ones on the next round
        for sub in subs:
            run(sub, "repl_sync ('pub', 'shop')")


def converged(pub, *subs) -> None:
    for sub in subs:
        result = same(pub, sub, "items")
        assert result["equal"], result


def guid(server, key: int) -> str:
    column = '"ROWGUID"' if server.dialect == "postgresql" else "ROWGUID"
    return value(server, f"SELECT {column} FROM items WHERE id = {key}")


def test_a_subscribers_change_reaches_the_publisher_and_the_other_subscriber_without_echo(nodes):
    pub, my, pg = nodes
    sql(
        my,
        "UPDATE items SET name = 'renamed on my' WHERE id = 1",
        "INSERT INTO items (id, name, price, qty) VALUES (9, 'new', 1.5, 1)",
    )
    sql(pg, "DELETE FROM items WHERE id = 2")
    before = guid(my, 1)
    assert before.startswith("my@")
    sync_all(my, pg)
    assert value(pub, "SELECT name FROM items WHERE id = 1") == "renamed on my"
    assert value(pub, "SELECT COUNT(*) FROM items WHERE id IN (2, 9)") == 1
    converged(pub, my, pg)
    assert guid(pub, 1) == guid(pg, 1) == before  # the version keeps its origin everywhere
    assert not ConflictBackup.objects.exists()
    outcome = run(my, "repl_sync ('pub', 'shop')")[0]
    assert outcome.details["pushed"] == 0 and outcome.details["applied"] == 0


def test_default_decisions_keep_the_publishers_version_and_the_losing_one_in_the_backups(nodes):
    pub, my, pg = nodes
    sql(pub, "UPDATE items SET name = 'publisher' WHERE id = 1")
    sql(my, "UPDATE items SET name = 'subscriber' WHERE id = 1")  # update conflict
    sql(pub, "DELETE FROM items WHERE id = 2")
    sql(my, "UPDATE items SET qty = 99 WHERE id = 2")  # update of a deleted row: delete conflict
    sql(pub, "UPDATE items SET qty = 50 WHERE id = 3")
    sql(my, "DELETE FROM items WHERE id = 3")  # delete of a changed row: delete conflict, ignored
    sql(pub, "INSERT INTO items (id, name, price, qty) VALUES (7, 'pub seven', 7, 7)")
    sql(my, "INSERT INTO items (id, name, price, qty) VALUES (7, 'my seven', 7, 7)")  # insert conflict
    sync_all(my, pg)
    assert value(my, "SELECT name FROM items WHERE id = 1") == "publisher"
    assert value(my, "SELECT qty FROM items WHERE id = 3") == 50  # the ignored delete is undone
    assert value(my, "SELECT name FROM items WHERE id = 7") == "pub seven"
    assert value(my, "SELECT COUNT(*) FROM items WHERE id = 2") == 0
    converged(pub, my, pg)
    backups = {b.primary_key["id"]: b for b in ConflictBackup.objects.filter(kind="transactional")}
    assert {k: (b.conflict_type, b.operation, b.decision) for k, b in backups.items()} == {
        1: ("U", "U", 3),
        2: ("D", "U", 5),
        3: ("D", "D", 5),
        7: ("I", "I", 3),
    }
    assert backups[1].losing_row["name"] == "subscriber" and backups[1].winning_row["name"] == "publisher"
    assert backups[7].losing_row["name"] == "my seven"

    # The inbox re-applies a losing version on the publisher; it reaches every node, its originator too.

    assert "losing version" in do_reapply_conflict(Actor.command(), backups[1])
    sync_all(my, pg)
    assert {value(node, "SELECT name FROM items WHERE id = 1") for node in (pub, my, pg)} == {"subscriber"}
    converged(pub, my, pg)


def test_the_originator_receives_the_decided_version_in_the_same_sync(nodes):
    pub, my, _pg = nodes
    run(pub, "REPL_ADD_CR ('items', 'ave', 'U', 10, 'ave', 'price')")  # Virtuoso's order: suffix, then type
    sql(pub, "UPDATE items SET price = 30.00 WHERE id = 4")
    sql(my, "UPDATE items SET price = 50.00 WHERE id = 4")
    outcome = run(my, "repl_sync ('pub', 'shop')")[0]
    assert outcome.details["pushed"] == 1
    # One sync: the publisher decided 40.00 (the average) and the originator already has it.
    assert Decimal(value(pub, "SELECT price FROM items WHERE id = 4")) == Decimal("40.00")
    assert Decimal(value(my, "SELECT price FROM items WHERE id = 4")) == Decimal("40.00")
    assert same(pub, my, "items")["equal"]
    again = run(my, "repl_sync ('pub', 'shop')")[0]
    assert again.details["pushed"] == 0 and again.details["applied"] == 0


def test_resolver_codes_subscriber_wins_average_add_and_minimum(nodes):
    pub, my, pg = nodes
    run(
        pub,
        "REPL_ADD_CR ('items', 'U', 'sub', 10, 'sub_wins');REPL_ADD_CR ('items', 'I', 'min', 10, 'min', 'price')",
    )
    sql(pub, "UPDATE items SET name = 'pub' WHERE id = 1")
    sql(my, "UPDATE items SET name = 'my wins' WHERE id = 1")
    sql(pub, "INSERT INTO items (id, name, price, qty) VALUES (8, 'pub eight', 8.00, 1)")
    sql(
        my, "INSERT INTO items (id, name, price, qty) VALUES (8, 'my eight', 3.00, 1)"
    )  # cheaper: the subscriber's row wins
    sync_all(my, pg)
    assert value(pub, "SELECT name FROM items WHERE id = 1") == "my wins"
    assert value(pub, "SELECT name FROM items WHERE id = 8") == "my eight"
    converged(pub, my, pg)

    TransactionalConflictResolver.objects.all().delete()
    run(
        pub,
        "REPL_ADD_CR ('items', 'U', 'ave', 10, 'ave', 'price'); REPL_ADD_CR ('items', 'U', 'add', 20, 'add', 'qty')",
    )
    sql(pub, "UPDATE items SET price = 30.00 WHERE id = 4")
    sql(my, "UPDATE items SET price = 50.00 WHERE id = 4")  # average: 40, sent to everyone
    sync_all(my, pg)
    assert Decimal(value(pub, "SELECT price FROM items WHERE id = 4")) == Decimal("40.00")
    converged(pub, my, pg)
    TransactionalConflictResolver.objects.filter(proc__contains="ave").delete()
    sql(pub, "UPDATE items SET qty = qty + 5 WHERE id = 5")
    sql(pg, "UPDATE items SET qty = qty + 3 WHERE id = 5")  # add: 10 + 5 + 3
    sync_all(my, pg)
    assert value(pub, "SELECT qty FROM items WHERE id = 5") == 18
    converged(pub, my, pg)
    codes = sorted(ConflictBackup.objects.values_list("decision", flat=True))
    assert codes == [1, 1, 2, 2]


def test_publisher_wins_and_reinitialise_keeps_the_publishers_rows_and_copies_the_subscriber_again(nodes):
    pub, my, _pg = nodes
    assert "not updateable" not in run(pub, "REPL_PUB_ON_CONFLICT ('shop', 'reinitialize')")[0].message
    sql(my, "UPDATE items SET name = 'my first' WHERE id = 3")  # no conflict: pushed before the conflict
    sql(pub, "UPDATE items SET name = 'publisher' WHERE id = 1")
    sql(my, "UPDATE items SET name = 'subscriber' WHERE id = 1")  # conflicts with the publisher's update
    sql(my, "INSERT INTO items (id, name, price, qty) VALUES (9, 'my nine', 9, 9)")  # after it: not pushed
    outcome = run(my, "repl_sync ('pub', 'shop')")[0]
    assert outcome.details["reinitialise"] and outcome.details["discarded"] == 2
    assert outcome.details["copy"]["mode"] == "init"
    # The publisher's rows stand; the subscriber is a copy of them again; nothing it had is silently lost.
    assert value(pub, "SELECT name FROM items WHERE id = 1") == "publisher"
    assert value(pub, "SELECT name FROM items WHERE id = 3") == "my first"
    assert value(pub, "SELECT COUNT(*) FROM items WHERE id = 9") == 0
    assert same(pub, my, "items")["equal"]
    backups = {b.primary_key["id"]: b for b in ConflictBackup.objects.filter(kind="transactional")}
    assert {k: (b.conflict_type, b.decision, b.losing_row["name"]) for k, b in backups.items()} == {
        1: ("U", 3, "subscriber"),
        9: ("I", 3, "my nine"),
    }
    assert "not pushed" in backups[9].note and backups[1].winning_row["name"] == "publisher"
    # The inbox re-applies a kept change; the copied subscriber pushes its new changes normally.
    do_reapply_conflict(Actor.command(), backups[9])
    sql(my, "UPDATE items SET name = 'after the copy' WHERE id = 2")
    again = run(my, "repl_sync ('pub', 'shop')")[0]
    assert again.details["pushed"] == 1 and not again.details["reinitialise"]
    assert value(pub, "SELECT name FROM items WHERE id = 2") == "after the copy"
    assert value(my, "SELECT name FROM items WHERE id = 9") == "my nine"
    assert same(pub, my, "items")["equal"]


def test_the_answer_to_conflicts_is_refused_for_a_publication_that_is_not_updateable(make_server):
    pub = make_server("sqlite", "ro")
    run(pub, "REPL_PUBLISH ('ro', 'ro.log')")
    outcome = execute(Actor.command(), "REPL_PUB_ON_CONFLICT ('ro', 'reinitialize')", context=pub)[-1]
    assert not outcome.ok and outcome.message == "ro/ro is not updateable: its subscribers send no changes to conflict"


def test_a_followed_subscriber_whose_change_conflicts_is_copied_again_and_followed_after(nodes):
    pub, my, _pg = nodes
    run(pub, "REPL_PUB_ON_CONFLICT ('shop', 'reinitialize')")
    run(my, "SYNC_REPL ()")
    sub = ReplSubscriber.objects.get(subscriber="my")
    assert sub.follow and sub.state == ReplSubscriber.IN_SYNC
    sql(pub, "UPDATE items SET qty = 1 WHERE id = 5")
    sql(my, "UPDATE items SET qty = 2 WHERE id = 5")
    outcome = trx_sync.follow_step(sub)
    assert outcome is not None and outcome.reinitialise and outcome.discarded == 1
    copy = JobRun.objects.filter(kind="trx_init").latest("pk")  # queued by the follower, run here (sync mode)
    assert copy.state == JobRun.State.SUCCEEDED and copy.trigger == JobRun.Trigger.SCHEDULER
    sub.refresh_from_db()
    assert sub.state == ReplSubscriber.IN_SYNC and sub.init_state == "done"
    assert value(my, "SELECT qty FROM items WHERE id = 5") == 1
    assert same(pub, my, "items")["equal"]


def test_the_owner_of_a_resolver_and_the_default_rules_address_are_told_of_the_conflicts_a_sync_decided(
    nodes, mailoutbox
):
    pub, my, _pg = nodes
    run(pub, "REPL_ADD_CR ('items', 'sub', 'U', 10, 'sub_wins')")
    resolver = TransactionalConflictResolver.objects.get()
    do_update_resolver(  # the owner it names, as the resolver editor sets it
        Actor.command(), resolver, resolver.expression, resolver.assignments, "owner@example.com",
        table_columns(pub, "items"),
    )  # fmt: skip
    do_set_conflict_notify_email(Actor.command(), "dba@example.com")
    with webhook() as hook:
        do_create_notification_channel(Actor.command(), "chat", hook.url, ["conflicts"])
        sql(pub, "UPDATE items SET name = 'publisher' WHERE id = 1")
        sql(my, "UPDATE items SET name = 'subscriber' WHERE id = 1")  # decided by the resolver
        sql(pub, "INSERT INTO items (id, name, price, qty) VALUES (7, 'pub seven', 7, 7)")
        sql(my, "INSERT INTO items (id, name, price, qty) VALUES (7, 'my seven', 7, 7)")  # by the default rule
        outcome = run(my, "repl_sync ('pub', 'shop')")[0]
        assert outcome.details["pushed"] >= 1
        assert value(pub, "SELECT name FROM items WHERE id = 1") == "subscriber"
        decided = {b.primary_key["id"]: b for b in ConflictBackup.objects.filter(kind="transactional")}
        assert sorted(decided) == [1, 7] and decided[7].resolver_id is None
        # The sync's own end sent them: no round of the scheduler in between.
        by_address = {tuple(m.to): m.body for m in mailoutbox}
        assert sorted(by_address) == [("dba@example.com",), ("owner@example.com",)]
        assert "id=1 in items from my: subscriber wins" in by_address[("owner@example.com",)]
        assert "id=7 in items from my: publisher wins (default)" in by_address[("dba@example.com",)]
        assert "id=7" not in by_address[("owner@example.com",)]
        assert len(hook.received) == 1 and "2 conflict(s) on pub.items" in hook.received[0]["title"]
        sync_all(my)  # nothing more decided: nobody told twice
        assert len(mailoutbox) == 2 and len(hook.received) == 1
    assert ConflictBackup.objects.filter(notified=False).count() == 0

"""A subscription's apply timeout: an application on the subscriber holds a row the apply must write; the apply's
statement is cancelled at the subscription's bound (PostgreSQL's statement_timeout, MariaDB's max_statement_time),
its transaction rolled back, the subscription not halted and its level unchanged;
once the application lets go, the next sync applies the transaction once and the subscriber matches the publisher. SQLite cannot cancel a statement: a timeout of its own is refused in one line."""

from __future__ import annotations

import threading

import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import AuditEntry, RegistryEntry, ReplSubscriber
from replication_admin.statements import execute
from replication_admin.transactional import profile
from replication_admin.transactional import sync as trx_sync
from replication_admin.transactional.actions import do_set_subscription_profile
from replication_admin.transactional.apply import ApplyTimedOut
from replication_admin.transactional.lookups import TrxError
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = pytest.mark.live_db
LET_GO_AFTER = 20.0  # seconds: the application's row lock, unless the sync came back before


def subscribed(make_server, dialect: str):
    pub, sub = make_server("postgresql", "pub"), make_server(dialect, "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), hits integer)")
    sql(pub, *[f"INSERT INTO items VALUES ({i}, 'item {i}', 0)" for i in (1, 2, 3)])
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    return pub, sub, ReplSubscriber.objects.get(subscriber="sub")


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_an_apply_held_up_by_an_application_is_cancelled_at_its_timeout_and_applied_once_the_row_is_free(
    make_server, jobs_sync, spark, dialect
):
    pub, sub, subscription = subscribed(make_server, dialect)
    do_set_subscription_profile(Actor.command(), subscription, apply_timeout=1)
    assert profile.apply_timeout(ReplSubscriber.objects.get(pk=subscription.pk)) == 1
    sql(pub, "UPDATE items SET name = 'pub 1', hits = hits + 1 WHERE id = 1")

    with connections.connect(sub, autocommit=False) as application:
        application.cursor().execute("UPDATE items SET name = 'local 1' WHERE id = 1")  # holds the row
        # Without the bound the sync would wait for the row: the application lets go after a while, and the sync
        # then succeeds (which fails this test) instead of waiting for ever.
        letting_go = threading.Timer(LET_GO_AFTER, application.rollback)
        letting_go.start()
        outcome = execute(Actor.command(), "REPL_SYNC ('pub', 'shop')", context=sub)[-1]
        letting_go.cancel()
        application.rollback()

    assert not outcome.ok
    assert "ran longer than the subscription's apply timeout (1 s) and was cancelled" in outcome.message
    after = ReplSubscriber.objects.get(pk=subscription.pk)
    assert after.halt_count is None and after.halt_error == ""  # a bound, not a transaction that cannot apply
    assert value(sub, "SELECT name FROM items WHERE id = 1") == "item 1"  # rolled back whole

    synced = run(sub, "REPL_SYNC ('pub', 'shop')")[0]
    assert synced.details["applied"] == 1 and synced.details["skipped"] == 0, synced.details
    assert value(sub, "SELECT hits FROM items WHERE id = 1") == 1  # the publisher's image, once
    assert value(sub, "SELECT name FROM items WHERE id = 1") == "pub 1"
    assert same(pub, sub, "items")["equal"]


def test_a_followed_subscription_whose_apply_times_out_is_shown_lost_with_the_cause_and_heals_by_itself(
    make_server, jobs_sync, spark
):
    pub, sub, subscription = subscribed(make_server, "postgresql")
    ReplSubscriber.objects.filter(pk=subscription.pk).update(follow=True)  # a follower serves it
    do_set_subscription_profile(Actor.command(), subscription, apply_timeout=1)
    sql(pub, "UPDATE items SET name = 'pub 1', hits = hits + 1 WHERE id = 1")

    with connections.connect(sub, autocommit=False) as application:
        application.cursor().execute("UPDATE items SET name = 'local 1' WHERE id = 1")
        with pytest.raises(ApplyTimedOut):
            trx_sync.follow_step(ReplSubscriber.objects.get(pk=subscription.pk))
        application.rollback()

    lost = ReplSubscriber.objects.get(pk=subscription.pk)
    assert lost.state == ReplSubscriber.DISCONNECTED  # never green while its apply cannot get through
    assert "apply timeout (1 s)" in lost.last_error and lost.halt_count is None
    assert lost in trx_sync.followable()  # the follower tries it again, no person needed

    healed = trx_sync.follow_step(ReplSubscriber.objects.get(pk=subscription.pk))
    assert healed is not None and healed.applied == 1
    back = ReplSubscriber.objects.get(pk=subscription.pk)
    assert back.state == ReplSubscriber.IN_SYNC and back.last_error == ""
    assert value(sub, "SELECT hits FROM items WHERE id = 1") == 1
    assert same(pub, sub, "items")["equal"]


def test_without_a_timeout_of_its_own_a_subscription_takes_the_registrys(make_server, jobs_sync, spark):
    _pub, _sub, subscription = subscribed(make_server, "postgresql")
    assert profile.apply_timeout(subscription) == 0  # the registry's default: no bound but the server's
    RegistryEntry.objects.update_or_create(key="repl_apply_timeout", defaults={"value": "7"})
    assert profile.apply_timeout(subscription) == 7
    rows = {s.name: s for s in profile.settings_of(subscription, None)}
    assert rows["apply_timeout"].value == 7 and rows["apply_timeout"].source == "the registry (repl_apply_timeout)"


def test_a_sqlite_subscription_is_refused_a_timeout_of_its_own_in_one_line_and_left_unchanged(
    make_server, jobs_sync, spark
):
    _pub, _sub, subscription = subscribed(make_server, "sqlite")
    with pytest.raises(TrxError) as refused:
        do_set_subscription_profile(Actor.command(), subscription, apply_timeout=5, apply_batch=10)
    assert str(refused.value) == (
        "apply_timeout: SQLite cannot cancel an apply's statement: it waits for the file's lock as its connection "
        "says (30 s)"
    )
    unchanged = ReplSubscriber.objects.get(pk=subscription.pk)
    assert unchanged.apply_timeout is None and unchanged.apply_batch is None  # nothing of the refused change
    audited = AuditEntry.objects.filter(action="trx.profile").latest("at")
    assert audited.outcome == AuditEntry.Outcome.ERROR and "SQLite cannot cancel" in audited.detail["error"]
    # A registry-wide timeout leaves it aside: its page says why there is none, and its syncs still apply.
    RegistryEntry.objects.update_or_create(key="repl_apply_timeout", defaults={"value": "3"})
    rows = {s.name: s for s in profile.settings_of(unchanged, None)}
    assert rows["apply_timeout"].value is None
    assert rows["apply_timeout"].source.startswith("SQLite cannot cancel an apply's statement")
    sql(_pub, "UPDATE items SET hits = 5 WHERE id = 3")
    assert run(_sub, "REPL_SYNC ('pub', 'shop')")[0].details["applied"] == 1
    assert same(_pub, _sub, "items")["equal"]

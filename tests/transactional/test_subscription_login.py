"""REPL_SUBSCRIBE's and REPL_SYNC's replication user is checked against the publication's grants (REPL_GRANT), not
ignored: on a publication with grants, a user without one is refused in one line and nothing is subscribed or
applied; a revoked grant refuses the next sync, named or not, and the follower's next step, and the console shows
the subscription failing with the reason until a grant names it again. The reference's own examples, which name
'dba' on publications without grants, run unchanged."""

from __future__ import annotations

import pytest

from replication_admin.models import ReplSubscriber
from replication_admin.transactional import states as trx_states
from replication_admin.transactional import sync as trx_sync
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def publish_items(pub, grantee: str, *statements: str) -> None:
    """The publication 'acct' of a table `items` (after `statements` on it), granted to `grantee`."""
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))", *statements)
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(pub, f"REPL_GRANT ('acct', '{grantee}')")


def test_a_replication_user_needs_a_grant_on_a_publication_that_has_grants(make_server, jobs_sync, spark):
    pub, sub = make_server("mysql", "lpub"), make_server("postgresql", "lsub")
    publish_items(pub, "repl", "INSERT INTO items VALUES (1, 'one')")
    run(sub, "REPL_SERVER ('lpub', 'lpub')")
    subscribe = "REPL_SUBSCRIBE ('lpub', 'acct', null, null, '{}', 'secret')"
    assert refused(sub, subscribe.format("someone")) == "'someone' has no grant on the publication 'acct'"
    assert not ReplSubscriber.objects.filter(subscribed=True).exists()
    assert run(sub, subscribe.format("repl"))[-1].message == "lsub subscribes to lpub/acct"
    run(sub, "REPL_INIT_COPY ('lpub', 'acct')")

    sql(pub, "INSERT INTO items VALUES (2, 'two')")
    level = ReplSubscriber.objects.get().level
    assert refused(sub, "REPL_SYNC ('lpub', 'acct', 'someone', 'secret')") == (
        "'someone' has no grant on the publication 'acct'"
    )
    assert ReplSubscriber.objects.get().level == level and value(sub, "SELECT count(*) FROM items") == 1
    run(sub, "REPL_SYNC ('lpub', 'acct', 'repl', 'secret')")
    assert value(sub, "SELECT count(*) FROM items") == 2

    run(pub, "REPL_REVOKE ('acct', 'repl'); REPL_GRANT ('acct', 'another')")
    sql(pub, "INSERT INTO items VALUES (3, 'three')")
    assert (
        refused(sub, "REPL_SYNC ('lpub', 'acct', 'repl', 'secret')") == "'repl' has no grant on the publication 'acct'"
    )
    assert value(sub, "SELECT count(*) FROM items") == 2


def test_without_grants_any_replication_user_subscribes_as_in_the_references_examples(make_server, jobs_sync):
    pub, sub = make_server("sqlite", "fpub"), make_server("sqlite", "fsub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('fpub', 'fpub')")
    outcome = run(sub, "REPL_SUBSCRIBE ('fpub', 'acct', null, null, 'dba', 'dba')")[-1]
    assert outcome.message == "fsub subscribes to fpub/acct"


def subscriber_row(subscriber: str) -> dict:
    rows = [s for p in trx_states.trx_status_rows() for s in p["subscribers"] if s["subscriber"] == subscriber]
    assert len(rows) == 1
    return rows[0]


def test_a_revoked_grant_stops_the_syncs_and_the_follower_and_the_console_says_why_until_it_is_given_again(
    make_server, jobs_sync, spark
):
    pub, sub = make_server("sqlite", "gpub"), make_server("postgresql", "gsub")
    publish_items(pub, "gsub", "INSERT INTO items VALUES (1, 'one')")
    run(sub, "REPL_SERVER ('gpub', 'gpub'); REPL_SUBSCRIBE ('gpub', 'acct'); REPL_INIT_COPY ('gpub', 'acct')")
    sql(pub, "INSERT INTO items VALUES (2, 'two')")
    run(sub, "REPL_SYNC ('gpub', 'acct')")
    assert value(sub, "SELECT count(*) FROM items") == 2 and subscriber_row("gsub")["state"] == "ok"

    run(pub, "REPL_GRANT ('acct', 'another')")
    revoked = run(pub, "REPL_REVOKE ('acct', 'gsub')")[-1].message
    assert revoked == "gsub may no longer subscribe to acct; not fed until granted again: gsub"
    why = "'gsub' has no grant on the publication 'acct' (revoked): gsub is not fed until REPL_GRANT gives it one again"
    # The console says so at once, before any sync meets it.
    row = subscriber_row("gsub")
    assert (row["state"], row["last_error"]) == ("failing", why)
    ReplSubscriber.objects.filter(subscriber="gsub").update(state=ReplSubscriber.IN_SYNC)  # followed, not yet met
    assert subscriber_row("gsub")["sync_state"] == "IN SYNC (not fed: no grant)"
    ReplSubscriber.objects.filter(subscriber="gsub").update(state=ReplSubscriber.OFF)
    sql(pub, "INSERT INTO items VALUES (3, 'three')")
    assert why in refused(sub, "REPL_SYNC ('gpub', 'acct')")
    # The follower feeds it nothing either.
    subscription = ReplSubscriber.objects.get(subscriber="gsub")
    ReplSubscriber.objects.filter(pk=subscription.pk).update(state=ReplSubscriber.IN_SYNC, follow=True)
    assert trx_sync.follow_step(ReplSubscriber.objects.get(pk=subscription.pk)) is None
    subscription.refresh_from_db()
    assert (subscription.state, subscription.last_error) == (ReplSubscriber.DISCONNECTED, why)
    assert value(sub, "SELECT count(*) FROM items") == 2

    run(pub, "REPL_GRANT ('acct', 'gsub')")
    outcome = trx_sync.follow_step(ReplSubscriber.objects.get(pk=subscription.pk))
    assert outcome is not None and outcome.applied == 1
    assert value(sub, "SELECT count(*) FROM items") == 3
    # In sync and fed again; no follower runs here, which is what the console says now.
    row = subscriber_row("gsub")
    assert (row["state"], row["last_error"]) == ("follower_down", "")


def test_a_subscription_a_grant_let_in_by_its_replication_user_is_fed_while_that_user_keeps_it(
    make_server, jobs_sync, spark
):
    pub, sub = make_server("sqlite", "upub"), make_server("sqlite", "usub")
    publish_items(pub, "repl")
    run(sub, "REPL_SERVER ('upub', 'upub'); REPL_SUBSCRIBE ('upub', 'acct', null, null, 'repl', 'x')")
    run(sub, "REPL_INIT_COPY ('upub', 'acct')")
    assert ReplSubscriber.objects.get(subscriber="usub").grantee == "repl"
    sql(pub, "INSERT INTO items VALUES (1, 'one')")
    run(sub, "REPL_SYNC ('upub', 'acct')")  # a sync naming no user: the subscription's own is checked
    assert value(sub, "SELECT count(*) FROM items") == 1 and subscriber_row("usub")["state"] == "ok"
    run(pub, "REPL_REVOKE ('acct', 'repl')")  # no grants left: anyone may subscribe again
    sql(pub, "INSERT INTO items VALUES (2, 'two')")
    run(sub, "REPL_SYNC ('upub', 'acct')")
    assert value(sub, "SELECT count(*) FROM items") == 2

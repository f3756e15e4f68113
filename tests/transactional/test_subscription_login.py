"""REPL_SUBSCRIBE's and REPL_SYNC's replication user is checked against the publication's grants (REPL_GRANT), not
ignored: on a publication with grants, a user without one is refused in one line and nothing is subscribed or
applied; a revoked grant refuses the next sync that names the user. The reference's own examples, which name
'dba' on publications without grants, run unchanged."""

from __future__ import annotations

import pytest

from replication_admin.models import ReplSubscriber
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def test_a_replication_user_needs_a_grant_on_a_publication_that_has_grants(make_server, jobs_sync, spark):
    pub, sub = make_server("mysql", "lpub"), make_server("postgresql", "lsub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))", "INSERT INTO items VALUES (1, 'one')")
    run(
        pub,
        "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null); REPL_GRANT ('acct', 'repl')",
    )
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

"""REPL_SUBSCRIBE's and REPL_SYNC's replication user and password are checked, not ignored: the user must hold a
grant on the publication (REPL_GRANT) when it has grants, and the publisher must accept its login with that
password; each refusal is one line and changes nothing."""

from __future__ import annotations

import uuid

import pytest

from replication_admin.models import ReplSubscriber
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def test_a_subscription_needs_a_granted_user_whose_login_the_publisher_accepts(make_server, jobs_sync, spark):
    pub, sub = make_server("mysql", "lpub"), make_server("postgresql", "lsub")
    user = f"repl_{uuid.uuid4().hex[:8]}"
    sql(
        pub,
        "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))",
        "INSERT INTO items VALUES (1, 'one')",
        f"CREATE USER '{user}'@'%' IDENTIFIED BY 'right-pw'",
        f"GRANT SELECT ON `{pub.database}`.* TO '{user}'@'%'",
    )
    try:
        run(pub, f"REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null); "
                 f"REPL_GRANT ('acct', '{user}')")  # fmt: skip
        run(sub, "REPL_SERVER ('lpub', 'lpub')")
        subscribe = "REPL_SUBSCRIBE ('lpub', 'acct', null, null, '{}', '{}')"
        assert refused(sub, subscribe.format("someone", "x")) == "'someone' has no grant on the publication 'acct'"
        wrong = refused(sub, subscribe.format(user, "wrong-pw"))
        assert wrong.startswith(f"lpub refused the login of '{user}': ") and "\n" not in wrong
        assert not ReplSubscriber.objects.filter(subscribed=True).exists()  # neither refusal subscribed
        assert run(sub, subscribe.format(user, "right-pw"))[-1].message == "lsub subscribes to lpub/acct"
        run(sub, "REPL_INIT_COPY ('lpub', 'acct')")

        sql(pub, "INSERT INTO items VALUES (2, 'two')")
        level = ReplSubscriber.objects.get().level
        assert refused(sub, f"REPL_SYNC ('lpub', 'acct', '{user}', 'wrong-pw')").startswith("lpub refused the login")
        assert ReplSubscriber.objects.get().level == level and value(sub, "SELECT count(*) FROM items") == 1
        run(sub, f"REPL_SYNC ('lpub', 'acct', '{user}', 'right-pw')")
        assert value(sub, "SELECT count(*) FROM items") == 2

        run(pub, f"REPL_REVOKE ('acct', '{user}'); REPL_GRANT ('acct', 'another')")
        assert refused(sub, f"REPL_SYNC ('lpub', 'acct', '{user}', 'right-pw')") == (
            f"'{user}' has no grant on the publication 'acct'"
        )
    finally:
        sql(pub, f"DROP USER IF EXISTS '{user}'@'%'")


def test_on_a_publisher_without_logins_only_the_grant_is_checked_and_the_outcome_says_so(make_server, jobs_sync):
    pub, sub = make_server("sqlite", "fpub"), make_server("sqlite", "fsub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(
        pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null); REPL_GRANT ('acct', 'dba')"
    )
    run(sub, "REPL_SERVER ('fpub', 'fpub')")
    assert refused(sub, "REPL_SUBSCRIBE ('fpub', 'acct', null, null, 'guest', 'x')") == (
        "'guest' has no grant on the publication 'acct'"
    )
    outcome = run(sub, "REPL_SUBSCRIBE ('fpub', 'acct', null, null, 'dba', 'dba')")[-1]
    assert outcome.message == "fsub subscribes to fpub/acct; fpub has no logins (SQLite): only the grant was checked"

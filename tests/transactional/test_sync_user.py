"""REPL_PUBLISH's sync user: a subscriber's changes are replayed on the publisher with that user's privileges (on
PostgreSQL, SET ROLE for the rows, the login for the bookkeeping); a dialect that cannot act as another user, or
a role the login may not take, is refused at publish time in one line."""

from __future__ import annotations

import pytest

from replication_admin.core import connections
from replication_admin.models import ReplAccount
from tests.transactional.test_replay_user import CANNOT_ACT_AS_ANOTHER_USER, scratch_role
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def table(server) -> None:
    sql(server, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))", "INSERT INTO items VALUES (1, 'one')")


def test_a_subscribers_change_is_written_on_the_publisher_as_the_sync_user_and_only_with_its_privileges(
    make_server, jobs_sync, spark
):
    pub, sub = make_server("postgresql", "spub"), make_server("mysql", "ssub")
    table(pub)
    with scratch_role(pub, "syncer") as role:
        assert refused(pub, "REPL_PUBLISH ('acct', 'acct.log', 1, 'nobody_here')") == (
            "spub has no user or role 'nobody_here' to replay as"
        )
        assert not ReplAccount.objects.exists()
        run(pub, f"REPL_PUBLISH ('acct', 'acct.log', 1, '{role}'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
        assert ReplAccount.objects.get().sync_user == role
        run(sub, "REPL_SERVER ('spub', 'spub'); REPL_SUBSCRIBE ('spub', 'acct'); REPL_INIT_COPY ('spub', 'acct')")
        sql(
            pub,
            "CREATE TABLE who (u text, op text)",
            "CREATE FUNCTION note_who() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO who VALUES (current_user, TG_OP); RETURN NULL; END $$",
            "CREATE TRIGGER items_who AFTER INSERT OR UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION note_who()",
            f'GRANT SELECT, INSERT, UPDATE ON items TO "{role}"',
            f'GRANT INSERT ON who TO "{role}"',
        )
        sql(sub, "UPDATE items SET name = 'uno' WHERE id = 1", "INSERT INTO items (id, name) VALUES (2, 'two')")
        outcome = run(sub, "REPL_SYNC ('spub', 'acct')")[0]
        assert outcome.details["pushed"] == 2
        with connections.connect(pub) as conn:
            seen = sorted(tuple(r) for r in conn.cursor().execute("SELECT u, op FROM who").fetchall())
            rows = [tuple(r) for r in conn.cursor().execute("SELECT id, name FROM items ORDER BY id").fetchall()]
        assert seen == [(role, "INSERT"), (role, "UPDATE")] and rows == [(1, "uno"), (2, "two")]

        # Without the sync user's privilege the publisher refuses the change, though the login could write it:
        # nothing is written, the change waits in the subscriber's log, and goes once the privilege is back.
        sql(pub, f'REVOKE UPDATE ON items FROM "{role}"')
        sql(sub, "UPDATE items SET name = 'dos' WHERE id = 2")
        assert "permission denied" in refused(sub, "REPL_SYNC ('spub', 'acct')")
        assert value(pub, "SELECT name FROM items WHERE id = 2") == "two"
        sql(pub, f'GRANT UPDATE ON items TO "{role}"')
        assert run(sub, "REPL_SYNC ('spub', 'acct')")[0].details["pushed"] == 1
        assert value(pub, "SELECT name FROM items WHERE id = 2") == "dos"
        assert value(pub, "SELECT u FROM who WHERE op = 'UPDATE' ORDER BY u DESC LIMIT 1") == role


@pytest.mark.parametrize(("dialect", "reason"), CANNOT_ACT_AS_ANOTHER_USER)
def test_a_sync_user_is_refused_at_publish_where_the_dialect_cannot_act_as_one(make_server, dialect, reason):
    pub = make_server(dialect, "spub")
    table(pub)
    assert refused(pub, "REPL_PUBLISH ('acct', 'acct.log', 1, 'demo')") == f"spub cannot replay as 'demo': {reason}"
    assert not ReplAccount.objects.exists()

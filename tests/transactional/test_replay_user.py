"""REPL_SUBSCRIBE's replaying user: on PostgreSQL the rows are written with that role's privileges; a dialect
that cannot act as another user refuses it at subscribe time, in one line."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import ReplSubscriber
from replication_admin.statements import execute
from tests.transactional.test_trx_replication import refused, run, sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


# The dialects that cannot replay as another user, and why, in the words of their refusal.
CANNOT_ACT_AS_ANOTHER_USER = [
    ("mysql", "MariaDB cannot act as another user without its password; register the server with that user's login"),
    ("sqlite", "SQLite has no users: every writer of the file has the same rights"),
]


@contextlib.contextmanager
def scratch_role(server, prefix: str) -> Iterator[str]:
    """A PostgreSQL role of its own for one test, dropped with what it owns and its grants afterwards."""
    role = f"{prefix}_{uuid.uuid4().hex[:8]}"
    sql(server, f'CREATE ROLE "{role}"')
    try:
        yield role
    finally:
        with connections.connect(server) as conn:
            conn.cursor().execute(f'DROP OWNED BY "{role}"')
            conn.cursor().execute(f'DROP ROLE "{role}"')


def publish(pub) -> None:
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))", "INSERT INTO items VALUES (1, 'one')")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")


def subscribe(sub, user: str) -> str:
    text = f"REPL_SERVER ('rpub', 'rpub'); REPL_SUBSCRIBE ('rpub', 'acct', null, null, null, null, '{user}')"
    return execute(Actor.command(), text, context=sub)[-1].message


def test_the_replaying_role_writes_the_rows_on_a_postgresql_subscriber(make_server, jobs_sync, spark):
    pub, sub = make_server("mysql", "rpub"), make_server("postgresql", "rsub")
    publish(pub)
    with scratch_role(sub, "replayer") as role:
        assert subscribe(sub, "nobody_here") == "rsub has no user or role 'nobody_here' to replay as"
        assert subscribe(sub, role) == "rsub subscribes to rpub/acct"
        assert ReplSubscriber.objects.get(subscriber="rsub").replay_user == role
        run(sub, "REPL_INIT_COPY ('rpub', 'acct')")
        sql(
            sub,
            "CREATE TABLE who (u text, op text)",
            "CREATE FUNCTION note_who() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO who VALUES (current_user, TG_OP); RETURN NULL; END $$",
            "CREATE TRIGGER items_who AFTER INSERT OR UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION note_who()",
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON items TO "{role}"',
            f'GRANT INSERT ON who TO "{role}"',
        )
        sql(pub, "INSERT INTO items VALUES (2, 'two')", "UPDATE items SET name = 'uno' WHERE id = 1")
        outcome = run(sub, "REPL_SYNC ('rpub', 'acct')")[0]
        assert outcome.details["applied"] == 2 and outcome.details["skipped"] == 0  # two autocommitted statements
        with connections.connect(sub) as conn:
            seen = sorted(tuple(r) for r in conn.cursor().execute("SELECT u, op FROM who").fetchall())
            rows = [tuple(r) for r in conn.cursor().execute("SELECT id, name FROM items ORDER BY id").fetchall()]
        assert seen == [(role, "INSERT"), (role, "UPDATE")] and rows == [(1, "uno"), (2, "two")]

        # Without the role's privilege the change is refused by the database, not written by the login: the
        # subscription halts there, and goes on once the privilege is back.
        sql(sub, f'REVOKE DELETE ON items FROM "{role}"')
        sql(pub, "DELETE FROM items WHERE id = 2")
        assert "permission denied" in refused(sub, "REPL_SYNC ('rpub', 'acct')")
        assert ReplSubscriber.objects.get(subscriber="rsub").halt_keys == [{"table": "items", "key": [2]}]
        with connections.connect(sub) as conn:
            assert conn.cursor().execute("SELECT COUNT(*) FROM items").fetchone()[0] == 2
        sql(sub, f'GRANT DELETE ON items TO "{role}"')
        assert run(sub, "REPL_SYNC ('rpub', 'acct')")[0].details["applied"] == 1
        assert ReplSubscriber.objects.get(subscriber="rsub").halt_count is None
        with connections.connect(sub) as conn:
            assert conn.cursor().execute("SELECT COUNT(*) FROM items").fetchone()[0] == 1


@pytest.mark.parametrize(("dialect", "reason"), CANNOT_ACT_AS_ANOTHER_USER)
def test_a_replaying_user_is_refused_where_the_dialect_cannot_act_as_one(make_server, dialect, reason):
    publish(make_server("postgresql", "rpub"))
    sub = make_server(dialect, "rsub")
    assert subscribe(sub, "dba") == f"rsub cannot replay as 'dba': {reason}"
    assert not ReplSubscriber.objects.filter(subscriber="rsub").exists()

"""REPL_UNPUBLISH removes every object publishing made on the publisher — log tables, capture triggers and their
functions, the replication slot of WAL capture, the procedure wrappers' event trigger — listed from the server's
own catalog before publishing and after unpublishing; only the published tables (and an updateable one's ROWGUID
column, which holds data) stay."""

from __future__ import annotations

import pytest

from replication_admin.core import connections
from tests.transactional.test_trx_replication import run, sql

pytestmark = [pytest.mark.live_db]

CATALOG = {
    "postgresql": [
        "SELECT 'table ' || tablename FROM pg_tables WHERE schemaname = current_schema()",
        "SELECT 'function ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = current_schema()",
        "SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal",
        "SELECT 'slot ' || slot_name FROM pg_replication_slots WHERE database = current_database()",
        "SELECT 'event trigger ' || evtname FROM pg_event_trigger",
        "SELECT 'sequence ' || sequencename FROM pg_sequences WHERE schemaname = current_schema()",
    ],
    "mysql": [
        "SELECT CONCAT('table ', TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
        "SELECT CONCAT('routine ', ROUTINE_NAME) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()",
        "SELECT CONCAT('trigger ', TRIGGER_NAME) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()",
    ],
    "sqlite": ["SELECT type || ' ' || name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"],
}


def objects(server) -> set[str]:
    queries = CATALOG["postgresql" if server.dialect == "postgresql" else server.dialect]
    with connections.connect(server) as conn:
        return {row[0] for query in queries for row in conn.cursor().execute(query).fetchall()}


@pytest.mark.parametrize(
    ("dialect", "updateable"),
    [("postgresql", 0), ("postgresql", 1), ("pgwal", 0), ("pgwal", 1), ("mysql", 0), ("mysql", 1), ("sqlite", 0)],
)  # SQLite publications are not updateable
def test_unpublishing_removes_every_object_publishing_made(make_server, dialect, updateable):
    pub = make_server(dialect, "upub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))", "INSERT INTO items VALUES (1, 'one')")
    before = objects(pub)
    run(pub, f"REPL_PUBLISH ('acct', 'acct.log', {updateable}); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    published = objects(pub)
    assert published - before, "publishing made nothing to remove"
    run(pub, "REPL_UNPUBLISH ('acct')")
    left = objects(pub) - before
    assert not left, f"left behind on {dialect}: {sorted(left)}"


def test_what_publications_share_stays_while_another_publication_or_a_subscription_uses_it(make_server):
    pub = make_server("sqlite", "upub")
    sql(pub, "CREATE TABLE a (id integer PRIMARY KEY)", "CREATE TABLE b (id integer PRIMARY KEY)")
    run(pub, "REPL_PUBLISH ('one', 'one.log'); REPL_PUB_ADD ('one', 'a', 2, 0, null)")
    run(pub, "REPL_PUBLISH ('two', 'two.log'); REPL_PUB_ADD ('two', 'b', 2, 0, null)")
    run(pub, "REPL_UNPUBLISH ('one')")
    assert {"table REPL_TEXT", "table RTCTX"} <= objects(pub)  # 'two' still logs through them
    run(pub, "REPL_UNPUBLISH ('two')")
    assert not {"table REPL_TEXT", "table RTCTX"} & objects(pub)

"""Transactional replication end to end through the statement language, on live databases and Spark."""

from __future__ import annotations

import pytest

from replication_admin import connections
from replication_admin.actions.audit import Actor
from replication_admin.actions.statements import execute
from replication_admin.models import ReplSubscriber, SkippedTransaction
from tests.jobs.test_bidir import same


def run(server, text: str) -> list:
    outcomes = execute(Actor.command(), text, context=server)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def refused(server, text: str) -> str:
    outcomes = execute(Actor.command(), text, context=server)
    assert not outcomes[-1].ok, outcomes[-1].message
    return outcomes[-1].message


def sql(server, *statements: str) -> None:
    with connections.connect(server) as conn:
        for text in statements:
            conn.cursor().execute(text)


def value(server, query: str):
    with connections.connect(server) as conn:
        return conn.cursor().execute(query).fetchone()[0]


PUBLISHER_TABLES = [
    'CREATE TABLE "TEST" (id integer, name varchar(50), tm timestamp, content text, PRIMARY KEY (id, name))',
    'CREATE TABLE "ab ""cd" ("id key" integer, "ef ""gh" varchar(50), PRIMARY KEY ("id key"))',
    *[f"INSERT INTO \"TEST\" VALUES (1, '{n}', now(), 'xxx')" for n in "abcd"],
    'INSERT INTO "ab ""cd" VALUES (1, \'1\')',
]


@pytest.fixture
def rep(make_server, jobs_sync, spark):
    rep1 = make_server("postgresql", "rep1")
    rep2 = make_server("mysql", "rep2")
    sql(rep1, *PUBLISHER_TABLES)
    run(
        rep1,
        "REPL_PUBLISH ('tbl', 'tbl.log');"
        "REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 0, null);"
        "REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)",
    )
    return rep1, rep2


def test_the_references_transactional_replication_example(rep):
    rep1, rep2 = rep
    run(
        rep2,
        "REPL_SERVER ('rep1', '1111', 'localhost:1111');"
        "REPL_SUBSCRIBE ('rep1', 'tbl', null, null, 'dba', 'dba');"
        "DB..REPL_INIT_COPY ('rep1', 'tbl')",
    )
    assert value(rep2, "SELECT COUNT(*) FROM TEST") == 4
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd`') == 1
    run(rep2, "SYNC_REPL()")
    sql(
        rep1,
        "INSERT INTO \"TEST\" VALUES (7, 'a', now(), repeat('x', 1000000))",
        'INSERT INTO "ab ""cd" VALUES (2, \'2\')',
        'INSERT INTO "ab ""cd" VALUES (3, \'3\')',
        'INSERT INTO "ab ""cd" VALUES (4, \'4\')',
        'DELETE FROM "ab ""cd" WHERE "id key" = 4',
        'UPDATE "ab ""cd" SET "ef ""gh" = \'4\' WHERE "id key" = 3',
    )
    run(rep2, "REPL_SYNC ('rep1', 'tbl')")
    assert value(rep2, "SELECT COUNT(*) FROM TEST") == 5
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd`') == 3
    assert value(rep2, 'SELECT `ef "gh` FROM `ab "cd` WHERE `id key` = 3') == "4"
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd` WHERE `id key` = 4') == 0
    assert value(rep2, "SELECT LENGTH(content) FROM TEST WHERE id = 7") == 1_000_000
    # The two creating statements, then the six transactions: level 8 on both sides.
    status = run(rep2, "repl_status ('rep1', 'tbl')")[0]
    assert status.details == {"level": 8, "stat": ReplSubscriber.IN_SYNC}
    assert same(rep1, rep2, "TEST")["equal"] and same(rep1, rep2, 'ab "cd')["equal"]
    # A second sync finds nothing to do and changes nothing.
    again = run(rep2, "REPL_SYNC ('rep1', 'tbl')")[0]
    assert again.details["applied"] == 0


def test_subscribing_checks_the_references_preconditions(rep):
    rep1, rep2 = rep
    assert refused(rep1, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')") == (
        "publication and subscription servers have identical names."
    )
    assert refused(rep2, "REPL_SUBSCRIBE ('rep1', 'tbl')") == (
        "Publishing server must be declared with REPL_SERVER before subscribing"
    )
    sql(rep2, "CREATE TABLE TEST (id int PRIMARY KEY)")
    assert refused(rep2, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')") == (
        "The table 'DB.DBA.TEST' already exists"
    )
    sql(rep2, "DROP TABLE TEST")
    run(rep2, "REPL_SUBSCRIBE ('rep1', 'tbl')")
    assert refused(rep2, "REPL_SUBSCRIBE ('rep1', 'tbl')") == "The subscription 'tbl' already exist"
    assert "already exists" in refused(rep1, "REPL_PUBLISH ('tbl', 'again.log')")


def test_an_invalid_subscriber_is_refused_until_reinitialised_and_marked_valid(rep):
    from replication_admin.actions import trx as trx_actions

    rep1, rep2 = rep
    run(rep2, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    sub = ReplSubscriber.objects.get(subscriber="rep2")
    # The subscriber claims a level ahead of the publisher (its copy belongs to another history).
    sql(rep2, "UPDATE RTLEVEL SET LVL = LVL + 5, N = N + 5")
    message = refused(rep2, "REPL_SYNC ('rep1', 'tbl')")
    assert "no longer valid" in message
    sub.refresh_from_db()
    assert sub.valid == 0
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (9, \'9\')')
    run(rep2, "REPL_INIT_COPY ('rep1', 'tbl')")
    assert "marked invalid" in refused(rep2, "REPL_SYNC ('rep1', 'tbl')")
    trx_actions.do_mark_valid(Actor.command(), ReplSubscriber.objects.get(pk=sub.pk), True)
    run(rep2, "REPL_SYNC ('rep1', 'tbl')")
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd` WHERE `id key` = 9') == 1


def test_a_transaction_that_fails_on_the_subscriber_is_skipped_and_the_gap_recorded(rep):
    rep1, rep2 = rep
    run(rep2, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    sql(rep2, 'ALTER TABLE `ab "cd` ADD CONSTRAINT small CHECK (`id key` < 100)')
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (2, \'ok\')')
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (500, \'refused by the subscriber\')')
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (3, \'ok\')')
    outcome = run(rep2, "REPL_SYNC ('rep1', 'tbl')")[0]
    assert outcome.details["applied"] == 2 and outcome.details["skipped"] == 1
    skipped = SkippedTransaction.objects.get(subscriber="rep2")
    assert skipped.entries[0]["new"]["id key"] == 500 and "small" in skipped.error.lower()
    assert sorted(r[0] for r in _rows(rep2, 'SELECT `id key` FROM `ab "cd`')) == [1, 2, 3]


def _rows(server, query: str) -> list:
    with connections.connect(server) as conn:
        return [tuple(r) for r in conn.cursor().execute(query).fetchall()]

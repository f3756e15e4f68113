"""Transactional replication end to end through the statement language, on live databases and Spark."""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects, levels
from replication_admin.engine import transactional_sql as trx_sql
from replication_admin.models import AuditEntry, RegistryEntry, ReplAccount, ReplSubscriber, SkippedTransaction, TpItem
from replication_admin.statements import execute
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import sync as trx_sync
from tests.bidir.test_bidir_sync import same


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


@pytest.fixture(params=["postgresql", "pgwal"])
def rep(request, make_server, jobs_sync, spark):
    """rep1 (PostgreSQL, capturing by triggers or from its WAL) publishes TEST and "ab ""cd"; rep2 is MariaDB."""
    rep1 = make_server(request.param, "rep1")
    rep2 = make_server("mysql", "rep2")
    sql(rep1, *PUBLISHER_TABLES)
    run(
        rep1,
        "REPL_PUBLISH ('tbl', 'tbl.log');"
        "REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 0, null);"
        "REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)",
    )
    # Automatic capture: from the WAL where wal_level = logical, triggers (saying why) elsewhere.
    account = ReplAccount.objects.get(server="rep1", account="tbl")
    assert account.capture == ("wal" if request.param == "pgwal" else "triggers")
    assert request.param == "pgwal" or "wal_level is replica" in account.capture_note
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


def test_with_on_error_skip_a_transaction_that_fails_on_the_subscriber_is_skipped_and_the_gap_recorded(rep):
    rep1, rep2 = rep
    run(rep2, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    ReplSubscriber.objects.filter(subscriber="rep2").update(on_error="skip")
    sql(rep2, 'ALTER TABLE `ab "cd` ADD CONSTRAINT small CHECK (`id key` < 100)')
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (2, \'ok\')')
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (500, \'refused by the subscriber\')')
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (3, \'ok\')')
    outcome = run(rep2, "REPL_SYNC ('rep1', 'tbl')")[0]
    assert outcome.details["applied"] == 2 and outcome.details["skipped"] == 1
    skipped = SkippedTransaction.objects.get(subscriber="rep2")
    assert skipped.entries[0]["new"]["id key"] == 500 and "small" in skipped.error.lower()
    assert skipped.keys == [{"table": 'ab "cd', "key": [500]}] and skipped.skipped_by == ""
    assert sorted(r[0] for r in _rows(rep2, 'SELECT `id key` FROM `ab "cd`')) == [1, 2, 3]


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_a_row_written_several_times_in_one_batch_arrives_as_its_last_version(make_server, jobs_sync, spark, dialect):
    """Writes of a batch are sent as multi-row upserts: a key written twice in one transaction, or in
    consecutive transactions, must reach the subscriber once, as its last image, in order with deletes."""
    rep1, sub = make_server("postgresql", "rep1"), make_server(dialect, "rep4")
    sql(rep1, *PUBLISHER_TABLES)
    run(rep1, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)")
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    with connections.connect(rep1, autocommit=False) as conn:
        cursor = conn.cursor()
        cursor.execute('INSERT INTO "ab ""cd" VALUES (10, \'a\')')
        cursor.execute('UPDATE "ab ""cd" SET "ef ""gh" = \'b\' WHERE "id key" = 10')
        cursor.execute('UPDATE "ab ""cd" SET "ef ""gh" = \'c\' WHERE "id key" = 10')
        conn.commit()
    for n in range(20):  # one key, twenty one-row transactions
        sql(rep1, f'UPDATE "ab ""cd" SET "ef ""gh" = \'v{n}\' WHERE "id key" = 1')
    sql(
        rep1,
        'INSERT INTO "ab ""cd" VALUES (11, \'first\')',
        'DELETE FROM "ab ""cd" WHERE "id key" = 11',
        'INSERT INTO "ab ""cd" VALUES (11, \'again\')',
        'INSERT INTO "ab ""cd" VALUES (12, \'gone\')',
        'DELETE FROM "ab ""cd" WHERE "id key" = 12',
    )
    outcome = run(sub, "REPL_SYNC ('rep1', 'tbl')")[0]
    assert outcome.details["skipped"] == 0 and outcome.details["applied"] == 1 + 20 + 5, outcome.details
    assert not SkippedTransaction.objects.exists()
    q = dialects.get(sub.dialect).quote
    key, name, table = q("id key"), q('ef "gh'), q('ab "cd')
    got = _rows(sub, f"SELECT {key}, {name} FROM {table} ORDER BY 1")
    assert got == [(1, "v19"), (10, "c"), (11, "again")]
    assert same(rep1, sub, 'ab "cd')["equal"]


def test_mariadb_writers_logging_at_once_reach_a_mariadb_subscriber_once_each(make_server, jobs_sync, spark):
    """Three writers of one MariaDB publication hold logged, uncommitted transactions at the same time (none waits:
    a one-second lock wait would fail it), commit in reverse order, one of them after another changed its row;
    the subscriber gets each transaction once and ends equal to the publisher."""
    pub, sub = make_server("mysql", "rep1"), make_server("mysql", "rep4")
    sql(pub, "CREATE TABLE items (id int PRIMARY KEY, name varchar(50))", "INSERT INTO items VALUES (100, 'start')")
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    writers = [connections.open_connection(pub, autocommit=False) for _ in range(3)]
    try:
        for n, writer in enumerate(writers, start=1):
            cursor = writer.cursor()
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            cursor.execute("INSERT INTO items (id, name) VALUES (?, ?)", n, f"w{n}")
        for writer in reversed(writers[1:]):
            writer.commit()
        writers[0].cursor().execute("UPDATE items SET name = 'last' WHERE id = 3")  # after the third committed it
        writers[0].commit()
    finally:
        for writer in writers:
            writer.close()
    outcome = run(sub, "REPL_SYNC ('rep1', 'tbl')")[0]
    assert outcome.details["applied"] == 3 and outcome.details["skipped"] == 0, outcome.details
    assert run(sub, "REPL_SYNC ('rep1', 'tbl')")[0].details["applied"] == 0
    assert _rows(sub, "SELECT id, name FROM items ORDER BY id") == [(1, "w1"), (2, "w2"), (3, "last"), (100, "start")]
    assert same(pub, sub, "items")["equal"]


def _rows(server, query: str) -> list:
    with connections.connect(server) as conn:
        return [tuple(r) for r in conn.cursor().execute(query).fetchall()]


def subscribed_in_sync(rep1, rep2) -> ReplSubscriber:
    run(
        rep2,
        "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl'); SYNC_REPL()",
    )
    sub = ReplSubscriber.objects.get(subscriber="rep2")
    assert sub.follow and sub.state == ReplSubscriber.IN_SYNC
    return sub


def test_in_sync_mode_makes_each_new_transaction_visible_within_a_second(rep):
    rep1, rep2 = rep
    subscribed_in_sync(rep1, rep2)
    latencies: list[float] = []
    done = threading.Event()

    def write_and_watch() -> None:
        try:
            with connections.connect(rep1) as pub, connections.connect(rep2) as sub:
                for key in range(100, 120):
                    pub.cursor().execute(f'INSERT INTO "ab ""cd" VALUES ({key}, \'live\')')
                    committed = time.monotonic()
                    while (
                        not sub.cursor().execute(f'SELECT COUNT(*) FROM `ab "cd` WHERE `id key` = {key}').fetchone()[0]
                    ):
                        if time.monotonic() - committed > 10:
                            return
                        time.sleep(0.005)
                    latencies.append(time.monotonic() - committed)
        finally:
            done.set()

    thread = threading.Thread(target=write_and_watch)
    thread.start()
    applied = trx_sync.follow_loop(done.is_set, interval=0.05)
    thread.join()
    assert len(latencies) == 20 and applied == 20
    assert sorted(latencies)[10] < 1.0, latencies
    assert same(rep1, rep2, 'ab "cd')["equal"]


def test_a_subscriber_over_the_backlog_threshold_is_cut_and_resyncs_from_its_level(rep):
    rep1, rep2 = rep
    sub = subscribed_in_sync(rep1, rep2)
    ReplAccount.objects.filter(server="rep1", account="tbl").update(max_backlog=5)
    for key in range(200, 220):
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'burst\')')
    level_before = sub.level
    assert trx_sync.follow_step(sub) is None
    sub.refresh_from_db()
    assert sub.state == ReplSubscriber.DISCONNECTED and "feed is cut" in sub.last_error
    assert sub.level == level_before and value(rep2, 'SELECT COUNT(*) FROM `ab "cd`') == 1
    assert sub.pk not in [s.pk for s in trx_sync.followed()]
    outcome = run(rep2, "REPL_SYNC ('rep1', 'tbl')")[0]
    assert outcome.details["applied"] == 20
    sub.refresh_from_db()
    assert sub.state == ReplSubscriber.IN_SYNC and sub.pk in [s.pk for s in trx_sync.followed()]
    assert same(rep1, rep2, 'ab "cd')["equal"]


def test_an_in_sync_subscriber_lost_to_an_error_is_followed_again_after_a_pause(rep):
    rep1, rep2 = rep
    sub = subscribed_in_sync(rep1, rep2)
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (300, \'after the cut\')')
    just_now = timezone.now()
    ReplSubscriber.objects.filter(pk=sub.pk).update(
        state=ReplSubscriber.DISCONNECTED, last_error="connection to server rep2 lost", last_error_at=just_now
    )
    assert sub.pk not in [s.pk for s in trx_sync.followed()]  # not at once: the failure is fresh
    ReplSubscriber.objects.filter(pk=sub.pk).update(
        last_error_at=just_now - timedelta(seconds=trx_sync.FOLLOW_RETRY_SECONDS + 1)
    )
    [again] = [s for s in trx_sync.followed() if s.pk == sub.pk]
    assert trx_sync.follow_step(again).applied == 1
    sub.refresh_from_db()
    assert (sub.state, sub.last_error) == (ReplSubscriber.IN_SYNC, "")
    assert value(rep2, 'SELECT `ef "gh` FROM `ab "cd` WHERE `id key` = 300') == "after the cut"


def test_a_burst_the_follower_drains_does_not_cut_the_feed_but_falling_behind_does(rep):
    rep1, rep2 = rep
    sub = subscribed_in_sync(rep1, rep2)
    ReplAccount.objects.filter(server="rep1", account="tbl").update(max_backlog=5)
    RegistryEntry.objects.update_or_create(key="repl_apply_batch", defaults={"value": "4"})
    watch = trx_sync.BacklogWatch(grace=0)
    for key in range(300, 320):
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'burst\')')
    applied = []
    while (outcome := trx_sync.follow_step(sub, watch)) is not None and outcome.applied:
        applied.append(outcome.applied)  # each step over the threshold, each one smaller: drained, never cut
    sub.refresh_from_db()
    assert applied == [4, 4, 4, 4, 4] and sub.state == ReplSubscriber.IN_SYNC
    assert same(rep1, rep2, 'ab "cd')["equal"]

    for key in range(400, 420):
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'steady\')')
    assert trx_sync.follow_step(sub, watch).applied == 4  # 20 behind, then 16
    for key in range(420, 430):
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'steady\')')
    assert trx_sync.follow_step(sub, watch) is None  # 26 behind: bigger than before, for longer than the grace
    sub.refresh_from_db()
    assert sub.state == ReplSubscriber.DISCONNECTED and "feed is cut" in sub.last_error
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd` WHERE `id key` >= 400') == 4


LOGGER_TABLES = {
    "postgresql": [
        "CREATE TABLE wl_ip_cnt (ic_ip varchar(40) PRIMARY KEY, ic_cnt integer)",
        "CREATE TABLE wl_user (wu_user varchar(40) PRIMARY KEY, wu_cnt integer)",
        "CREATE PROCEDURE wl_hit_repl (ip varchar, usr varchar) LANGUAGE plpgsql AS $$ BEGIN "
        "UPDATE wl_ip_cnt SET ic_cnt = ic_cnt + 1 WHERE ic_ip = ip; "
        "IF NOT FOUND THEN INSERT INTO wl_ip_cnt (ic_ip, ic_cnt) VALUES (ip, 1); END IF; "
        "UPDATE wl_user SET wu_cnt = wu_cnt + 1 WHERE wu_user = usr; "
        "IF NOT FOUND THEN INSERT INTO wl_user (wu_user, wu_cnt) VALUES (usr, 1); END IF; END $$",
        "CREATE PROCEDURE wl_hit (ip varchar, usr varchar) LANGUAGE plpgsql AS $$ BEGIN "
        "CALL wl_hit_repl (ip, usr); "
        'INSERT INTO "REPL_TEXT" ("ACCOUNT", "STMT", "ARGS") '
        "VALUES ('hits', 'wl_hit_repl (?, ?)', json_build_array(ip, usr)::text); END $$",
    ],
    "mysql": [
        "CREATE TABLE wl_ip_cnt (ic_ip varchar(40) PRIMARY KEY, ic_cnt integer)",
        "CREATE TABLE wl_user (wu_user varchar(40) PRIMARY KEY, wu_cnt integer)",
        "CREATE PROCEDURE wl_hit_repl (IN ip varchar(40), IN usr varchar(40)) BEGIN "
        "UPDATE wl_ip_cnt SET ic_cnt = ic_cnt + 1 WHERE ic_ip = ip; "
        "IF ROW_COUNT() = 0 THEN INSERT INTO wl_ip_cnt (ic_ip, ic_cnt) VALUES (ip, 1); END IF; "
        "UPDATE wl_user SET wu_cnt = wu_cnt + 1 WHERE wu_user = usr; "
        "IF ROW_COUNT() = 0 THEN INSERT INTO wl_user (wu_user, wu_cnt) VALUES (usr, 1); END IF; END",
        "CREATE PROCEDURE wl_hit (IN ip varchar(40), IN usr varchar(40)) BEGIN "
        "CALL wl_hit_repl (ip, usr); "
        "INSERT INTO REPL_TEXT (ACCOUNT, STMT, ARGS) VALUES ('hits', 'wl_hit_repl (?, ?)', JSON_ARRAY(ip, usr)); END",
    ],
}


def test_the_references_replication_logger_sample_with_four_servers(make_server, jobs_sync, spark):
    """Four servers each publish `hits` and subscribe to the other three; every hit, wherever it is
    logged, reaches every server through REPL_TEXT calls of wl_hit_repl."""
    logs = [make_server(d, f"log{i}") for i, d in enumerate(["postgresql", "mysql", "postgresql", "mysql"], 1)]
    for server in logs:
        sql(server, *LOGGER_TABLES[server.dialect])
        run(server, "repl_publish ('hits', 'hits.log')")
    for server in logs:
        for other in logs:
            run(server, f"repl_server ('{other.name}', 'localhost:200{other.name[-1]}')")
        for other in logs:
            text = f"repl_subscribe ('{other.name}', 'hits')"
            if other is server:
                assert refused(server, text) == "publication and subscription servers have identical names."
            else:
                run(server, text + f"; repl_init_copy ('{other.name}', 'hits')")
    rng = random.Random(7)
    hits = 0
    for _round in range(3):
        for server in logs:
            with connections.connect(server) as conn:
                for _ in range(rng.randint(5, 12)):
                    ip, user = f"10.0.0.{rng.randint(1, 5)}", rng.choice(["ann", "bob", "cy", "dee"])
                    conn.cursor().execute("CALL wl_hit (?, ?)", ip, user)
                    hits += 1
        for server in logs:  # log_sync: every server syncs every subscription
            run(server, "repl_sync_all ()")
    for server in logs:
        assert value(server, "SELECT SUM(ic_cnt) FROM wl_ip_cnt") == hits
        assert value(server, "SELECT SUM(wu_cnt) FROM wl_user") == hits
    for server in logs[1:]:
        assert same(logs[0], server, "wl_ip_cnt")["equal"] and same(logs[0], server, "wl_user")["equal"]
    assert not SkippedTransaction.objects.exists()


T_PROC = (
    "CREATE PROCEDURE t_proc (i integer) LANGUAGE plpgsql AS $$ DECLARE d varchar; BEGIN "
    "SELECT dt INTO d FROM p_test WHERE id = i; d := d || d; UPDATE p_test SET dt = d WHERE id = i; END $$"
)
T_PROC_128 = (
    "CREATE OR REPLACE PROCEDURE t_proc (i integer) LANGUAGE plpgsql AS $$ DECLARE n integer := 128; BEGIN "
    "WHILE n > 5 LOOP INSERT INTO p_test (id, dt) VALUES (n, n::varchar); n := n - 1; END LOOP; END $$"
)
P_TEST = [
    "CREATE TABLE p_test (id integer, dt varchar(300), PRIMARY KEY (id))",
    *[f"INSERT INTO p_test VALUES ({i}, '{i}')" for i in range(1, 6)],
]


@pytest.mark.parametrize("capture", ["postgresql", "pgwal"])  # calls logged into the tables, or as WAL messages
def test_the_references_procedure_example_replicates_calls_and_a_new_definition(make_server, jobs_sync, capture):
    rep1 = make_server(capture, "rep1")
    rep2 = make_server("postgresql", "rep2")
    sql(rep1, *P_TEST, T_PROC)
    run(rep1, "REPL_PUBLISH ('proc', 'proc.log'); REPL_PUB_ADD ('proc', 'DB.DBA.t_proc', 3, 0, 3)")
    sql(rep2, *P_TEST)
    run(
        rep2,
        "REPL_SERVER ('rep1', '1111', 'localhost:1111');"
        "REPL_SUBSCRIBE ('rep1', 'proc', null, null, 'dba', 'dba');"
        "DB..REPL_INIT_COPY ('rep1', 'proc');"
        "SYNC_REPL()",
    )
    for i in range(1, 6):
        sql(rep1, f"CALL t_proc ({i})")
    run(rep2, "REPL_SYNC ('rep1', 'proc')")
    assert run(rep2, "repl_status ('rep1', 'proc')")[0].details["level"] == 5
    assert value(rep2, "SELECT COUNT(*) FROM p_test WHERE length(dt) = 2") == 5
    sql(rep1, T_PROC_128, "CALL t_proc (1)")
    run(rep2, "REPL_SYNC ('rep1', 'proc')")
    assert run(rep2, "repl_status ('rep1', 'proc')")[0].details["level"] == 7
    assert value(rep2, "SELECT COUNT(*) FROM p_test") == 128
    # The body's own changes were not logged (only the calls and the definition were).
    assert same(rep1, rep2, "p_test")["equal"]
    run(rep1, "REPL_PUB_REMOVE ('proc', 'DB.DBA.t_proc', 3)")
    assert _rows(rep1, "SELECT proname FROM pg_proc WHERE proname LIKE 't\\_proc%'") == [("t_proc",)]
    # The procedure is the publisher's own again: neither a new definition nor its calls are logged.
    sql(
        rep1,
        T_PROC.replace("CREATE", "CREATE OR REPLACE").replace("d := d || d", "d := 'x'"),
        "CALL t_proc (1)",
    )
    assert value(rep1, "SELECT dt FROM p_test WHERE id = 1") == "x"
    assert run(rep2, "REPL_SYNC ('rep1', 'proc')")[0].details["applied"] == 0


def test_a_procedures_calls_alone_replay_on_a_mariadb_subscriber_with_its_own_definition(make_server, jobs_sync):
    rep1 = make_server("postgresql", "rep1")
    rep3 = make_server("mysql", "rep3")
    sql(
        rep1,
        "CREATE TABLE notes (n integer PRIMARY KEY, note varchar(40))",
        "CREATE PROCEDURE t_note (n integer, note varchar) LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO notes VALUES (n, note); END $$",
    )
    sql(
        rep3,
        "CREATE TABLE notes (n int PRIMARY KEY, note varchar(40), here varchar(10))",
        "CREATE PROCEDURE t_note (IN n int, IN note varchar(40)) BEGIN "
        "INSERT INTO notes VALUES (n, UPPER(note), 'mariadb'); END",
    )
    run(rep1, "REPL_PUBLISH ('calls', 'calls.log'); REPL_PUB_ADD ('calls', 't_note', 3, 0, 1)")
    run(rep3, "REPL_SERVER ('rep1', 'rep1'); REPL_SUBSCRIBE ('rep1', 'calls'); REPL_INIT_COPY ('rep1', 'calls')")
    sql(rep1, "CALL t_note (1, 'first')", "CALL t_note (2, 'second')")
    run(rep3, "REPL_SYNC ('rep1', 'calls')")
    assert sorted(tuple(r) for r in _rows(rep3, "SELECT n, note, here FROM notes")) == [
        (1, "FIRST", "mariadb"),
        (2, "SECOND", "mariadb"),
    ]
    assert "PostgreSQL publisher" in refused(
        rep3, "REPL_PUBLISH ('mine', 'mine.log'); REPL_PUB_ADD ('mine', 't_note', 3, 0, 1)"
    )


def test_a_table_added_later_is_created_on_the_subscriber_before_its_rows_arrive(rep):
    rep1, rep2 = rep
    run(rep2, "REPL_SERVER ('rep1', 'rep1'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    sql(rep1, "CREATE TABLE later (k integer PRIMARY KEY, amount numeric(8, 3), at timestamp)")
    run(rep1, "REPL_PUB_ADD ('tbl', 'later', 2, 0, null)")
    sql(rep1, "INSERT INTO later VALUES (1, 1.125, '2026-11-23 10:00:00.5'), (2, NULL, NULL)")
    assert not _rows(rep2, "SHOW TABLES LIKE 'later'")
    run(rep2, "REPL_SYNC ('rep1', 'tbl')")
    assert same(rep1, rep2, "later")["equal"]


def test_a_subscriber_syncs_across_the_wrap_of_levels(rep):
    rep1, rep2 = rep
    names = trx_sql.log_names(dialects.get("postgresql"), "tbl")
    trx_capture.publisher_count(rep1, "tbl")  # what the publisher has captured is in its log (WAL mode reads it)
    sql(rep1, f'DELETE FROM "{names.tx}"', f'DELETE FROM "{names.log}"')
    sql(rep1, f'UPDATE "{names.seq}" SET "N" = {levels.REPL_WRAPAROUND - 1}')
    run(rep2, "REPL_SERVER ('rep1', 'rep1'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    assert run(rep2, "repl_status ('rep1', 'tbl')")[0].details["level"] == 0x7FFFFFFE
    for key in (2, 3, 4):
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'wrap {key}\')')
    outcome = run(rep2, "REPL_SYNC ('rep1', 'tbl')")[0]
    assert outcome.details["applied"] == 3 and outcome.details["level"] == 2
    subscriber = ReplSubscriber.objects.get(subscriber="rep2")
    assert (subscriber.level, subscriber.valid) == (2, 1)
    assert same(rep1, rep2, 'ab "cd')["equal"]


@pytest.mark.parametrize("dialect", ["mysql", "sqlite"])
def test_publishing_a_procedure_elsewhere_than_postgresql_is_refused_in_one_line_and_changes_nothing(
    make_server, dialect
):
    pub = make_server(dialect, "prp")
    if dialect == "mysql":
        sql(pub, "CREATE TABLE stock (id int PRIMARY KEY, qty int)", "CREATE PROCEDURE restock (IN n int) "
            "UPDATE stock SET qty = qty + n")  # fmt: skip
    run(pub, "REPL_PUBLISH ('calls', 'calls.log')")
    message = refused(pub, "REPL_PUB_ADD ('calls', 'restock', 3, 0, 3)")
    label = "MariaDB / MySQL" if dialect == "mysql" else "SQLite"
    assert message == (
        f"publishing procedures needs a PostgreSQL publisher; prp is {label}, which has no DDL triggers to keep a "
        "redefined procedure's calls logged (use REPL_TEXT there)"
    )
    assert not TpItem.objects.filter(server="prp").exists()
    assert AuditEntry.objects.filter(action="trx.pub_add", outcome="error").count() == 1


def test_a_sync_reads_its_next_window_while_it_applies_one_and_ends_as_the_publisher(
    make_server, jobs_sync, spark, monkeypatch
):
    rep1, rep2 = make_server("postgresql", "rep1"), make_server("mysql", "rep2")
    sql(rep1, *PUBLISHER_TABLES)
    run(rep1, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)")
    run(rep2, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl'); REPL_INIT_COPY ('rep1', 'tbl')")
    reads: list[trx_capture.ReadAhead] = []

    class Counted(trx_capture.ReadAhead):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            reads.append(self)

    monkeypatch.setattr(trx_sync, "ReadAhead", Counted)
    RegistryEntry.objects.update_or_create(key="repl_apply_batch", defaults={"value": "7"})
    for key in range(100, 150):  # 50 transactions: windows of 7, the last of 1
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'row {key}\')')
    sql(rep1, 'UPDATE "ab ""cd" SET "ef ""gh" = \'changed\' WHERE "id key" BETWEEN 120 AND 125')
    sql(rep1, 'DELETE FROM "ab ""cd" WHERE "id key" > 140')
    run(rep2, "REPL_SYNC ('rep1', 'tbl')")
    assert same(rep1, rep2, 'ab "cd')["equal"]
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd`') == 42
    # Every window after the first was read while the one before it applied: 52 transactions in 8 windows.
    assert [r.taken for r in reads] == [7]
    sub = ReplSubscriber.objects.get(subscriber="rep2")
    assert sub.valid and not sub.last_error and sub.halt_count is None

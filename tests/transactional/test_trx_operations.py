"""Transactional replication operations: purging the log (now and by the purger's schedule), grants,
new log segments, status functions, scheduled syncs, disconnecting, unsubscribing and unpublishing,
and a sync that loses its connection and retries."""

from __future__ import annotations

import threading
import time
from datetime import time as clock
from datetime import timedelta

import pytest
from django.utils import timezone

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import (
    AuditEntry,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    SkippedTransaction,
    TpGrant,
)
from replication_admin.statements import execute
from replication_admin.tasks import scheduler_round
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import sync as trx_sync
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import refused, run, sql, value


@pytest.fixture
def pair(make_server, jobs_sync):
    pub = make_server("postgresql", "pg1")
    sub = make_server("mysql", "my2")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct'); REPL_INIT_COPY ('pg1', 'acct')")
    return pub, sub


def log_size(pub) -> int:
    return value(pub, 'SELECT COUNT(*) FROM "RTTX_acct"')


def insert(pub, first: int, count: int) -> None:
    for key in range(first, first + count):
        sql(pub, f"INSERT INTO items VALUES ({key}, 'row {key}')")


def test_repl_purge_keeps_what_a_valid_subscriber_still_needs_and_invalidates_one_it_cut_off(pair, make_server, spark):
    pub, sub = pair
    late = make_server("sqlite", "lite3")
    run(late, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct'); REPL_INIT_COPY ('pg1', 'acct')")
    insert(pub, 1, 10)
    run(sub, "REPL_SYNC ('pg1', 'acct')")  # my2 is at the end, lite3 still at the start
    before = log_size(pub)
    assert run(pub, "REPL_PURGE ('pg1', 'acct')")[0].details["deleted"] == 1  # the creating statement only
    assert log_size(pub) == before - 1
    run(late, "REPL_SYNC ('pg1', 'acct')")
    assert same(pub, late, "items")["equal"]

    insert(pub, 11, 5)
    lagging = ReplSubscriber.objects.get(subscriber="lite3")
    trx_actions.do_mark_valid(Actor.command(), lagging, False)  # an invalid subscriber does not hold the log
    run(sub, "REPL_SYNC ('pg1', 'acct')")
    assert run(pub, "REPL_PURGE ('pg1', 'acct')")[0].details["deleted"] == 15
    assert log_size(pub) == 0
    trx_actions.do_mark_valid(Actor.command(), ReplSubscriber.objects.get(pk=lagging.pk), True)
    assert "have been purged" in refused(late, "REPL_SYNC ('pg1', 'acct')")
    run(late, "REPL_INIT_COPY ('pg1', 'acct')")
    trx_actions.do_mark_valid(Actor.command(), ReplSubscriber.objects.get(pk=lagging.pk), True)
    insert(pub, 16, 1)
    run(late, "REPL_SYNC ('pg1', 'acct')")
    assert same(pub, late, "items")["equal"]


def test_the_purger_runs_as_a_scheduled_event_from_its_settings(pair):
    pub, sub = pair
    account = ReplAccount.objects.get(server="pg1", account="acct")
    now = timezone.localtime()
    event = trx_actions.do_set_purger(Actor.command(), account, None, None, None, clock(3, 30))
    assert event is not None and event.sql == "REPL_PURGE ('pg1', 'acct')" and event.interval == 1440
    assert (event.start.hour, event.start.minute) == (3, 30) and event.start >= now
    weekly = trx_actions.do_set_purger(Actor.command(), account, None, None, 7, clock(1, 0))
    assert weekly.interval == 10080 and timezone.localtime(weekly.start).isoweekday() == 7
    insert(pub, 1, 3)
    run(sub, "REPL_SYNC ('pg1', 'acct')")
    ScheduledEvent.objects.filter(pk=weekly.pk).update(start=timezone.now() - timedelta(minutes=1))
    assert scheduler_round() == [weekly.name]
    assert log_size(pub) == 0
    account.refresh_from_db()
    assert account.last_purge_at is not None and account.purged_upto == account.count == 4
    assert trx_actions.do_set_purger(Actor.command(), account, None, None, None, None) is None
    assert not ScheduledEvent.objects.filter(name=weekly.name).exists()


def test_a_new_publication_purges_what_every_valid_subscriber_applied_every_few_minutes(pair):
    pub, sub = pair
    account = ReplAccount.objects.get(server="pg1", account="acct")
    event = ScheduledEvent.objects.get(name=trx_actions.purge_event_name(account))
    assert (event.sql, event.interval, account.purge_every) == ("REPL_PURGE ('pg1', 'acct')", 10, 10)
    insert(pub, 1, 6)
    run(sub, "REPL_SYNC ('pg1', 'acct')")
    insert(pub, 7, 2)  # not applied yet: kept
    ScheduledEvent.objects.filter(pk=event.pk).update(start=timezone.now() - timedelta(minutes=10))
    assert scheduler_round() == [event.name]
    assert log_size(pub) == 2
    account.refresh_from_db()
    assert account.purged_upto == ReplSubscriber.objects.get(subscriber="my2").count == 7
    after = ScheduledEvent.objects.get(pk=event.pk)  # the same event, its slots anchored where they were
    assert after.interval == 10 and after.last_completed is not None
    run(sub, "REPL_SYNC ('pg1', 'acct')")
    assert same(pub, sub, "items")["equal"]
    # "Never" is a choice too; every-N-minutes can be chosen back.
    assert trx_actions.do_set_purger(Actor.command(), account, None, None, None, None) is None
    assert not ScheduledEvent.objects.filter(name=event.name).exists()
    again = trx_actions.do_set_purger(Actor.command(), account, None, None, None, None, purge_every=3)
    assert again is not None and again.interval == 3 and again.start > timezone.now()


def test_grants_new_log_status_functions_schedules_and_teardown(pair, make_server):
    pub, sub = pair
    other = make_server("mysql", "my3")
    run(pub, "REPL_GRANT ('acct', 'my2')")
    assert TpGrant.objects.filter(acct="acct", grantee="my2").exists()
    assert "no grant" in refused(other, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct')")
    run(pub, "REPL_REVOKE ('acct', 'my2')")
    assert not TpGrant.objects.exists()
    assert "no grant" in refused(pub, "REPL_REVOKE ('acct', 'my2')")

    insert(pub, 1, 2)
    assert "from level 3" in run(pub, "REPL_NEW_LOG ('acct', 'acct-2.log')")[0].message
    account = ReplAccount.objects.get(account="acct")
    assert (account.log_file, account.log_start_level) == ("acct-2.log", 3)

    assert run(sub, "REPL_THIS_SERVER ()")[0].message == "my2"
    run(sub, "SUB_SCHEDULE ('pg1', 'acct', 5)")
    event = ScheduledEvent.objects.get(name="repl_pg1_acct@my2")
    assert (event.sql, event.server, event.interval) == ("REPL_SYNC ('pg1', 'acct')", "my2", 5)
    assert scheduler_round() == [event.name]  # runs on my2, the subscriber
    assert same(pub, sub, "items")["equal"]
    stat = run(sub, "REPL_STAT ()")[0].details["subscriptions"]
    assert stat == [{"server": "pg1", "account": "acct", "level": 3, "stat": ReplSubscriber.OFF, "valid": 1}]

    run(sub, "SYNC_REPL ()")
    assert run(sub, "REPL_STATUS ('pg1', 'acct')")[0].details["stat"] == ReplSubscriber.IN_SYNC
    run(sub, "REPL_DISCONNECT ('pg1')")
    subscription = ReplSubscriber.objects.get(subscriber="my2")
    assert subscription.state == ReplSubscriber.DISCONNECTED and not subscription.follow
    run(sub, "SUB_SCHEDULE ('pg1', 'acct', 0)")
    assert not ScheduledEvent.objects.filter(name="repl_pg1_acct@my2").exists()
    run(sub, "REPL_UNSUBSCRIBE ('pg1', 'acct', null)")
    assert not ReplSubscriber.objects.exists()
    assert value(sub, "SELECT COUNT(*) FROM items") == 2  # the copy stays

    run(pub, "REPL_UNPUBLISH ('acct')")
    assert not ReplAccount.objects.exists()
    sql(pub, "INSERT INTO items VALUES (99, 'after')")  # no trigger logs it any more
    tables = {r[0] for r in _rows(pub, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'RT%'")}
    assert tables == set()


def _rows(server, query: str) -> list:
    with connections.connect(server) as conn:
        return [tuple(r) for r in conn.cursor().execute(query).fetchall()]


def test_a_sync_whose_connection_is_killed_retries_and_applies_everything_once(make_server, jobs_sync):
    pub = make_server("postgresql", "pg1")
    sub = make_server("postgresql", "pg2")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct'); REPL_INIT_COPY ('pg1', 'acct')")
    insert(pub, 1, 5)
    blocker = connections.open_connection(sub, autocommit=False)
    blocker.cursor().execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
    killed: list[int] = []

    def kill_the_waiting_apply() -> None:
        with connections.connect(sub) as admin:
            cursor = admin.cursor()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not killed:
                rows = cursor.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                ).fetchall()
                for (pid,) in rows:
                    cursor.execute("SELECT pg_terminate_backend(?)", [pid])
                    killed.append(pid)
                time.sleep(0.05)
        blocker.rollback()  # the next attempt finds the table free

    thread = threading.Thread(target=kill_the_waiting_apply)
    thread.start()
    outcome = trx_sync.sync_once(ReplSubscriber.objects.get(subscriber="pg2"))
    thread.join()
    blocker.close()
    assert killed, "the apply never waited for the lock"
    assert outcome.applied == 5 and outcome.skipped == 0
    assert not SkippedTransaction.objects.exists()
    assert same(pub, sub, "items")["equal"]


def test_repl_sched_init_puts_back_the_purgers_the_catalog_calls_for(make_server):
    pub = make_server("sqlite", "spub")
    sql_run = execute(Actor.command(), "REPL_PUBLISH ('acct', 'acct.log')", context=pub)
    assert sql_run[-1].ok, sql_run[-1].message
    account = ReplAccount.objects.get(server="spub", account="acct")
    name = trx_actions.purge_event_name(account)
    ScheduledEvent.objects.filter(name=name).delete()
    outcome = execute(Actor.command(), "REPL_SCHED_INIT ()")[-1]
    assert outcome.ok and outcome.details["created"] == [name]
    restored = ScheduledEvent.objects.get(name=name)
    assert restored.sql == "REPL_PURGE ('spub', 'acct')" and restored.interval == account.purge_every
    again = execute(Actor.command(), "repl_sched_init ()")[-1]
    assert again.ok and again.message == "every replication event was in place"
    assert AuditEntry.objects.filter(action="trx.sched_init").count() == 2

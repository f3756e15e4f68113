"""A transaction a subscriber cannot apply: the subscription halts there and heals by itself once the cause is gone
(on_error = halt), or the transaction is skipped as a gap whose keys are repaired from the publisher's rows
(on_error = skip); a person may skip a halted transaction. Live PostgreSQL publisher, MariaDB subscriber."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from replication_admin import tasks
from replication_admin.console.status_api import trx_rows
from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.engine import levels
from replication_admin.models import Alert, AuditEntry, JobRun, ReplSubscriber, SkippedTransaction
from replication_admin.servers.actions import do_register_server, do_update_server
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import sync as trx_sync
from replication_admin.transactional.apply import LevelMoved, Target, skip_transaction
from replication_admin.transactional.capture import publisher_count, read_transactions
from replication_admin.transactional.lookups import server_named
from replication_admin.transactional.positions import subscriber_position
from tests.conftest import server_data
from tests.transactional.test_trx_replication import _rows, refused, run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

TARGET = "hsub <- hpub/acct"


def rows(server) -> list[tuple]:
    with connections.connect(server) as conn:
        return sorted(tuple(r) for r in conn.cursor().execute("SELECT id, name FROM items").fetchall())


def content(server) -> str:
    """The table's content as a hash of its sorted rows."""
    return hashlib.sha256(repr(rows(server)).encode()).hexdigest()


def status_row(subscriber: str) -> dict:
    for row in trx_rows(timezone.now()):
        for sub in row["subscribers"]:
            if sub["subscriber"] == subscriber:
                return sub
    raise AssertionError(f"{subscriber} is not in the status rows")


def state_of(subscriber: str) -> str:
    return status_row(subscriber)["state"]


def subscribed(make_server) -> tuple:
    """hpub (PostgreSQL, trigger capture) publishes items; hsub (MariaDB) has its initial copy."""
    pub, sub = make_server("postgresql", "hpub"), make_server("mysql", "hsub")
    sql(
        pub,
        "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))",
        *[f"INSERT INTO items VALUES ({i}, 'row {i}')" for i in range(1, 6)],
    )
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('hpub', 'hpub'); REPL_SUBSCRIBE ('hpub', 'acct'); REPL_INIT_COPY ('hpub', 'acct')")
    return pub, sub


def open_halt_alerts() -> int:
    return Alert.objects.filter(kind=Alert.Kind.APPLY_HALTED, target=TARGET, resolved_at__isnull=True).count()


def test_a_revoked_insert_halts_the_subscription_until_the_grant_returns_then_it_heals_by_itself(
    make_server, jobs_sync, spark, monkeypatch
):
    pub, sub = subscribed(make_server)
    # The subscriber replays as a MariaDB login of its own; root ("hroot", the same database) changes its grants.
    root = do_register_server(Actor.command(), server_data("mysql", "hroot", sub.database))
    user, password = f"replay_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    logins = [f"'{user}'@'{host}'" for host in ("%", "localhost")]
    for login in logins:
        sql(root, f"CREATE USER {login} IDENTIFIED BY '{password}'")
        sql(root, f"GRANT SELECT, UPDATE, DELETE ON `{sub.database}`.* TO {login}")
        sql(root, f"GRANT INSERT ON `{sub.database}`.`items` TO {login}")
    try:
        do_update_server(Actor.command(), sub, replace(server_data("mysql", "hsub", sub.database), user=user,
                                                       password=password))  # fmt: skip
        run(sub, "SYNC_REPL()")
        monkeypatch.setattr(trx_sync, "HALT_RETRY_FIRST", 0.2)  # the backoff's first step, for a short test
        pk = ReplSubscriber.objects.get(subscriber="hsub").pk
        start = ReplSubscriber.objects.get(pk=pk).count

        writing = threading.Event()
        written: list[int] = []

        def writer() -> None:
            with connections.connect(pub) as conn:
                key = 100
                while not writing.is_set():
                    conn.cursor().execute(f"INSERT INTO items VALUES ({key}, 'written {key}')")
                    written.append(key)
                    key += 1
                    time.sleep(0.15)

        seen: dict = {}
        phase = ["warm"]
        deadline = time.monotonic() + 90

        def step() -> bool:
            """The follower's stop(): moves the test on, phase by phase, from the follower's own thread."""
            s = ReplSubscriber.objects.get(pk=pk)
            if phase[0] == "warm" and s.count >= start + 3:
                for login in logins:
                    sql(root, f"REVOKE INSERT ON `{sub.database}`.`items` FROM {login}")
                seen["revoked_at_count"] = s.count
                phase[0] = "revoked"
            elif phase[0] == "revoked" and s.halt_count is not None:
                seen["halt"] = (s.halt_count, s.halt_level, s.halt_error, list(s.halt_keys), s.count)
                seen["alerts"] = open_halt_alerts()
                seen["state"] = state_of("hsub")
                # A sync job of a halted subscription tries at once, fails with the cause, and moves nothing.
                seen["job_error"] = refused(sub, "REPL_SYNC ('hpub', 'acct')")
                phase[0] = "halted"
            elif phase[0] == "halted" and s.halt_attempts >= 4:
                position = subscriber_position(sub, "hpub", "acct")
                seen["held"] = (s.count, position[1] if position else None, s.halt_count)
                seen["gaps"] = SkippedTransaction.objects.count()
                # Granted back on the database: MariaDB reads a database's grants when a session starts, so only
                # a retry on a new session sees it (one kept from before would be refused again).
                for login in logins:
                    sql(root, f"GRANT INSERT ON `{sub.database}`.* TO {login}")
                phase[0] = "granted"
            elif phase[0] == "granted" and s.halt_count is None:
                writing.set()
                phase[0] = "healed"
            elif phase[0] == "healed" and s.count == publisher_count(pub, "acct"):
                return True
            return time.monotonic() > deadline

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            trx_sync.follow_loop(step, interval=0.05)
        finally:
            writing.set()
            thread.join()
        assert phase[0] == "healed", (phase, seen)

        halt_count, halt_level, halt_error, halt_keys, count_at_halt = seen["halt"]
        # Halted AT the first transaction that failed: every one before it is applied, none after it.
        assert halt_count == count_at_halt + 1 and count_at_halt >= seen["revoked_at_count"]
        assert halt_level == levels.level_of(halt_count)
        assert "hsub halted at level" in halt_error and "INSERT command denied" in halt_error
        assert "\n" not in halt_error
        assert len(halt_keys) == 1 and halt_keys[0]["table"] == "items" and halt_keys[0]["key"][0] >= 100
        assert seen["alerts"] == 1 and seen["state"] == "failing"
        assert "INSERT command denied" in seen["job_error"] and "\n" not in seen["job_error"]
        # Over several further tries (the follower's and the job's) the level stayed just before the halt.
        assert seen["held"] == (count_at_halt, count_at_halt, halt_count) and seen["gaps"] == 0

        s = ReplSubscriber.objects.get(pk=pk)
        assert s.halt_count is None and s.halt_keys == [] and s.retry_at is None and s.halt_attempts == 0
        assert open_halt_alerts() == 0
        assert Alert.objects.filter(kind=Alert.Kind.APPLY_HALTED, target=TARGET, resolved_at__isnull=False).exists()
        assert not SkippedTransaction.objects.exists()
        assert rows(sub)[-1][0] == written[-1] and content(sub) == content(pub)
    finally:
        for login in logins:
            sql(root, f"DROP USER IF EXISTS {login}")


def test_with_on_error_skip_the_gap_is_recorded_and_repairing_its_keys_makes_the_copies_equal(
    make_server, jobs_sync, spark
):
    pub, sub = subscribed(make_server)
    ReplSubscriber.objects.filter(subscriber="hsub").update(on_error="skip")
    sql(sub, "ALTER TABLE items ADD CONSTRAINT small CHECK (id < 100)")
    sql(
        pub,
        "INSERT INTO items VALUES (6, 'six')",
        "INSERT INTO items VALUES (500, 'refused by the subscriber')",
        "UPDATE items SET name = 'renamed' WHERE id = 2",
    )
    with connections.connect(pub, autocommit=False) as conn:  # one transaction: a key change and an insert
        conn.cursor().execute("UPDATE items SET id = 600 WHERE id = 3")
        conn.cursor().execute("INSERT INTO items VALUES (700, 'seven hundred')")
        conn.commit()
    sql(pub, "INSERT INTO items VALUES (7, 'seven')")
    outcome = run(sub, "REPL_SYNC ('hpub', 'acct')")[0]
    assert outcome.details["applied"] == 3 and outcome.details["skipped"] == 2
    gaps = list(SkippedTransaction.objects.order_by("count"))
    assert [g.skipped_by for g in gaps] == ["", ""] and all(g.repaired_at is None for g in gaps)
    assert gaps[0].keys == [{"table": "items", "key": [500]}]
    assert sorted(k["key"][0] for k in gaps[1].keys) == [3, 600, 700]
    assert Alert.objects.filter(kind=Alert.Kind.TRANSACTION_SKIPPED, target=TARGET, resolved_at__isnull=True).exists()
    assert state_of("hsub") == "failing" and content(sub) != content(pub)

    # No false gap: a skip whose level is no longer where it expected records nothing.
    sub_server, pub_server = server_named("hsub"), server_named("hpub")
    count = subscriber_position(sub_server, "hpub", "acct")[1]
    sql(pub, "INSERT INTO items VALUES (8, 'eight')")
    assert publisher_count(pub_server, "acct") == count + 1  # numbers the new transaction
    txn = read_transactions(pub_server, "acct", count, count + 1)[0]
    with pytest.raises(LevelMoved):
        skip_transaction(Target(sub_server, "hpub", "acct"), txn, count - 1, "stale", [])
    assert not SkippedTransaction.objects.filter(count=txn.count).exists()
    assert subscriber_position(sub_server, "hpub", "acct")[1] == count

    sql(sub, "ALTER TABLE items DROP CONSTRAINT small")
    run(sub, "REPL_SYNC ('hpub', 'acct')")
    assert content(sub) != content(pub)  # the skipped rows are still missing or stale
    outcome = run(sub, "REPL_REPAIR_KEYS ('hpub', 'acct')")[0]
    assert "repaired 4 key(s) of 2 gap(s)" in outcome.message
    assert content(sub) == content(pub) and value(sub, "SELECT COUNT(*) FROM items WHERE id = 3") == 0
    assert SkippedTransaction.objects.filter(repaired_at__isnull=True).count() == 0
    assert not Alert.objects.filter(kind=Alert.Kind.TRANSACTION_SKIPPED, target=TARGET, resolved_at__isnull=True)
    audit = AuditEntry.objects.get(action="trx.repair_keys")
    assert audit.outcome == AuditEntry.Outcome.OK and {"table": "items", "key": [600]} in audit.detail["keys"]
    assert state_of("hsub") == "ok"
    assert "has no unrepaired gap" in refused(sub, "REPL_REPAIR_KEYS ('hpub', 'acct')")


def test_a_person_skips_the_halted_transaction_with_a_statement_and_the_level_moves_by_exactly_one(
    make_server, jobs_sync, spark
):
    pub, sub = subscribed(make_server)
    assert "is not halted" in refused(sub, "REPL_SKIP_TRANSACTION ('hpub', 'acct')")
    sql(sub, "ALTER TABLE items ADD CONSTRAINT small CHECK (id < 100)")
    sql(
        pub,
        "INSERT INTO items VALUES (6, 'six')",
        "INSERT INTO items VALUES (500, 'refused')",
        "INSERT INTO items VALUES (7, 'seven')",
    )
    message = refused(sub, "REPL_SYNC ('hpub', 'acct')")
    assert "halted at level" in message and "small" in message.lower()
    s = ReplSubscriber.objects.get(subscriber="hsub")
    before = s.count
    assert s.halt_count == before + 1 and s.halt_keys == [{"table": "items", "key": [500]}]
    assert value(sub, "SELECT COUNT(*) FROM items WHERE id = 6") == 1  # the one before it was applied
    assert state_of("hsub") == "failing"

    outcome = run(sub, "REPL_SKIP_TRANSACTION ('hpub', 'acct', 'hsub')")[0]
    assert "skipped level" in outcome.message
    s.refresh_from_db()
    assert s.count == before + 1 and s.halt_count is None and open_halt_alerts() == 0
    assert subscriber_position(sub, "hpub", "acct")[1] == before + 1
    assert value(sub, "SELECT COUNT(*) FROM items WHERE id = 7") == 0  # nothing after it was applied
    gap = SkippedTransaction.objects.get()
    assert gap.count == before + 1 and gap.skipped_by == Actor.command().username
    assert gap.keys == [{"table": "items", "key": [500]}] and gap.repaired_at is None
    audit = AuditEntry.objects.get(action="trx.skip_transaction", outcome=AuditEntry.Outcome.OK)
    assert audit.detail["keys"] == [{"table": "items", "key": [500]}] and audit.detail["count"] == before + 1
    assert "is not halted" in refused(sub, "REPL_SKIP_TRANSACTION ('hpub', 'acct')")

    run(sub, "REPL_SYNC ('hpub', 'acct')")
    assert value(sub, "SELECT COUNT(*) FROM items WHERE id = 7") == 1
    assert state_of("hsub") == "failing"  # the gap is not repaired yet


def test_a_halted_subscription_no_follower_serves_is_retried_from_the_scheduler_once_its_backoff_has_passed(
    make_server, jobs_sync, spark
):
    pub, sub = subscribed(make_server)
    sql(sub, "ALTER TABLE items ADD CONSTRAINT small CHECK (id < 100)")
    sql(pub, "INSERT INTO items VALUES (500, 'refused')", "INSERT INTO items VALUES (6, 'six')")
    refused(sub, "REPL_SYNC ('hpub', 'acct')")
    s = ReplSubscriber.objects.get(subscriber="hsub")
    before = s.count
    assert s.halt_attempts == 1 and s.retry_at > timezone.now() and not s.follow
    assert trx_actions.retry_due_halts() == []  # its backoff has not passed

    ReplSubscriber.objects.filter(pk=s.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    [job] = trx_actions.retry_due_halts()
    assert JobRun.objects.get(pk=job).state == JobRun.State.FAILED  # still refused: the halt stays
    s.refresh_from_db()
    assert s.halt_attempts == 2 and s.count == before and s.halt_count == before + 1
    assert trx_actions.retry_due_halts() == []  # the next try waits for the longer backoff

    sql(sub, "ALTER TABLE items DROP CONSTRAINT small")
    ReplSubscriber.objects.filter(pk=s.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    tasks.scheduler_round()
    s.refresh_from_db()
    assert s.halt_count is None and s.count == before + 2 and open_halt_alerts() == 0
    assert content(sub) == content(pub) and not SkippedTransaction.objects.exists()
    assert JobRun.objects.filter(kind="trx_sync", state=JobRun.State.SUCCEEDED).count() == 1


def test_repairing_the_keys_of_a_gap_works_on_a_postgresql_subscriber_with_hostile_names(make_server, jobs_sync, spark):
    pub, sub = make_server("postgresql", "hpub"), make_server("postgresql", "hsub")
    table = '"ab ""cd"'
    sql(
        pub,
        f'CREATE TABLE {table} ("id key" integer, "ef ""gh" varchar(50), PRIMARY KEY ("id key"))',
        f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two')",
    )
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'DB.DBA.ab \"cd', 2, 0, null)")
    run(sub, "REPL_SERVER ('hpub', 'hpub'); REPL_SUBSCRIBE ('hpub', 'acct'); REPL_INIT_COPY ('hpub', 'acct')")
    ReplSubscriber.objects.filter(subscriber="hsub").update(on_error="skip")
    sql(sub, f'ALTER TABLE {table} ADD CONSTRAINT "small ""one""" CHECK ("id key" < 100)')
    sql(
        pub,
        f"INSERT INTO {table} VALUES (500, 'refused')",
        f"""UPDATE {table} SET "ef ""gh" = 'x' WHERE "id key" = 1""",
    )
    sql(pub, f'UPDATE {table} SET "id key" = 600 WHERE "id key" = 2')
    assert run(sub, "REPL_SYNC ('hpub', 'acct')")[0].details["skipped"] == 2
    assert [g.keys for g in SkippedTransaction.objects.order_by("count")] == [
        [{"table": 'ab "cd', "key": [500]}], [{"table": 'ab "cd', "key": [2]}, {"table": 'ab "cd', "key": [600]}]
    ]  # fmt: skip

    def both() -> tuple[list, list]:
        query = f'SELECT "id key", "ef ""gh" FROM {table} ORDER BY 1'
        return [tuple(r) for r in _rows(pub, query)], [tuple(r) for r in _rows(sub, query)]

    published, copied = both()
    assert published != copied
    sql(sub, f'ALTER TABLE {table} DROP CONSTRAINT "small ""one"""')
    run(sub, "REPL_REPAIR_KEYS ('hpub', 'acct', 'hsub')")
    published, copied = both()
    assert published == copied == [(1, "x"), (500, "refused"), (600, "two")]
    row = status_row("hsub")
    assert row["state"] == "ok", row["last_error"]

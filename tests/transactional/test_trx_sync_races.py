"""REPL_SYNC jobs racing the in-sync follower and each other under a writer: each waits behind the apply that
holds the subscription (or merges what it applied), none fails, and the copies end equal."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun
from replication_admin.statements import execute
from replication_admin.transactional import sync as trx_sync
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

WRITES = 120
SYNCERS = 3
SYNCS_EACH = 4


def test_sync_jobs_racing_the_follower_and_each_other_all_succeed_and_the_copies_are_equal(
    transactional_db, make_server, jobs_sync, spark
):
    pub = make_server("postgresql", "race1")
    sub = make_server("mysql", "race2")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))", "INSERT INTO items VALUES (0, 'first')")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('race1', 'race1'); REPL_SUBSCRIBE ('race1', 'acct'); REPL_INIT_COPY ('race1', 'acct');"
             "SYNC_REPL ()")  # fmt: skip
    before = JobRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    stop = threading.Event()
    written = threading.Event()
    failures: list[str] = []

    def follower() -> None:
        try:
            trx_sync.follow_loop(stop.is_set, interval=0.02)
        finally:
            connection.close()

    def writer() -> None:
        try:
            with connections.connect(pub) as conn:
                for key in range(1, WRITES + 1):
                    conn.cursor().execute("INSERT INTO items VALUES (?, ?)", key, f"row {key}")
                    if key % 3 == 0:
                        conn.cursor().execute("UPDATE items SET name = ? WHERE id = ?", f"changed {key}", key - 1)
        finally:
            written.set()

    def syncer() -> None:
        try:
            for _ in range(SYNCS_EACH):
                for outcome in execute(Actor.command(), "REPL_SYNC ('race1', 'acct')", context=sub):
                    if not outcome.ok:
                        failures.append(outcome.message)
        finally:
            connection.close()

    threads = [threading.Thread(target=follower), threading.Thread(target=writer)]
    threads += [threading.Thread(target=syncer) for _ in range(SYNCERS)]
    for thread in threads:
        thread.start()
    for thread in threads[2:]:
        thread.join()
    written.wait()
    run(sub, "REPL_SYNC ('race1', 'acct')")  # whatever the follower had not taken yet
    stop.set()
    threads[0].join()
    threads[1].join()

    syncs = JobRun.objects.filter(kind="trx_sync", pk__gt=before)
    assert syncs.count() == SYNCERS * SYNCS_EACH + 1
    assert not failures and set(syncs.values_list("state", flat=True)) == {JobRun.State.SUCCEEDED}, [
        (j.pk, j.state, j.error) for j in syncs.exclude(state=JobRun.State.SUCCEEDED)
    ]
    assert value(sub, "SELECT COUNT(*) FROM items") == WRITES + 1
    assert same(pub, sub)["equal"]

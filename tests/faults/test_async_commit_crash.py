"""An apply on a PostgreSQL subscriber commits without waiting for its flush (REPLADMIN_APPLY_ASYNC_COMMIT, as
PostgreSQL's own apply workers do): a crash of the subscriber right after it takes the rows and the level back
together, the publisher's log keeps what the subscriber had not made durable (a purge meanwhile stops short of it),
and the next sync applies it again: nothing lost, nothing doubled. A WAL publication's straight-from-the-slot apply,
whose log counts what it applied without storing it, makes its applies durable first: the same crash loses nothing.

The subscriber is a PostgreSQL cluster of the test's own whose WAL writer is stopped (SIGSTOP) while it applies,
with nothing else flushing (no autovacuum, no background writes, no checkpoint), so the crash (the WAL writer
killed: the postmaster ends every server process at once) comes before any flush; the test checks that the flush
had not happened."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.models import ReplAccount, ReplSubscriber, Server
from replication_admin.servers.actions import ServerData, do_register_server
from replication_admin.transactional.actions import do_purge
from replication_admin.transactional.capture import oldest_count
from replication_admin.transactional.positions import subscriber_position
from tests.dev_env import free_ports
from tests.pg_cluster import BIN, _as_postgres, own_cluster
from tests.transactional.test_trx_replication import run, sql
from tests.transactional.test_wal_direct import log_of

pytestmark = [pytest.mark.live_db, pytest.mark.spark]

# Nothing on the subscriber's cluster flushes the WAL but the WAL writer (stopped while the test applies) and the
# commits that wait for their flush (none between the apply and the crash).
QUIET = {
    "autovacuum": "off",
    "bgwriter_lru_maxpages": "0",
    "checkpoint_timeout": "1h",
    "max_wal_size": "4GB",
    "restart_after_crash": "off",
}


class Crashable:
    """The test's own PostgreSQL cluster: stop its WAL writer, crash it, start it again."""

    def __init__(self, port: int, data: str) -> None:
        self.port, self.data = port, data
        self.writer: int | None = None

    def query(self, text: str):
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="csub", autocommit=True) as c:
            return c.execute(text).fetchone()

    def stop_wal_writer(self) -> None:
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres") as c:
            self.writer = int(
                c.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'").fetchone()[0]
            )
        os.kill(self.writer, signal.SIGSTOP)

    def unflushed(self) -> bool:
        """Whether WAL was written that is not flushed yet (the applies' commits still in the server's memory)."""
        return bool(self.query("SELECT pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()")[0])

    def crash(self) -> None:
        """Kill the stopped WAL writer: the postmaster ends every other server process at once (as `pg_ctl stop -m
        immediate` does) and, with restart_after_crash off, stays down. What only the WAL writer would have flushed is
        gone."""
        assert self.writer is not None
        os.kill(self.writer, signal.SIGKILL)
        self.writer = None
        pid_file = Path(self.data) / "postmaster.pid"
        deadline = time.monotonic() + 60
        while pid_file.exists():
            assert time.monotonic() < deadline, "the crashed cluster did not stop"
            time.sleep(0.1)

    def start(self) -> None:
        log = str(Path(self.data).parent / "log")
        subprocess.run(_as_postgres(str(BIN / "pg_ctl"), "-D", self.data, "-l", log, "-w", "start"), check=True)


@pytest.fixture
def crashable() -> Iterator[Crashable]:
    port = free_ports(1)
    with own_cluster(port, QUIET) as data:
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True) as c:
            c.execute("CREATE DATABASE csub")
        cluster = Crashable(port, data)
        try:
            yield cluster
        finally:
            if cluster.writer is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(cluster.writer, signal.SIGCONT)


def contents(server: Server) -> tuple[int, str]:
    """The rows' count and a hash of them in key order."""
    with connections.connect(server) as conn:
        rows = conn.cursor().execute("SELECT id, name FROM items ORDER BY id").fetchall()
    return len(rows), hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()


def write(pub: Server, first: int, count: int) -> None:
    with connections.connect(pub, autocommit=False) as conn:
        cursor = conn.cursor()
        for n in range(first, first + count):
            cursor.execute("INSERT INTO items (id, name) VALUES (?, ?)", n, f"row {n}")
            if n % 3 == 0:
                cursor.execute("UPDATE items SET name = 'changed' WHERE id = ?", n - 1)
            conn.commit()


def subscribed(make_server, crashable: Crashable, publisher: str) -> tuple[Server, Server, ReplSubscriber]:
    pub = make_server(publisher, "cpub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    # Named after the port: a process remembers the servers whose level table it made by name.
    data = ServerData(name=f"csub{crashable.port}", dialect="postgresql", host="127.0.0.1", port=crashable.port, database="csub",
                      user="postgres", password="")  # fmt: skip
    sub = do_register_server(Actor.command(), data)
    run(sub, "REPL_SERVER ('cpub', 'cpub'); REPL_SUBSCRIBE ('cpub', 'acct'); REPL_INIT_COPY ('cpub', 'acct')")
    write(pub, 1, 10)
    run(sub, "REPL_SYNC ('cpub', 'acct')")
    return pub, sub, ReplSubscriber.objects.get(server="cpub", account="acct", subscriber=sub.name)


def test_a_subscriber_crashed_before_its_applies_were_flushed_gets_them_again_and_the_log_kept_them(
    make_server, crashable, jobs_sync, spark, settings
):
    settings.APPLY_ASYNC_COMMIT = True
    pub, sub, subscription = subscribed(make_server, crashable, "postgresql")
    account = ReplAccount.objects.get(server="cpub", account="acct")
    do_purge(Actor.command(), account)  # the subscriber reachable: everything it applied is made durable, then purged
    durable = ReplAccount.objects.get(pk=account.pk).purged_upto
    assert durable == ReplSubscriber.objects.get(pk=subscription.pk).count
    assert subscriber_position(sub, "cpub", "acct")[1] == durable

    crashable.stop_wal_writer()
    write(pub, 11, 12)
    run(sub, "REPL_SYNC ('cpub', 'acct')")
    applied = ReplSubscriber.objects.get(pk=subscription.pk).count
    assert applied > durable
    assert contents(sub) == contents(pub)  # visible on the subscriber ...
    assert crashable.unflushed()  # ... and not flushed yet

    crashable.crash()
    # Down: the purge cannot make the subscriber's level durable, so it keeps the log where the last purge left it.
    do_purge(Actor.command(), ReplAccount.objects.get(pk=account.pk))
    assert ReplAccount.objects.get(pk=account.pk).purged_upto == durable
    assert oldest_count(pub, "acct") == durable + 1

    crashable.start()
    after_crash = subscriber_position(sub, "cpub", "acct")[1]
    assert durable <= after_crash < applied  # the crash took the last applies back, rows and level together
    assert contents(sub)[0] < contents(pub)[0]
    outcome = run(sub, "REPL_SYNC ('cpub', 'acct')")[-1]
    assert outcome.ok
    assert (
        subscriber_position(sub, "cpub", "acct")[1] == applied == ReplSubscriber.objects.get(pk=subscription.pk).count
    )
    assert contents(sub) == contents(pub)  # nothing lost, nothing doubled (the keys are the table's primary key)

    do_purge(Actor.command(), ReplAccount.objects.get(pk=account.pk))  # reachable again: purged up to its level
    assert ReplAccount.objects.get(pk=account.pk).purged_upto == applied


def test_a_straight_from_the_slot_apply_is_durable_before_the_log_counts_it(make_server, crashable, jobs_sync, spark,
                                                                            settings):  # fmt: skip
    settings.APPLY_ASYNC_COMMIT = True
    pub, sub, subscription = subscribed(make_server, crashable, "pgwal")
    crashable.stop_wal_writer()
    write(pub, 11, 12)
    run(sub, "REPL_SYNC ('cpub', 'acct')")  # the only subscriber, current: applied straight from the slot
    applied = ReplSubscriber.objects.get(pk=subscription.pk).count
    count, stored, _entries = log_of(pub)
    assert applied == count and stored < count - 12  # the twelve were counted, not stored

    crashable.crash()  # the WAL writer still stopped: only the apply's own confirmation flushed
    crashable.start()
    # The log counted those transactions without storing them: they had been made durable on the subscriber first.
    assert subscriber_position(sub, "cpub", "acct")[1] == applied
    assert contents(sub) == contents(pub)

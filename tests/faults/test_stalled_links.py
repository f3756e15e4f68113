"""A link that stops forwarding without closing holds nothing for ever.

The TCP proxy of tests/faults/proxy.py keeps its connections open and forwards nothing (its kernel still
acknowledges, so TCP keepalives and TCP_USER_TIMEOUT do not fire): a statement waiting on such a link fails once
the server has sent nothing for REPLADMIN_READ_TIMEOUT seconds (MariaDB Connector/ODBC's READ_TIMEOUT, the
control plane's read watchdog for psqlODBC), as a lost connection; the job retries it, and once the link forwards
again the retry succeeds with every transaction applied once. Bounds are small settings here; nothing measures
time (the assertions are on outcomes and on the jobs' logs)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from replication_admin.core import connections, native_copy
from replication_admin.models import JobRun, SkippedTransaction
from tests.bidir.test_bidir_sync import COLUMNS, same
from tests.faults.test_network_blips import last_job, retried, run
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = [pytest.mark.live_db]

DIALECTS = ["mysql", "postgresql"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_statement_on_a_stalled_link_fails_as_a_lost_connection_and_the_next_connection_works(
    proxied_server, settings, dialect
):
    server, proxy = proxied_server(dialect, f"{dialect[:2]}_stall")
    settings.READ_TIMEOUT = 2
    with pytest.raises(connections.ConnectionLost) as caught, connections.connect(server) as conn:
        conn.cursor().execute("CREATE TABLE t (id integer PRIMARY KEY)")
        proxy.stall()
        conn.cursor().execute("INSERT INTO t VALUES (1)")
    assert connections.is_connection_fault(caught.value)
    assert str(caught.value).startswith(f"server {server.name} (127.0.0.1:{proxy.port}): lost connection ("), caught
    proxy.resume()
    with connections.connect(server) as conn:
        conn.cursor().execute("INSERT INTO t VALUES (2)")
        ids = sorted(r[0] for r in conn.cursor().execute("SELECT id FROM t").fetchall())
    assert ids in ([2], [1, 2])  # the stalled INSERT may have reached the server; it was never applied twice


def publish_rows(pub, first: int, count: int) -> None:
    """`count` publisher transactions of one row each."""
    with connections.connect(pub, autocommit=False) as conn:
        cursor = conn.cursor()
        for n in range(first, first + count):
            cursor.execute("INSERT INTO items (id, name) VALUES (?, ?)", n, f"row {n}")
            conn.commit()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_sync_whose_subscriber_link_stalls_fails_its_attempt_then_applies_every_transaction_once(
    proxied_server, make_server, jobs_sync, spark, settings, dialect
):
    pub = make_server("postgresql", "pg_stpub")
    sub, proxy = proxied_server(dialect, f"{dialect[:2]}_stsub")
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
        conn.cursor().execute("INSERT INTO items SELECT g, 'seed ' || g FROM generate_series(100001, 101000) g")
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", pub)
    run("REPL_SERVER ('pg_stpub', 'pg_stpub'); REPL_SUBSCRIBE ('pg_stpub', 'acct')", sub)
    run("REPL_INIT_COPY ('pg_stpub', 'acct')", sub)

    settings.READ_TIMEOUT = 2
    settings.CONNECT_TIMEOUT = 2
    publish_rows(pub, 1, 1500)
    proxy.stall_after(40_000, 6.0)  # inside the sync's apply on the subscriber; longer than the read bound
    run("REPL_SYNC ('pg_stpub', 'acct')", sub)
    synced = last_job()
    assert synced.state == JobRun.State.SUCCEEDED, synced.error
    assert proxy.stalls == 1 and retried(synced), synced.log
    assert "lost" in synced.log.lower(), synced.log
    assert not SkippedTransaction.objects.exists()
    with connections.connect(sub) as conn:
        count, low, high = conn.cursor().execute("SELECT count(*), min(id), max(id) FROM items").fetchone()
    assert (count, low, high) == (2500, 1, 101000)
    assert same(pub, sub, "items")["equal"]


def test_a_spark_copy_whose_source_link_stalls_fails_its_attempt_and_the_retry_copies_everything(
    proxied_server, make_server, jobs_sync, spark, settings
):
    settings.FULL_COPY_PATH = native_copy.SPARK  # through Spark's JDBC read (socketTimeout)
    source, proxy = proxied_server("postgresql", "pg_stsrc")
    dest = make_server("mysql", "my_stdest")
    create_table(source, "items", COLUMNS, ["id"])
    insert_rows(source, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) / 4) for i in range(1, 40_001)])
    run("create nonincremental snapshot my_stdest.items_copy as 'select * from pg_stsrc.items'")

    def connections_of_a_refresh() -> int:
        before = proxy.connections
        run("update snapshot my_stdest.items_copy")
        return proxy.connections - before

    connections_of_a_refresh()  # the pooled connections are open from here on
    unstalled = connections_of_a_refresh()
    # Bounds under the stall's length: the read's, and the connect's and login's (a task that opens its connection
    # while the link stalls waits in the handshake, bounded by those).
    settings.READ_TIMEOUT = settings.BULK_READ_TIMEOUT = settings.CONNECT_TIMEOUT = 3
    proxy.stall_after(300_000, 8.0)  # inside the read of about 1.5 MB; longer than the bounds
    stalled = connections_of_a_refresh()
    job = last_job()
    assert job.state == JobRun.State.SUCCEEDED, job.error
    # The stalled read was given up, not waited out: its attempt was retried, by the product (a job retry in its
    # log) or by Spark (a task run again, with a cluster's task retries), on a new connection either way.
    assert proxy.stalls == 1 and stalled > unstalled, (stalled, unstalled, job.log)
    expected = sorted(tuple(r) for r in fetch_all(source, "SELECT id, name, price FROM items"))
    copied = sorted(tuple(r) for r in fetch_all(dest, "SELECT id, name, price FROM items_copy"))
    assert len(copied) == 40_000 and copied == expected

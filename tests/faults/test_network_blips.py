"""A network blip means a retry, never a failed job.

Servers are registered on the port of a TCP proxy (tests/faults/proxy.py) in front of the live database;
the proxy cuts connections or refuses new ones for a couple of seconds at a point in the middle of a job
(after a number of bytes went through, so the fault lands inside the copy or the apply, not before it).
Each job must end succeeded by itself, with its retry in its log, the data equal on both sides and
nothing applied twice; a server that stays down fails the job after the bounded time with one line."""

from __future__ import annotations

from decimal import Decimal

import pytest

from jobs.jdbc import read_query
from replication_admin.core import connections, native_copy, transactions
from replication_admin.core.audit import Actor
from replication_admin.core.spark import endpoint
from replication_admin.models import JobRun, SkippedTransaction
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import COLUMNS, rows, same, sql
from tests.faults.test_kill_trx import BUMP, publish_transactions
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = [pytest.mark.live_db]

RETRY_LINE = "; retrying in"
JOB_AGAIN = "running the job again from its start in"


def run(text: str, server=None):
    outcomes = execute(Actor.command(), text, context=server, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def last_job() -> JobRun:
    return JobRun.objects.order_by("-id").first()


def retried(job: JobRun) -> bool:
    return RETRY_LINE in job.log or JOB_AGAIN in job.log


# --- the control plane: pooled connections, lost connections, refused connects ------------------------------


def test_a_dead_pooled_connection_is_replaced_and_a_lost_one_retried(proxied_server, settings):
    server, proxy = proxied_server("postgresql", "pg_blip")
    settings.CONNECTION_CHECK_AFTER = 0  # every reuse after a hand-back is checked
    with connections.reuse():
        with connections.connect(server) as conn:
            first = conn
            conn.cursor().execute("CREATE TABLE t (id integer PRIMARY KEY)")
        assert proxy.cut() == 1
        with connections.connect(server) as conn:
            assert conn is not first  # the cut connection was not handed out again
            conn.cursor().execute("INSERT INTO t VALUES (1)")
    assert proxy.connections == 2

    # A connection lost inside a transaction: the transaction runs again on a new connection.
    settings.CONNECTION_CHECK_AFTER = 3600
    lines: list[str] = []
    calls = {"n": 0}

    def work(cursor):
        calls["n"] += 1
        cursor.execute("INSERT INTO t VALUES (?)", [10 + calls["n"]])
        if calls["n"] == 1:
            proxy.cut()
        cursor.execute("SELECT count(*) FROM t")

    with transactions.retry_scope(lines.append), connections.reuse():
        transactions.with_retries(server, work)
    assert calls["n"] == 2
    assert sorted(r[0] for r in fetch_all(server, "SELECT id FROM t")) == [1, 12]  # the lost attempt left nothing
    assert len(lines) == 1 and lines[0].startswith(f"connection to server pg_blip (127.0.0.1:{proxy.port}) lost (")
    assert RETRY_LINE in lines[0]


def test_a_refused_connect_is_retried_for_the_bounded_time_then_fails_in_one_line(
    proxied_server, make_server, settings, jobs_sync, spark
):
    source, proxy = proxied_server("postgresql", "pg_gone")
    make_server("sqlite", "lite_dest")
    create_table(source, "items", COLUMNS, ["id"])
    insert_rows(source, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i)) for i in range(1, 51)])
    run("create nonincremental snapshot lite_dest.items_copy as 'select * from pg_gone.items'")
    settings.RETRY_SECONDS = 3
    proxy.stop()  # nothing listens on the port any more
    outcomes = execute(Actor.command(), "update snapshot lite_dest.items_copy", wait=True)
    assert not outcomes[-1].ok
    job = last_job()
    assert job.state == JobRun.State.FAILED
    assert job.error.startswith(f"server pg_gone (127.0.0.1:{proxy.port}): connection refused"), job.error
    assert len(job.error) < 200 and "\n" not in job.error and "java" not in job.error.lower(), job.error
    assert retried(job), job.log
    assert "Traceback" in job.log  # the whole story stays in the log


def test_a_spark_jdbc_failure_is_one_line_naming_the_server(proxied_server, spark):
    server, proxy = proxied_server("mysql", "my_gone")
    ep = endpoint(server, readonly=True)
    proxy.stop()
    with pytest.raises(Exception) as caught:
        read_query(spark, ep.jdbc, "SELECT 1 AS x", "x INT").collect()
    exc = caught.value
    assert len(str(exc)) > 1000  # Spark's own text: a Java trace
    assert transactions.is_retryable(exc)
    line = transactions.one_line(exc)
    assert line == f"server my_gone (127.0.0.1:{proxy.port}): connection refused", line


# --- blips in the middle of jobs --------------------------------------------------------------------------


@pytest.mark.parametrize("path", [native_copy.SPARK, native_copy.STREAM])
def test_an_outage_mid_full_refresh_is_retried_and_the_copy_is_whole(
    proxied_server, make_server, jobs_sync, spark, settings, path
):
    settings.FULL_COPY_PATH = path  # through Spark's JDBC read, or the native stream
    source, proxy = proxied_server("postgresql", "pg_src")
    dest = make_server("mysql", "my_dest")
    create_table(source, "items", COLUMNS, ["id"])
    insert_rows(source, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) / 4) for i in range(1, 40_001)])
    run("create nonincremental snapshot my_dest.items_copy as 'select * from pg_src.items'")
    proxy.outage_after(300_000, 2.0)  # inside the read of about 1.5 MB
    run("update snapshot my_dest.items_copy")
    job = last_job()
    assert job.state == JobRun.State.SUCCEEDED, job.error
    assert proxy.outages == 1 and retried(job), job.log
    expected = sorted(tuple(r) for r in fetch_all(source, "SELECT id, name, price FROM items"))
    copied = sorted(tuple(r) for r in fetch_all(dest, "SELECT id, name, price FROM items_copy"))
    assert len(copied) == 40_000 and copied == expected


def test_outages_mid_bidir_pull_and_push_are_retried_and_the_nodes_converge(
    proxied_server, make_server, jobs_sync, spark
):
    pub = make_server("postgresql", "pg_pub")
    sub, proxy = proxied_server("mysql", "my_sub")
    create_table(pub, "items", COLUMNS, ["id"])
    insert_rows(pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) / 4) for i in range(1, 5001)])
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('pg_pub.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('my_sub', 'pg_pub.items', 2);"
        "REPL_INIT_SNAPSHOT ('my_sub', 'pg_pub.items', 2, 1000)"
    )
    # The pull: the subscriber's changes, with an outage while they are read and applied.
    sql(sub, "UPDATE \"items\" SET name = CONCAT(name, ' sub') WHERE id <= 3000")
    proxy.outage_after(100_000, 2.0)
    run("REPL_UPDATE_SNAPSHOT ('pg_pub.items', 2)")
    pulled = last_job()
    assert pulled.state == JobRun.State.SUCCEEDED, pulled.error
    assert proxy.outages == 1 and retried(pulled), pulled.log
    # The push: the publisher's changes, with an outage while they are written to the subscriber.
    sql(pub, 'UPDATE "items" SET price = price + 1 WHERE id > 1000')
    proxy.outage_after(100_000, 2.0)
    run("REPL_UPDATE_SNAPSHOT ('pg_pub.items', 2)")
    pushed = last_job()
    assert pushed.state == JobRun.State.SUCCEEDED, pushed.error
    assert proxy.outages == 2 and retried(pushed), pushed.log
    assert rows(pub) == rows(sub)
    names = {r[0] for r in fetch_all(pub, "SELECT name FROM items WHERE id <= 3000")}
    assert all(n.endswith(" sub") and not n.endswith(" sub sub") for n in names)  # nothing doubled
    assert same(pub, sub)["equal"]


@pytest.mark.parametrize("path", [native_copy.SPARK, native_copy.STREAM])
def test_an_outage_mid_transactional_copy_and_sync_applies_every_transaction_once(
    proxied_server, make_server, jobs_sync, spark, settings, path
):
    settings.FULL_COPY_PATH = path
    pub, proxy = proxied_server("postgresql", "pg_trx")
    sub = make_server("mysql", "my_trx")
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
        conn.cursor().execute("INSERT INTO items SELECT g, 'seed ' || g FROM generate_series(100001, 130000) g")
    with connections.connect(sub) as conn:
        conn.cursor().execute("CREATE TABLE counter (id int PRIMARY KEY, v int, last int)")
        conn.cursor().execute("INSERT INTO counter VALUES (1, 0, 0)")
        conn.cursor().execute(BUMP)
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", pub)
    run("REPL_SERVER ('pg_trx', 'pg_trx'); REPL_SUBSCRIBE ('pg_trx', 'acct')", sub)
    proxy.outage_after(200_000, 2.0)  # inside the read of the published table
    run("REPL_INIT_COPY ('pg_trx', 'acct')", sub)
    copied = last_job()
    assert copied.state == JobRun.State.SUCCEEDED, copied.error
    assert proxy.outages == 1 and retried(copied), copied.log

    publish_transactions(pub, 1, 1500)
    proxy.outage_after(150_000, 2.0)  # inside the sync's reading of the publisher's log
    run("REPL_SYNC ('pg_trx', 'acct')", sub)
    synced = last_job()
    assert synced.state == JobRun.State.SUCCEEDED, synced.error
    assert proxy.outages == 2 and retried(synced), synced.log
    with connections.connect(sub) as conn:
        assert tuple(conn.cursor().execute("SELECT v, last FROM counter").fetchone()) == (1500, 1500)
    assert not SkippedTransaction.objects.exists()
    assert same(pub, sub, "items")["equal"]

"""The true lag of a publication that captures from the WAL: what the publisher committed and its slot still holds
counts, in transactions and in seconds, before any sync has read it; a lag alert opens by time from the periodic
check and resolves after a sync; the slot's WAL is guarded (an alert over a limit, shown on the publication's page,
exported in /metrics) and an idle publication's slot keeps moving while other tables are written."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from replication_admin.console.status_api import trx_rows
from replication_admin.core import connections
from replication_admin.health.checks import check_lag
from replication_admin.models import Alert, AuditEntry, ReplAccount, Server
from replication_admin.tasks import scheduler_loop
from replication_admin.transactional import capture as trx_capture
from tests.transactional.test_trx_replication import run, sql, value

TOKEN = "wal-lag-token"
BEHIND = 2000


def published(make_server, name: str = "pw1") -> Server:
    """A PostgreSQL publisher capturing from its WAL: `items` published in `acct`, `other` not published."""
    pub = make_server("pgwal", name)
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))", "CREATE TABLE other (id integer)")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    assert ReplAccount.objects.get(server=name, account="acct").capture == ReplAccount.Capture.WAL
    return pub


def commit_each(server: Server, statements: list[str]) -> None:
    """Each statement its own transaction, on one connection."""
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        for text in statements:
            cursor.execute(text)


def slot_lsns(server: Server) -> tuple[int, int]:
    """(the slot's confirmed position, the server's WAL end now), as numbers."""
    slot = trx_capture.wal_capture.slot_name(server.database, connections.table_schema(server), "acct")
    with connections.connect(server) as conn:
        row = (
            conn.cursor()
            .execute(
                "SELECT confirmed_flush_lsn - '0/0'::pg_lsn, pg_current_wal_lsn() - '0/0'::pg_lsn "
                "FROM pg_replication_slots WHERE slot_name = ?",
                [slot],
            )
            .fetchone()
        )
    return int(row[0]), int(row[1])


def subscriber_row(name: str) -> dict:
    cache.clear()
    [publication] = [p for p in trx_rows(timezone.now()) if p["account"] == "acct"]
    return next(s for s in publication["subscribers"] if s["subscriber"] == name)


@pytest.fixture
def wal_pair(make_server, jobs_sync, spark, settings):
    settings.STATUS_TOKENS = [TOKEN]
    pub = published(make_server)
    sub = make_server("postgresql", "pg2")
    run(sub, "REPL_SERVER ('pw1', 'pw1'); REPL_SUBSCRIBE ('pw1', 'acct'); REPL_INIT_COPY ('pw1', 'acct')")
    cache.clear()
    return pub, sub


def test_transactions_nobody_read_out_of_the_slot_are_lag_that_alerts_by_time_and_clears_after_a_sync(wal_pair, client):
    pub, sub = wal_pair
    assert subscriber_row("pg2")["lag_transactions"] == 0
    commit_each(pub, [f"INSERT INTO items VALUES ({k}, 'row {k}')" for k in range(1, BEHIND + 1)])
    assert value(pub, "SELECT count(*) FROM items") == BEHIND

    started = time.perf_counter()
    backlog = trx_capture.wal_backlog(pub, "acct")
    print(f"slot read with {BEHIND} transactions in it: {(time.perf_counter() - started) * 1000:.0f} ms")
    assert (backlog.pending, backlog.complete, backlog.active) == (BEHIND, True, False)

    row = subscriber_row("pg2")
    assert row["lag_transactions"] >= BEHIND and row["lag_seconds"] is not None and row["reachable"] is True
    response = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    [publication] = response.json()["transactional_publications"]
    assert publication["subscribers"][0]["lag_transactions"] >= BEHIND
    assert publication["subscribers"][0]["lag_seconds"] is not None

    ReplAccount.objects.filter(server="pw1", account="acct").update(alert_lag_seconds=1)
    deadline = time.monotonic() + 30
    while (row := subscriber_row("pg2"))["lag_seconds"] <= 1:  # the oldest waits until it is older than the limit
        assert time.monotonic() < deadline, "the lag in seconds never grew"
        time.sleep(0.2)
    assert row["state"] == "lagging"
    assert check_lag()["lagging"] == 1
    alert = Alert.objects.get(kind=Alert.Kind.LAG, target="pg2 <- pw1/acct", resolved_at__isnull=True)
    assert "oldest unapplied transaction" in alert.message

    run(Server.objects.get(pk=sub.pk), "REPL_SYNC ('pw1', 'acct')")
    assert value(sub, "SELECT count(*) FROM items") == BEHIND
    row = subscriber_row("pg2")
    assert (row["lag_transactions"], row["lag_seconds"], row["state"]) == (0, 0.0, "ok")
    check_lag()
    alert.refresh_from_db()
    assert alert.resolved_at is not None and "lag back to 0 transactions" in alert.resolution


def test_a_slot_keeping_more_wal_than_the_limit_alerts_and_shows_on_the_publication_page_and_in_metrics(
    make_server, settings, viewer_client, client
):
    settings.STATUS_TOKENS = [TOKEN]
    pub = published(make_server)
    commit_each(pub, [f"INSERT INTO items VALUES ({k}, '{'x' * 30}')" for k in range(1, 201)])
    settings.SLOT_WAL_ALERT_BYTES = 4096
    cache.clear()
    assert check_lag()["slots_over"] == 1
    alert = Alert.objects.get(kind=Alert.Kind.SLOT_WAL, target="pw1/acct", resolved_at__isnull=True)
    assert "keeps" in alert.message and "alert above 4.0 KiB" in alert.message

    retained = trx_capture.wal_backlog(pub, "acct").retained_bytes
    assert retained is not None and retained > 4096
    page = viewer_client.get(reverse("trx-publications-detail", args=["pw1", "acct"])).content.decode()
    assert 'id="trx-slot-retained" data-bytes="' in page and 'id="trx-slot-problem"' in page
    shown = int(page.split('id="trx-slot-retained" data-bytes="')[1].split('"')[0])
    assert shown > 4096
    metrics = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert 'repladmin_slot_retained_wal_bytes{publisher="pw1",account="acct",slot="repladmin_' in metrics
    assert 'repladmin_slot_pending_transactions{publisher="pw1",account="acct"' in metrics

    settings.SLOT_WAL_ALERT_BYTES = 1024**3
    cache.clear()
    assert check_lag()["slots_resolved"] == 1
    alert.refresh_from_db()
    assert alert.resolved_at is not None


def test_an_idle_publications_slot_moves_past_what_other_tables_write_read_by_syncs_or_streamed(make_server):
    pub = published(make_server)
    stored = trx_capture.publisher_count(pub, "acct")  # the creating statement REPL_PUB_ADD logged
    commit_each(pub, [f"INSERT INTO other VALUES ({k})" for k in range(300)])
    confirmed, end = slot_lsns(pub)
    assert confirmed < end
    backlog = trx_capture.wal_backlog(pub, "acct")
    assert backlog.pending == 0 and backlog.unread_bytes > 0  # other tables' writes are not the publication's lag
    cache.clear()
    assert check_lag()["slots_moved"] == 1
    assert slot_lsns(pub)[0] >= end

    stream = trx_capture.WalStream(pub, "acct")
    try:
        commit_each(pub, [f"INSERT INTO other VALUES ({k})" for k in range(300)])
        end = slot_lsns(pub)[1]
        deadline = time.monotonic() + 30
        while slot_lsns(pub)[0] < end:  # the stream confirms the server's keepalive position once caught up
            assert time.monotonic() < deadline, "the streamed slot never moved past the other table's writes"
            stream.pump()
            time.sleep(0.1)
        assert stream.count == stored
    finally:
        stream.close()
    assert trx_capture.publisher_count(pub, "acct") == stored


def test_a_slot_a_follower_streams_is_counted_on_a_copy_that_leaves_the_stream_and_no_slot_behind(make_server):
    pub = published(make_server)
    base = trx_capture.publisher_count(pub, "acct")  # the creating statement REPL_PUB_ADD logged, stored
    stream = trx_capture.WalStream(pub, "acct")
    try:
        commit_each(pub, [f"INSERT INTO items VALUES ({k}, 'row {k}')" for k in range(1, 51)])
        backlog = trx_capture.wal_backlog(pub, "acct")  # the stream has stored none of them yet
        assert (backlog.active, backlog.stored, backlog.pending, backlog.complete) == (True, base, 50, True)
        deadline = time.monotonic() + 30
        while stream.count < base + 50:  # the copy consumed nothing: the stream still gets every transaction
            assert time.monotonic() < deadline, "the stream never delivered"
            stream.pump()
        assert trx_capture.wal_backlog(pub, "acct").pending == 0
    finally:
        stream.close()
    assert value(pub, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%peek%'") == 0


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_thread_runs_the_lag_check_so_a_slot_alert_opens_without_any_sync(make_server, settings):
    pub = published(make_server)
    commit_each(pub, [f"INSERT INTO items VALUES ({k}, '{'x' * 30}')" for k in range(1, 201)])
    settings.SLOT_WAL_ALERT_BYTES = 4096
    cache.clear()
    stop = threading.Event()
    thread = threading.Thread(target=scheduler_loop, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not Alert.objects.filter(kind=Alert.Kind.SLOT_WAL, target="pw1/acct").exists():
            assert time.monotonic() < deadline, "the scheduler thread never checked the slot"
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_the_publication_page_edits_its_lag_limits_by_count_and_time_audited_and_a_viewer_may_not(
    make_server, editor_client, viewer_client
):
    make_server("sqlite", "lite")
    ReplAccount.objects.create(server="lite", account="acct")
    url = reverse("trx-publications-lag-alert", args=["lite", "acct"])
    assert viewer_client.post(url, {"alert_lag": "5", "alert_lag_seconds": "9"}).status_code == 403
    page = editor_client.get(reverse("trx-publications-detail", args=["lite", "acct"])).content.decode()
    assert 'id="trx-lag-alert-form"' in page and "older than 60 s" in page  # the default, REPLADMIN_LAG_ALERT_SECONDS
    assert editor_client.post(url, {"alert_lag": "", "alert_lag_seconds": "30"}).status_code == 302
    account = ReplAccount.objects.get(server="lite", account="acct")
    assert (account.alert_lag, account.alert_lag_seconds) == (None, 30)
    entry = AuditEntry.objects.get(action="trx.lag_alert", outcome="ok")
    assert entry.detail == {"transactions": None, "seconds": 30} and entry.target == "lite/acct"
    page = editor_client.get(reverse("trx-publications-detail", args=["lite", "acct"])).content.decode()
    assert "older than 30 s" in page

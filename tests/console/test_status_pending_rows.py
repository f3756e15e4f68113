"""Pending log rows, read live: an incremental snapshot's source log rows newer than its last refresh, shown by
the status API and the dashboard, back to 0 after a refresh."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.core.cache import cache
from django.urls import reverse

from replication_admin.core import connections
from replication_admin.core.times import aware, naive_utc
from replication_admin.models import Snapshot
from tests.bidir.test_bidir_sync import run as run_statements
from tests.snapshots.test_snapshot_refresh import run
from tests.tables import execute as run_sql

TOKEN = "pending-rows-token"


@pytest.fixture
def snapshot(make_server, spark, settings):
    settings.STATUS_TOKENS = [TOKEN]
    source = make_server("sqlite", "src")
    make_server("postgresql", "dst")
    run_sql(source, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    for key in range(1, 21):
        run_sql(source, f"INSERT INTO items VALUES ({key}, 'row {key}')")
    run("create snapshot log for items", source)
    run("create snapshot dst.inc_items from src.items", source)
    run("update snapshot dst.inc_items")
    cache.clear()
    return source


def snapshot_row(client) -> dict:
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    return next(s for s in body["snapshots"] if s["name"] == "dst.inc_items")


def test_the_pending_rows_of_a_snapshot_log_are_the_rows_changed_since_its_last_refresh(
    snapshot, client, viewer_client
):
    assert snapshot_row(client)["pending_rows"] == 0
    run_sql(snapshot, "UPDATE items SET name = 'changed' WHERE id <= 4")
    run_sql(snapshot, "DELETE FROM items WHERE id = 10")
    run_sql(snapshot, "INSERT INTO items VALUES (99, 'new')")
    cache.clear()
    before = datetime.now(UTC)
    row = snapshot_row(client)
    after = datetime.now(UTC)
    assert (row["pending_rows"], row["reachable"], row["state"]) == (6, True, "ok")
    # Behind in time: the age of the oldest change waiting in the log, as the log itself records it.
    oldest = oldest_pending(snapshot)
    assert (before - oldest).total_seconds() - 0.001 <= row["lag_seconds"] <= (after - oldest).total_seconds() + 0.001
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert '<td class="item-pending">6 rows</td>' in page
    run("update snapshot dst.inc_items")
    cache.clear()
    row = snapshot_row(client)
    assert (row["pending_rows"], row["lag_seconds"]) == (0, 0)


def oldest_pending(source) -> datetime:
    """The SNAPTIME of the oldest log row newer than the snapshot's SN_LAST_TS, read on the source itself."""
    last_ts = naive_utc(Snapshot.objects.get(name="dst.inc_items").last_ts).isoformat(sep=" ")
    with connections.connect(source) as conn:
        cursor = conn.cursor().execute('SELECT MIN("SNAPTIME") FROM "RLOG_items" WHERE "SNAPTIME" > ?', [last_ts])
        return aware(cursor.fetchone()[0])


@pytest.fixture
def bidir(make_server, jobs_sync, spark, settings):
    settings.STATUS_TOKENS = [TOKEN]
    publisher = make_server("postgresql", "pg1")
    subscriber = make_server("sqlite", "lite3")
    run_sql(publisher, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    for key in range(1, 11):
        run_sql(publisher, f"INSERT INTO items VALUES ({key}, 'row {key}')")
    run_statements(
        "REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('lite3', 'pg1.items', 2);"
        "REPL_INIT_SNAPSHOT ('lite3', 'pg1.items', 2)"
    )
    cache.clear()
    return publisher, subscriber


def min_snaptime(server) -> datetime | None:
    with connections.connect(server) as conn:
        return aware(conn.cursor().execute('SELECT MIN("SNAPTIME") FROM "RLOG_items"').fetchone()[0])


def test_a_bidirectional_subscription_is_behind_by_the_age_of_the_oldest_change_either_side_holds(bidir, client):
    publisher, subscriber = bidir
    subscription = status_of(client)
    assert (subscription["pending_rows"], subscription["lag_seconds"]) == (0, 0)
    run_sql(subscriber, "UPDATE items SET name = 'from the subscriber' WHERE id = 2")
    run_sql(publisher, "UPDATE items SET name = 'from the publisher' WHERE id = 7")
    cache.clear()
    before = datetime.now(UTC)
    subscription = status_of(client)
    after = datetime.now(UTC)
    assert subscription["pending_rows"] == 2  # one row in each log
    oldest = min(min_snaptime(subscriber), min_snaptime(publisher))
    assert (before - oldest).total_seconds() - 0.001 <= subscription["lag_seconds"]
    assert subscription["lag_seconds"] <= (after - oldest).total_seconds() + 0.001
    run_statements("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")
    cache.clear()
    subscription = status_of(client)
    assert (subscription["pending_rows"], subscription["lag_seconds"]) == (0, 0)


def status_of(client) -> dict:
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    [publication] = body["bidirectional_publications"]
    [subscription] = publication["subscribers"]
    assert publication["lag_seconds"] == subscription["lag_seconds"]
    return subscription


def test_the_metrics_give_every_item_its_lag_in_seconds_and_its_pending_changes(snapshot, client):
    run_sql(snapshot, "UPDATE items SET name = 'changed' WHERE id <= 3")
    cache.clear()
    body = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    labels = 'kind="snapshot",item="dst.inc_items",subscriber="dst"'
    assert f"repladmin_item_pending_changes{{{labels}}} 3" in body
    [lag] = re.findall(rf"repladmin_item_lag_seconds\{{{re.escape(labels)}\}} ([0-9.e+-]+)", body)
    assert 0 < float(lag) < 3600  # the updates were made in this test
    assert "# TYPE repladmin_tracer_latency_seconds gauge" in body

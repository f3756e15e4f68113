"""Pending log rows, read live: an incremental snapshot's source log rows newer than its last refresh, shown by
the status API and the dashboard, back to 0 after a refresh."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

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
    row = snapshot_row(client)
    assert (row["pending_rows"], row["reachable"], row["state"]) == (6, True, "ok")
    assert "6 pending log rows" in viewer_client.get(reverse("dashboard")).content.decode()
    run("update snapshot dst.inc_items")
    cache.clear()
    assert snapshot_row(client)["pending_rows"] == 0

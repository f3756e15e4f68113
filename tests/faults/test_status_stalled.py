"""A server that accepts connections and then stops answering (a stalled link) is reported as unreachable by the
status API, with the cause, instead of holding the whole answer: each live read is bounded, and the stalled server
is not asked again while its verdict is cached."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from tests.snapshots.test_snapshot_refresh import run
from tests.tables import execute as run_sql

TOKEN = "stalled-status-token"


@pytest.fixture
def stalled_source(proxied_server, make_server, spark, settings):
    settings.STATUS_TOKENS = [TOKEN]
    source, proxy = proxied_server("postgresql", "pg_stall")
    make_server("sqlite", "lite_stall")
    run_sql(source, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run_sql(source, "INSERT INTO items VALUES (1, 'one'), (2, 'two')")
    run("create snapshot log for items", source)
    run("create snapshot lite_stall.inc_items from pg_stall.items", source)
    run("update snapshot lite_stall.inc_items")
    run_sql(source, "UPDATE items SET name = 'changed' WHERE id = 1")
    cache.clear()
    return proxy


def snapshot_row(client) -> dict:
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    return next(s for s in body["snapshots"] if s["name"] == "lite_stall.inc_items")


def test_a_stalled_server_reads_unreachable_with_its_cause_and_is_not_asked_again_while_that_is_known(
    stalled_source, client
):
    row = snapshot_row(client)
    assert (row["state"], row["pending_rows"], row["reachable"]) == ("ok", 1, True)
    cache.clear()
    stalled_source.stall()
    row = snapshot_row(client)
    assert row["state"] == "unreachable" and row["reachable"] is False and row["pending_rows"] is None
    assert "server pg_stall unreachable: no answer within" in row["last_error"]
    # Known stalled: the next answers do not open another connection to it (nothing waits on it again).
    opened = stalled_source.connections
    for _ in range(3):
        assert snapshot_row(client)["state"] == "unreachable"
    assert stalled_source.connections == opened
    stalled_source.resume()
    cache.clear()
    row = snapshot_row(client)
    assert (row["state"], row["pending_rows"], row["reachable"]) == ("ok", 1, True)

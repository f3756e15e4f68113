"""The status of a transactional subscription read live from the servers: the lag is the publisher's count minus
the subscriber's level (not the catalog's counts, which only a sync moves), with the age of the oldest transaction
not applied; an unreachable subscriber is shown as such, and its alert resolves itself once it answers again."""

from __future__ import annotations

import re
import socket

import pytest
from django.core.cache import cache
from django.urls import reverse

from replication_admin.health.checks import check_health
from replication_admin.models import Alert, ReplSubscriber, Server
from tests.transactional.test_trx_replication import run, sql

TOKEN = "live-status-token"


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_status(client) -> dict:
    response = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return response.json()


def subscriber_row(body: dict, name: str) -> dict:
    [publication] = body["transactional_publications"]
    return next(s for s in publication["subscribers"] if s["subscriber"] == name)


@pytest.fixture
def pair(make_server, jobs_sync, spark, settings):
    settings.STATUS_TOKENS = [TOKEN]
    pub = make_server("postgresql", "pg1")
    sub = make_server("mysql", "my2")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct'); REPL_INIT_COPY ('pg1', 'acct')")
    cache.clear()
    return pub, sub


def test_a_subscriber_cut_off_while_the_publisher_writes_shows_the_live_lag_and_is_back_to_zero_after_a_sync(
    pair, client, viewer_client
):
    pub, sub = pair
    assert subscriber_row(api_status(client), "my2")["lag_transactions"] == 0
    port = sub.port
    Server.objects.filter(pk=sub.pk).update(port=closed_port())  # the subscriber is gone
    for key in range(1, 8):
        sql(pub, f"INSERT INTO items VALUES ({key}, 'row {key}')")  # 7 transactions the catalog knows nothing of
    cache.clear()

    row = subscriber_row(api_status(client), "my2")
    assert row["lag_transactions"] == 7 and row["pending_rows"] == 7
    assert row["lag_seconds"] is not None and row["lag_seconds"] > 0
    assert row["reachable"] is False and row["state"] == "unreachable"
    assert "server my2 unreachable" in row["last_error"]
    assert ReplSubscriber.objects.get(subscriber="my2").count < 8  # the catalog still has the old count
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert '<td class="item-pending">7 transactions</td>' in page and ">unreachable</span>" in page
    assert re.search(r'<td class="item-lag">\d+ (s|min)</td>', page)  # behind by the oldest waiting transaction

    assert check_health()["unreachable"] == ["my2"]
    alert = Alert.objects.get(kind="server_unreachable", target="my2")
    assert alert.resolved_at is None and "my2 cannot be reached" in alert.message

    Server.objects.filter(pk=sub.pk).update(port=port)  # back
    run(Server.objects.get(pk=sub.pk), "REPL_SYNC ('pg1', 'acct')")
    cache.clear()
    assert check_health()["unreachable"] == []
    row = subscriber_row(api_status(client), "my2")
    assert (row["lag_transactions"], row["lag_seconds"], row["reachable"], row["state"]) == (0, 0, True, "ok")
    alert.refresh_from_db()
    assert alert.resolved_at is not None and "periodic check" in alert.resolution
    assert Alert.objects.filter(kind="server_unreachable", target="my2").count() == 1  # kept as history


def test_a_subscription_never_copied_shows_not_initialised_with_the_transactions_waiting(
    pair, make_server, client, viewer_client
):
    pub, _sub = pair
    late = make_server("mysql", "my3")
    run(late, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'acct')")  # no initial copy
    for key in range(1, 4):
        sql(pub, f"INSERT INTO items VALUES ({key}, 'row {key}')")
    cache.clear()
    row = subscriber_row(api_status(client), "my3")
    assert row["state"] == "never" and row["state_label"] == "not initialised"
    assert row["lag_transactions"] >= 3 and row["reachable"] is True
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert ">not initialised</span>" in page
    subscriptions = viewer_client.get(reverse("subscriptions")).content.decode()
    assert ">not initialised</span>" in subscriptions


def test_a_scheduled_subscriber_between_runs_is_shown_as_scheduled_not_off(pair, viewer_client):
    _pub, sub = pair
    run(sub, "SUB_SCHEDULE ('pg1', 'acct', 5)")
    subscriptions = viewer_client.get(reverse("subscriptions")).content.decode()
    row = subscriptions.split('data-subscription="my2 pg1/acct"', 1)[1].split("</tr>", 1)[0]
    # its state is ok between runs (behind by less than its interval); how it is kept up to date is said beside it
    assert 'data-state="ok">ok</span>' in row and "scheduled (every 5 min) · OFF</span>" in row

"""A table an item replicates that disappears (dropped or renamed on the publisher, or the subscriber's copy dropped)
makes the item "broken" on every page and in the status API, with an alert that resolves once the table is back;
every page says an item's state in the same words as the status API."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from replication_admin.health.state_alerts import check_items
from replication_admin.models import Alert, JobRun, Snapshot
from tests.console.test_same_state_words import BADGE
from tests.snapshots.test_snapshot_refresh import run as run_snapshot
from tests.transactional.test_trx_live_status import (
    TOKEN,
    api_status,
    pair,  # noqa: F401 - the fixture
    subscriber_row,
)
from tests.transactional.test_trx_replication import sql


def badge_words(page: str) -> list[tuple[str, str]]:
    return BADGE.findall(page)


def test_a_published_table_dropped_on_the_publisher_makes_its_subscription_broken_with_an_alert_until_it_is_back(
    pair,  # noqa: F811
    client,
    viewer_client,
):
    pub, _sub = pair
    assert subscriber_row(api_status(client), "my2")["state"] == "ok"
    assert check_items()["broken"] == 0
    sql(pub, "ALTER TABLE items RENAME TO items_old")  # as good as dropped for the publication
    cache.clear()
    body = api_status(client)
    row = subscriber_row(body, "my2")
    assert (row["state"], row["state_label"]) == ("broken", "broken")
    assert row["last_error"] == "the published table items is gone from server pg1 (dropped or renamed)"
    assert body["transactional_publications"][0]["state"] == "broken"
    assert check_items()["broken"] == 1
    alert = Alert.objects.get(kind=Alert.Kind.ITEM_BROKEN, target="my2 <- pg1/acct")
    assert alert.resolved_at is None and "items is gone from server pg1" in alert.message
    # The same word on the dashboard, the subscriptions list and the subscription's page.
    detail = reverse("trx-subscriptions-detail", args=["my2", "pg1", "acct"])
    for url in (reverse("dashboard"), reverse("subscriptions"), detail):
        page = viewer_client.get(url).content.decode()
        assert ("broken", "broken") in badge_words(page), url

    sql(pub, "ALTER TABLE items_old RENAME TO items")
    cache.clear()
    assert subscriber_row(api_status(client), "my2")["state"] == "ok"
    assert check_items() == {"broken": 0, "resolved": 1}
    alert.refresh_from_db()
    assert alert.resolved_at is not None


def test_a_subscribers_copy_that_disappears_makes_the_subscription_broken(pair, client):  # noqa: F811
    _pub, sub = pair
    sql(sub, "DROP TABLE items")
    cache.clear()
    row = subscriber_row(api_status(client), "my2")
    assert row["state"] == "broken"
    assert row["last_error"] == "the subscriber's copy of the table items is gone from server my2 (dropped or renamed)"


@pytest.fixture
def snapshots(make_server, spark, settings):
    """Two snapshots of a PostgreSQL table on SQLite: one refreshed from its log (ok), one never refreshed."""
    settings.STATUS_TOKENS = [TOKEN]
    source = make_server("postgresql", "pg_src")
    make_server("sqlite", "lite_dst")
    sql(source, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    sql(source, "INSERT INTO items VALUES (1, 'one'), (2, 'two')")
    run_snapshot("create snapshot log for items", source)
    run_snapshot("create snapshot lite_dst.copied from pg_src.items", source)
    run_snapshot("update snapshot lite_dst.copied")
    run_snapshot("create snapshot lite_dst.waiting from pg_src.items", source)
    # as if its first refresh had not run yet
    JobRun.objects.filter(kind="snapshot_refresh", params__snapshot="lite_dst.waiting").delete()
    Snapshot.objects.filter(name="lite_dst.waiting").update(last_ts=None)
    cache.clear()
    return source


def snapshot_states(client) -> dict[str, tuple[str, str]]:
    return {s["name"]: (s["state"], s["state_label"]) for s in api_status(client)["snapshots"]}


def test_every_page_shows_a_snapshots_state_in_the_words_of_the_status_api(snapshots, client, viewer_client):
    for dropped in (False, True):
        if dropped:
            sql(snapshots, "DROP TABLE items")
            cache.clear()
        api = snapshot_states(client)
        expected = {"copied": ("broken", "broken"), "waiting": ("broken", "broken")} if dropped else {
            "copied": ("ok", "ok"), "waiting": ("never", "never refreshed")}  # fmt: skip
        assert {name.split(".")[1]: value for name, value in api.items()} == expected
        listing = badge_words(viewer_client.get(reverse("snapshots")).content.decode())
        assert sorted(listing) == sorted(api.values())
        dashboard = viewer_client.get(reverse("dashboard")).content.decode()
        for name, words in api.items():
            detail = viewer_client.get(reverse("snapshots-detail", args=[name])).content.decode()
            assert badge_words(detail) == [words], name
            assert words in badge_words(dashboard), name

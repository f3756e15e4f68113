"""Every page says an item's state in the same words as the status API: one module decides it (engine/health.py
through each feature's status rows) and one tag draws it, so the dashboard, the subscriptions list, the
publication's and the subscription's pages and /api/status cannot disagree — checked for every state a
transactional subscription can be in here (broken: tests/console/test_broken_items.py)."""

from __future__ import annotations

import re
import sqlite3
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.times import duration_text
from replication_admin.engine import health
from replication_admin.models import ReplAccount, ReplSubscriber, Server, SnapshotPublication, SnapshotSubscription
from tests.transactional.test_trx_live_status import closed_port

pytestmark = pytest.mark.django_db
TOKEN = "same-words-token"
BADGE = re.compile(r'<span class="badge [a-z]*" title="[^"]*" data-state="([a-z_]+)">([^<]+)</span>')

# subscriber name -> its state: the publication "pub/acc" has 120 transactions
EXPECTED = {
    "s_ok": health.OK,
    "s_copying": health.COPYING,
    "s_never": health.NEVER,
    "s_lagging": health.LAGGING,
    "s_follower_down": health.FOLLOWER_DOWN,
    "s_unreachable": health.UNREACHABLE,
    "s_invalid": health.INVALID,
    "s_halted": health.FAILING,
}


def row_of(page: str, marker: str) -> str:
    """The table row of `page` that holds `marker`."""
    at = page.index(marker)
    return page[page.rindex("<tr", 0, at) : page.index("</tr>", at)]


@pytest.fixture
def subscriptions(settings) -> None:
    """A publication on a server the console does not register (its count is the catalog's) and a subscriber in
    each state."""
    settings.STATUS_TOKENS = [TOKEN]
    now = timezone.now()
    ReplAccount.objects.create(server="pub", account="acc", level=120, count=120)
    Server.objects.create(name="s_unreachable", dialect="postgresql", host="127.0.0.1", port=closed_port(),
                          database="gone", user="x")  # fmt: skip
    done = {"server": "pub", "account": "acc", "init_state": "done", "last_sync_at": now - timedelta(minutes=1)}
    in_sync = {**done, "state": ReplSubscriber.IN_SYNC, "level": 120, "count": 120}
    ReplSubscriber.objects.create(**in_sync, subscriber="s_ok")
    ReplSubscriber.objects.create(**{**in_sync, "init_state": "copying"}, subscriber="s_copying")
    ReplSubscriber.objects.create(**{**in_sync, "init_state": "none"}, subscriber="s_never")
    ReplSubscriber.objects.create(**{**done, "last_sync_at": now - timedelta(hours=1)}, subscriber="s_lagging",
                                  level=100, count=100, state=ReplSubscriber.OFF)  # fmt: skip
    ReplSubscriber.objects.create(**in_sync, subscriber="s_follower_down", follow=True)
    ReplSubscriber.objects.create(**in_sync, subscriber="s_unreachable")
    ReplSubscriber.objects.create(**in_sync, subscriber="s_invalid", valid=0)
    ReplSubscriber.objects.create(**{**in_sync, "level": 110, "count": 110}, subscriber="s_halted", halt_count=111,
                                  halt_level=111, halt_error="server s_halted: INSERT command denied")  # fmt: skip
    cache.clear()


def test_every_page_shows_each_subscriptions_state_in_the_words_of_the_status_api(subscriptions, client, viewer_client):
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    [publication] = body["transactional_publications"]
    api = {s["subscriber"]: (s["state"], s["state_label"]) for s in publication["subscribers"]}
    assert {name: state for name, (state, _) in api.items()} == EXPECTED
    assert all(label == health.LABELS[state] for state, label in api.values())

    listing = viewer_client.get(reverse("subscriptions")).content.decode()
    publication_page = viewer_client.get(reverse("trx-publications-detail", args=["pub", "acc"])).content.decode()
    page = viewer_client.get(reverse("dashboard")).content.decode()
    dashboard, drawing = page.split('id="items"', 1)[1], page.split('id="topology', 1)[1]
    for name, words in api.items():
        row = listing.split(f'data-subscription="{name} pub/acc"', 1)[1].split("</tr>", 1)[0]
        assert BADGE.findall(row) == [words], f"subscriptions list: {name}"
        row = publication_page.split(f'data-subscriber="{name}"', 1)[1].split("</tr>", 1)[0]
        assert BADGE.findall(row) == [words], f"publication page: {name}"
        detail = viewer_client.get(reverse("trx-subscriptions-detail", args=[name, "pub", "acc"])).content.decode()
        status = detail.split('id="trx-sub-status"', 1)[1].split("</dd>", 1)[0]
        assert BADGE.findall(status) == [words], f"subscription page: {name}"
        assert BADGE.findall(row_of(dashboard, f">{name} ← pub/acc</a>")) == [words], f"dashboard: {name}"
        assert BADGE.findall(row_of(drawing, f">{name} ← pub/acc</a>")) == [words], f"topology's table: {name}"
    # the reason stands beside a state that is not ok, on every page alike
    assert "server s_halted: INSERT command denied" in listing.split('data-subscription="s_halted pub/acc"', 1)[1]


@pytest.fixture
def bidir_subscriptions(settings, sqlite_path) -> None:
    """A bi-directional publication with a subscriber in sync (ok) and one whose copy is not made (never); and one
    whose publisher's file is gone (unreachable)."""
    settings.STATUS_TOKENS = [TOKEN]
    now = timezone.now()
    for name in ("shop", "branch"):
        made = Server.objects.create(name=name, dialect="sqlite", database=sqlite_path(name))
        with sqlite3.connect(made.database) as conn:
            conn.execute("CREATE TABLE items (id integer PRIMARY KEY)")
            # each side's bi-directional log, empty: nothing waits
            conn.execute('CREATE TABLE "RLOG_items" ("SNAPTIME" text, "RLOG_ROWGUID" text)')
    shop = Server.objects.get(name="shop")
    gone = Server.objects.create(name="gone", dialect="sqlite", database="/nonexistent/gone.sqlite3")
    SnapshotPublication.objects.create(item="shop.items", server=shop, table="items", last_sync_at=now)
    SnapshotPublication.objects.create(item="gone.items", server=gone, table="items", last_sync_at=now)
    for server, init in (("branch", "done"), ("outlet", "none")):
        SnapshotSubscription.objects.create(server=server, item="shop.items", init_state=init, last_sync_at=now)
    SnapshotSubscription.objects.create(server="branch", item="gone.items", init_state="done", last_sync_at=now)
    cache.clear()


def test_every_page_shows_each_bidirectional_subscriptions_state_in_the_words_of_the_status_api(
    bidir_subscriptions, client, viewer_client
):
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    api = {(p["item"], s["server"]): (s["state"], s["state_label"])
           for p in body["bidirectional_publications"] for s in p["subscribers"]}  # fmt: skip
    assert {key: state for key, (state, _) in api.items()} == {
        ("shop.items", "branch"): health.OK, ("shop.items", "outlet"): health.NEVER,
        ("gone.items", "branch"): health.UNREACHABLE,
    }  # fmt: skip
    listing = viewer_client.get(reverse("subscriptions")).content.decode()
    page = viewer_client.get(reverse("dashboard")).content.decode()
    dashboard = page.split('id="items"', 1)[1]
    for (item, server), words in api.items():
        assert BADGE.findall(row_of(listing, f'data-subscription="{server} {item}"')) == [words], (item, server)
        assert BADGE.findall(row_of(dashboard, f">{item} ↔ {server}</a>")) == [words], (item, server)
        pub = SnapshotPublication.objects.get(item=item)
        detail = viewer_client.get(reverse("publications-detail", args=[pub.pk])).content.decode()
        assert BADGE.findall(row_of(detail, f'data-server="{server}"')) == [words], (item, server)


def lag_cells(row: str) -> tuple[str, str]:
    """The Behind and Pending cells of a list row (partials/lag_cells.html), as text."""
    found = re.findall(r'<td class="num item-(?:lag|pending)">(.*?)</td>', row, re.S)
    assert len(found) == 2, row
    behind, pending = (re.sub(r"<[^>]+>", "", cell).strip() for cell in found)
    return behind, pending


def words_of(row: dict, unit: str) -> tuple[str, str]:
    """How the status API's row reads in those cells."""
    behind = "unknown" if row["lag_seconds"] is None else duration_text(row["lag_seconds"])
    n = row["pending_rows"]
    return behind, "—" if n is None else f"{n} {unit}{'' if n == 1 else 's'}"


def test_every_list_says_how_far_behind_each_item_is_and_what_waits_as_the_status_api_does(
    subscriptions, bidir_subscriptions, client, viewer_client
):
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    subscriptions_page = viewer_client.get(reverse("subscriptions")).content.decode()
    publications_page = viewer_client.get(reverse("publications")).content.decode()
    [trx] = body["transactional_publications"]
    assert BADGE.findall(row_of(publications_page, 'data-account="pub/acc"')) == [
        (trx["state"], health.LABELS[trx["state"]])
    ]
    assert lag_cells(row_of(publications_page, 'data-account="pub/acc"')) == words_of(trx, "transaction")
    for sub in trx["subscribers"]:
        row = row_of(subscriptions_page, f'data-subscription="{sub["subscriber"]} pub/acc"')
        assert lag_cells(row) == words_of(sub, "transaction"), sub["subscriber"]
    lagging = next(s for s in trx["subscribers"] if s["subscriber"] == "s_lagging")
    assert lag_cells(row_of(subscriptions_page, 'data-subscription="s_lagging pub/acc"'))[1] == "20 transactions"
    assert lagging["pending_rows"] == 20  # 120 published, 100 applied
    for pub in body["bidirectional_publications"]:
        row = row_of(publications_page, f">{pub['item']}</a>")
        assert BADGE.findall(row) == [(pub["state"], health.LABELS[pub["state"]])], pub["item"]
        assert lag_cells(row) == words_of(pub, "change"), pub["item"]
        for sub in pub["subscribers"]:
            row = row_of(subscriptions_page, f'data-subscription="{sub["server"]} {pub["item"]}"')
            assert lag_cells(row) == words_of(sub, "change"), (pub["item"], sub["server"])

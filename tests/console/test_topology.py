"""The topology: every registered server a node, every snapshot, bi-directional and transactional subscription an
edge between its servers, coloured by its state, labelled with how far behind it is and linked to its page; the
same on the dashboard, and as a table for screen readers."""

from __future__ import annotations

import html
import re
import sqlite3

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from replication_admin.models import JobRun, Server, Snapshot, SnapshotPublication, SnapshotSubscription
from tests.console.test_dashboard import refresh
from tests.transactional.test_trx_live_status import closed_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def servers(sqlite_path) -> dict[str, Server]:
    """shop → replica (a snapshot refreshed 2 hours ago), shop → remote (its refresh failed; remote does not answer),
    shop ↔ branch (a bi-directional subscription synced just now), and a server nothing uses."""
    made = {name: Server.objects.create(name=name, dialect="sqlite", database=sqlite_path(name))
            for name in ("shop", "replica", "branch", "idle")}  # fmt: skip
    for name, tables in (("shop", ("customers", "items")), ("replica", ("customers",)), ("branch", ("items",))):
        with sqlite3.connect(made[name].database) as conn:  # the tables are there: no item is broken
            for table in tables:
                conn.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY)")
    made["remote"] = Server.objects.create(name="remote", dialect="postgresql", host="127.0.0.1",
                                           port=closed_port(), database="gone", user="x")  # fmt: skip
    for dest, state in (("replica", JobRun.State.SUCCEEDED), ("remote", JobRun.State.FAILED)):
        Snapshot.objects.create(name=f"{dest}.customers", source_server=made["shop"], source_table="customers",
                                dest_server=made[dest], dest_table="customers", is_incremental=0)  # fmt: skip
        refresh(f"{dest}.customers", JobRun.State.SUCCEEDED, 3)
        refresh(f"{dest}.customers", state, 2)
    now = timezone.now()
    SnapshotPublication.objects.create(item="shop.items", server=made["shop"], table="items", last_sync_at=now)
    SnapshotSubscription.objects.create(server="branch", item="shop.items", init_state="done", last_sync_at=now)
    cache.clear()
    return made


def edges_of(page: str) -> dict[str, tuple[str, str]]:
    """item name → (its colour class, its link) of each edge drawn."""
    found = re.findall(r'<a href="([^"]+)" class="edge edge-(\w+)" data-item="([^"]+)"', page)
    return {html.unescape(name): (badge, html.unescape(url)) for url, badge, name in found}


def labels_of(page: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<text [^>]*class="edge-label">([^<]+)</text>', page)]


def test_every_replication_is_an_edge_between_its_servers_coloured_by_state_and_labelled_with_its_lag(
    viewer_client, servers
):
    page = viewer_client.get(reverse("topology")).content.decode()
    assert edges_of(page) == {
        "replica.customers": ("ok", reverse("snapshots-detail", args=["replica.customers"])),
        "remote.customers": ("bad", reverse("snapshots-detail", args=["remote.customers"])),
        # branch's SQLite file is there but holds no log: the live read fails, so the edge is not green
        "shop.items ↔ branch": ("bad", SnapshotPublication.objects.get().get_absolute_url()),
    }
    labels = labels_of(page)
    assert "replica.customers: ok · behind 2 h 0 min" in labels  # a full snapshot: behind by its copy's age
    assert "remote.customers: failing · behind 3 h 0 min" in labels  # since its last successful refresh
    assert "shop.items ↔ branch: unreachable · lag unknown" in labels
    nodes = dict(re.findall(r'<a href="([^"]+)" class="node node-\w+" data-server="([^"]+)">', page))
    assert {v: k for k, v in nodes.items()} == {s.name: s.get_absolute_url() for s in servers.values()}
    assert 'class="node node-bad" data-server="remote"' in page  # nothing accepts connections at its port
    assert 'class="node node-ok" data-server="idle"' in page
    # shop: two snapshots, the publication and its subscription
    assert re.search(r'data-server="shop">.*?class="node-sub">SQLite · 4 items</text>', page, re.S)
    # the bi-directional edge has arrowheads at both ends, the snapshots one
    assert page.count('marker-start="url(#arrow-') == 1
    # the table view lists the same items
    table = page[page.index('id="topology-table"') :]
    for name in edges_of(page):
        assert f">{html.escape(name)}</a>" in table


def test_the_dashboard_shows_the_topology_and_its_page_needs_no_more_than_a_viewer(viewer_client, servers):
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert 'id="topology-panel"' in page
    assert set(edges_of(page)) == {"replica.customers", "remote.customers", "shop.items ↔ branch"}
    assert 'hx-trigger="every 10s"' not in page  # the dashboard's own refresh redraws it
    partial = viewer_client.get(reverse("topology"), HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="topology" hx-get=')


def test_with_no_server_the_topology_says_how_to_start(viewer_client):
    page = viewer_client.get(reverse("topology")).content.decode()
    assert "No server is registered yet" in page


def test_more_servers_than_a_drawing_holds_are_listed_in_the_table(viewer_client, servers, settings, monkeypatch):
    monkeypatch.setattr("replication_admin.console.topology.MAX_DRAWN_SERVERS", 3)
    page = viewer_client.get(reverse("topology")).content.decode()
    assert "<svg" not in page and "5 servers are more than a drawing can show (3)" in page
    assert '<details class="table-view" open>' in page


def test_more_replications_between_two_servers_than_lines_hold_are_one_line_with_their_states_and_worst_lag(
    viewer_client, servers
):
    for n in range(6):  # with replica.customers, seven snapshots shop → replica; the last one's refreshes fail
        name = f"replica.part{n}"
        with sqlite3.connect(servers["shop"].database) as conn:
            conn.execute(f"CREATE TABLE part{n} (id integer PRIMARY KEY)")
        Snapshot.objects.create(name=name, source_server=servers["shop"], source_table=f"part{n}",
                                dest_server=servers["replica"], dest_table=f"part{n}", is_incremental=0)  # fmt: skip
        refresh(name, JobRun.State.SUCCEEDED, 5)
        refresh(name, JobRun.State.FAILED if n == 5 else JobRun.State.SUCCEEDED, 1)
    cache.clear()
    page = viewer_client.get(reverse("topology")).content.decode()
    edges = edges_of(page)
    bundle = "7 replications between shop and replica"
    assert set(edges) == {bundle, "remote.customers", "shop.items ↔ branch"}
    assert edges[bundle] == ("bad", servers["replica"].get_absolute_url())  # the failing one colours it
    # the oldest copy is 5 h old: the one whose last refresh failed
    assert "7 replications: 6 ok, 1 failing · up to 5 h 0 min behind" in labels_of(page)
    table = page[page.index('id="topology-table"') :]
    for n in range(6):
        assert f">replica.part{n}</a>" in table
    assert ">replica.customers</a>" in table


def test_the_dashboards_topology_lists_the_most_urgent_replications_and_leaves_the_rest_to_its_page(
    viewer_client, servers, monkeypatch
):
    monkeypatch.setattr("replication_admin.console.dashboard.ITEMS_SHOWN", 2)
    monkeypatch.setattr("replication_admin.console.topology.MAX_DRAWN_SERVERS", 3)
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert "<svg" not in page and '<details class="table-view" >' in page  # closed: the items are listed above it
    table = page[page.index('id="topology-table"') : page.index("</table>", page.index('id="topology-table"'))]
    assert table.count("<tr>") == 1 + 2  # the header and the two most urgent
    assert ">remote.customers</a>" in table  # failing, so among them
    assert "The 2 most urgent of 4 replications" in page  # the publication of shop.items is not ok either
    full = viewer_client.get(reverse("topology")).content.decode()
    assert '<details class="table-view" open>' in full and "most urgent of" not in full
    assert full[full.index('id="topology-table"') :].count(">replica.customers</a>") == 1


def test_up_to_five_replications_between_two_servers_are_each_a_line_of_their_own(viewer_client, servers):
    for n in range(4):  # with replica.customers, five snapshots shop → replica, as many as lines hold
        name = f"replica.part{n}"
        Snapshot.objects.create(name=name, source_server=servers["shop"], source_table=f"part{n}",
                                dest_server=servers["replica"], dest_table=f"part{n}", is_incremental=0)  # fmt: skip
        refresh(name, JobRun.State.SUCCEEDED, 1)
    cache.clear()
    page = viewer_client.get(reverse("topology")).content.decode()
    parts = {f"replica.part{n}" for n in range(4)}
    assert parts | {"replica.customers"} <= set(edges_of(page))
    assert not [name for name in edges_of(page) if "replications between" in name]

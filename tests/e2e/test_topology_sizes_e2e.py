"""In headless Chromium, the topology of 4, 7, 15 and 50 servers as an operator reads it: no label covers a server's
box or another label, no line runs through a box, every server's name fits its box (and its title holds all of
it), and every replication has its line — the names as awkward as DBAs make them."""

from __future__ import annotations

import itertools
import sqlite3

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache

from replication_admin.models import JobRun, Server, Snapshot, SnapshotPublication, SnapshotSubscription
from tests.console.test_dashboard import refresh
from tests.e2e.test_console import PASSWORD, log_in

pytestmark = [pytest.mark.browser]

AWKWARD = ['ab ""cd', "表😀", "warehouse_eu_west_replica_number_07_long_name", "Order Details"]

# Each drawn part's box on the screen, and 40 points along each line.
MEASURE = """svg => {
  const box = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  return {
    servers: [...svg.querySelectorAll('a.node')].map(a => ({
      name: a.dataset.server, box: box(a.querySelector('rect')), text: box(a.querySelector('text.node-name')),
      title: a.querySelector('title').textContent})),
    labels: [...svg.querySelectorAll('text.edge-label')].map(t => ({item: t.parentNode.dataset.item, box: box(t)})),
    lines: [...svg.querySelectorAll('a.edge')].map(a => {
      const path = a.querySelector('path'), length = path.getTotalLength(), m = path.getScreenCTM();
      const points = [];
      for (let i = 1; i < 40; i++) { const p = path.getPointAtLength(length * i / 40).matrixTransform(m); points.push([p.x, p.y]); }
      return {item: a.dataset.item, from: a.dataset.from, to: a.dataset.to, points};
    }),
  };
}"""


def server_names(n: int) -> list[str]:
    return [*AWKWARD[: min(len(AWKWARD), n - 1)], *(f"site{i:02d}" for i in range(n))][: n - 1]


@pytest.fixture
def replications(sqlite_path):
    """hub → every other server (a snapshot each, one in three failing), a chain between neighbours, three
    snapshots between the hub and its first server, and a bi-directional publication of the hub with three
    subscribers. Returns how many servers there are and the names of the replications drawn as lines."""

    def make(n: int) -> set[str]:
        names = ["hub", *server_names(n)]
        servers = {name: Server.objects.create(name=name, dialect="sqlite", database=sqlite_path(f"s{i}"))
                   for i, name in enumerate(names)}  # fmt: skip
        with sqlite3.connect(servers["hub"].database) as conn:
            conn.execute("CREATE TABLE customers (id integer PRIMARY KEY)")
        items = set()

        def snapshot(name: str, source: str, dest: str, failing: bool) -> None:
            Snapshot.objects.create(name=name, source_server=servers[source], source_table="customers",
                                    dest_server=servers[dest], dest_table=name, is_incremental=0)  # fmt: skip
            refresh(name, JobRun.State.SUCCEEDED, 2)
            refresh(name, JobRun.State.FAILED if failing else JobRun.State.SUCCEEDED, 1)
            items.add(name)

        for i, dest in enumerate(names[1:]):
            snapshot(f"{dest}.customers", "hub", dest, failing=i % 3 == 2)
        for a, b in itertools.pairwise(names[1:]):
            snapshot(f"{b}.from_{a}", a, b, failing=False)
        for k in range(2):
            snapshot(f"{names[1]}.part{k}", "hub", names[1], failing=False)
        SnapshotPublication.objects.create(item="hub.customers", server=servers["hub"], table="customers")
        for subscriber in names[1:4]:
            SnapshotSubscription.objects.create(server=subscriber, item="hub.customers", init_state="done")
            items.add(f"hub.customers ↔ {subscriber}")
        cache.clear()
        return items

    return make


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def inside(point: list[float], box: list[float]) -> bool:
    return box[0] + 1 < point[0] < box[2] - 1 and box[1] + 1 < point[1] < box[3] - 1


@pytest.mark.parametrize("n", [4, 7, 15, 50])
def test_the_topology_of_n_servers_has_no_label_over_a_box_or_a_label_and_no_line_through_a_box(
    live_server, page, shot, replications, n
):
    items = replications(n)
    User.objects.create_superuser("admin", password=PASSWORD)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/topology/")
    graph = page.locator("#topology svg.topology")
    graph.wait_for()
    drawn = graph.evaluate(MEASURE)
    shot(page, f"topology-{n}-servers")

    servers = drawn["servers"]
    assert sorted(s["name"] for s in servers) == sorted(Server.objects.values_list("name", flat=True))
    for s in servers:
        box, text = s["box"], s["text"]
        assert box[0] <= text[0] and text[2] <= box[2], f"{s['name']}'s name runs out of its box"
        assert s["title"].startswith(f"{s['name']} (SQLite)")  # the whole name on hover
    # Every replication is a line between its two servers (more than five between one pair would be bundled).
    assert {line["item"] for line in drawn["lines"]} == items
    labels = drawn["labels"]
    assert len(labels) == len(drawn["lines"]), "a line without its label"
    for i, label in enumerate(labels):
        for s in servers:
            assert not overlap(label["box"], s["box"]), f"the label of {label['item']} covers {s['name']}"
        for other in labels[i + 1 :]:
            assert not overlap(label["box"], other["box"]), f"{label['item']}'s label covers {other['item']}'s"
    for line in drawn["lines"]:
        for s in servers:
            crossed = [p for p in line["points"] if inside(p, s["box"])]
            assert not crossed, f"the line of {line['item']} ({line['from']} → {line['to']}) runs through {s['name']}"

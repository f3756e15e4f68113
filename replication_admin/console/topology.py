"""Who replicates to whom: the registered servers as nodes and the replication items (snapshots, bi-directional and
transactional subscriptions) as edges between them, coloured by the item's state and labelled with how far behind
it is. Drawn on the server as SVG: no script runs to lay it out, every node and edge is a link to its page, and the
same edges are listed in a table for screen readers and for more servers than a drawing can hold."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from django.urls import reverse

from replication_admin.core import live
from replication_admin.core.times import duration_text
from replication_admin.engine import health
from replication_admin.models import Server

WIDTH, HEIGHT = 960, 480
NODE_W, NODE_H = 164, 46
CURVE_STEP = 34  # px between parallel edges of one pair of servers
LABEL_NAME = 26  # characters of the item's name a label shows (the link's title has all of it)
LABEL_SPREAD = 0.14  # how far apart along the edges the labels of parallel edges sit (a fraction of the curve)
BADGE_RANK = {"ok": 0, "": 1, "warn": 2, "bad": 3}
# Servers the ellipse holds without two boxes overlapping (at its top, 2π·rx / n must stay wider than a box);
# beyond this the drawing is left out and the table lists every replication.
MAX_DRAWN_SERVERS = 14
# Lines one pair of servers shows apart (they fan out CURVE_STEP apart, their labels spread LABEL_SPREAD apart
# along them, the outer ones at 0.22 and 0.78 of the curve); more are drawn as one line naming how many there are,
# its colour the worst of theirs, its label the worst lag. The demo's four between two servers are drawn apart.
MAX_LINES_PER_PAIR = 5


@dataclass
class Node:
    name: str
    dialect: str
    url: str
    x: float = 0.0
    y: float = 0.0
    badge: str = "ok"
    problem: str = ""
    items: int = 0

    @property
    def box_x(self) -> float:
        return self.x - NODE_W / 2

    @property
    def box_y(self) -> float:
        return self.y - NODE_H / 2

    @property
    def name_y(self) -> float:
        return self.y - 3

    @property
    def sub_y(self) -> float:
        return self.y + 13


@dataclass
class Edge:
    item: dict
    source: Node
    destination: Node
    both_ways: bool
    path: str = ""
    label_x: float = 0.0
    label_y: float = 0.0
    label: str = ""
    extra: dict = field(default_factory=dict)


def _edge_label(item: dict) -> str:
    behind = f"behind {item['lag']}" if item["lag"] else "lag unknown"
    if "count" in item:  # a bundle (_bundled): how many in each state, the worst lag
        worst_lag = f" · up to {item['lag']} behind" if item["lag"] else ""
        return f"{item['count']} replications: {item['label']}{worst_lag}"
    if item["state"] == health.NEVER:
        behind = "not initialised"
    name = item["name"] if len(item["name"]) <= LABEL_NAME else item["name"][: LABEL_NAME - 1] + "…"
    return f"{name}: {item['label']} · {behind}"


def _layout(nodes: list[Node]) -> None:
    """On an ellipse, the first server on the left: two servers face each other, more go round."""
    n = len(nodes)
    rx, ry = WIDTH / 2 - NODE_W / 2 - 16, HEIGHT / 2 - NODE_H / 2 - 20
    for i, node in enumerate(nodes):
        angle = math.pi + 2 * math.pi * i / max(n, 1)
        node.x = round(WIDTH / 2 + rx * math.cos(angle), 1)
        node.y = round(HEIGHT / 2 + ry * math.sin(angle), 1) if n > 2 else HEIGHT / 2


def _border_point(node: Node, toward_x: float, toward_y: float) -> tuple[float, float]:
    """Where the line from the node's centre toward a point leaves its box (so arrowheads touch the box)."""
    dx, dy = toward_x - node.x, toward_y - node.y
    if dx == 0 and dy == 0:
        return node.x, node.y
    scale = min(
        (NODE_W / 2 + 4) / abs(dx) if dx else math.inf,
        (NODE_H / 2 + 4) / abs(dy) if dy else math.inf,
    )
    return node.x + dx * scale, node.y + dy * scale


def _by_pair(edges: list[Edge]) -> dict[tuple[str, str], list[Edge]]:
    """The edges between each pair of servers, whichever way they run, keyed by the two names in order."""
    pairs: dict[tuple[str, str], list[Edge]] = {}
    for edge in edges:
        first, second = sorted((edge.source.name, edge.destination.name))
        pairs.setdefault((first, second), []).append(edge)
    return pairs


def _bundled(edges: list[Edge]) -> list[Edge]:
    """The edges to draw: a pair of servers with more than MAX_LINES_PER_PAIR replications between them gets one
    line for all of them, which leads to the second server's page (it lists the replications that use it)."""
    drawn: list[Edge] = []
    for group in _by_pair(edges).values():
        if len(group) <= MAX_LINES_PER_PAIR:
            drawn.extend(group)
            continue
        worst = max(group, key=lambda e: BADGE_RANK[e.item["badge"]]).item
        lags = [e.item["lag_seconds"] for e in group if e.item["lag_seconds"] is not None]
        counts = Counter(e.item["label"] for e in group)
        states = ", ".join(f"{n} {label}" for label, n in counts.most_common())
        first = group[0]
        one_way = all(e.source is first.source and not e.both_ways for e in group)
        item = {
            "name": f"{len(group)} replications between {first.source.name} and {first.destination.name}",
            "kind": "",
            "count": len(group),
            "badge": worst["badge"],
            "label": states,
            "lag": duration_text(max(lags)) if lags else "",
            "pending_text": "",
            "detail": worst["detail"] if worst["badge"] == "bad" else "",
            "url": first.destination.url,
        }
        drawn.append(Edge(item=item, source=first.source, destination=first.destination, both_ways=not one_way))
    return drawn


def _route(edges: list[Edge]) -> None:
    """Each edge a quadratic curve; parallel edges between one pair fan out so none hides another."""
    for pair, group in _by_pair(edges).items():
        for i, edge in enumerate(group):
            a, b = edge.source, edge.destination
            offset = (i - (len(group) - 1) / 2) * CURVE_STEP
            if (a.name, b.name) != pair:
                offset = -offset  # the same side whichever way the edge runs
            mx, my = (a.x + b.x) / 2, (a.y + b.y) / 2
            length = math.hypot(b.x - a.x, b.y - a.y) or 1.0
            nx, ny = -(b.y - a.y) / length, (b.x - a.x) / length
            cx, cy = mx + nx * offset * 2, my + ny * offset * 2
            sx, sy = _border_point(a, cx, cy)
            ex, ey = _border_point(b, cx, cy)
            edge.path = f"M {sx:.1f} {sy:.1f} Q {cx:.1f} {cy:.1f} {ex:.1f} {ey:.1f}"
            # Parallel edges' labels also spread along the edges, so that none covers another's.
            t = 0.5 + (i - (len(group) - 1) / 2) * LABEL_SPREAD
            t = t if (a.name, b.name) == pair else 1 - t
            edge.label_x = round((1 - t) ** 2 * sx + 2 * (1 - t) * t * cx + t**2 * ex, 1)
            edge.label_y = round((1 - t) ** 2 * sy + 2 * (1 - t) * t * cy + t**2 * ey - 10, 1)  # above the line
            edge.label = _edge_label(edge.item)


def _with_url(item: dict) -> dict:
    if "url" not in item:
        item["url"] = reverse(item["route"][0], args=item["route"][1:])
    return item


def topology(items: list[dict], rows_shown: int | None = None) -> dict:
    """The nodes and edges to draw from the dashboard's replication items (the most urgent first), and the items as
    table rows (with `rows_shown`, the first so many: the dashboard's panel leaves the rest to the topology page)."""
    servers = list(Server.objects.order_by("name"))
    reach = live.reachability(servers)
    nodes = {
        s.name: Node(name=s.name, dialect=s.get_dialect_display(), url=s.get_absolute_url(),
                     badge="bad" if reach.get(s.name) or s.last_check_ok is False else "ok",
                     problem=reach.get(s.name) or (s.last_check_error if s.last_check_ok is False else ""))
        for s in servers
    }  # fmt: skip
    edges = []
    for item in items:
        source, destination = nodes.get(item["source"]), nodes.get(item["destination"])
        for node in {id(n): n for n in (source, destination) if n is not None}.values():
            node.items += 1
        if source is None or destination is None:
            continue  # a server no longer registered: the table still lists the item
        if source is destination:  # a publication's own state shows on its server
            if BADGE_RANK[item["badge"]] > BADGE_RANK[source.badge]:
                source.badge, source.problem = item["badge"], item["detail"]
            continue
        edges.append(Edge(item=_with_url(item), source=source, destination=destination,
                          both_ways=item["kind"] == "bi-directional subscription"))  # fmt: skip
    drawn = list(nodes.values())
    drawable = len(drawn) <= MAX_DRAWN_SERVERS
    if drawable:
        _layout(drawn)
        edges = _bundled(edges)
        _route(edges)
    rows = [i for i in items if i["source"] != i["destination"] or i["badge"] != "ok"]
    return {
        "nodes": drawn,
        "edges": edges,
        "drawable": drawable,
        "width": WIDTH,
        "height": HEIGHT,
        "node_w": NODE_W,
        "node_h": NODE_H,
        "topology_rows": [_with_url(i) for i in rows[:rows_shown]],
        "topology_rows_total": len(rows),
        "max_drawn": MAX_DRAWN_SERVERS,
        "badges": list(BADGE_RANK),
        "topology_url": reverse("topology"),
    }

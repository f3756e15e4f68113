"""Who replicates to whom: the registered servers as nodes and the replication items (snapshots, bi-directional and
transactional subscriptions) as edges between them, coloured by the item's state and labelled with how far behind
it is. Drawn on the server as SVG: no script runs to lay it out, every node and edge is a link to its page, and the
same edges are listed in a table for screen readers and for more servers than a drawing can hold."""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from dataclasses import dataclass

from django.urls import reverse

from replication_admin.core import live
from replication_admin.core.times import duration_text
from replication_admin.engine import health
from replication_admin.models import Server

WIDTH = 960
NODE_W, NODE_H = 164, 46
MARGIN = 14  # px between the canvas's edge and a column of boxes
ROW_GAP = 36  # px between two boxes of a column (the shortest a column's step is)
MIN_HEIGHT = 280
CURVE_STEP = 22  # px between parallel edges of one pair of servers
LABEL_NAME = 26  # characters of the item's name a label shows (the link's title has all of it)
LABEL_FONT = 12  # px, as console.css draws .edge-label
BADGE_RANK = {"ok": 0, "": 1, "warn": 2, "bad": 3}
# Beyond this many servers the page lists the replications in its table only; the dashboard's panel draws fewer.
MAX_DRAWN_SERVERS = 60
DASHBOARD_DRAWN_SERVERS = 10
# Lines one pair of servers shows apart; more are drawn as one line naming how many there are, its colour the
# worst of theirs, its label the worst lag. The demo's four between two servers are drawn apart.
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

    @property
    def shown_name(self) -> str:
        """The name as far as the box holds it (bold 14 px; its title has all of it)."""
        return _fit(self.name, 15, NODE_W - 14)


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
    label_width: float = 0.0
    points: tuple[tuple[float, float], ...] = ()


def _edge_label(item: dict) -> str:
    behind = f"behind {item['lag']}" if item["lag"] else "lag unknown"
    if "count" in item:  # a bundle (_bundled): how many in each state, the worst lag
        worst_lag = f" · up to {item['lag']} behind" if item["lag"] else ""
        return f"{item['count']} replications: {item['label']}{worst_lag}"
    if item["state"] == health.NEVER:
        behind = "not initialised"
    name = item["name"] if len(item["name"]) <= LABEL_NAME else item["name"][: LABEL_NAME - 1] + "…"
    return f"{name}: {item['label']} · {behind}"


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


def text_width(text: str, size: float) -> float:
    """A generous estimate of the text's width in px; the label is drawn at exactly this width (SVG `textLength`),
    so the boxes placed clear of each other here are the boxes the browser draws."""
    width = 0.0
    for ch in text:
        if unicodedata.east_asian_width(ch) in "WF" or ord(ch) >= 0x1F000:
            width += 1.1 * size
        elif ch.isupper() or ch.isdigit() or ch in "mwMW@%&":
            width += 0.7 * size
        elif ch in " .,:;'|!ilIjft·()[]":
            width += 0.36 * size
        else:
            width += 0.58 * size
    return round(width, 1)


def _fit(text: str, size: float, room: float) -> str:
    """The text, cut with "…" so that it is at most `room` px wide."""
    if text_width(text, size) <= room:
        return text
    while text and text_width(text + "…", size) > room:
        text = text[:-1]
    return text + "…"


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def meets(self, other: Box) -> bool:
        return (
            self.left < other.right and other.left < self.right and self.top < other.bottom and other.top < self.bottom
        )


def _node_box(node: Node, pad: float = 0.0) -> Box:
    return Box(node.box_x - pad, node.box_y - pad, node.box_x + NODE_W + pad, node.box_y + NODE_H + pad)


def _sides(nodes: list[Node], edges: list[Edge]) -> tuple[list[Node], list[Node]]:
    """Two columns, as many replications as can be running between them rather than within one (a greedy
    maximum cut, then swaps that raise it), neither column more than half the servers; the side most lines leave
    from is on the left, so that most arrows point right."""
    weight: Counter[tuple[str, str]] = Counter()
    flow: Counter[str] = Counter()  # lines leaving a server minus lines reaching it
    for edge in edges:
        a, b = edge.source.name, edge.destination.name
        weight[(a, b)] += 1
        weight[(b, a)] += 1
        if not edge.both_ways:
            flow[a] += 1
            flow[b] -= 1
    neighbours: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
    for (a, b), w in weight.items():
        neighbours[a][b] = w
    room = math.ceil(len(nodes) / 2)
    side: dict[str, int] = {}  # 0 left, 1 right
    for node in sorted(nodes, key=lambda n: (-sum(neighbours[n.name].values()), n.name)):
        across = [sum(w for m, w in neighbours[node.name].items() if side.get(m) == 1 - s) for s in (0, 1)]
        filled = [sum(1 for v in side.values() if v == s) for s in (0, 1)]
        choices = [s for s in (0, 1) if filled[s] < room]
        side[node.name] = max(choices, key=lambda s: (across[s], (1 - 2 * s) * flow[node.name], -filled[s]))

    def gain(name: str) -> int:  # how many more lines would run between the columns if this server moved
        return sum(w if side[m] == side[name] else -w for m, w in neighbours[name].items())

    for _ in range(len(nodes)):
        best = max(
            ((gain(a) + gain(b) + 2 * neighbours[a].get(b, 0), a, b)
             for a in side for b in side if side[a] == 0 and side[b] == 1),
            default=(0, "", ""),
        )  # fmt: skip
        if best[0] <= 0:
            break
        side[best[1]], side[best[2]] = 1, 0
    leaving = sum(flow[n] for n, s in side.items() if s == 0)
    if leaving < 0:  # more lines leave the right column than the left
        side = {n: 1 - s for n, s in side.items()}
    columns: tuple[list[Node], list[Node]] = ([], [])
    for node in nodes:
        columns[side[node.name]].append(node)
    return columns


def _ordered(columns: tuple[list[Node], list[Node]], edges: list[Edge]) -> None:
    """Each column in the order that puts a server level with the servers it replicates with (a few rounds of the
    barycentre heuristic), so that few lines cross; servers without replications at the bottom."""
    linked: dict[str, list[str]] = {}
    for edge in edges:
        linked.setdefault(edge.source.name, []).append(edge.destination.name)
        linked.setdefault(edge.destination.name, []).append(edge.source.name)
    for _ in range(6):
        where = {n.name: (i + 0.5) / len(col) for col in columns for i, n in enumerate(col)}
        for column in columns:
            column.sort(key=lambda n: (
                n.name not in linked,
                sum(where[m] for m in linked.get(n.name, ())) / max(len(linked.get(n.name, ())), 1)
                if n.name in linked else where[n.name],
                n.name,
            ))  # fmt: skip


def _layout(nodes: list[Node], edges: list[Edge], row_gap: float) -> float:
    """Two columns of boxes with every line in the space between them: a line runs from the inner side of one box
    to the inner side of another, so it never crosses a box, and the labels have the middle to themselves. The
    shorter column spreads over the height of the longer. Returns the drawing's height."""
    if len(nodes) == 1:
        nodes[0].x, nodes[0].y = WIDTH / 2, MIN_HEIGHT / 2
        return MIN_HEIGHT
    columns = _sides(nodes, edges)
    _ordered(columns, edges)
    step = NODE_H + row_gap
    height = max(MIN_HEIGHT, max(len(c) for c in columns) * step + 2 * MARGIN)
    for s, column in enumerate(columns):
        x = MARGIN + NODE_W / 2 if s == 0 else WIDTH - MARGIN - NODE_W / 2
        spacing = (height - 2 * MARGIN) / max(len(column), 1)
        for i, node in enumerate(column):
            node.x, node.y = x, round(MARGIN + spacing * (i + 0.5), 1)
    return height


def _inner_x(node: Node) -> float:
    """Where lines meet the box: its side that faces the middle (4 px off, for the arrowhead)."""
    return node.x + NODE_W / 2 + 4 if node.x < WIDTH / 2 else node.x - NODE_W / 2 - 4


def _ports(edges: list[Edge]) -> dict[tuple[int, int], float]:
    """Where each line meets its box: the lines of one box spread along its inner side in the order of the heights
    of their other ends, so that they leave without crossing each other. (id(edge), 0 for its start or 1 for its
    end) → y."""
    ends: dict[str, list[tuple[float, int, tuple[int, int]]]] = {}
    where = {}
    for n, edge in enumerate(edges):
        for which, (here, there) in enumerate(((edge.source, edge.destination), (edge.destination, edge.source))):
            ends.setdefault(here.name, []).append((there.y, n, (id(edge), which)))
            where[here.name] = here.y
    ports = {}
    span = NODE_H - 12
    for name, attached in ends.items():
        attached.sort()
        for k, (_, _, key) in enumerate(attached):
            ports[key] = where[name] - span / 2 + span * (k + 0.5) / len(attached)
    return ports


def _route(edges: list[Edge]) -> None:
    """Each edge a cubic curve between the boxes' inner sides; parallel edges between one pair fan out (their
    middles CURVE_STEP apart) so that none hides another."""
    gap = WIDTH - 2 * (MARGIN + NODE_W + 4)
    ports = _ports(edges)
    for pair, group in _by_pair(edges).items():
        for i, edge in enumerate(group):
            a, b = edge.source, edge.destination
            rank = i - (len(group) - 1) / 2
            if (a.name, b.name) != pair:
                rank = -rank  # the same side whichever way the edge runs
            ax, ay, bx, by = _inner_x(a), ports[(id(edge), 0)], _inner_x(b), ports[(id(edge), 1)]
            if (a.x < WIDTH / 2) != (b.x < WIDTH / 2):  # across the middle
                pull = (bx - ax) * 0.4
                c1, c2 = (ax + pull, ay + rank * CURVE_STEP), (bx - pull, by + rank * CURVE_STEP)
            else:  # within a column: a bow into the middle, deeper the farther apart the boxes
                inward = 1 if a.x < WIDTH / 2 else -1
                depth = min(gap * 0.6, 40 + 0.3 * abs(by - ay) + (i * CURVE_STEP))
                c1, c2 = (ax + inward * depth, ay), (bx + inward * depth, by)
            edge.points = ((ax, ay), c1, c2, (bx, by))
            edge.path = "M {:.1f} {:.1f} C {:.1f} {:.1f} {:.1f} {:.1f} {:.1f} {:.1f}".format(ax, ay, *c1, *c2, bx, by)


def _on_curve(points: tuple[tuple[float, float], ...], t: float) -> tuple[float, float]:
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points
    u = 1 - t
    return (
        u**3 * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t**3 * x3,
        u**3 * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t**3 * y3,
    )


# Where along its line a label may sit, the middle first; and its baseline against the line (above, below).
LABEL_SPOTS = [0.5 + sign * 0.05 * k for k in range(8) for sign in ((1, -1) if k else (1,))]
LABEL_BASELINES = (-6, 16, -20, 30)
# Sideways shifts of a label from its line's point: none first; where the middle is crowded (a hub's many lines),
# a little to either side before the label is shortened.
LABEL_NUDGES = ((0,), (-60, 60, -120, 120))


def _short_labels(edge: Edge) -> list[str]:
    """The label, then shorter forms of it for a crowded drawing (the line's title always has all of it)."""
    full = _edge_label(edge.item)
    name = edge.item["name"]
    return list(
        dict.fromkeys([full, f"{_fit(name, LABEL_FONT, 110)}: {edge.item['label']}", _fit(name, LABEL_FONT, 90)])
    )


def _place_labels(nodes: list[Node], edges: list[Edge], height: float) -> int:
    """Each edge's label at the first spot along its curve (the middle first, then outwards; above the line,
    then below) where it meets no box and no label placed before it; the broken replications are placed first,
    so they get the best spots. A label with no free spot is shortened, and left out as a last resort (its line's
    title and the table still say it all). Returns how many were left out."""
    taken = [_node_box(n, pad=3) for n in nodes]
    left_out = 0
    for edge in sorted(edges, key=lambda e: (-BADGE_RANK[e.item["badge"]], e.item["name"])):
        edge.label = ""
        bold = 1.08 if edge.item["badge"] == "bad" else 1.0  # console.css draws a broken one's label in bold
        tries = [(text, nudges) for text in _short_labels(edge) for nudges in LABEL_NUDGES]
        for text, nudges in tries:
            width = round(text_width(text, LABEL_FONT) * bold, 1)
            spot = next(
                ((x, baseline, box) for t in LABEL_SPOTS for cx, y in [_on_curve(edge.points, t)]
                 for x in (cx + dx for dx in nudges) for baseline in (y + dy for dy in LABEL_BASELINES)
                 for box in [Box(x - width / 2 - 2, baseline - LABEL_FONT - 1, x + width / 2 + 2, baseline + 4)]
                 if box.left >= 0 and box.right <= WIDTH and box.top >= 0 and box.bottom <= height
                 and not any(box.meets(other) for other in taken)),
                None,
            )  # fmt: skip
            if spot is not None:
                edge.label, edge.label_width = text, width
                edge.label_x, edge.label_y = round(spot[0], 1), round(spot[1], 1)
                taken.append(spot[2])
                break
        else:
            left_out += 1
    return left_out


def _draw(nodes: list[Node], edges: list[Edge]) -> tuple[float, int]:
    """Lay out, route and label; where labels had to be left out, the rows move apart (twice at most) to make
    room. Returns the height and how many labels are left out."""
    best: tuple[int, float] | None = None
    for row_gap in (ROW_GAP, ROW_GAP * 2, ROW_GAP * 4):
        height = _layout(nodes, edges, row_gap)
        _route(edges)
        left_out = _place_labels(nodes, edges, height)
        if left_out == 0:
            return height, 0
        if best is None or left_out < best[0]:
            best = (left_out, row_gap)
    assert best is not None
    height = _layout(nodes, edges, best[1])
    _route(edges)
    return height, _place_labels(nodes, edges, height)


def _with_url(item: dict) -> dict:
    if "url" not in item:
        item["url"] = reverse(item["route"][0], args=item["route"][1:])
    return item


def topology(items: list[dict], rows_shown: int | None = None, max_drawn: int | None = None) -> dict:
    """The nodes and edges to draw from the dashboard's replication items (the most urgent first), and the items as
    table rows (with `rows_shown`, the first so many: the dashboard's panel leaves the rest to the topology page);
    with more servers than `max_drawn` (or MAX_DRAWN_SERVERS), the table only."""
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
    drawable = len(drawn) <= min(MAX_DRAWN_SERVERS, max_drawn or MAX_DRAWN_SERVERS)
    height, left_out = float(MIN_HEIGHT), 0
    if drawable:
        edges = _bundled(edges)
        height, left_out = _draw(drawn, edges)
    rows = [i for i in items if i["source"] != i["destination"] or i["badge"] != "ok"]
    return {
        "nodes": drawn,
        "edges": edges,
        "drawable": drawable,
        "width": WIDTH,
        "height": height,
        "labels_left_out": left_out,
        "node_w": NODE_W,
        "node_h": NODE_H,
        "topology_rows": [_with_url(i) for i in rows[:rows_shown]],
        "topology_rows_total": len(rows),
        "max_drawn": min(MAX_DRAWN_SERVERS, max_drawn or MAX_DRAWN_SERVERS),
        "badges": list(BADGE_RANK),
        "topology_url": reverse("topology"),
    }

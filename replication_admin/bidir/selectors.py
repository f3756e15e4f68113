"""Read queries of bi-directional replication for pages: the sections of the publications and subscriptions
lists."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils import timezone

from replication_admin.bidir import actions as bidir
from replication_admin.bidir.forms import (
    PublicationForm,
)
from replication_admin.core import live
from replication_admin.core.live import backlog_fields, backlog_seconds
from replication_admin.core.presence import Presence
from replication_admin.core.times import iso
from replication_admin.core.web import Chart, SortFields, line_chart, listing, local_stamp
from replication_admin.engine import health
from replication_admin.models import (
    RegistryEntry,
    ScheduledEvent,
    Server,
    SnapshotPublication,
    SnapshotSubscription,
    Validation,
)

PUBLICATION_SORTS: dict[str, SortFields] = {
    "item": "item",
    "publisher": ("server_id", "table", "item"),
    "subscribers": ("subscriber_count", "item"),
    "last_ts": ("last_ts", "item"),
    "last_sync": ("last_sync_at", "item"),
}


SUBSCRIPTION_SORTS = {
    "server": ("server", "item"),
    "item": ("item", "server"),
    "init": ("init_state", "item", "server"),
    "last_pull": ("last_pull_ts", "item", "server"),
    "last_push": ("last_push_ts", "item", "server"),
    "last_sync": ("last_sync_at", "item", "server"),
}


def publication_list_context(request: HttpRequest) -> dict:
    """The bi-directional section of the publications page."""
    subscribers = (
        SnapshotSubscription.objects.filter(item=OuterRef("item"), type=OuterRef("type"))
        .order_by()
        .values("item")
        .annotate(n=Count("id"))
        .values("n")
    )
    publications = SnapshotPublication.objects.annotate(subscriber_count=Coalesce(Subquery(subscribers), 0))
    pubs = listing(request, publications, sorts=PUBLICATION_SORTS, default="item",
                   search=("item", "server__name", "table"))  # fmt: skip
    shown = list(pubs.page)
    names = {bidir.publication_event_name(p): p.pk for p in shown}
    events = {names[e.name]: e for e in ScheduledEvent.objects.filter(name__in=names)}
    states = {row["id"]: row for row in bidir_status_rows({p.item for p in shown})} if shown else {}
    pubs.page.object_list = [(p, events.get(p.pk), states.get(p.pk)) for p in shown]
    return {"publications": pubs, "form": PublicationForm()}


def subscription_list_context(request: HttpRequest) -> dict:
    """The bi-directional section of the subscriptions page."""
    subs = listing(request, SnapshotSubscription.objects.all(), sorts=SUBSCRIPTION_SORTS, default="item",
                   search=("server", "item"))  # fmt: skip
    shown = list(subs.page)
    publications = dict(SnapshotPublication.objects.filter(item__in={s.item for s in shown}).values_list("item", "pk"))
    items = {s.item for s in shown}
    states = {(p["item"], row["server"]): row for p in (bidir_status_rows(items) if items else [])
              for row in p["subscribers"]}  # fmt: skip
    subs.page.object_list = [(s, publications.get(s.item), states.get((s.item, s.server))) for s in shown]
    return {"snapshot_subscriptions": subs}


def pending_rows(pairs: Iterable[tuple[Any, Mapping[str, Any]]]) -> dict[tuple[str, str], live.Live]:
    """Per (item, subscriber server): the log rows a sync has yet to apply and the oldest one's time (a
    live.Backlog), read live (bounded reads on the SNAPTIME index, cached a few seconds): the subscriber's own log
    (it holds only what it has not sent) plus the publisher's log rows newer than the subscriber's last push that
    did not come from the subscriber itself (their push to it is pending).
    `pairs`: (publication with server_id and table, subscription dict with server, last_push_ts, init_started_at,
    init_state). A subscription whose initial copy is not done has nothing pending (it is not initialised). One
    catalog query."""
    pairs = [(p, s) for p, s in pairs if s["init_state"] == "done"]
    names = {p.server_id for p, _ in pairs} | {s["server"] for _, s in pairs}
    servers = {s.name: s for s in Server.objects.filter(name__in=names)}
    reach = live.reachability(servers.values())
    result = {}
    for pub, sub in pairs:
        since = sub["last_push_ts"] or sub["init_started_at"]
        total, errors = live.Backlog(), []
        for name, at, not_from in ((sub["server"], None, ""), (pub.server_id, since, sub["server"])):
            server = servers.get(name)
            if server is None:
                errors.append(f"server {name} is not registered")
                continue
            key = ("bidir-backlog", pub.table, at, not_from)
            rows = live.read(server, reach, key, partial(live.log_backlog, server, pub.table, at, not_from))
            if rows.ok:
                total += rows.value
            else:
                errors.append(rows.error)
        result[(pub.item, sub["server"])] = live.Live(error="; ".join(errors)) if errors else live.Live(value=total)
    return result


# --- state (engine/health.py decides it from live facts) ---------------------------------------------------

BIDIR_PUB_FIELDS = ("id", "item", "type", "server", "table", "last_sync_at", "last_sync_error")
BIDIR_SUB_FIELDS = (
    "server",
    "item",
    "type",
    "init_state",
    "init_started_at",
    "last_pull_ts",
    "last_push_ts",
    "last_sync_at",
    "last_error",
)
BidirState = tuple[SnapshotPublication, str, list[tuple[dict, str]]]


def bidir_states(
    sub_fields: tuple[str, ...] = BIDIR_SUB_FIELDS, items: Iterable[str] | None = None
) -> list[BidirState]:
    """Every bi-directional publication with its state, and its subscriptions (dicts of `sub_fields`) each with
    theirs (two queries)."""
    fields = dict.fromkeys(("item", "type", "init_state", "init_started_at", "last_push_ts", "last_sync_at",
                            "last_error", *sub_fields))  # fmt: skip
    subscriptions: dict[tuple[str, int], list[dict]] = defaultdict(list)
    items = None if items is None else list(items)
    chosen = (
        SnapshotSubscription.objects.all() if items is None else SnapshotSubscription.objects.filter(item__in=items)
    )
    for sub in chosen.values(*fields):
        subscriptions[(sub["item"], sub["type"])].append(sub)
    pubs = SnapshotPublication.objects.all() if items is None else SnapshotPublication.objects.filter(item__in=items)
    publications = list(pubs.only(*BIDIR_PUB_FIELDS))
    pending = pending_rows((pub, sub) for pub in publications for sub in subscriptions.get((pub.item, pub.type), []))
    names = {str(p.server_id) for p in publications} | {s["server"] for subs in subscriptions.values() for s in subs}
    presence = Presence(names)
    result = []
    for pub in publications:
        subs = []
        for sub in subscriptions.get((pub.item, pub.type), []):
            sub["backlog"], sub["reachable"], sub["live_error"] = backlog_fields(pending.get((pub.item, sub["server"])))
            sub["pending_rows"] = sub["backlog"].rows if sub["backlog"] else None
            state = health.bidir_subscriber_state(sub["last_error"], sub["init_state"] == "done", sub["last_sync_at"],
                                                  pub.last_sync_at)  # fmt: skip
            sub["broken"] = presence.gone(str(pub.server_id), pub.table, "published") or (
                presence.gone(sub["server"], pub.table, "subscriber's copy of the")
                if sub["init_state"] == "done"
                else ""
            )
            state = health.with_presence(health.with_reachability(state, sub["reachable"]), sub["broken"])
            subs.append((sub, state))
        gone = presence.gone(str(pub.server_id), pub.table, "published")
        state = health.with_presence(health.bidir_publication_state(pub.last_sync_error, [s for _, s in subs]), gone)
        result.append((pub, state, subs))
    return result


def bidir_status_rows(items: Iterable[str] | None = None, now: datetime | None = None) -> list[dict]:
    """Every bi-directional publication with its subscribers. Lag in seconds: the age of the oldest change a sync
    has yet to carry between the publisher and the subscriber (0 when none waits); a publication's is its worst."""
    now = now or timezone.now()
    rows = []
    for pub, pub_state, subscribers in bidir_states(items=items):
        subs = [
            {
                "server": sub["server"], "init_state": sub["init_state"], "last_pull_ts": iso(sub["last_pull_ts"]),
                "last_push_ts": iso(sub["last_push_ts"]), "last_sync_at": iso(sub["last_sync_at"]),
                "last_error": sub["broken"] or sub["last_error"] or sub["live_error"], "state": state,
                "state_label": health.LABELS[state], "lag_transactions": None,
                "lag_seconds": backlog_seconds(sub["backlog"], now), "pending_rows": sub["pending_rows"],
                "reachable": sub["reachable"],
                "last_success": iso(sub["last_sync_at"]) if not sub["last_error"] else None,
            }
            for sub, state in subscribers
        ]  # fmt: skip
        pending = [s["pending_rows"] for s in subs]
        ages = [s["lag_seconds"] for s in subs]
        rows.append({
            "id": pub.pk, "item": pub.item, "server": pub.server_id, "table": pub.table,
            "last_sync_at": iso(pub.last_sync_at), "last_sync_error": pub.last_sync_error, "subscribers": subs,
            "state": pub_state,
            "state_label": health.LABELS[pub_state], "lag_transactions": None,
            "lag_seconds": None if None in ages else max(ages, default=0.0),
            "pending_rows": None if None in pending else sum(p for p in pending if p is not None),
            "reachable": all(s["reachable"] for s in subs), "last_error": pub.last_sync_error,
            "last_success": iso(pub.last_sync_at) if not pub.last_sync_error else None,
        })  # fmt: skip
    return rows


VALIDATIONS_SHOWN = 200  # validations the drift chart draws (of every subscriber of the publication), newest


@dataclass(frozen=True)
class ValidationPanel:
    """The publication page's validation panel: each copied subscriber's latest validation, the drift trend, the
    registry's schedule (bi-directional subscriptions have no profile of their own)."""

    latest: list[tuple[SnapshotSubscription, Validation | None]]
    chart: Chart
    every: int
    slices: int


def validation_panel(subscriptions: list[SnapshotSubscription]) -> ValidationPanel:
    rows = list(Validation.objects.filter(bidir__in=subscriptions).order_by("-at", "-pk")[:VALIDATIONS_SHOWN])
    latest: dict[int, Validation] = {}
    for row in rows:
        latest.setdefault(row.bidir_id or 0, row)
    traces = []
    for subscription in subscriptions:
        points = sorted((r for r in rows if r.bidir_id == subscription.pk), key=lambda r: (r.at, r.pk))
        if points:
            traces.append({
                "type": "scatter", "mode": "lines+markers", "name": subscription.server,
                "x": [local_stamp(r.at) for r in points], "y": [r.drift for r in points],
                "text": [f"{r.slice_text}: {r.verdict}" for r in points],
            })  # fmt: skip
    return ValidationPanel(
        latest=[(s, latest.get(s.pk)) for s in subscriptions if s.init_state == "done"],
        chart=Chart(line_chart(traces, "keys that differ")),
        every=RegistryEntry.get_int("repl_validate_every"),
        slices=max(1, RegistryEntry.get_int("repl_validate_slices")),
    )  # fmt: skip

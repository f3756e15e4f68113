"""Read queries of bi-directional replication for pages: the sections of the publications and subscriptions
lists."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest

from replication_admin.bidir import actions as bidir
from replication_admin.bidir.forms import (
    PublicationForm,
)
from replication_admin.core import live
from replication_admin.core.web import SortFields, listing
from replication_admin.models import ScheduledEvent, Server, SnapshotPublication, SnapshotSubscription

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
    pubs.page.object_list = [(p, events.get(p.pk)) for p in shown]
    return {"publications": pubs, "form": PublicationForm()}


def subscription_list_context(request: HttpRequest) -> dict:
    """The bi-directional section of the subscriptions page."""
    subs = listing(request, SnapshotSubscription.objects.all(), sorts=SUBSCRIPTION_SORTS, default="item",
                   search=("server", "item"))  # fmt: skip
    shown = list(subs.page)
    publications = dict(SnapshotPublication.objects.filter(item__in={s.item for s in shown}).values_list("item", "pk"))
    subs.page.object_list = [(s, publications.get(s.item)) for s in shown]
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

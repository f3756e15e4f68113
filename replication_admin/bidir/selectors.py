"""Read queries of bi-directional replication for pages: the sections of the publications and subscriptions
lists."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest

from replication_admin.bidir import actions as bidir
from replication_admin.bidir.forms import (
    PublicationForm,
)
from replication_admin.core.web import SortFields, listing
from replication_admin.models import ScheduledEvent, SnapshotPublication, SnapshotSubscription

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

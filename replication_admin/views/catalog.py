"""Read-only views over catalog tables that later features fill (snapshots, publications, ...)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from replication_admin.models import (
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
    TpItem,
    TransactionalConflictResolver,
)


@require_GET
def publications(request: HttpRequest) -> HttpResponse:
    context = {
        "snapshot_publications": SnapshotPublication.objects.all(),
        "accounts": ReplAccount.objects.all(),
        "items": TpItem.objects.all(),
    }
    return render(request, "replication_admin/publications.html", context)


@require_GET
def subscriptions(request: HttpRequest) -> HttpResponse:
    context = {
        "snapshot_subscriptions": SnapshotSubscription.objects.all(),
        "subscribers": ReplSubscriber.objects.all(),
    }
    return render(request, "replication_admin/subscriptions.html", context)


@require_GET
def conflicts(request: HttpRequest) -> HttpResponse:
    context = {
        "snapshot_resolvers": SnapshotConflictResolver.objects.all(),
        "transactional_resolvers": TransactionalConflictResolver.objects.all(),
    }
    return render(request, "replication_admin/conflicts.html", context)


@require_GET
def scheduler(request: HttpRequest) -> HttpResponse:
    return render(request, "replication_admin/scheduler.html", {"events": ScheduledEvent.objects.all()})

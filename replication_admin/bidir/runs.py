"""The bi-directional feature's jobs: a subscriber's initial copy and the sync of a publication."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replication_admin.bidir.initial_copy import init_subscription
from replication_admin.bidir.sync import sync_publication
from replication_admin.core.jobs import JobParams, JobRunner, Subject, register
from replication_admin.models import SnapshotPublication, SnapshotSubscription


@dataclass(frozen=True)
class InitParams(JobParams):
    subscription: int
    rows_per_commit: int | None = None


@dataclass(frozen=True)
class SyncParams(JobParams):
    publication: int


@register
class BidirInit(JobRunner[InitParams]):
    kind = "bidir_init"
    label = "Initial copy to a subscriber"
    params_type = InitParams

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        subscription = SnapshotSubscription.objects.filter(pk=params["subscription"]).first()
        if subscription is None:
            return Subject(f"bi-directional subscription #{params['subscription']} (dropped)")
        publication = SnapshotPublication.objects.filter(item=subscription.item).first()
        url = publication.get_absolute_url() if publication is not None else ""
        return Subject(f"subscription of {subscription.server} to {subscription.item}", url)

    def run(self) -> dict:
        return init_subscription(self.job, self.reporter, self.params.subscription, self.params.rows_per_commit)


@register
class BidirSync(JobRunner[SyncParams]):
    kind = "bidir_sync"
    label = "Sync a bi-directional publication"
    params_type = SyncParams

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        publication = SnapshotPublication.objects.filter(pk=params["publication"]).first()
        if publication is None:
            return Subject(f"bi-directional publication #{params['publication']} (dropped)")
        return Subject(f"publication {publication.item}", publication.get_absolute_url())

    def run(self) -> dict:
        return sync_publication(self.job, self.reporter, self.params.publication)

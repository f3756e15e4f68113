"""The bi-directional feature's jobs: a subscriber's initial copy and the sync of a publication."""

from __future__ import annotations

from dataclasses import dataclass

from replication_admin.bidir.initial_copy import init_subscription
from replication_admin.bidir.sync import sync_publication
from replication_admin.core.jobs import JobParams, JobRunner, register


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

    def run(self) -> dict:
        return init_subscription(self.job, self.reporter, self.params.subscription, self.params.rows_per_commit)


@register
class BidirSync(JobRunner[SyncParams]):
    kind = "bidir_sync"
    label = "Sync a bi-directional publication"
    params_type = SyncParams

    def run(self) -> dict:
        return sync_publication(self.job, self.reporter, self.params.publication)

"""The bi-directional feature's jobs: a subscriber's initial copy and the sync of a publication, with their
parameters and results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replication_admin.bidir.initial_copy import init_subscription
from replication_admin.bidir.sync import sync_publication
from replication_admin.core.jobs import JobParams, JobResult, JobRunner, Subject, register, run_counts
from replication_admin.models import SnapshotPublication, SnapshotSubscription


@dataclass(frozen=True)
class InitParams(JobParams):
    subscription: int
    rows_per_commit: int | None = None


@dataclass(frozen=True)
class SyncParams(JobParams):
    publication: int


@dataclass(frozen=True)
class InitResult(JobResult):
    """An initial copy: the publisher's rows, how many were inserted (the rest were there), in commits of
    `rows_per_commit`, and whether it resumed an interrupted copy."""

    mode: str = "init"
    rows: int = 0
    inserted: int = 0
    rows_per_commit: int | None = None
    resumed: bool = False
    path: str = ""  # how the rows were staged: "stream" or "spark" ("" when a staged copy was resumed)

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.rows, written=self.inserted)


@dataclass(frozen=True)
class SubscriberSync(JobResult):
    """One subscriber's part of a sync: what was pulled from it and pushed to it. Of the changes `read`
    from its log, `applied` were settled by this sync (`pulled` onto the publisher, conflicts decided
    among them, or `already_applied`); `decided_again` of them were decided again under the apply's locks
    because their publisher row moved meanwhile; `held` conflicts wait for a person and
    `left_for_next_sync` changes for the next sync."""

    read: int = 0
    applied: int = 0
    pulled: int = 0
    conflicts: int = 0
    already_applied: int = 0
    decided_again: int = 0
    held: int = 0
    left_for_next_sync: int = 0
    pushed: int = 0
    waiting: int = 0


@dataclass(frozen=True)
class SyncResult(JobResult):
    """A sync of a publication: each subscriber's part, the schema changes followed (in words) and the conflicts."""

    mode: str = "sync"
    subscribers: dict[str, SubscriberSync] = field(default_factory=dict)
    schema_changes: list[str] = field(default_factory=list)
    conflicts: int = 0

    def counts(self) -> dict[str, int]:
        """No "written": a pulled change is settled on the publisher whether it was written or lost a conflict."""
        parts = self.subscribers.values()
        return run_counts(read=sum(p.read for p in parts), pulled=sum(p.pulled for p in parts),
                          pushed=sum(p.pushed for p in parts), conflicts=sum(p.conflicts for p in parts))  # fmt: skip


@register
class BidirInit(JobRunner[InitParams]):
    kind = "bidir_init"
    label = "Initial copy to a subscriber"
    params_type = InitParams
    result_type = InitResult

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        subscription = SnapshotSubscription.objects.filter(pk=params["subscription"]).first()
        if subscription is None:
            return Subject(f"bi-directional subscription #{params['subscription']} (dropped)")
        publication = SnapshotPublication.objects.filter(item=subscription.item).first()
        url = publication.get_absolute_url() if publication is not None else ""
        return Subject(f"subscription of {subscription.server} to {subscription.item}", url)

    def run(self) -> InitResult:
        copied = init_subscription(self.job, self.reporter, self.params.subscription, self.params.rows_per_commit)
        return InitResult.from_json(copied)


@register
class BidirSync(JobRunner[SyncParams]):
    kind = "bidir_sync"
    label = "Sync a bi-directional publication"
    params_type = SyncParams
    result_type = SyncResult

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        publication = SnapshotPublication.objects.filter(pk=params["publication"]).first()
        if publication is None:
            return Subject(f"bi-directional publication #{params['publication']} (dropped)")
        return Subject(f"publication {publication.item}", publication.get_absolute_url())

    def run(self) -> SyncResult:
        return SyncResult.from_json(sync_publication(self.job, self.reporter, self.params.publication))

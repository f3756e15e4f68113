"""The transactional feature's jobs: REPL_INIT_COPY, REPL_RELOAD_TABLE and REPL_SYNC of a subscription, with their
parameters and results."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from replication_admin.core.alerts import safely_send_notifications
from replication_admin.core.jobs import STORED_WHEN_SET, JobParams, JobResult, JobRunner, Subject, register, run_counts
from replication_admin.models import ReplSubscriber
from replication_admin.transactional.initial_copy import init_copy, init_from_image, reload_table
from replication_admin.transactional.sync import SyncOutcome, sync_subscription


@dataclass(frozen=True)
class SubscriptionParams(JobParams):
    subscription: int
    image: str = ""  # REPL_INIT_COPY from this publication image instead of from the publisher


@dataclass(frozen=True)
class InitResult(JobResult):
    """An initial copy, from the publisher (`mode` init) or from a publication image (image), each its own shape."""

    mode: str = ""


@dataclass(frozen=True)
class CopyInit(InitResult):
    """Every published table copied from the publisher (rows by table), the subscriber at the publisher's level."""

    mode: str = "init"
    rows: dict[str, int] = field(default_factory=dict)
    level: int = 0
    count: int = 0
    path: str = ""  # how the tables were copied: "stream", "spark" or both ("spark + stream")

    def counts(self) -> dict[str, int]:
        return run_counts(read=sum(self.rows.values()), written=sum(self.rows.values()))


@dataclass(frozen=True)
class ImageInit(InitResult):
    """The subscriber loaded from a publication image (REPL_PUB_INIT_IMAGE) at the image's level."""

    mode: str = "image"
    image: str = ""
    rows: int = 0
    level: int = 0
    count: int = 0

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.rows, written=self.rows)


InitResult.modes = {"init": CopyInit, "image": ImageInit}


@dataclass(frozen=True)
class SyncResult(SyncOutcome):
    """A sync's outcome; after a conflict the publication answers with a new copy, `copy`."""

    copy: InitResult | None = field(default=None, metadata=STORED_WHEN_SET)


def subscription_subject(params: dict[str, Any]) -> Subject:
    sub = ReplSubscriber.objects.filter(pk=params["subscription"]).first()
    if sub is None:
        return Subject(f"transactional subscription #{params['subscription']} (dropped)")
    return Subject(f"subscription {sub.label}", sub.get_absolute_url())


@register
class TrxInit(JobRunner[SubscriptionParams]):
    kind = "trx_init"
    label = "Initial copy of a transactional subscription"
    params_type = SubscriptionParams
    result_type = InitResult
    subject = staticmethod(subscription_subject)

    def run(self) -> InitResult:
        if self.params.image:
            loaded = init_from_image(self.job, self.reporter, self.params.subscription, self.params.image)
            return InitResult.from_json(loaded)
        return InitResult.from_json(init_copy(self.job, self.reporter, self.params.subscription))


@dataclass(frozen=True)
class ReloadParams(JobParams):
    subscription: int
    table: str  # the published table, as REPL_RELOAD_TABLE named it


@dataclass(frozen=True)
class ReloadResult(JobResult):
    """One table copied again, swapped in at the subscriber's level (kept)."""

    table: str = ""
    rows: int = 0
    level: int = 0
    count: int = 0
    path: str = ""

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.rows, written=self.rows)


@register
class TrxReload(JobRunner[ReloadParams]):
    kind = "trx_reload"
    label = "Reload one table of a transactional subscription"
    params_type = ReloadParams
    result_type = ReloadResult
    subject = staticmethod(subscription_subject)

    def run(self) -> ReloadResult:
        return ReloadResult.from_json(
            reload_table(self.job, self.reporter, self.params.subscription, self.params.table)
        )


@register
class TrxSync(JobRunner[SubscriptionParams]):
    kind = "trx_sync"
    label = "Sync a transactional subscription"
    params_type = SubscriptionParams
    result_type = SyncResult
    subject = staticmethod(subscription_subject)

    def run(self) -> SyncResult:
        result = SyncResult.from_json(sync_subscription(self.job, self.reporter, self.params.subscription))
        if result.reinitialise:
            # A conflict on a publication that answers with "publisher wins, copy again": this job copies.
            self.reporter.log(f"{result.discarded} unpushed change(s) kept in the conflict inbox; copying again")
            copy = InitResult.from_json(init_copy(self.job, self.reporter, self.params.subscription))
            result = replace(result, copy=copy)
        if result.pushed or result.reinitialise:  # the conflicts its push decided go out now, not at the next round
            safely_send_notifications()
        return result

"""The transactional feature's jobs: REPL_INIT_COPY and REPL_SYNC of a subscription."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replication_admin.core.jobs import JobParams, JobRunner, Subject, register
from replication_admin.models import ReplSubscriber
from replication_admin.transactional.initial_copy import init_copy, init_from_image
from replication_admin.transactional.sync import sync_subscription


@dataclass(frozen=True)
class SubscriptionParams(JobParams):
    subscription: int
    image: str = ""  # REPL_INIT_COPY from this publication image instead of from the publisher


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
    subject = staticmethod(subscription_subject)

    def run(self) -> dict:
        if self.params.image:
            return init_from_image(self.job, self.reporter, self.params.subscription, self.params.image)
        return init_copy(self.job, self.reporter, self.params.subscription)


@register
class TrxSync(JobRunner[SubscriptionParams]):
    kind = "trx_sync"
    label = "Sync a transactional subscription"
    params_type = SubscriptionParams
    subject = staticmethod(subscription_subject)

    def run(self) -> dict:
        result = sync_subscription(self.job, self.reporter, self.params.subscription)
        if result.get("reinitialise"):
            # A conflict on a publication that answers with "publisher wins, copy again": this job copies.
            self.reporter.log(f"{result['discarded']} unpushed change(s) kept in the conflict inbox; copying again")
            result["copy"] = init_copy(self.job, self.reporter, self.params.subscription)
        return result

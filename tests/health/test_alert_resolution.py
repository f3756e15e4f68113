"""Alerts resolve themselves when their cause clears, and stay as history: a failed job when a later job of the
same kind and target succeeds, a failed scheduled event when it next completes, a lag alert when the lag is back
under its threshold, an invalid subscriber when it is marked valid, an unreachable server when the periodic check
reaches it again. The dashboard shows open alerts with how long they have been open, and the resolved ones."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from replication_admin.core import jobs
from replication_admin.core.alerts import raise_alert
from replication_admin.core.audit import Actor
from replication_admin.health.checks import check_health, resolve_cleared_alerts
from replication_admin.models import Alert, JobRun, ReplAccount, ReplSubscriber, ScheduledEvent
from replication_admin.tasks import run_event, run_job
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import positions as trx_positions


@dataclasses.dataclass(frozen=True)
class FlakyParams(jobs.JobParams):
    fail: bool = False


class Flaky(jobs.JobRunner[FlakyParams]):
    kind = "flaky_for_alerts"
    label = "flaky"
    params_type = FlakyParams

    def run(self) -> dict[str, Any]:
        if self.params.fail:
            raise jobs.JobError("the flaky job failed")
        return {}


@pytest.fixture
def flaky(db, monkeypatch):
    monkeypatch.setitem(jobs.RUNNERS, Flaky.kind, Flaky)


def flaky_job(fail: bool) -> JobRun:
    job = JobRun.objects.create(kind=Flaky.kind, target="orders nightly", params={"fail": fail})
    run_job(job.pk)
    return JobRun.objects.get(pk=job.pk)


def test_a_failed_job_alert_resolves_when_a_later_job_of_the_same_kind_and_target_succeeds(flaky, viewer_client):
    assert flaky_job(fail=True).state == JobRun.State.FAILED
    alert = Alert.objects.get(kind="job_failed")
    assert alert.resolved_at is None and "open for" in viewer_client.get(reverse("dashboard")).content.decode()
    succeeded = flaky_job(fail=False)
    alert.refresh_from_db()
    assert alert.resolved_at is not None and alert.resolution == f"job #{succeeded.pk} succeeded"
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert 'id="alerts"' not in page and 'id="resolved-alerts"' in page and "was open for" in page
    flaky_job(fail=True)  # the same trouble again opens a new alert; the resolved one stays as history
    assert Alert.objects.filter(kind="job_failed").count() == 2
    assert Alert.objects.filter(kind="job_failed", resolved_at__isnull=True).count() == 1


def test_the_periodic_check_resolves_a_job_alert_whose_job_succeeded_since(flaky):
    flaky_job(fail=True)
    alert = Alert.objects.get(kind="job_failed")
    JobRun.objects.create(kind=Flaky.kind, target="orders nightly", state=JobRun.State.SUCCEEDED,
                          finished_at=timezone.now() + timedelta(seconds=1))  # fmt: skip
    assert resolve_cleared_alerts() == 1
    alert.refresh_from_db()
    assert alert.resolved_at is not None and "succeeded" in alert.resolution


def test_a_failed_event_alert_resolves_when_the_event_next_completes(db):
    ScheduledEvent.objects.create(
        name="nightly", start=timezone.now() - timedelta(minutes=5), sql="update snapshot nowhere.nothing", interval=60
    )
    assert "failed" in run_event("nightly")
    assert resolve_cleared_alerts() == 0  # still failing
    ScheduledEvent.objects.filter(name="nightly").update(last_error=None, last_completed=timezone.now())
    assert resolve_cleared_alerts() == 1
    alert = Alert.objects.get(kind="event_error")
    assert alert.resolved_at is not None and "the event completed" in alert.resolution


def test_a_lag_alert_resolves_when_the_lag_is_back_under_the_threshold(db):
    ReplAccount.objects.create(server="pub", account="acct", alert_lag=5)
    sub = ReplSubscriber.objects.create(server="pub", account="acct", subscriber="sub", level=0, valid=1)
    trx_positions.record_position(sub, count=10, pub_count=40)
    alert = Alert.objects.get(kind="lag")
    trx_positions.record_position(sub, count=38, pub_count=40)
    alert.refresh_from_db()
    assert alert.resolved_at is not None and alert.resolution == "lag back to 2 transactions (alert above 5)"


def test_an_invalid_subscriber_alert_resolves_when_it_is_marked_valid(db):
    sub = ReplSubscriber.objects.create(server="pub", account="acct", subscriber="sub", level=0, valid=0)
    raise_alert("subscriber_invalid", "sub <- pub/acct", "sub is no longer valid for pub/acct")
    trx_actions.do_mark_valid(Actor.command(), sub, True)
    alert = Alert.objects.get(kind="subscriber_invalid")
    assert alert.resolved_at is not None and alert.resolution.startswith("marked valid by")


def test_the_periodic_check_flips_a_server_to_unreachable_and_back_raising_and_resolving_its_alert(make_server):
    server = make_server("sqlite", "lite")
    assert check_health()["unreachable"] == []
    server.refresh_from_db()
    assert server.last_check_ok is True
    os.rename(server.database, server.database + ".away")
    cache.clear()
    assert check_health()["unreachable"] == ["lite"]
    server.refresh_from_db()
    assert server.last_check_ok is False and "does not exist" in server.last_check_error
    alert = Alert.objects.get(kind="server_unreachable", target="lite")
    assert alert.resolved_at is None
    check_health()  # still down: the same alert counts up
    alert.refresh_from_db()
    assert alert.count == 2

    os.rename(server.database + ".away", server.database)
    cache.clear()
    assert check_health()["unreachable"] == []
    alert.refresh_from_db()
    server.refresh_from_db()
    assert server.last_check_ok is True and alert.resolved_at is not None and alert.resolution.startswith("periodic")
    assert Alert.objects.filter(kind="server_unreachable").count() == 1

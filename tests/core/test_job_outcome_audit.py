"""How each job ended is in the audit log, under the name of whoever queued it: one `job.finished` row per
finished job, `error` with the job's one-line error for a failed, lost or cancelled job, `ok` for a success."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from replication_admin.compare.actions import do_start_compare
from replication_admin.core import reaper
from replication_admin.core.audit import Actor
from replication_admin.core.jobs import RUNNERS, do_cancel_job, do_start_job, execute
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun
from tests.tables import create_table
from tests.users import make_user

pytestmark = pytest.mark.django_db


def finished_rows(job: JobRun) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action="job.finished", detail__job=job.pk))


def test_a_job_a_person_queued_that_fails_is_audited_as_an_error_under_their_name(make_server, jobs_sync):
    alice = make_user("alice", "operate")
    shop, replica = make_server("sqlite", "shop"), make_server("sqlite", "replica")
    create_table(replica, "customers", [("id", LogicalType("integer"))], ["id"])

    job = do_start_compare(Actor(user=alice, remote_addr="10.1.2.3"), shop, "customers", replica, "customers")

    job.refresh_from_db()
    assert job.state == JobRun.State.FAILED and "customers" in job.error
    queued = AuditEntry.objects.get(action="job.compare", detail__job=job.pk)
    assert (queued.username, queued.outcome) == ("alice", "ok")  # the request itself was fine
    [row] = finished_rows(job)
    assert (row.user, row.username, row.via, row.remote_addr) == (alice, "alice", "web", "10.1.2.3")
    assert (row.outcome, row.target) == (AuditEntry.Outcome.ERROR, str(job))
    assert row.detail["state"] == "failed" and row.detail["error"] == job.error.splitlines()[0]
    assert "\n" not in row.detail["error"]


def test_a_cancelled_job_is_audited_as_an_error_under_the_name_of_who_queued_it_not_who_cancelled_it():
    alice, bob = make_user("alice", "operate"), make_user("bob", "operate")
    runner = RUNNERS["snapshot_refresh"]
    params = runner.params_type.from_json({"snapshot": "dst.t", "nonincremental": False})
    job = do_start_job(Actor(user=alice), runner, "snapshot dst.t", params, sync=False)  # stays queued here

    assert do_cancel_job(Actor(user=bob), job)

    [row] = finished_rows(job)
    assert (row.username, row.outcome) == ("alice", AuditEntry.Outcome.ERROR)
    assert row.detail == {"job": job.pk, "kind": "snapshot_refresh", "state": "cancelled", "error": "cancelled by bob"}


def test_a_job_lost_for_good_is_audited_under_the_name_of_who_queued_its_first_attempt(settings):
    settings.JOB_ATTEMPTS = 2
    alice = make_user("alice", "operate")
    runner = RUNNERS["snapshot_refresh"]
    params = runner.params_type.from_json({"snapshot": "dst.t", "nonincremental": False})
    first = do_start_job(Actor(user=alice), runner, "snapshot dst.t", params, sync=False)
    gone = {"state": JobRun.State.RUNNING, "worker_host": "another-host", "worker_pid": 4242, "attempts": 1,
            "lease_expires_at": timezone.now() - timedelta(minutes=1)}  # fmt: skip
    JobRun.objects.filter(pk=first.pk).update(**gone)
    retry = reaper.take_back(first.pk, "its worker stopped renewing the job's lease")
    assert retry is not None
    JobRun.objects.filter(pk=retry.pk).update(**{**gone, "attempts": 2})
    assert reaper.take_back(retry.pk, "its worker stopped renewing the job's lease") is None

    for job in (first, retry):
        job.refresh_from_db()
        [row] = finished_rows(job)
        assert (row.username, row.outcome, row.detail["state"]) == ("alice", AuditEntry.Outcome.ERROR, "lost")
        assert row.detail["error"] == job.error and job.error.startswith("lost: its worker stopped")


def test_a_job_cancelled_while_running_ends_when_its_worker_stops_not_when_the_cancel_was_asked(monkeypatch):
    class Stalls(RUNNERS["snapshot_refresh"]):  # type: ignore[misc,valid-type]
        def run(self):
            do_cancel_job(Actor.command(), self.job)  # asked while it runs; it notices at its next report
            cancelled_at = JobRun.objects.get(pk=self.job.pk).finished_at
            with self.reporter.phase("work after the cancel was asked"):
                JobRun.objects.filter(pk=self.job.pk).update(message=cancelled_at.isoformat())
                self.reporter.progress(1, 2, "still at it")  # raises JobCancelled
            raise AssertionError("the cancelled job went on")

    monkeypatch.setitem(RUNNERS, "snapshot_refresh", Stalls)
    params = Stalls.params_type.from_json({"snapshot": "dst.t", "nonincremental": False})
    job = do_start_job(Actor.command(), Stalls, "snapshot dst.t", params, sync=False)
    assert execute(job.pk) == f"job {job.pk} cancelled"
    job.refresh_from_db()
    assert job.state == JobRun.State.CANCELLED
    # it ended when its worker stopped, after the work its timings count, not when the cancel was asked
    assert job.finished_at > datetime.fromisoformat(job.message)
    assert "work after the cancel was asked" in job.timings

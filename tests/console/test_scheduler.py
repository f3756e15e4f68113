"""The scheduler runs SYS_SCHEDULED_EVENT statements through django-q2 (sync mode here): on their slots,
overdue ones once, a run that finds the previous one still going skipped, every run audited as it ended."""

from __future__ import annotations

import os
from datetime import UTC, timedelta

import pytest
from django.core import mail
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.audit import Actor
from replication_admin.core.leases import HOST, expiry
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun, ReplLock, ScheduledEvent, Snapshot
from replication_admin.snapshots.actions import do_schedule_snapshot
from replication_admin.statements import execute
from replication_admin.tasks import run_event, scheduler_round
from tests.tables import create_table, fetch_all, insert_rows
from tests.tables import execute as execute_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def earlier(name: str, by: timedelta) -> None:
    """As if everything the event did had happened `by` earlier (its slots move with it)."""
    ScheduledEvent.objects.filter(name=name).update(
        start=F("start") - by, last_slot=F("last_slot") - by, last_started=F("last_started") - by,
        last_completed=F("last_completed") - by,
    )  # fmt: skip


@pytest.fixture
def scheduled_snapshot(make_server, spark, jobs_sync):
    source = make_server("sqlite", "sch_s")
    dest = make_server("postgresql", "sch_d")
    create_table(source, "t", [("id", LogicalType("integer")), ("v", LogicalType("integer"))], ["id"])
    insert_rows(source, "t", ["id", "v"], [(i, i) for i in range(10)])
    outcomes = execute(
        Actor.command(), "create snapshot log for t; create snapshot sch_d.t_copy from t", context=source
    )
    assert all(o.ok for o in outcomes), outcomes
    snapshot = Snapshot.objects.get()
    event = do_schedule_snapshot(Actor.command(), snapshot, 5)
    # The replay-log purge scheduled with the snapshot log has its own test; keep it out of these rounds.
    ScheduledEvent.objects.filter(name="purge_rplogs").update(last_slot=timezone.now())
    return source, dest, snapshot, event


def test_a_scheduled_refresh_runs_when_due_and_records_its_completion(scheduled_snapshot):
    source, dest, _snapshot, event = scheduled_snapshot
    assert event.sql == "UPDATE SNAPSHOT sch_d.t_copy" and event.interval == 5
    insert_rows(source, "t", ["id", "v"], [(100, 100)])
    jobs_before = JobRun.objects.count()

    assert scheduler_round() == [event.name]
    event.refresh_from_db()
    assert event.last_completed is not None and event.last_error is None
    assert fetch_all(dest, "SELECT count(*) FROM t_copy") == [(11,)]
    assert JobRun.objects.count() == jobs_before + 1

    assert event.last_slot == event.start and event.last_started is not None
    assert event.last_started <= event.last_completed

    # Ran for its first slot: not due again until the next one.
    assert scheduler_round() == []
    earlier(event.name, timedelta(minutes=5))
    assert scheduler_round() == [event.name]
    event.refresh_from_db()
    assert event.last_slot == event.start + timedelta(minutes=5)


def test_an_overdue_event_runs_once(scheduled_snapshot):
    *_, event = scheduled_snapshot
    assert scheduler_round() == [event.name]
    earlier(event.name, timedelta(days=2))  # 576 slots missed
    before = JobRun.objects.count()
    assert scheduler_round() == [event.name]
    assert scheduler_round() == []
    assert JobRun.objects.count() == before + 1
    event.refresh_from_db()
    assert event.last_slot == event.start + timedelta(days=2)  # it ran for the latest slot


def test_a_disabled_event_never_runs(scheduled_snapshot):
    *_, event = scheduled_snapshot
    ScheduledEvent.objects.filter(pk=event.pk).update(disabled=1, last_completed=None)
    before = JobRun.objects.count()
    assert scheduler_round() == []
    assert JobRun.objects.count() == before


def test_a_failing_event_records_its_error_and_notifies_once(db, jobs_sync):
    ScheduledEvent.objects.create(
        name="broken", start=timezone.now() - timedelta(minutes=1), sql="UPDATE SNAPSHOT nowhere.t",
        interval=1, enable_notify=1, notify="dba@example.com",
    )  # fmt: skip
    scheduler_round()
    event = ScheduledEvent.objects.get(name="broken")
    assert "server 'nowhere' is not registered" in event.last_error
    assert event.last_completed is None and event.notification_sent == 1
    assert len(mail.outbox) == 1 and "broken" in mail.outbox[0].subject
    assert scheduler_round() == []  # a failed run is tried again a minute after it started
    earlier("broken", timedelta(minutes=1))
    assert scheduler_round() == ["broken"]  # still failing: tried again, but the DBA is not mailed twice
    assert len(mail.outbox) == 1


def test_the_replay_log_purge_runs_as_scheduled_and_keeps_recent_rows(scheduled_snapshot):
    source, dest, snapshot, _ = scheduled_snapshot
    insert_rows(source, "t", ["id", "v"], [(200, 1)])
    assert execute(Actor.command(), "update snapshot sch_d.t_copy")[0].ok
    rplog = '"RPLOG_sch_s_t"'
    assert fetch_all(dest, f"SELECT count(*) FROM {rplog}") == [(1,)]
    purge = ScheduledEvent.objects.get(name="purge_rplogs")
    earlier(purge.name, timedelta(minutes=30))
    assert purge.name in scheduler_round()
    assert fetch_all(dest, f"SELECT count(*) FROM {rplog}") == [(1,)]  # within snp_repl_purge_offset
    Snapshot.objects.filter(pk=snapshot.pk).update(last_ts=timezone.now() + timedelta(minutes=31))
    earlier(purge.name, timedelta(minutes=30))
    assert purge.name in scheduler_round()
    assert fetch_all(dest, f"SELECT count(*) FROM {rplog}") == [(0,)]
    assert ScheduledEvent.objects.get(pk=purge.pk).last_error is None


def test_statements_that_do_not_parse_are_recorded_as_the_error(db, jobs_sync):
    ScheduledEvent.objects.create(name="typo", start=timezone.now(), sql="UPDATE SNAPSHOOT x", interval=1)
    scheduler_round()
    assert "line 1, column 8" in ScheduledEvent.objects.get(name="typo").last_error


def test_a_scheduled_job_is_audited_with_how_it_ended(scheduled_snapshot):
    source, _dest, _snapshot, event = scheduled_snapshot
    ScheduledEvent.objects.filter(pk=event.pk).update(sql="UPDATE SNAPSHOT sch_d.t_copy AS NONINCREMENTAL")
    assert scheduler_round() == [event.name]
    ok_job = JobRun.objects.latest("pk")
    assert ok_job.state == JobRun.State.SUCCEEDED
    audited = AuditEntry.objects.get(action="job.snapshot_refresh", via="scheduler", detail__job=ok_job.pk)
    assert audited.outcome == AuditEntry.Outcome.OK and audited.detail["state"] == "succeeded"
    run = AuditEntry.objects.filter(action="event.run", target=event.name).latest("pk")
    assert run.outcome == AuditEntry.Outcome.OK and run.detail["jobs"] == [{"job": ok_job.pk, "state": "succeeded"}]

    execute_sql(source, "DROP TABLE t")  # the next refresh cannot read its source: the job fails
    earlier(event.name, timedelta(minutes=5))
    assert scheduler_round() == [event.name]
    failed_job = JobRun.objects.latest("pk")
    assert failed_job.pk != ok_job.pk and failed_job.state == JobRun.State.FAILED
    audited = AuditEntry.objects.get(action="job.snapshot_refresh", via="scheduler", detail__job=failed_job.pk)
    assert audited.outcome == AuditEntry.Outcome.ERROR and audited.detail["state"] == "failed"
    assert audited.detail["error"] == failed_job.error
    run = AuditEntry.objects.filter(action="event.run", target=event.name).latest("pk")
    assert run.outcome == AuditEntry.Outcome.ERROR and "failed" in run.detail["error"]
    assert ScheduledEvent.objects.get(pk=event.pk).last_error


def test_a_statement_that_fails_without_a_job_is_audited_as_failed(db, jobs_sync):
    ScheduledEvent.objects.create(name="gone", start=timezone.now(), sql="UPDATE SNAPSHOT nowhere.t", interval=1)
    assert "failed" in run_event("gone")
    run = AuditEntry.objects.get(action="event.run", target="gone")
    assert run.outcome == AuditEntry.Outcome.ERROR and "nowhere" in run.detail["error"]
    assert run.via == "scheduler" and run.detail["jobs"] == []


def test_a_run_that_finds_its_event_still_running_is_skipped_not_doubled(db, jobs_sync, admin_client):
    started = timezone.now() - timedelta(seconds=70)
    ScheduledEvent.objects.create(
        name="slow", start=started, sql="UPDATE SNAPSHOT nowhere.t", interval=1, last_slot=started,
        last_started=started,
    )  # fmt: skip
    # The run for the previous slot is still going, in another live process.
    ReplLock.objects.create(name="event:slow", pid=os.getppid(), host=HOST, expires_at=expiry())
    page = admin_client.get(reverse("scheduler")).content.decode()
    assert 'class="badge running"' in page

    assert scheduler_round() == ["slow"]
    since = timezone.localtime(started).strftime("%H:%M:%S")
    run = AuditEntry.objects.get(action="event.run", target="slow")
    assert run.outcome == AuditEntry.Outcome.SKIPPED and run.detail["skipped"] == f"still running since {since}"
    event = ScheduledEvent.objects.get(name="slow")
    assert event.last_error is None and event.last_started == started  # not an error, nothing ran
    assert event.last_slot == started + timedelta(minutes=1)
    assert scheduler_round() == []  # that slot is done with: not tried again at every tick
    assert not JobRun.objects.exists()


def test_the_scheduler_page_shows_each_events_runs_and_next_run(db, admin_client):
    now = timezone.now()
    ScheduledEvent.objects.create(
        name="every_minute", start=now - timedelta(minutes=10, seconds=30), sql="repl_purge_rplogs()", interval=1,
        last_slot=now - timedelta(seconds=30), last_started=now - timedelta(seconds=29),
        last_completed=now - timedelta(seconds=20), last_error="earlier trouble",
    )  # fmt: skip
    ScheduledEvent.objects.create(name="later", start=now + timedelta(hours=1), sql="repl_purge_rplogs()", interval=5)
    ScheduledEvent.objects.create(name="off", start=now, sql="repl_purge_rplogs()", interval=5, disabled=1)
    page = admin_client.get(reverse("scheduler")).content.decode()
    rows = {name: page.split(f'data-event="{name}"')[1].split("</tr>")[0] for name in ("every_minute", "later", "off")}
    next_slot = now - timedelta(seconds=30) + timedelta(minutes=1)
    from_utc = lambda t: t.astimezone(UTC).isoformat()  # noqa: E731
    assert from_utc(next_slot) in rows["every_minute"].split('class="next-run"')[1]
    assert from_utc(now - timedelta(seconds=29)) in rows["every_minute"].split('class="last-started"')[1]
    assert from_utc(now - timedelta(seconds=20)) in rows["every_minute"].split('class="last-completed"')[1]
    assert "earlier trouble" in rows["every_minute"] and "badge running" not in rows["every_minute"]
    assert from_utc(now + timedelta(hours=1)) in rows["later"].split('class="next-run"')[1]
    assert "never" in rows["off"].split('class="next-run"')[1]

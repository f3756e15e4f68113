"""The scheduler runs SYS_SCHEDULED_EVENT statements through django-q2 (sync mode here)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import JobRun, ScheduledEvent, Snapshot
from replication_admin.snapshots.actions import do_schedule_snapshot
from replication_admin.statements import execute
from replication_admin.tasks import scheduler_round
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


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
    ScheduledEvent.objects.filter(name="purge_rplogs").update(last_completed=timezone.now())
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

    # Completed just now: not due again until the interval has passed.
    assert scheduler_round() == []
    ScheduledEvent.objects.filter(pk=event.pk).update(last_completed=timezone.now() - timedelta(minutes=5))
    assert scheduler_round() == [event.name]


def test_an_overdue_event_runs_once(scheduled_snapshot):
    *_, event = scheduled_snapshot
    ScheduledEvent.objects.filter(pk=event.pk).update(last_completed=timezone.now() - timedelta(days=2))
    before = JobRun.objects.count()
    assert scheduler_round() == [event.name]
    assert scheduler_round() == []
    assert JobRun.objects.count() == before + 1


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
    scheduler_round()  # still failing: tried again, but the DBA is not mailed twice
    assert len(mail.outbox) == 1


def test_the_replay_log_purge_runs_as_scheduled_and_keeps_recent_rows(scheduled_snapshot):
    source, dest, snapshot, _ = scheduled_snapshot
    insert_rows(source, "t", ["id", "v"], [(200, 1)])
    assert execute(Actor.command(), "update snapshot sch_d.t_copy")[0].ok
    rplog = '"RPLOG_sch_s_t"'
    assert fetch_all(dest, f"SELECT count(*) FROM {rplog}") == [(1,)]
    purge = ScheduledEvent.objects.get(name="purge_rplogs")
    ScheduledEvent.objects.filter(pk=purge.pk).update(last_completed=timezone.now() - timedelta(minutes=30))
    scheduler_round()
    assert fetch_all(dest, f"SELECT count(*) FROM {rplog}") == [(1,)]  # within snp_repl_purge_offset
    Snapshot.objects.filter(pk=snapshot.pk).update(last_ts=timezone.now() + timedelta(minutes=31))
    ScheduledEvent.objects.filter(pk=purge.pk).update(last_completed=timezone.now() - timedelta(minutes=30))
    scheduler_round()
    assert fetch_all(dest, f"SELECT count(*) FROM {rplog}") == [(0,)]
    assert ScheduledEvent.objects.get(pk=purge.pk).last_error is None


def test_statements_that_do_not_parse_are_recorded_as_the_error(db, jobs_sync):
    ScheduledEvent.objects.create(name="typo", start=timezone.now(), sql="UPDATE SNAPSHOOT x", interval=1)
    scheduler_round()
    assert "line 1, column 8" in ScheduledEvent.objects.get(name="typo").last_error

"""The scheduler page's actions per event: run now (handed to a worker at once, claimed as a tick claims it, so it
does not run twice in a row), pause / resume (SE_DISABLED: the scheduler's tick skips a paused event) and the
interval (1 minute to a year, one line on bad input). Operators may; viewers are refused and audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.audit import Actor
from replication_admin.engine.schedule import next_run
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun, ReplLock, ScheduledEvent, Snapshot
from replication_admin.snapshots.actions import do_schedule_snapshot
from replication_admin.statements import execute
from replication_admin.tasks import scheduler_tick
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = pytest.mark.django_db

ACTIONS = ["scheduler-run", "scheduler-pause", "scheduler-resume", "scheduler-interval"]


def runs(name: str) -> int:
    return AuditEntry.objects.filter(action="event.run", target=name).count()


def earlier(name: str, by: timedelta) -> None:
    """As if the event's schedule and last run had happened `by` earlier."""
    ScheduledEvent.objects.filter(name=name).update(
        start=F("start") - by, last_slot=F("last_slot") - by, last_started=F("last_started") - by
    )


@pytest.fixture
def event(jobs_sync) -> ScheduledEvent:
    """An hourly event that started ten minutes ago and has run for that slot (not due until the next one)."""
    start = timezone.now() - timedelta(minutes=10)
    return ScheduledEvent.objects.create(
        name="hourly check", start=start, sql="repl_this_server ()", interval=60, last_slot=start
    )


def test_run_now_runs_the_event_at_once_and_keeps_its_next_slot(event, operator_client):
    response = operator_client.post(reverse("scheduler-run", args=[event.name]), follow=True)
    assert response.status_code == 200
    assert runs(event.name) == 1
    event.refresh_from_db()
    assert event.last_completed is not None and not event.last_error
    assert next_run(event.times(), timezone.now()) == event.start + timedelta(minutes=60)
    assert scheduler_tick() == [] and runs(event.name) == 1, "it ran twice in a row"
    assert AuditEntry.objects.filter(action="event.run_now", username="operator", outcome="ok").exists()
    assert "was handed to a worker; its next scheduled run stays" in response.content.decode()


def test_run_now_of_a_due_event_takes_its_slot_so_the_next_tick_does_not_run_it_again(event, operator_client):
    ScheduledEvent.objects.filter(pk=event.pk).update(last_slot=None)  # its first slot has come: due
    operator_client.post(reverse("scheduler-run", args=[event.name]))
    assert scheduler_tick() == []
    assert runs(event.name) == 1
    assert ScheduledEvent.objects.get(pk=event.pk).last_slot == event.start


def test_run_now_of_an_event_running_now_is_refused_in_one_line(event, operator_client):
    ReplLock.objects.create(name=f"event:{event.name}", expires_at=timezone.now() + timedelta(minutes=1), pid=1)
    response = operator_client.post(reverse("scheduler-run", args=[event.name]), follow=True)
    assert "hourly check is running now; it was not started again" in response.content.decode()
    assert runs(event.name) == 0
    assert AuditEntry.objects.filter(action="event.run_now", outcome="error").exists()


def test_a_paused_event_is_skipped_by_the_scheduler_until_it_is_resumed(event, operator_client):
    operator_client.post(reverse("scheduler-pause", args=[event.name]))
    assert ScheduledEvent.objects.get(pk=event.pk).disabled == 1
    earlier(event.name, timedelta(minutes=60))  # its next slot has come
    assert scheduler_tick() == [] and runs(event.name) == 0
    page = operator_client.get(reverse("scheduler")).content.decode()
    assert '<span class="badge paused">paused</span>' in page and ">Resume</button>" in page
    assert event.name in operator_client.get(reverse("scheduler"), {"state": "paused"}).content.decode()

    operator_client.post(reverse("scheduler-resume", args=[event.name]))
    resumed = ScheduledEvent.objects.get(pk=event.pk)
    assert resumed.disabled == 0
    # The slots missed while paused are not run at once: the next one is.
    assert scheduler_tick() == [] and runs(event.name) == 0
    earlier(event.name, timedelta(minutes=60))
    assert scheduler_tick() == [event.name] and runs(event.name) == 1
    actions = list(AuditEntry.objects.filter(username="operator").values_list("action", "outcome"))
    assert ("event.pause", "ok") in actions and ("event.resume", "ok") in actions


def test_the_interval_is_changed_and_takes_effect_at_the_next_slot_of_the_new_interval(event, operator_client):
    response = operator_client.post(reverse("scheduler-interval", args=[event.name]), {"interval": "5"}, follow=True)
    changed = ScheduledEvent.objects.get(pk=event.pk)
    assert changed.interval == 5
    assert "hourly check runs every 5 minutes" in response.content.decode()
    assert scheduler_tick() == []  # the five-minute slots already past are not run at once
    upcoming = next_run(changed.times(), timezone.now())
    assert timezone.now() < upcoming <= timezone.now() + timedelta(minutes=5)
    audit = AuditEntry.objects.get(action="event.interval")
    assert audit.detail == {"before": 60, "after": 5}


@pytest.mark.parametrize("bad", ["0", "-3", "abc", "", "525601", "1.5"])
def test_a_bad_interval_is_refused_in_one_line_and_changes_nothing(event, operator_client, bad):
    response = operator_client.post(reverse("scheduler-interval", args=[event.name]), {"interval": bad}, follow=True)
    assert "the interval is a whole number of minutes from 1 to 525600" in response.content.decode()
    assert ScheduledEvent.objects.get(pk=event.pk).interval == 60
    assert AuditEntry.objects.filter(action="event.interval", outcome="error").count() == 1


@pytest.mark.parametrize("name", ACTIONS)
def test_a_viewer_may_not_act_on_events_and_the_refusal_is_audited(event, viewer_client, name):
    before = ScheduledEvent.objects.filter(pk=event.pk).values().get()
    response = viewer_client.post(reverse(name, args=[event.name]), {"interval": "5"})
    assert response.status_code == 403 and b"needs replication_admin.operate" in response.content
    assert ScheduledEvent.objects.filter(pk=event.pk).values().get() == before and runs(event.name) == 0
    assert AuditEntry.objects.filter(username="viewer", outcome="denied", target=event.name).count() == 1
    assert "Run now" not in viewer_client.get(reverse("scheduler")).content.decode()


@pytest.mark.parametrize("name", ACTIONS)
def test_an_editor_may_act_on_events(event, editor_client, name):
    response = editor_client.post(reverse(name, args=[event.name]), {"interval": "30"})
    assert response.status_code == 302
    assert not AuditEntry.objects.filter(outcome="denied").exists()


@pytest.mark.spark
def test_run_now_of_a_scheduled_refresh_produces_its_job_and_the_rows_arrive(
    make_server, spark, jobs_sync, operator_client
):
    source, dest = make_server("sqlite", "src"), make_server("sqlite", "dst")
    create_table(source, "t", [("id", LogicalType("integer")), ("v", LogicalType("integer"))], ["id"])
    insert_rows(source, "t", ["id", "v"], [(i, i) for i in range(5)])
    outcomes = execute(Actor.command(), "create snapshot log for t; create snapshot dst.t_copy from t", context=source)
    assert all(o.ok for o in outcomes), outcomes
    snapshot = Snapshot.objects.get()
    event = do_schedule_snapshot(Actor.command(), snapshot, 60)
    ScheduledEvent.objects.filter(pk=event.pk).update(last_slot=event.start)  # its first slot has run
    ScheduledEvent.objects.filter(name="purge_rplogs").update(last_slot=timezone.now())
    insert_rows(source, "t", ["id", "v"], [(100, 100)])
    refreshes = JobRun.objects.filter(kind="snapshot_refresh").count()

    operator_client.post(reverse("scheduler-run", args=[event.name]))

    job = JobRun.objects.filter(kind="snapshot_refresh").latest("pk")
    assert JobRun.objects.filter(kind="snapshot_refresh").count() == refreshes + 1
    assert job.state == JobRun.State.SUCCEEDED, job.error
    assert fetch_all(dest, "SELECT count(*) FROM t_copy WHERE id = 100") == [(1,)]
    assert scheduler_tick() == []

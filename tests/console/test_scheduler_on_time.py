"""A real cluster runs an every-minute event on its slots: each run starts within 10 s of its slot, what
it writes on PostgreSQL carries the database's now() within 10 s of the slot, and there is one run per
slot that has come (an overdue event is not run more than once)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from replication_admin.core.audit import Actor
from replication_admin.models import AuditEntry, ScheduledEvent
from replication_admin.statements import execute
from tests.conftest import wait_for_job
from tests.tables import execute as execute_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

ON_TIME = timedelta(seconds=10)
SLOTS = 2  # the event's slots at start and start + 1 min: the test lasts about 2 minutes


def test_an_every_minute_event_runs_on_its_slots(make_server, qcluster):
    pg = make_server("postgresql", "tick_pg")
    # Each refresh of this snapshot writes the table again with one row more, stamped with now() on
    # PostgreSQL when the refresh reads it: one row per run, and when it ran by the database's clock.
    execute_sql(pg, "CREATE TABLE ticks (id integer PRIMARY KEY, at timestamp with time zone)")
    execute_sql(pg, "INSERT INTO ticks VALUES (0, now())")
    query = "select id, at from ticks union all select max(id) + 1, now() from ticks"
    # Its first refresh runs on the cluster's worker and warms its SparkSession before the measured runs.
    create = f"create nonincremental snapshot tick_pg.ticks as '{query}'"
    outcome = execute(Actor.command(), create, context=pg, wait=False)[-1]
    assert outcome.ok and outcome.job_id, outcome.message
    assert wait_for_job(outcome.job_id).state == "succeeded"
    before = fetch_all(pg, "SELECT max(id) FROM ticks")[0][0]

    start = timezone.now() + timedelta(seconds=8)  # the scheduler thread sees it within REPLADMIN_SCHEDULER_TICK
    ScheduledEvent.objects.create(
        name="every_minute", start=start, interval=1, sql="UPDATE SNAPSHOT tick_pg.ticks AS NONINCREMENTAL"
    )
    end = start + timedelta(minutes=SLOTS - 1, seconds=15)
    time.sleep(max((end - timezone.now()).total_seconds(), 0))

    slots = [start + timedelta(minutes=k) for k in range(SLOTS)]
    runs = list(AuditEntry.objects.filter(action="event.run", target="every_minute").order_by("pk"))
    assert abs(len(runs) - len(slots)) <= 1, [r.detail for r in runs]
    for run in runs:
        assert run.outcome == AuditEntry.Outcome.OK, run.detail
        slot = datetime.fromisoformat(run.detail["slot"])
        assert slot in slots
        started = datetime.fromisoformat(run.detail["started"])
        assert abs(started - slot) <= ON_TIME, (slot, started)
    assert len({r.detail["slot"] for r in runs}) == len(runs)  # one run per slot

    written = fetch_all(pg, "SELECT id, extract(epoch FROM at) FROM ticks WHERE id > ? ORDER BY id", [before])
    assert len(written) == len(runs), written
    for (_, at), slot in zip(written, slots, strict=False):
        assert abs(float(at) - slot.timestamp()) <= ON_TIME.total_seconds(), (slot, at)

    event = ScheduledEvent.objects.get(name="every_minute")
    assert event.last_error is None and event.last_slot == slots[len(runs) - 1]

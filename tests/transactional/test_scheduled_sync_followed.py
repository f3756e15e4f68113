"""A scheduled sync of an in-sync subscription runs no job while a live follower serves the subscription (it would
only wait behind the follower's step and be skipped), and is the fallback that applies the backlog once no live
follower does."""

from __future__ import annotations

import os
import signal

import pytest
from django.utils import timezone

from replication_admin.core import connections, heartbeats
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun, ScheduledEvent
from replication_admin.statements import execute
from replication_admin.tasks import run_event
from tests.transactional import test_follower_down
from tests.transactional.test_follower_down import STALE, count, in_sync_subscription, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

follower = test_follower_down.follower  # the fixture: `manage.py replfollow` processes, killed at the end


def test_a_scheduled_sync_leaves_a_followed_subscription_to_its_follower_and_syncs_it_once_none_serves_it(
    make_server, jobs_sync, spark, settings, follower, tmp_path
):
    settings.HEARTBEAT_STALE_SECONDS = STALE
    log = tmp_path / "replfollow.log"
    pub, sub_server, sub = in_sync_subscription(make_server, also="SUB_SCHEDULE ('fdpub', 'acct', 1); ")
    [event] = ScheduledEvent.objects.filter(sql__icontains="REPL_SYNC")

    proc = follower()
    wait_for("a live follower", lambda: heartbeats.live_followers().holds(sub.pk), log)
    syncs = JobRun.objects.filter(kind="trx_sync", trigger=JobRun.Trigger.SCHEDULER)
    before = syncs.count()
    [outcome] = execute(Actor.scheduler(), event.sql, context=sub_server)
    assert outcome.ok and "the scheduled sync is not needed" in outcome.message, outcome.message
    assert f"pid {proc.pid}" in outcome.message
    assert syncs.count() == before  # no job queued behind the follower's step
    assert not JobRun.objects.filter(state=JobRun.State.SKIPPED).exists()
    # The event's own run, as a tick runs it: completed, not skipped.
    assert "completed" in run_event(event.name, slot=timezone.now())
    event.refresh_from_db()
    assert event.last_error is None and event.last_completed is not None
    assert syncs.count() == before

    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for("no live follower", lambda: not heartbeats.live_followers().holds(sub.pk))
    with connections.connect(pub) as conn:
        conn.cursor().execute("INSERT INTO items VALUES (2, 'while no follower ran')")
    [outcome] = execute(Actor.scheduler(), event.sql, context=sub_server)
    assert outcome.ok and outcome.job_id is not None, outcome.message
    assert JobRun.objects.get(pk=outcome.job_id).state == JobRun.State.SUCCEEDED
    assert count(sub_server, "items") == 2

"""The Health page, /api/status's "components" and /metrics' repladmin_component_up show each worker host,
follower and the scheduler live or down from their heartbeats; the watchdog raises and resolves component-down
alerts in a fixed number of queries."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from replication_admin.core import heartbeats
from replication_admin.models import Alert, JobRun, ProcessHeartbeat, ReplSubscriber

TOKEN = "health-token"


def heartbeat(kind: str, host: str, pid: int, age: float, **details) -> ProcessHeartbeat:
    now = timezone.now()
    return ProcessHeartbeat.objects.create(kind=kind, host=host, pid=pid, started_at=now - timedelta(hours=1),
                                           renewed_at=now - timedelta(seconds=age), details=details)  # fmt: skip


def row_of(page: str, kind: str, host: str, pid: int) -> str:
    return page.split(f'data-component="{kind}" data-host="{host}" data-pid="{pid}"', 1)[1].split("</tr>", 1)[0]


@pytest.fixture
def world(db, settings):
    settings.STATUS_TOKENS = [TOKEN]
    settings.HEARTBEAT_STALE_SECONDS = 15
    job = JobRun.objects.create(kind="trx_sync", target="x", state=JobRun.State.RUNNING, worker_host="w1")
    heartbeat("worker", "w1", 101, age=2, jobs=[job.pk], workers=2)
    heartbeat("worker", "w2", 202, age=600, jobs=[], workers=2)  # gone ten minutes ago
    heartbeat("scheduler", "w1", 101, age=2, tick=timezone.now().isoformat())
    sub = ReplSubscriber.objects.create(server="pub", account="acc", subscriber="sub1", state=ReplSubscriber.IN_SYNC,
                                        follow=True, init_state="done")  # fmt: skip
    heartbeat("follower", "f1", 303, age=1, subscriptions=[sub.pk], part=None, applied=7)
    return job, sub


def test_a_viewer_sees_each_component_live_or_down_with_its_cause(world, viewer_client):
    job, _ = world
    response = viewer_client.get(reverse("health"))
    assert response.status_code == 200
    page = response.content.decode()
    assert f'href="{reverse("health")}"' in page  # in the navigation
    worker = row_of(page, "worker", "w1", 101)
    assert 'data-state="ok"' in worker and f"job #{job.pk}" in worker and "1 job(s) running on 2 workers" in worker
    gone = row_of(page, "worker", "w2", 202)
    assert 'data-state="down"' in gone and "no heartbeat for 10 min" in gone
    follower = row_of(page, "follower", "f1", 303)
    assert 'data-state="ok"' in follower and "sub1 &lt;- pub/acc" in follower and "7 applied" in follower
    assert 'data-component="scheduler"' in page and "last tick" in page
    assert (
        'data-component="spark"' in page and 'data-component="catalog" data-host="" data-pid="" data-state="ok"' in page
    )
    assert "no live follower serves" not in page


def test_the_status_api_and_metrics_list_the_components(world, client):
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    states = {(c["kind"], c["host"], c["pid"]): c["state"] for c in body["components"]}
    assert states[("worker", "w1", 101)] == "ok" and states[("worker", "w2", 202)] == "down"
    assert states[("follower", "f1", 303)] == "ok" and states[("scheduler", "w1", 101)] == "ok"
    assert states[("catalog", "", None)] == "ok" and [k for k in states if k[0] == "spark"]
    metrics = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert 'repladmin_component_up{kind="worker",host="w1",pid="101"} 1' in metrics
    assert 'repladmin_component_up{kind="worker",host="w2",pid="202"} 0' in metrics
    assert 'repladmin_component_up{kind="follower",host="f1",pid="303"} 1' in metrics


def test_a_follower_silent_past_its_stale_period_makes_its_subscription_follower_down(world, client, viewer_client):
    _, sub = world
    ProcessHeartbeat.objects.filter(kind="follower").update(renewed_at=timezone.now() - timedelta(seconds=16))
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    [row] = body["transactional_publications"][0]["subscribers"]
    # Its database is not registered, so the live read decides first; the follower fact still shows in sync_state.
    assert row["sync_state"] == "IN SYNC (follower down)"
    page = viewer_client.get(reverse("health")).content.decode()
    assert (
        'data-state="down"' in row_of(page, "follower", "f1", 303)
        and "1 in-sync subscription no live follower serves" in page
    )
    detail = viewer_client.get(sub.get_absolute_url()).content.decode()
    assert "IN SYNC (follower down)" in detail


def test_the_watchdog_raises_component_down_once_and_resolves_it_when_a_worker_host_beats_again(world):
    ProcessHeartbeat.objects.filter(kind="worker").update(renewed_at=timezone.now() - timedelta(minutes=5))
    assert heartbeats.watch()["raised"] == ["worker host"]
    alert = Alert.objects.get(kind=Alert.Kind.COMPONENT_DOWN, target="worker host", resolved_at__isnull=True)
    assert "no live worker host, so no job runs" in alert.message and "pid 101 on w1" in alert.message
    assert heartbeats.watch() == {"raised": [], "resolved": []}  # raised once while the trouble lasts
    Alert.objects.filter(pk=alert.pk).update(acknowledged_at=timezone.now(), acknowledged_by="dba")
    assert heartbeats.watch()["raised"] == []  # acknowledged: not raised again until it has cleared
    heartbeats.beat("worker", {"jobs": [], "workers": 1})  # this process, as a worker host
    assert heartbeats.watch()["resolved"] == ["worker host"]
    alert.refresh_from_db()
    assert alert.resolved_at is not None and alert.resolution


def test_the_watchdog_runs_as_many_queries_for_many_unfollowed_subscriptions_as_for_one(world):
    ProcessHeartbeat.objects.filter(kind="follower").delete()
    heartbeats.watch()  # raises the alerts of the first subscription

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            heartbeats.watch()
        return len(captured)

    one = queries()
    for n in range(2, 40):
        ReplSubscriber.objects.create(server="pub", account="acc", subscriber=f"sub{n}", state=ReplSubscriber.IN_SYNC,
                                      follow=True, init_state="done")  # fmt: skip
    heartbeats.watch()  # raises theirs
    assert Alert.objects.filter(kind=Alert.Kind.FOLLOWER_DOWN, resolved_at__isnull=True).count() == 39
    assert queries() == one


def test_a_worker_host_beats_with_its_scheduler_and_a_clean_stop_marks_both_stopped(qcluster, viewer_client):
    deadline = time.monotonic() + 120  # a guard against hanging, generous for a busy machine
    mine = ProcessHeartbeat.objects.filter(pid=qcluster.pid)
    while sorted(mine.values_list("kind", flat=True)) != ["scheduler", "worker"]:
        assert time.monotonic() < deadline and qcluster.poll() is None, qcluster.log_path.read_text()
        time.sleep(0.2)
    worker = mine.get(kind="worker")
    assert worker.details["jobs"] == [] and worker.details["workers"] == 1 and worker.stopped_at is None
    assert "tick" in mine.get(kind="scheduler").details
    page = viewer_client.get(reverse("health")).content.decode()
    assert 'data-state="ok"' in row_of(page, "worker", worker.host, qcluster.pid)

    os.killpg(qcluster.pid, signal.SIGTERM)
    qcluster.wait(timeout=30)
    assert all(beat.stopped_at is not None for beat in mine)
    assert heartbeats.watch()["raised"] == ["worker host", "scheduler"]  # none left alive


def test_the_spark_row_shows_the_master_executors_and_cores_the_service_reports_and_is_down_without_executors(
    world, client, settings, monkeypatch
):
    from replication_admin.health import selectors  # noqa: PLC0415

    settings.SPARK_REMOTE = "sc://spark-host:15002"
    monkeypatch.setattr(selectors.SPARK, "state", lambda wait=1.0: ("ok", "answers: one task in 0.4 s"))
    seen = {"remote": "sc://spark-host:15002", "master": "spark://m1:7077", "master_alive": True,
            "master_status": "ALIVE", "master_workers": 2, "executors": 2, "cores": 4, "restarts": 0}  # fmt: skip
    beat = heartbeat("spark", "spark-host", 404, age=1, **seen)

    def spark_component() -> dict:
        body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
        rows = [c for c in body["components"] if c["kind"] == "spark"]
        assert len(rows) == 1, rows  # the service's heartbeat is not listed as a process of its own
        return rows[0]

    row = spark_component()
    assert (row["state"], row["master_alive"], row["executors"], row["cores"]) == ("ok", True, 2, 4)
    assert "2 executor(s), 4 cores" in row["cause"] and "master alive (2 worker(s))" in row["cause"]
    # The master restarted without recovery and dropped the service's executors: the service answers, jobs wait.
    beat.details = {**seen, "master_alive": True, "executors": 0, "cores": 0}
    beat.save()
    row = spark_component()
    assert row["state"] == "down" and "0 executor(s)" in row["cause"]
    # The master is gone; the executors still work.
    beat.details = {**seen, "master_alive": False, "master_status": "no answer"}
    beat.save()
    row = spark_component()
    assert row["state"] == "unknown" and "master spark://m1:7077 no answer" in row["cause"]

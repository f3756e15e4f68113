"""Alerts: raised by failed jobs, failing scheduled events, invalid subscribers and lag over a
publication's threshold; e-mailed once; shown on the dashboard until an operator acknowledges them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.models import Alert, AuditEntry, JobRun, ReplAccount, ReplSubscriber, ScheduledEvent
from replication_admin.tasks import run_event, run_job
from replication_admin.transactional import lookups as trx_lookups
from replication_admin.transactional import positions as trx_positions
from replication_admin.transactional import sync as trx_sync


@pytest.fixture
def mail_to_dba(db, settings):
    settings.ALERT_RECIPIENTS = ["dba@example.com"]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    return settings


def fail_a_job() -> JobRun:
    job = JobRun.objects.create(kind="no_such_kind", target="orders nightly")
    run_job(job.pk)
    return JobRun.objects.get(pk=job.pk)


def test_a_failed_job_raises_one_alert_and_one_email_until_it_is_acknowledged(mail_to_dba, operator_client, mailoutbox):
    job = fail_a_job()
    assert job.state == JobRun.State.FAILED
    alert = Alert.objects.get(kind="job_failed")
    assert alert.target == "no_such_kind orders nightly" and "unknown job kind" in alert.message
    assert alert.url == reverse("jobs-detail", args=[job.pk])
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["dba@example.com"]
    assert "orders nightly" in mailoutbox[0].subject and alert.url in mailoutbox[0].body
    fail_a_job()
    alert.refresh_from_db()
    assert alert.count == 2 and len(mailoutbox) == 1  # the same open alert only counts up

    page = operator_client.get(reverse("dashboard"))
    assert b'id="alerts"' in page.content and b"(2 times)" in page.content
    response = operator_client.post(reverse("alerts-acknowledge", args=[alert.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b'id="alerts"' not in response.content
    alert.refresh_from_db()
    assert alert.acknowledged_at is not None and alert.acknowledged_by == "operator"
    assert AuditEntry.objects.filter(action="alert.acknowledge", outcome=AuditEntry.Outcome.OK).exists()
    fail_a_job()  # trouble after the acknowledgement is a new alert, and a new e-mail
    assert Alert.objects.filter(kind="job_failed", acknowledged_at__isnull=True).count() == 1
    assert len(mailoutbox) == 2


def test_a_viewer_sees_alerts_but_cannot_acknowledge_them(mail_to_dba, viewer_client):
    fail_a_job()
    alert = Alert.objects.get()
    page = viewer_client.get(reverse("dashboard"))
    assert b"orders nightly" in page.content and b"Acknowledge" not in page.content
    assert viewer_client.post(reverse("alerts-acknowledge", args=[alert.pk])).status_code == 403
    alert.refresh_from_db()
    assert alert.acknowledged_at is None
    assert AuditEntry.objects.filter(action="alert.acknowledge", outcome=AuditEntry.Outcome.DENIED).exists()


def test_a_failing_scheduled_event_raises_an_alert(mail_to_dba, mailoutbox):
    ScheduledEvent.objects.create(
        name="nightly", start=timezone.now() - timedelta(minutes=5), sql="update snapshot nowhere.nothing", interval=60
    )
    assert "failed" in run_event("nightly")
    alert = Alert.objects.get(kind="event_error")
    assert alert.target == "nightly" and "nowhere" in alert.message
    assert len(mailoutbox) == 1


def test_a_subscriber_that_becomes_invalid_raises_an_alert(mail_to_dba, mailoutbox):
    sub = ReplSubscriber.objects.create(server="pub", account="acct", subscriber="sub", level=0, valid=1)
    with pytest.raises(trx_lookups.InvalidSubscriber):
        trx_sync.check_request(sub, level=50, pub_level=10, pub_count=10, oldest=1)
    alert = Alert.objects.get(kind="subscriber_invalid")
    assert alert.target == "sub <- pub/acct" and "level 50" in alert.message
    with pytest.raises(trx_lookups.InvalidSubscriber):  # refused again: still one alert
        trx_sync.check_request(ReplSubscriber.objects.get(pk=sub.pk), level=50, pub_level=10, pub_count=10, oldest=1)
    assert Alert.objects.count() == 1 and len(mailoutbox) == 1


def test_lag_over_the_publications_threshold_raises_an_alert(mail_to_dba, mailoutbox):
    ReplAccount.objects.create(server="pub", account="acct", alert_lag=5)
    sub = ReplSubscriber.objects.create(server="pub", account="acct", subscriber="sub", level=0, valid=1)
    trx_positions.record_position(sub, count=10, pub_count=15)
    assert not Alert.objects.exists()  # 5 behind: at the threshold, not over it
    trx_positions.record_position(sub, count=10, pub_count=40)
    alert = Alert.objects.get(kind="lag")
    assert "30 transactions behind" in alert.message and alert.url == sub.get_absolute_url()


def test_times_are_shown_in_the_browsers_time_zone_with_utc_on_hover(mail_to_dba, viewer_client):
    fail_a_job()
    alert = Alert.objects.get()
    Alert.objects.filter(pk=alert.pk).update(last_seen_at=datetime(2026, 7, 1, 12, 0, tzinfo=UTC))
    viewer_client.cookies["tz"] = "Europe/Helsinki"
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert 'title="2026-07-01 12:00:00 UTC">2026-07-01 15:00:00</time>' in page
    viewer_client.cookies["tz"] = "Not/AZone"
    page = viewer_client.get(reverse("dashboard")).content.decode()
    assert 'title="2026-07-01 12:00:00 UTC">2026-07-01 12:00:00</time>' in page

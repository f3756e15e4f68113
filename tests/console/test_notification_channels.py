"""Notification channels: alerts and decided conflicts reach a real JSON webhook (Apprise's json:// service) through
the outbox, once each; a channel that refuses is tried again with backoff, alerts after three tries and heals; the
default rule's conflicts go to the registry's address and a resolver's to its owner; channels are made, switched,
tested and deleted by editors only, audited, their URLs kept encrypted."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.console.actions import (
    do_create_notification_channel,
    do_set_conflict_notify_email,
    do_set_notification_channel,
)
from replication_admin.core import notifications
from replication_admin.core.alerts import open_alerts, raise_alert, send_notifications
from replication_admin.core.audit import Actor
from replication_admin.models import (
    Alert,
    AuditEntry,
    ConflictBackup,
    Notification,
    NotificationChannel,
    TransactionalConflictResolver,
)
from replication_admin.servers.actions import do_rotate_passwords
from tests.stored import everything_stored
from tests.webhook import webhook

pytestmark = pytest.mark.django_db

ALERTS = ["alerts"]
BOTH = ["alerts", "conflicts"]


@pytest.fixture
def hook():
    with webhook() as receiver:
        yield receiver


def channel(hook, name: str = "on-call", events: list[str] | None = None) -> NotificationChannel:
    return do_create_notification_channel(Actor.command(), name, hook.url, events or ALERTS)


def time_passes() -> None:
    """The retry's wait is over (the backoff is what is tested, not the clock)."""
    Notification.objects.filter(state="pending").update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def backup(key: int, *, kind: str = "transactional", resolver_id: int | None = None, decision: int = 3, **extra):
    return ConflictBackup.objects.create(
        kind=kind, item="pub.items", table_name="items", publisher="pub", source="my", change_guid=f"my:{key}:1",
        origin="my", primary_key={"id": key}, conflict_type="U", operation="U", decision=decision,
        resolver_id=resolver_id, resolver="items_U_sub" if resolver_id else "default", **extra,
    )  # fmt: skip


# --- alerts to a channel -----------------------------------------------------------------------------------------


def test_an_alert_that_opens_reaches_the_webhook_once_and_raised_again_only_counts_up(hook, settings):
    settings.CONSOLE_URL = "https://console.example"
    channel(hook)
    raise_alert("apply_halted", "pg/shop → my", "halted at level 12: duplicate key", "/transactional/")
    assert Notification.objects.filter(state="pending").count() == 1  # written with the alert, sent by a round
    assert hook.received == []
    outcomes = send_notifications()
    assert [o.error for o in outcomes] == [None]
    assert hook.titles() == ["[replication_admin] apply halted: pg/shop → my"]
    message = hook.received[0]
    assert message["path"] == "/hooks/replication"
    assert "halted at level 12: duplicate key" in message["message"]
    assert "https://console.example/transactional/" in message["message"]
    sent = Notification.objects.get()
    assert (sent.state, sent.attempts) == ("sent", 1) and sent.sent_at is not None
    assert NotificationChannel.objects.get().last_sent_at is not None

    raise_alert("apply_halted", "pg/shop → my", "halted at level 12: duplicate key")  # still open: counts up
    send_notifications()
    assert len(hook.received) == 1 and Alert.objects.get().count == 2
    assert send_notifications() == []  # nothing left to send


def test_a_channel_that_refuses_is_tried_again_with_backoff_alerts_after_three_tries_and_heals(hook):
    on_call = channel(hook)
    other = channel(hook, "second")  # hears the failure's alert; the failing channel is not told of itself
    hook.failing = True
    raise_alert("server_unreachable", "my", "my does not answer")
    first = send_notifications()
    assert sorted(o.destination for o in first if o.error) == ["on-call", "second"]
    waiting = Notification.objects.get(channel=on_call)
    assert waiting.state == "pending" and waiting.attempts == 1 and "500" in waiting.last_error
    assert waiting.next_attempt_at > timezone.now() + timedelta(seconds=20)  # backoff: the next try waits
    assert send_notifications() == []  # not due yet
    assert not open_alerts().filter(kind="notify_failed").exists()

    time_passes()
    send_notifications()
    time_passes()
    send_notifications()  # the third failed try
    assert Notification.objects.get(channel=on_call, subject__contains="unreachable").attempts == 3
    failed = open_alerts().filter(kind="notify_failed")
    assert sorted(failed.values_list("target", flat=True)) == ["on-call", "second"]
    assert "3 tries failed" in failed.get(target="on-call").message
    told = Notification.objects.filter(subject__contains="notification not delivered")
    # Each failure's alert goes to the other channel only.
    assert {(n.channel.name, n.subject.rsplit(": ", 1)[1]) for n in told} == {
        ("second", "on-call"),
        ("on-call", "second"),
    }
    assert NotificationChannel.objects.get(pk=on_call.pk).last_error

    hook.failing = False
    time_passes()
    send_notifications()
    assert not open_alerts().filter(kind="notify_failed").exists()  # delivered: both alerts resolved
    assert hook.titles().count("[replication_admin] server unreachable: my") == 2
    assert Notification.objects.filter(state="pending").count() == 0
    assert NotificationChannel.objects.get(pk=other.pk).last_error == ""


def test_a_message_that_fails_every_try_ends_failed_and_is_not_sent_again(hook):
    on_call = channel(hook)
    hook.failing = True
    raise_alert("lag", "pg/shop → my", "behind 90 s")
    for _ in range(Notification.MAX_ATTEMPTS + 2):
        time_passes()
        send_notifications()
    message = Notification.objects.get(channel=on_call, subject__contains="lag")
    assert (message.state, message.attempts) == ("failed", Notification.MAX_ATTEMPTS)
    assert "no more tries" in open_alerts().get(kind="notify_failed").message
    hook.failing = False
    time_passes()
    send_notifications()
    assert hook.received == []  # a failed message stays failed


def test_a_channel_switched_off_holds_its_messages_and_on_again_sends_them(hook):
    on_call = channel(hook)
    do_set_notification_channel(Actor.command(), on_call, enabled=False, chosen=ALERTS)
    raise_alert("lag", "x", "behind")
    assert Notification.objects.count() == 0  # a channel off is not written to
    do_set_notification_channel(Actor.command(), on_call, enabled=True, chosen=ALERTS)
    raise_alert("lag", "y", "behind")
    do_set_notification_channel(Actor.command(), on_call, enabled=False, chosen=ALERTS)
    assert send_notifications() == []
    do_set_notification_channel(Actor.command(), on_call, enabled=True, chosen=ALERTS)
    send_notifications()
    assert hook.titles() == ["[replication_admin] lag over threshold: y"]


# --- conflicts ----------------------------------------------------------------------------------------------------


def test_conflicts_go_to_their_resolvers_owner_the_default_rules_to_the_registry_address_and_to_channels(
    hook, mailoutbox
):
    channel(hook, "conflicts", ["conflicts"])
    channel(hook, "alerts only", ALERTS)
    owned = TransactionalConflictResolver.objects.create(
        table_name="pub.items", type="U", proc="items_U_sub", resolver_class="sub_wins", notify="owner@example.com"
    )
    backup(1, resolver_id=owned.pk, decision=1)
    backup(2, resolver_id=owned.pk, decision=1)
    backup(3)  # the default rule: nobody named yet
    backup(4, pending=True)  # its sync has not committed: not told yet
    assert notifications.record_conflicts() == 3
    send_notifications()
    assert [m.to for m in mailoutbox] == [["owner@example.com"]]
    assert "2 conflict(s) on pub.items" in mailoutbox[0].subject
    assert "id=1 in items from my: subscriber wins (items_U_sub)" in mailoutbox[0].body
    assert "id=3" not in mailoutbox[0].body
    assert hook.titles() == ["[replication_admin] 3 conflict(s) on pub.items"]  # the channel hears all of them
    assert "id=3 in items from my: publisher wins (default)" in hook.received[0]["message"]
    assert ConflictBackup.objects.filter(notified=True).count() == 3

    do_set_conflict_notify_email(Actor.command(), "dba@example.com")
    ConflictBackup.with_pending.filter(pending=True).update(pending=False)
    backup(5)
    send_notifications()
    assert [m.to for m in mailoutbox][1:] == [["dba@example.com"]]
    assert "id=4 in" in mailoutbox[1].body and "id=5 in" in mailoutbox[1].body
    assert len(hook.received) == 2
    assert send_notifications() == [] and len(mailoutbox) == 2  # each conflict told once


def test_a_mail_server_that_refuses_is_tried_again(mailoutbox, settings):
    do_set_conflict_notify_email(Actor.command(), "dba@example.com")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 1, 2  # nothing listens there
    backup(1)
    [outcome] = send_notifications()
    assert outcome.error and outcome.destination == "dba@example.com"
    assert Notification.objects.get().state == "pending"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    time_passes()
    send_notifications()
    assert [m.to for m in mailoutbox] == [["dba@example.com"]] and Notification.objects.get().state == "sent"


# --- the console ------------------------------------------------------------------------------------------------


def test_an_editor_adds_a_channel_whose_url_is_kept_encrypted_and_tests_it(editor_client, hook):
    secret_url = hook.url.replace("json://", "json://hookuser:s3cr3t-t0ken@")
    response = editor_client.post(
        reverse("alerts-channels"), {"form": "create", "name": "on-call", "url": secret_url, "events": BOTH}
    )
    assert response.status_code == 302
    stored = NotificationChannel.objects.get()
    assert stored.events == BOTH and stored.enabled and stored.created_by == "editor"
    assert "s3cr3t-t0ken" not in everything_stored()
    assert notifications.channel_url(stored) == secret_url
    page = editor_client.get(reverse("alerts-channels")).content.decode()
    assert "on-call" in page and f"127.0.0.1:{hook.port}/hooks/replication" in page and "s3cr3t" not in page
    entry = AuditEntry.objects.get(action="notify_channel.create")
    assert entry.outcome == "ok" and "s3cr3t" not in repr(entry.detail)

    response = editor_client.post(reverse("alerts-channels-test", args=[stored.pk]), follow=True)
    assert "took the test message" in response.content.decode()
    assert hook.titles() == ["[replication_admin] test of the channel on-call"]
    hook.failing = True
    response = editor_client.post(reverse("alerts-channels-test", args=[stored.pk]), follow=True)
    assert "did not take the test message" in response.content.decode()
    assert list(
        AuditEntry.objects.filter(action="notify_channel.test").order_by("id").values_list("outcome", flat=True)
    ) == ["ok", "error"]

    do_rotate_passwords(Actor.command())  # the channels' URLs are re-encrypted with the servers' passwords
    assert notifications.channel_url(NotificationChannel.objects.get()) == secret_url

    response = editor_client.post(reverse("alerts-channels-delete", args=[stored.pk]), follow=True)
    assert "Deleted the channel on-call" in response.content.decode()
    assert not NotificationChannel.objects.exists()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("nonsense://somewhere", "'nonsense' is not a notification URL Apprise knows"),
        ("json://host/a b", "no spaces or line breaks"),
        ("", "give the channel's URL"),
        ("'; DROP TABLE REPL_ALERT; --", "no spaces or line breaks"),
        ("';DROP", "is not a notification URL Apprise knows"),
        (
            "https://hooks.example.com/replication",
            "for a generic JSON webhook write jsons://hooks.example.com/replication",
        ),
    ],
)
def test_a_url_apprise_does_not_know_is_refused_in_one_line_and_nothing_is_kept(editor_client, url, says):
    response = editor_client.post(
        reverse("alerts-channels"), {"form": "create", "name": 'ab ""cd 表😀', "url": url, "events": ALERTS}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert says in page.replace("&#x27;", "'") or (not url and "This field is required" in page)
    assert not NotificationChannel.objects.exists()
    if url:
        refusal = AuditEntry.objects.get(action="notify_channel.create")
        assert refusal.outcome == "error" and says in refusal.detail["refused"]


def test_a_viewer_reads_the_page_and_may_not_add_switch_test_or_delete_a_channel(viewer_client, hook):
    on_call = channel(hook)
    page = viewer_client.get(reverse("alerts-channels")).content.decode()
    assert "on-call" in page and "Add channel" not in page and "Send a test" not in page
    refused = [
        viewer_client.post(reverse("alerts-channels"), {"form": "create", "name": "x", "url": hook.url}),
        viewer_client.post(reverse("alerts-channels-change", args=[on_call.pk]), {}),
        viewer_client.post(reverse("alerts-channels-test", args=[on_call.pk])),
        viewer_client.post(reverse("alerts-channels-delete", args=[on_call.pk])),
        viewer_client.post(reverse("alerts-channels"), {"form": "notify_email", "address": "x@example.com"}),
    ]
    assert [r.status_code for r in refused] == [403] * 5
    assert NotificationChannel.objects.get().enabled and hook.received == []
    denied = AuditEntry.objects.filter(outcome="denied").values_list("action", flat=True)
    assert set(denied) == {
        "notify_channel.create", "notify_channel.change", "notify_channel.test", "notify_channel.delete",
        "conflict.notify_email",
    }  # fmt: skip


def test_the_default_rules_address_is_checked_and_set_from_the_page(editor_client):
    response = editor_client.post(reverse("alerts-channels"), {"form": "notify_email", "address": "not an address"})
    assert "is not an e-mail address" in response.content.decode().replace("&#x27;", "'")
    assert notifications.RegistryEntry.get_value("conflict_notify_email") == ""
    response = editor_client.post(
        reverse("alerts-channels"), {"form": "notify_email", "address": "dba@example.com"}, follow=True
    )
    assert "e-mailed to dba@example.com" in response.content.decode()
    assert notifications.RegistryEntry.get_value("conflict_notify_email") == "dba@example.com"


# --- a real cluster's rounds ---------------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_running_cluster_sends_an_alert_and_a_conflict_a_follower_decided_to_the_channel(qcluster):
    """Nothing here sends: the cluster's scheduler thread does, as it would for a follower's conflict."""
    with webhook() as hook:
        do_create_notification_channel(Actor.command(), "on-call", hook.url, BOTH)
        raise_alert("follower_down", "replfollow on host-a", "no heartbeat for 40 s")
        backup(1)  # written by a follower: no sync job ends to send it
        deadline = time.monotonic() + 120
        while len(hook.received) < 2 and time.monotonic() < deadline and qcluster.poll() is None:
            time.sleep(0.5)
        assert sorted(hook.titles()) == [
            "[replication_admin] 1 conflict(s) on pub.items",
            "[replication_admin] follower down: replfollow on host-a",
        ], qcluster.log_path.read_text(errors="replace")[-3000:]
        assert set(Notification.objects.values_list("state", flat=True)) == {"sent"}
        assert ConflictBackup.objects.get().notified
        time.sleep(2 * 5)  # two more rounds (REPLADMIN_SCHEDULER_TICK): nothing is sent twice
        assert len(hook.received) == 2

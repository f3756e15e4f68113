"""End to end in headless Chromium: an editor goes from the Alerts page to the notification channels, is refused a URL
Apprise does not know in one line, adds a JSON webhook that hears alerts, sends it a test, and the webhook (a real
HTTP server) gets it; an alert that opens reaches it through a notification round and is listed as sent; the
channel switched off and deleted from the page."""

from __future__ import annotations

import pytest

from replication_admin.core.alerts import raise_alert, send_notifications
from replication_admin.models import NotificationChannel
from tests.users import make_user
from tests.webhook import webhook

pytestmark = pytest.mark.browser

PASSWORD = "pw-for-tests-only"  # tests.users.make_user's


def test_an_editor_adds_a_webhook_channel_tests_it_and_an_alert_reaches_it(live_server, page, shot):
    make_user("editor", "edit", "operate")
    page.goto(live_server.url + "/alerts/")
    page.fill("#id_username", "editor")
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("h1:has-text('Alerts')")
    page.click("#channels-link")
    page.wait_for_selector("h1:has-text('Notification channels')")
    assert "No channels yet" in page.inner_text("#no-channels")

    with webhook() as hook:
        page.fill("#id_name", "on-call webhook")
        page.fill("#id_url", "teams-ish://not-a-service")
        page.click("#add-channel")
        page.wait_for_selector("#channel-form .errorlist")
        assert "is not a notification URL Apprise knows" in page.inner_text("#channel-form .errorlist")
        assert not NotificationChannel.objects.exists()
        shot(page, "url-refused")

        page.fill("#id_url", hook.url)
        page.click("#add-channel")
        page.wait_for_selector("#channel-rows")
        row = page.locator("#channel-rows tbody tr").first
        assert "on-call webhook" in row.inner_text() and f"127.0.0.1:{hook.port}" in row.inner_text()
        channel = NotificationChannel.objects.get()

        page.click(f"[data-test-channel='{channel.pk}']")
        page.wait_for_selector(".messages li.success")
        assert "took the test message" in page.inner_text(".messages")
        assert hook.titles() == ["[replication_admin] test of the channel on-call webhook"]
        shot(page, "channel-tested")

        raise_alert("follower_down", "replfollow on host-a", "no heartbeat for 40 s", "/health/")
        send_notifications()  # a scheduler round's work
        assert hook.titles()[-1] == "[replication_admin] follower down: replfollow on host-a"
        page.reload()
        sent = page.locator("#notification-rows tbody tr").first
        assert "follower down" in sent.inner_text() and "sent" in sent.inner_text()
        shot(page, "alert-sent")

        settings_form = page.locator(f"[data-channel='{channel.pk}'] form.channel-settings")
        settings_form.locator("input[name$='enabled']").uncheck()
        settings_form.locator("button").click()
        page.wait_for_selector(".messages li.success")
        assert "is off" in page.inner_text(".messages")
        assert not NotificationChannel.objects.get().enabled
        raise_alert("lag", "pg/shop → my", "behind 90 s")
        send_notifications()
        assert len(hook.received) == 2  # a channel off hears nothing

        page.click(f"[data-channel='{channel.pk}'] a:has-text('Delete')")
        page.click("button:has-text('Delete channel')")
        page.wait_for_selector("#no-channels")
        assert not NotificationChannel.objects.exists()
        shot(page, "channel-deleted")

"""End to end in headless Chromium: an editor makes an API token on the API tokens page, reads it once, monitoring
uses it against the live console's /api/status (and is refused /metrics, a scope the token lacks), the editor
revokes it and it is refused; a viewer sees the list and no way to make or revoke one."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from replication_admin.models import ApiToken, AuditEntry
from tests.users import make_user

pytestmark = pytest.mark.browser

PASSWORD = "pw-for-tests-only"  # tests.users.make_user's


def log_in(page, base_url: str, username: str) -> None:
    page.goto(base_url + "/tokens/")
    assert "/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("h1:has-text('API tokens')")


def get(url: str, token: str) -> tuple[int, str]:
    """A monitoring system's request: no browser, no session, only the token."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.netloc, timeout=60)
    try:
        connection.request("GET", address.path, headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_an_editor_makes_a_token_reads_it_once_monitoring_uses_it_and_after_revoking_it_is_refused(
    live_server, browser, page, shot, settings
):
    settings.STATUS_TOKENS = []
    make_user("editor", "edit", "operate")
    make_user("viewer")
    log_in(page, live_server.url, "editor")
    assert "No API tokens yet" in page.inner_text("main")
    shot(page, "no-tokens")

    page.fill("#id_name", "prometheus on mon-1")
    assert page.is_checked("#id_scopes_0") and not page.is_checked("#id_scopes_1")  # status only
    page.click("#create-token")
    page.wait_for_selector("#token-created")
    secret = page.inner_text("#new-token").strip()
    assert secret.startswith("ra_") and len(secret) == 43
    assert "it is not shown again" in page.inner_text("#token-created")
    assert f"{live_server.url}/api/status" in page.inner_text("#token-example")
    row = page.locator("#token-rows tbody tr").first
    assert "prometheus on mon-1" in row.inner_text() and secret[:11] in row.inner_text()
    shot(page, "token-made-shown-once")

    status, body = get(live_server.url + "/api/status", secret)
    assert status == 200
    report = json.loads(body)
    assert {"generated_at", "state", "snapshots", "conflicts"} <= report.keys()
    status, body = get(live_server.url + "/metrics", secret)
    assert status == 403 and json.loads(body) == {"error": "this token does not have the metrics scope"}

    page.click("header a:has-text('API tokens')")
    page.wait_for_selector("#token-rows")
    assert secret not in page.content() and page.locator("#token-created").count() == 0
    cells = page.locator("#token-rows tbody tr").first.locator("td")
    assert cells.nth(2).inner_text() == "status" and cells.nth(4).inner_text() != "—"  # last used: just now
    assert "active" in cells.nth(5).inner_text()
    shot(page, "list-after-use")

    viewer = browser.new_context(viewport={"width": 1360, "height": 900})
    viewer_page = viewer.new_page()
    log_in(viewer_page, live_server.url, "viewer")
    assert "prometheus on mon-1" in viewer_page.inner_text("#token-rows")
    assert viewer_page.locator("#token-form").count() == 0 and viewer_page.locator("text=Revoke…").count() == 0
    assert "needs the edit permission" in viewer_page.inner_text("main")
    shot(viewer_page, "viewer-reads-the-list")
    viewer.close()

    page.click("#token-rows a:has-text('Revoke…')")
    page.wait_for_selector("h1:has-text('Revoke the API token prometheus on mon-1?')")
    shot(page, "revoke-confirmation")
    assert get(live_server.url + "/api/status", secret)[0] == 200  # asking changed nothing
    page.click("button:has-text('Revoke token')")
    page.wait_for_selector(".messages li:has-text('Revoked the token')")
    assert "revoked" in page.locator("#token-rows tbody tr").first.locator("td").nth(5).inner_text()
    shot(page, "revoked")

    status, body = get(live_server.url + "/api/status", secret)
    assert status == 401 and json.loads(body) == {"error": "this token was revoked"}
    token = ApiToken.objects.get()
    assert token.revoked_by == "editor" and token.token_hash != secret
    assert list(AuditEntry.objects.filter(action__startswith="api_token.").order_by("id").values_list(
        "action", "username", "outcome")) == [("api_token.create", "editor", "ok"), ("api_token.revoke", "editor", "ok")]  # fmt: skip

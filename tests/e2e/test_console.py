"""End to end in headless Chromium: log in, see the servers, run a compare job through a real worker."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun, Server
from replication_admin.servers.actions import do_register_server
from tests.conftest import require_service, server_data
from tests.tables import create_table, insert_rows

pytestmark = [pytest.mark.browser, pytest.mark.spark]

PASSWORD = "e2e-password-1"


def log_in(page, base_url: str) -> None:
    page.goto(base_url + "/")
    assert "/login/" in page.url
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_selector("h1:has-text('Is replication working?')")


def test_an_admin_logs_in_sees_the_servers_runs_a_compare_and_watches_it_finish(
    live_server, qcluster, page, shot, sqlite_path
):
    User.objects.create_superuser("admin", password=PASSWORD)
    left = do_register_server(Actor.command(), server_data("sqlite", "shop", sqlite_path("shop")))
    right = do_register_server(Actor.command(), server_data("sqlite", "replica", sqlite_path("replica")))
    columns = [("id", LogicalType("integer")), ("name", LogicalType("varchar", length=20))]
    for server in (left, right):
        create_table(server, "customers", columns, ["id"])
    insert_rows(left, "customers", ["id", "name"], [(i, f"customer {i}") for i in range(1, 301)])
    insert_rows(right, "customers", ["id", "name"], [(i, f"customer {i}") for i in range(1, 300)])

    log_in(page, live_server.url)
    shot(page, "dashboard")

    page.click("header nav a:has-text('Servers')")
    page.wait_for_selector("#server-rows")
    rows = page.locator("#server-rows tbody tr")
    assert rows.count() == 2
    assert "replica" in rows.nth(0).inner_text() and "shop" in rows.nth(1).inner_text()
    shot(page, "servers")

    page.click("a:has-text('shop')")
    page.wait_for_selector("#tables table")  # loaded by htmx after the page
    assert "customers" in page.locator("#tables").inner_text()
    page.click("#check-server")
    page.wait_for_selector("#server-status .result.ok")
    shot(page, "server-detail")

    page.goto(live_server.url + "/jobs/compare/")
    page.select_option("#id_left_server", "shop")
    page.fill("#id_left_table", "customers")
    page.select_option("#id_right_server", "replica")
    page.fill("#id_right_table", "customers")
    page.click("#start-compare")
    page.wait_for_selector("#job-status")
    # A marker on the window survives htmx swaps but not a page reload: the bar updates in place.
    page.evaluate("window.__stayed = true")
    page.wait_for_selector("#job-status[data-state='succeeded']", timeout=180_000)
    assert page.evaluate("window.__stayed") is True
    assert page.get_attribute("[role=progressbar]", "aria-valuenow") == "100"
    result = page.locator("#compare-result").inner_text()
    assert "different" in result and "300" in result and "299" in result
    assert "id=300" in result
    shot(page, "compare-finished")

    job = JobRun.objects.get()
    assert job.state == "succeeded" and job.result["missing_in_right"] == 1
    assert job.created_by.username == "admin"
    assert AuditEntry.objects.filter(action="job.compare", username="admin").exists()


def test_the_test_connection_button_reports_a_wrong_password_without_saving(live_server, page, shot):
    require_service("mysql")
    User.objects.create_superuser("admin", password=PASSWORD)
    log_in(page, live_server.url)
    page.goto(live_server.url + "/servers/add/")
    page.fill("#id_name", "maria")
    page.select_option("#id_dialect", "mysql")
    page.fill("#id_host", "127.0.0.1")
    page.fill("#id_port", "3306")
    page.fill("#id_database", "test")
    page.fill("#id_user", "root")
    page.fill("#id_password", "not-the-password")
    page.click("#test-connection")
    page.wait_for_selector("#connection-result .result.bad")
    assert "wrong user name or password" in page.inner_text("#connection-result")
    shot(page, "wrong-password")

    page.fill("#id_password", "")
    page.click("#test-connection")
    page.wait_for_selector("#connection-result .result.ok")
    shot(page, "connected")
    assert not Server.objects.exists()

    page.click("button:has-text('Register')")
    page.wait_for_selector("h1:has-text('Server maria')")
    assert Server.objects.get(name="maria").dialect == "mysql"


def test_pages_charts_and_htmx_run_under_the_content_security_policy(live_server, page, sqlite_path):
    """The dashboard (its charts come by htmx, drawn by plotly), a server's htmx connection test and the charts of a
    transactional page run with no Content-Security-Policy violation and no script error."""
    User.objects.create_superuser("admin", password=PASSWORD)
    do_register_server(Actor.command(), server_data("sqlite", "shop", sqlite_path("shop")))
    now = timezone.now()
    JobRun.objects.create(kind="compare", target="a ↔ b", state=JobRun.State.SUCCEEDED, finished_at=now)
    JobRun.objects.create(kind="compare", target="a ↔ b", state=JobRun.State.FAILED, finished_at=now, error="x")
    problems: list[str] = []
    page.on(
        "console",
        lambda m: (
            problems.append(m.text)
            if (m.type == "error" and "Failed to load resource" not in m.text) or "Policy" in m.text or "CSP" in m.text
            else None
        ),
    )
    page.on(
        "response",
        lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', function (e) {"
        " console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI); });"
    )

    log_in(page, live_server.url)
    page.wait_for_selector("#charts .js-plotly-plot .main-svg")  # plotly drew the job outcomes chart
    styles = page.evaluate(
        "Array.from(document.querySelectorAll('style')).map(s => s.id + ':' + s.textContent.slice(0, 80) + ':' + !!s.sheet)"
    )
    assert styles == [], styles

    page.goto(live_server.url + "/servers/shop/")
    page.click("#check-server")
    page.wait_for_selector("#server-status .result.ok")  # an htmx request and swap

    page.goto(live_server.url + "/conflicts/")  # its chart script is a static file now
    page.wait_for_load_state("load")

    page.goto(live_server.url + "/audit/")
    page.wait_for_selector("#audit-rows")
    assert problems == []

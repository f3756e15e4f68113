"""In headless Chromium at a laptop's width: no console page is wider than the window. A table with long
names, statements, dates and row actions wraps inside the page instead of pushing its last columns off screen."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from replication_admin.models import AuditEntry, JobRun, ScheduledEvent
from tests.console.big_catalog import SMALL, console_pages, seed
from tests.e2e.test_console import PASSWORD, log_in

pytestmark = [pytest.mark.browser]

WIDTH = 1280


def demo_shaped_rows() -> None:
    """Rows named as the demo and a long-running install name them: events per subscription and server, a
    statement with arguments, a long error, jobs and audit entries with long targets."""
    now = timezone.now()
    for name, sql, server in (
        ("repl_demo_orders@pg_demo", "REPL_SYNC ('demo', 'orders')", "pg_demo"),
        ("repl_tracer_demo_orders", "REPL_TRACER ('orders')", "demo"),
        ("snapshot pg_demo.order_totals", "UPDATE SNAPSHOT pg_demo.order_totals", ""),
        ("bidir demo.Products", "REPL_UPDATE_SNAPSHOT ('demo.Products', 2)", ""),
    ):
        ScheduledEvent.objects.create(
            name=name, sql=sql, server=server, start=now - timedelta(hours=1), interval=1,
            last_started=now - timedelta(seconds=30), last_completed=now - timedelta(seconds=29),
            last_error="server 'pg_demo' is unreachable: connection refused (127.0.0.1:5432) after 5 attempts",
        )  # fmt: skip
    JobRun.objects.create(
        kind="snapshot_refresh", target="UPDATE SNAPSHOT pg_demo.order_totals_of_every_customer_by_region",
        state="failed", error="server 'pg_demo' is unreachable: connection refused (127.0.0.1:5432) after 5 attempts",
        started_at=now - timedelta(minutes=1), finished_at=now,
    )  # fmt: skip
    AuditEntry.objects.create(
        username="command:root", action="job.snapshot_refresh", outcome="ok",
        target="UPDATE SNAPSHOT pg_demo.order_totals_of_every_customer_by_region", detail={},
    )  # fmt: skip


def test_no_console_page_is_wider_than_a_laptop_window(live_server, page, shot):
    User.objects.create_superuser("admin", password=PASSWORD)
    seed(SMALL)
    demo_shaped_rows()
    page.set_viewport_size({"width": WIDTH, "height": 900})
    log_in(page, live_server.url)
    too_wide: dict[str, dict[str, int]] = {}
    visited = 0
    for console_page in console_pages():
        if console_page.headers or console_page.url.startswith(("/metrics", "/api/")):
            continue  # htmx fragments and the monitoring endpoints are not pages
        page.goto(live_server.url + console_page.url)
        page.wait_for_load_state("networkidle")
        visited += 1
        # Wider than the window, or a table reaching past its panel's inner edge (by more than a rounding).
        excess = page.evaluate(
            """() => [['page', document.documentElement.scrollWidth - window.innerWidth],
                 ...[...document.querySelectorAll('table')].filter(t => t.checkVisibility()).map(t => {
                   const box = t.parentElement.getBoundingClientRect(), style = getComputedStyle(t.parentElement);
                   const inner = box.right - parseFloat(style.paddingRight);
                   return ['table ' + (t.id || t.className), Math.round(t.getBoundingClientRect().right - inner)];
                 })].filter(([, px]) => px > 1)"""
        )
        if excess:
            too_wide[console_page.name] = dict(excess)
            shot(page, re.sub(r"[^a-z0-9]+", "-", console_page.name.lower()).strip("-"))
    assert visited >= 25
    assert too_wide == {}


def test_the_dashboards_panels_break_long_names_but_never_a_job_kind_or_a_user_name(live_server, page, shot):
    User.objects.create_superuser("admin", password=PASSWORD)
    demo_shaped_rows()
    page.set_viewport_size({"width": WIDTH, "height": 900})
    log_in(page, live_server.url)
    page.goto(live_server.url + "/")
    shot(page, "dashboard-panels")
    # A word broken across lines is drawn as two boxes: count the line boxes of each cell's text.
    lines = page.evaluate(
        """() => [...document.querySelectorAll('.split table.grid .word')].map(td => {
             const range = document.createRange(); range.selectNodeContents(td);
             const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
             return [td.textContent.trim(), tops.size];
           })"""
    )
    assert any(text == "snapshot_refresh" for text, _ in lines)
    assert any(text == "command:root" for text, _ in lines)
    assert [text for text, count in lines if count != 1] == []
    excess = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert excess <= 0

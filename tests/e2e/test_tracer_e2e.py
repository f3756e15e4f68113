"""In headless Chromium: an operator posts a tracer token on a transactional publication's page, and once the
subscribers have applied it, reads each one's latency in the table and the chart."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from replication_admin.models import TracerArrival
from tests.e2e.test_console import PASSWORD, log_in
from tests.transactional.test_tracers import published
from tests.transactional.test_trx_replication import run

pytestmark = [pytest.mark.browser, pytest.mark.live_db]


def test_an_operator_posts_a_tracer_and_reads_each_subscribers_latency(live_server, page, shot, make_server, jobs_sync):
    _pub, subs = published(make_server, {"my": "mysql", "lite": "sqlite"})
    User.objects.create_superuser("admin", password=PASSWORD)
    log_in(page, live_server.url)
    page.goto(live_server.url + "/publications/trx/pub/acct/")
    page.wait_for_selector("#tracers")
    shot(page, "no-tracer-yet")

    for _ in range(2):
        page.click("#post-tracer")
        page.wait_for_selector(".messages li:has-text('written into the log')")
        for sub in subs:
            run(sub, "REPL_SYNC ('pub', 'acct')")
    assert TracerArrival.objects.count() == 4

    page.goto(live_server.url + "/publications/trx/pub/acct/")
    rows = page.locator("#tracer-table tbody tr")
    assert rows.count() == 2
    for name in ("my", "lite"):
        cell = rows.first.locator(f'td[data-subscriber="{name}"]').inner_text()
        assert cell.endswith(" s") and float(cell[:-2]) >= 0
    chart = page.locator("#trx-tracer-chart")
    chart.locator(".main-svg").first.wait_for()
    assert chart.locator(".scatterlayer .trace").count() == 2  # a line per subscriber
    chart.scroll_into_view_if_needed()
    shot(page, "tracer-latencies")

"""In headless Chromium: the operator sees on the dashboard which replication is broken and how far behind the
others are, opens the topology, and clicks the red line through to the broken item's page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.console.test_topology import servers  # noqa: F401  (the fixture)
from tests.e2e.test_console import PASSWORD, log_in

pytestmark = [pytest.mark.browser]


def test_the_topology_shows_a_failing_item_in_red_and_leads_to_it(live_server, page, shot, servers):  # noqa: F811
    User.objects.create_superuser("admin", password=PASSWORD)
    log_in(page, live_server.url)
    panel = page.locator("#topology-panel")
    panel.locator("svg.topology").wait_for()
    assert panel.locator("a.edge.edge-bad").count() == 2 and panel.locator("a.edge.edge-ok").count() == 1
    row = page.locator("tr.item-row", has_text="remote.customers")
    assert "broken for 3 h 0 min" in row.inner_text()  # since its last success
    assert row.locator("td.item-lag").inner_text() == "3 h 0 min"
    shot(page, "dashboard-with-topology")

    page.click("#topology-panel h2 a:has-text('open the page')")
    page.wait_for_selector("h1:has-text('Topology')")
    graph = page.locator("#topology svg.topology")
    box = graph.bounding_box()
    assert box and box["width"] > 600 and box["height"] > 250  # drawn, not collapsed
    remote = page.locator('a.node[data-server="remote"]')
    assert "node-bad" in (remote.get_attribute("class") or "")
    shot(page, "topology")

    page.locator('a.edge-text[data-item="remote.customers"] text').click()  # its label, drawn over the boxes
    page.wait_for_selector("h1:has-text('remote.customers')")
    assert page.url.endswith("/snapshots/remote.customers/")
    shot(page, "broken-item")

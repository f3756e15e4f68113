"""Console pages benchmark (run on demand: `make bench`). It prints figures and ratios measured in the same run; it
asserts only that every page answers 200.

Every console page of tests/console/big_catalog.py (each list sorted, filtered and paged, the detail pages, the htmx
fragments, /metrics and /api/status), rendered RUNS times through Django's test client on a small catalog (a few rows
of each kind) and then on the big one (10,000 conflicts, 1,000 subscriptions of each kind, 3,000 jobs): per page, the
server time's median and p95 on the big catalog, the SQL queries it runs on each catalog, and two ratios of its median
on the big catalog, to its median on the small one and to the login page's (a page that reads nothing), both measured
in this run. The suite checks that the query counts stay the same (tests/console/test_list_pages.py); the times are here.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from dataclasses import dataclass

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.console.big_catalog import BIG, SMALL, TOKEN, Page, clear, console_pages, seed
from tests.users import make_user

pytestmark = [pytest.mark.bench, pytest.mark.django_db]

RUNS = int(os.environ.get("BENCH_PAGE_RUNS", "20"))


@dataclass(frozen=True)
class Figures:
    times_ms: list[float]
    queries: int

    @property
    def median(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.times_ms)
        return ordered[math.ceil(0.95 * len(ordered)) - 1]  # nearest rank


def measure(client: Client, page: Page) -> Figures:
    """RUNS timed GETs (after one to warm up), and the queries of one more, counted apart so that recording the
    queries does not add to the times."""
    assert client.get(page.url, **page.headers).status_code == 200, page.name
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        response = client.get(page.url, **page.headers)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, page.name
    with CaptureQueriesContext(connection) as queries:
        assert client.get(page.url, **page.headers).status_code == 200, page.name
    return Figures(times, len(queries))


def measure_all(client: Client) -> dict[str, Figures]:
    return {page.name: measure(client, page) for page in console_pages()}


@pytest.fixture
def quiet_gc():
    """Time the views, not the garbage collector: a test run holds far more live objects than a server process, and
    a full collection over them lands in whichever request happens to trigger it."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def test_console_pages_server_time_with_ten_thousand_conflicts_and_a_thousand_subscriptions(settings, quiet_gc):
    settings.STATUS_TOKENS = [TOKEN]
    client = Client()
    client.force_login(make_user("bench-editor", "edit", "operate"))

    seed(SMALL)
    small = measure_all(client)
    clear()
    seed(BIG)
    login = measure(Client(), Page(reverse("login"), name="login page"))
    big = measure_all(client)

    print(f"\nBENCH console pages: {RUNS} renders each, server time in ms; login page median {login.median:.1f} ms,"
          f" p95 {login.p95:.1f} ms, {login.queries} queries")  # fmt: skip
    print(f"  {'median':>7} {'p95':>7} {'small':>7}  {'x small':>7} {'x login':>7}  {'queries':>9}  page (big catalog)")
    for name, figures in sorted(big.items(), key=lambda kv: -kv[1].median):
        base = small[name]
        print(
            f"  {figures.median:7.1f} {figures.p95:7.1f} {base.median:7.1f}  {figures.median / base.median:7.2f}"
            f" {figures.median / login.median:7.2f}  {base.queries:>4}/{figures.queries:<4}  {name}"
        )
    medians = [f.median for f in big.values()]
    print(
        f"BENCH console pages: slowest median {max(medians):.1f} ms, median of medians {statistics.median(medians):.1f}"
        f" ms, total of medians {sum(medians):.1f} ms over {len(big)} pages;"
        f" big/small {sum(medians) / sum(f.median for f in small.values()):.2f},"
        f" pages whose queries grow with the catalog: {[n for n in big if big[n].queries != small[n].queries]}"
        f" (catalog: {BIG.conflicts} conflicts, {BIG.publications * BIG.subs_per_publication} + "
        f"{BIG.accounts * BIG.subs_per_account} subscriptions)"
    )

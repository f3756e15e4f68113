"""The status API with a stalled server (run on demand: `make bench`). It prints figures measured in the same run and
asserts only what the answers say, never their times.

A snapshot whose source is a PostgreSQL server behind a TCP proxy: /api/status is timed with every cache cleared,
RUNS times while the proxy forwards (the peer: every live read answers) and RUNS times while it stalls (accepts
bytes, forwards none: no driver timeout ends that within seconds), then the answer just after a stalled one (the
stalled server known for LIVE_SECONDS, its reads not tried again). Before reads were bounded in time, one stalled
server held the answer for 10.7 s.
"""

from __future__ import annotations

import os
import statistics
import time

import pytest
from django.core.cache import cache
from django.urls import reverse

from tests.faults.conftest import proxied_server, tcp_proxy  # noqa: F401 - fixtures
from tests.faults.test_status_stalled import TOKEN, stalled_source  # noqa: F401 - fixture

pytestmark = [pytest.mark.bench]

RUNS = int(os.environ.get("BENCH_STATUS_RUNS", "5"))


def timed_status(client) -> tuple[float, dict]:
    start = time.perf_counter()
    response = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    elapsed = time.perf_counter() - start
    assert response.status_code == 200
    row = next(s for s in response.json()["snapshots"] if s["name"] == "lite_stall.inc_items")
    return elapsed, row


def test_status_api_answers_within_its_read_bound_with_a_stalled_server(stalled_source, client):  # noqa: F811
    healthy = []
    for _ in range(RUNS):
        cache.clear()
        elapsed, row = timed_status(client)
        assert row["state"] == "ok"
        healthy.append(elapsed)
    stalled_source.stall()
    stalled, following = [], []
    for _ in range(RUNS):
        cache.clear()
        elapsed, row = timed_status(client)
        assert row["state"] == "unreachable" and "no answer within" in row["last_error"]
        stalled.append(elapsed)
        elapsed, row = timed_status(client)  # the stalled server is known now
        assert row["state"] == "unreachable"
        following.append(elapsed)
    stalled_source.resume()
    peer = statistics.median(healthy)
    for name, figures in (("status_api_stalled_server", stalled), ("status_api_after_a_stalled_answer", following)):
        product = statistics.median(figures)
        print(f"BENCH {name}: product={product:.3f}s peer={peer:.3f}s ratio={product / peer:.2f}")

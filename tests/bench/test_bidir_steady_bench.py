"""Bi-directional syncs back to back for two minutes of steady writes on every node (`make bench`): the
same checks as tests/bidir/test_steady_writes.py, over a longer run."""

from __future__ import annotations

import pytest

from tests.bidir import test_steady_writes as steady
from tests.bidir.test_steady_writes import nodes  # noqa: F401 - the fixture

pytestmark = [pytest.mark.bench, pytest.mark.spark, pytest.mark.live_db]


def test_two_minutes_of_steady_writes_every_sync_succeeds_and_no_version_is_lost(nodes, monkeypatch):  # noqa: F811
    monkeypatch.setattr(steady, "DURATION", 120.0)
    steady.test_every_sync_succeeds_under_steady_writes_on_every_node_and_no_version_is_lost(nodes)

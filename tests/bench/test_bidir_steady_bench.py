"""Bi-directional syncs back to back for two minutes of steady writes on every node (`make bench`): the
same checks as tests/bidir/test_steady_writes.py, over a longer run.

`bidir_sync_under_contention`: of the changes each pull read from a subscriber's log while the writers
kept changing the same keys on every node, the share it applied (decided and written, or found already
applied) in the same sync, summed over the syncs run under writes; the peer is 1.0 (every change read is
applied). Also printed: the changes per second those syncs applied (pulled and pushed)."""

from __future__ import annotations

import pytest

from tests.bidir import test_steady_writes as steady
from tests.bidir.test_steady_writes import nodes  # noqa: F401 - the fixture

pytestmark = [pytest.mark.bench, pytest.mark.spark, pytest.mark.live_db]


def pull_counts(entry: dict) -> tuple[int, int]:
    """(changes read from the subscriber's log, changes applied) of one subscriber's pull."""
    if "read" in entry:
        return entry["read"], entry["applied"]
    # A result without the counts: what was read is what it applied, left for the next sync or already had.
    applied = entry.get("pulled", 0) + entry.get("already_applied", 0)
    return applied + entry.get("left_for_next_sync", 0), applied


def test_two_minutes_of_steady_writes_every_sync_succeeds_and_no_version_is_lost(nodes, monkeypatch):  # noqa: F811
    monkeypatch.setattr(steady, "DURATION", float(steady.os.environ.get("REPLADMIN_STEADY_SECONDS", "120")))
    steady.test_every_sync_succeeds_under_steady_writes_on_every_node_and_no_version_is_lost(nodes)
    under_writes = list(steady.UNDER_WRITES)
    read = applied = moved = 0
    seconds = 0.0
    for took, outcome in under_writes:
        seconds += took
        for entry in outcome.details["subscribers"].values():
            r, a = pull_counts(entry)
            read, applied = read + r, applied + a
            moved += a + entry.get("pushed", 0)
    product = applied / read if read else 1.0
    print(
        f"\nBENCH bidir_sync_under_contention: product={product:.3f} peer=1.0 ratio={product:.3f} "
        f"(changes applied {applied} of {read} read by {len(under_writes)} syncs; "
        f"{moved / seconds:.1f} changes/s applied, pulled and pushed)"
    )

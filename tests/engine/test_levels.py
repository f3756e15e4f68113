"""Levels of transactional replication: wrap-around, validity (LEVEL_OK) and the purger's schedule."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from replication_admin.engine.levels import (
    REPL_MAX_DELTA,
    REPL_WRAPAROUND,
    distance,
    is_below,
    lag,
    level_ok,
    next_purge,
    purge_kind,
)


@pytest.mark.parametrize(
    ("log", "requested", "below"),
    [
        (1, 2, True),
        (2, 2, False),
        (3, 2, False),
        (0, REPL_MAX_DELTA - 1, True),
        (0, REPL_MAX_DELTA, False),  # too far behind to tell from ahead
        (REPL_WRAPAROUND - 5, 3, True),  # across the wrap
        (REPL_WRAPAROUND - REPL_MAX_DELTA + 1, 10, True),
        (REPL_WRAPAROUND - REPL_MAX_DELTA, 10, False),
        (3, REPL_WRAPAROUND - 5, False),  # a subscriber ahead of the publisher, across the wrap
    ],
)
def test_is_below_follows_the_reference(log, requested, below):
    assert is_below(log, requested) is below


def test_a_subscriber_is_valid_at_or_below_the_publishers_level_and_lags_by_the_distance():
    assert level_ok(100, 100) and level_ok(90, 100) and not level_ok(101, 100)
    assert lag(90, 100) == 10 and lag(100, 100) == 0 and lag(101, 100) is None
    assert lag(REPL_WRAPAROUND - 2, 3) == 5 == distance(REPL_WRAPAROUND - 2, 3)


NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("month", "day", "wday", "at", "kind", "expected"),
    [
        (None, None, None, None, None, None),
        (None, None, None, time(13, 0), "daily", datetime(2026, 11, 23, 13, 0, tzinfo=UTC)),
        (None, None, None, time(11, 0), "daily", datetime(2026, 11, 24, 11, 0, tzinfo=UTC)),
        (None, None, 1, time(11, 0), "weekly", datetime(2026, 11, 30, 11, 0, tzinfo=UTC)),
        (None, None, 3, time(2, 30), "weekly", datetime(2026, 11, 25, 2, 30, tzinfo=UTC)),
        (None, 31, 5, time(1, 0), "monthly", datetime(2026, 11, 30, 1, 0, tzinfo=UTC)),  # no 31 November
        (None, 5, None, time(1, 0), "monthly", datetime(2026, 12, 5, 1, 0, tzinfo=UTC)),
        (2, None, 4, time(0, 0), "yearly", datetime(2027, 2, 1, 0, 0, tzinfo=UTC)),
        (12, 24, None, time(18, 0), "yearly", datetime(2026, 12, 24, 18, 0, tzinfo=UTC)),
        (2, 29, None, time(0, 0), "yearly", datetime(2027, 2, 28, 0, 0, tzinfo=UTC)),
    ],
)
def test_the_purger_runs_on_the_schedule_the_reference_describes(month, day, wday, at, kind, expected):
    assert purge_kind(month, day, wday, at) == kind
    assert next_purge(NOW, month, day, wday, at) == expected

"""Transactional replication levels (pure): serial numbers that wrap, subscriber validity, and when the
log purger of a publication runs next.

A publication's level counts its transactions: 1, 2, ... REPL_WRAPAROUND (0x7fffffff), then 1 again.
Levels are compared as serial numbers: `a` is below `b` when `b` is less than REPL_MAX_DELTA ahead of
it, counting across the wrap. A subscriber asking for the transactions after level L is valid when L
is the publisher's level or below it; a level ahead of the publisher (or more than REPL_MAX_DELTA
behind, which cannot be told from ahead) means the subscriber no longer matches this publisher.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta

REPL_WRAPAROUND = 0x7FFFFFFF
REPL_MAX_DELTA = 1_000_000_000
# A new publication purges what every valid subscriber has applied this often (minutes), so its log stays
# small (reads of a long log slow every sync) until a P_TIME schedule or "never" is chosen.
DEFAULT_PURGE_MINUTES = 10


def distance(low: int, high: int) -> int:
    """How many transactions lead from `low` to `high`, counting across the wrap (0 when equal)."""
    if high >= low:
        return high - low
    return (REPL_WRAPAROUND - low) + high  # low .. 0x7fffffff, then 1 .. high


def is_below(log: int, requested: int) -> bool:
    """Virtuoso's is_below: `log` comes before `requested`, wrap-aware."""
    if log < requested and requested - log < REPL_MAX_DELTA:
        return True
    return log > REPL_WRAPAROUND - REPL_MAX_DELTA and requested < REPL_MAX_DELTA and log > requested


def level_ok(requested: int, publisher: int) -> bool:
    """LEVEL_OK: a subscriber at `requested` may sync from a publisher at `publisher`."""
    return requested == publisher or is_below(requested, publisher)


def level_of(count: int) -> int:
    """The level of a publication's `count`-th transaction (the log counts without wrapping)."""
    if count < 0:
        raise ValueError("a transaction count is never negative")
    return 0 if count == 0 else (count - 1) % REPL_WRAPAROUND + 1


def count_of(level: int, publisher_level: int, publisher_count: int) -> int:
    """The unwrapped count a subscriber at `level` has reached, given where the publisher is.

    Only meaningful when level_ok(level, publisher_level); the result is never below 0."""
    return max(0, publisher_count - distance(level, publisher_level))


def lag(subscriber: int, publisher: int) -> int | None:
    """Transactions the subscriber is behind, or None when its level is not valid for this publisher."""
    if not level_ok(subscriber, publisher):
        return None
    return distance(subscriber, publisher)


# --- the log purger's schedule (P_MONTH, P_DAY, P_WDAY, P_TIME) ------------------------------------------


def _day_in_month(year: int, month: int, day: int) -> date:
    return date(year, month, min(day, calendar.monthrange(year, month)[1]))


def purge_kind(p_month: int | None, p_day: int | None, p_wday: int | None, p_time: time | None) -> str | None:
    """yearly / monthly / weekly / daily, as the reference's table says; None when P_TIME is NULL."""
    if p_time is None:
        return None
    if p_month is not None:
        return "yearly"
    if p_day is not None:
        return "monthly"
    if p_wday is not None:
        return "weekly"
    return "daily"


def next_purge(
    now: datetime, p_month: int | None, p_day: int | None, p_wday: int | None, p_time: time | None
) -> datetime | None:
    """The first time at or after `now` the purger runs (P_WDAY: 1 = Monday ... 7 = Sunday); a day
    past the month's end (31 in April) means the month's last day."""
    kind = purge_kind(p_month, p_day, p_wday, p_time)
    if kind is None:
        return None
    assert p_time is not None
    candidates: list[date] = []
    today = now.date()
    if kind == "yearly":
        assert p_month is not None
        candidates = [_day_in_month(today.year + k, p_month, p_day or 1) for k in (0, 1)]
    elif kind == "monthly":
        assert p_day is not None
        first = today.replace(day=1)
        following = (first + timedelta(days=32)).replace(day=1)
        candidates = [_day_in_month(m.year, m.month, p_day) for m in (first, following)]
    elif kind == "weekly":
        assert p_wday is not None
        ahead = (p_wday - 1 - today.weekday()) % 7
        candidates = [today + timedelta(days=ahead), today + timedelta(days=ahead + 7)]
    else:
        candidates = [today, today + timedelta(days=1)]
    for day in candidates:
        at = datetime.combine(day, p_time, tzinfo=now.tzinfo)
        if at >= now:
            return at
    raise AssertionError("unreachable: the second candidate is always in the future")

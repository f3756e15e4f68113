"""Virtuoso's scheduler pick rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from replication_admin.engine.schedule import EventTimes, due_events, is_due, next_run

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def event(name="e", start=NOW - timedelta(hours=1), interval=10, last=None, disabled=0) -> EventTimes:
    return EventTimes(name=name, start=start, interval=interval, last_completed=last, disabled=disabled)


def test_an_event_that_never_completed_is_due_once_its_start_has_come():
    assert is_due(event(), NOW)
    assert not is_due(event(start=NOW + timedelta(seconds=1)), NOW)


def test_an_event_is_due_when_its_interval_has_passed_since_the_last_completion():
    assert not is_due(event(last=NOW - timedelta(minutes=9, seconds=59)), NOW)
    assert is_due(event(last=NOW - timedelta(minutes=10)), NOW)


def test_disabled_events_and_events_without_an_interval_never_run():
    assert not is_due(event(disabled=1), NOW)
    assert not is_due(event(interval=0), NOW)
    assert next_run(event(disabled=1), NOW) is None


def test_an_overdue_event_runs_once_and_is_next_due_an_interval_after_that_run():
    overdue = event(last=NOW - timedelta(days=3))
    assert is_due(overdue, NOW)
    after_run = event(last=NOW)
    assert not is_due(after_run, NOW + timedelta(minutes=5))
    assert next_run(after_run, NOW) == NOW + timedelta(minutes=10)


def test_due_events_come_in_last_completed_order_never_completed_first():
    events = [
        event("b", last=NOW - timedelta(minutes=30)),
        event("a", last=NOW - timedelta(minutes=60)),
        event("new"),
        event("off", disabled=1),
    ]
    assert [e.name for e in due_events(events, NOW)] == ["new", "a", "b"]

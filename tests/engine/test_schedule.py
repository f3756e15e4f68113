"""The scheduler's rule: slots anchored on SE_START, one run per slot, overdue events run once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from replication_admin.engine.schedule import (
    EventTimes,
    due_at,
    due_events,
    is_due,
    next_run,
    seconds_to_next,
    slot_after,
    slot_at,
)

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
START = datetime(2026, 1, 1, 8, 45, 0, 250000, tzinfo=UTC)  # slots at 08:45:00.25 + k minutes


def event(name="e", start=NOW - timedelta(hours=1), interval=10, last=None, disabled=0, **runs) -> EventTimes:
    return EventTimes(name=name, start=start, interval=interval, last_completed=last, disabled=disabled, **runs)


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


class Clock:
    """A fake clock and a fake worker: ticks every `tick` seconds hand out due runs; a run takes
    `duration` seconds and a run that finds the previous one still going is skipped."""

    def __init__(self, times: EventTimes, duration: float, tick: float = 0.5) -> None:
        self.times, self.duration, self.tick = times, duration, tick
        self.started: list[tuple[datetime, datetime]] = []  # (slot, start)
        self.skipped: list[datetime] = []
        self.busy_until: datetime | None = None

    def run_until(self, end: datetime, now: datetime) -> None:
        while now < end:
            at = due_at(self.times, now)
            if at is not None:
                self.times = replace(self.times, last_slot=at)
                if self.busy_until is not None and now < self.busy_until:
                    self.skipped.append(at)
                else:
                    self.started.append((at, now))
                    self.times = replace(self.times, last_started=now)
                    self.busy_until = now + s(self.duration)
            if self.busy_until is not None and now >= self.busy_until:
                self.times = replace(self.times, last_completed=self.busy_until)
            now += s(self.tick)


def test_slots_are_anchored_on_the_start():
    e = event(start=START, interval=1)
    assert slot_at(e, START - s(1)) is None
    assert slot_at(e, START) == START
    assert slot_at(e, START + s(59.9)) == START
    assert slot_at(e, START + s(60)) == START + s(60)
    assert slot_after(e, START) == START + s(60)
    assert slot_after(e, START - timedelta(days=1)) == START
    assert slot_after(e, START + s(61)) == START + s(120)


def test_an_event_is_due_at_its_start_and_then_at_each_slot():
    e = event(start=START, interval=1)
    assert not is_due(e, START - s(0.1)) and next_run(e, START - s(5)) == START
    assert due_at(e, START + s(0.1)) == START
    ran = replace(e, last_slot=START, last_started=START + s(0.1))
    assert not is_due(ran, START + s(59.9))
    assert next_run(ran, START + s(30)) == START + s(60)
    assert due_at(ran, START + s(60)) == START + s(60)


@pytest.mark.parametrize("duration", [0.2, 5, 30, 50, 59])
def test_runs_start_on_their_slots_whatever_they_take(duration):
    # Measured before: every-minute events ran at 08:45:50, 08:47:51, 08:49:51 (completion + interval).
    clock = Clock(event(start=START, interval=1), duration)
    clock.run_until(START + timedelta(minutes=10), START - s(3))
    slots = [START + timedelta(minutes=k) for k in range(10)]
    assert [slot for slot, _ in clock.started] == slots
    assert all(timedelta(0) <= start - slot <= s(0.5) for slot, start in clock.started)
    assert clock.skipped == []


def test_a_run_longer_than_its_interval_makes_the_next_slot_skip_not_double():
    clock = Clock(event(start=START, interval=1), duration=90)
    clock.run_until(START + timedelta(minutes=6, seconds=1), START)
    # 08:45 runs until 08:46:30; 08:46 finds it running (skipped); 08:47 runs again, on its slot …
    assert [slot for slot, _ in clock.started] == [START + timedelta(minutes=k) for k in (0, 2, 4, 6)]
    assert clock.skipped == [START + timedelta(minutes=k) for k in (1, 3, 5)]
    assert all(start - slot <= s(0.5) for slot, start in clock.started)


def test_an_overdue_event_runs_once_for_its_latest_slot():
    ran = event(start=START, interval=1, last_slot=START, last_started=START, last=START + s(2))
    later = START + timedelta(hours=3, seconds=20)  # the scheduler was down for three hours
    assert due_at(ran, later) == START + timedelta(hours=3)
    assert next_run(ran, later) == later
    after = replace(ran, last_slot=START + timedelta(hours=3), last_started=later)
    assert not is_due(after, later + s(1))
    assert next_run(after, later + s(1)) == START + timedelta(hours=3, minutes=1)
    # and from then on, on its slots again
    clock = Clock(after, duration=1)
    clock.run_until(later + timedelta(minutes=3), later)
    assert [slot for slot, _ in clock.started] == [START + timedelta(hours=3, minutes=k) for k in (1, 2, 3)]


def test_a_failed_run_is_tried_again_a_minute_later_then_goes_back_to_its_slots():
    failed = event(start=START, interval=60, last_slot=START, last_started=START + s(1), failed=True)
    assert not is_due(failed, START + s(60))
    assert next_run(failed, START + s(30)) == START + s(61)
    assert due_at(failed, START + s(61)) == START + s(61)
    retried = replace(failed, last_slot=START + s(61), last_started=START + s(61.2))
    assert not is_due(retried, START + s(100))
    succeeded = replace(retried, failed=False, last_completed=START + s(70))
    assert next_run(succeeded, START + s(100)) == START + timedelta(hours=1)


def test_an_event_that_never_ran_is_due_once_its_start_has_come():
    assert is_due(event(), NOW)
    assert due_at(event(), NOW) == NOW  # started an hour ago, every 10 minutes: 12:00 is a slot
    assert not is_due(event(start=NOW + s(1)), NOW)
    assert next_run(event(start=NOW + s(1)), NOW) == NOW + s(1)


def test_disabled_events_and_events_without_an_interval_never_run():
    assert not is_due(event(disabled=1), NOW)
    assert not is_due(event(interval=0), NOW)
    assert next_run(event(disabled=1), NOW) is None
    assert next_run(event(interval=0), NOW) is None


def test_due_events_come_longest_waiting_first_with_the_time_each_run_is_for():
    events = [
        event("b", start=NOW - timedelta(minutes=5), interval=5),
        event("a", start=NOW - timedelta(minutes=61), interval=60),
        event("done", last_slot=NOW),
        event("off", disabled=1),
    ]
    assert [(e.name, at) for e, at in due_events(events, NOW)] == [
        ("a", NOW - timedelta(minutes=1)),
        ("b", NOW),
    ]


def test_a_tick_sleeps_until_the_next_run_at_most_its_longest_wait():
    ran = event(start=START, interval=1, last_slot=START, last_started=START)
    assert seconds_to_next([ran], START + s(58), 5.0) == pytest.approx(2.0)
    assert seconds_to_next([ran], START + s(10), 5.0) == 5.0
    assert seconds_to_next([ran, event(disabled=1)], START + s(60.5), 5.0) == 0.0
    assert seconds_to_next([], START, 5.0) == 5.0

"""The follower's steps (FollowSteps in transactional/sync.py) with the step itself replaced: a stuck step holds only
its own subscription, a subscription is never stepped twice at once nor from a row read before its last step ended,
each thread has its own pooled connections, and closing does not wait for ever on a stuck step. The real step on
real servers with a stalled link: tests/faults/test_follower_independence.py."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from replication_admin.core import connections
from replication_admin.models import ReplSubscriber
from replication_admin.transactional import sync as trx_sync

GUARD = 60.0  # seconds: against hanging, not a timing assertion


class FakeSteps:
    """follow_step replaced: subscription 1 is stuck until `release`; every step records its thread and pool."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: Counter[int] = Counter()
        self.running: Counter[int] = Counter()
        self.twice: list[int] = []
        self.pools: dict[str, object] = {}
        self.guard = threading.Lock()

    def __call__(
        self,
        sub: ReplSubscriber,
        watch: trx_sync.BacklogWatch | None = None,
        registry: object = None,
        windows: object = None,
        memo: trx_sync.FollowMemo | None = None,
    ) -> trx_sync.SyncOutcome:
        with self.guard:
            self.calls[sub.pk] += 1
            self.running[sub.pk] += 1
            if self.running[sub.pk] > 1:
                self.twice.append(sub.pk)
            self.pools[threading.current_thread().name] = connections._reused.get()
        try:
            if sub.pk == 1:
                self.release.wait(GUARD)
            return trx_sync.SyncOutcome(applied=1)
        finally:
            with self.guard:
                self.running[sub.pk] -= 1


@pytest.fixture
def fake(monkeypatch) -> FakeSteps:
    steps = FakeSteps()
    monkeypatch.setattr(trx_sync, "follow_step", steps)
    return steps


def rounds(steps: trx_sync.FollowSteps, subs: list[ReplSubscriber], done) -> None:
    """Hand the subscriptions out round after round, as the follower's loop does, until `done()`."""
    deadline = time.monotonic() + GUARD
    while not done():
        assert time.monotonic() < deadline
        steps.ending.clear()
        steps.hand_out(subs, time.monotonic(), lambda: None)
        steps.ending.wait(0.05)


def test_a_stuck_step_holds_only_its_own_subscription_and_each_thread_has_its_own_connections(fake):
    steps = trx_sync.FollowSteps(4, trx_sync.BacklogWatch())
    subs = [ReplSubscriber(pk=pk) for pk in (1, 2, 3)]
    try:
        rounds(steps, subs, lambda: min(fake.calls[2], fake.calls[3]) >= 20)
        assert fake.calls[1] == 1 and 1 in steps.slow(0.0)  # handed out once, not again while it runs
        assert fake.twice == []
        # Every step ran on a worker thread, in a connection pool of that thread's own.
        assert threading.current_thread().name not in fake.pools
        pools = list(fake.pools.values())
        assert None not in pools and len({id(p) for p in pools}) == len(pools) >= 2
        assert len(steps.threads) <= 3
    finally:
        fake.release.set()
        steps.close()
    assert steps.applied == sum(fake.calls.values()) and steps.slow(0.0) == []
    assert not any(t.is_alive() for t in steps.threads)


def test_a_subscription_read_before_its_last_step_ended_is_not_handed_out(fake):
    steps = trx_sync.FollowSteps(2, trx_sync.BacklogWatch())
    sub = ReplSubscriber(pk=2)
    read_at = time.monotonic()
    assert steps.hand_out([sub], read_at, lambda: None) == 1
    rounds(steps, [], lambda: not steps.busy())
    assert steps.hand_out([sub], read_at, lambda: None) == 0  # the row read at `read_at` predates the step's end
    assert steps.hand_out([sub], time.monotonic(), lambda: None) == 1
    steps.close()
    assert fake.calls[2] == 2


def test_closing_does_not_wait_for_ever_on_a_stuck_step(fake):
    steps = trx_sync.FollowSteps(2, trx_sync.BacklogWatch())
    steps.hand_out([ReplSubscriber(pk=1), ReplSubscriber(pk=2)], time.monotonic(), lambda: None)
    rounds(steps, [], lambda: fake.calls[2] == 1 and steps.slow(0.0) == [1])
    steps.close(wait=0.2)
    assert steps.slow(0.0) == [1] and all(t.daemon for t in steps.threads)
    fake.release.set()


def test_with_no_threads_the_steps_run_one_after_another_in_the_callers_thread(fake):
    steps = trx_sync.FollowSteps(0, trx_sync.BacklogWatch())
    beats: list[int] = []
    fake.release.set()
    assert steps.hand_out([ReplSubscriber(pk=pk) for pk in (1, 2)], time.monotonic(), lambda: beats.append(1)) == 2
    assert steps.threads == [] and list(fake.pools) == [threading.current_thread().name]
    assert beats == [1, 1] and steps.applied == 2
    steps.close()

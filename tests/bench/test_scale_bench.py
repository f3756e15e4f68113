"""Per-tick overhead of the scheduler and of the followers on a large catalog (run on demand: `make bench`).

- scheduler_tick_10k_events: BENCH_SCALE_EVENTS (10,000) scheduled events (every 2 to 24 hours), BENCH_SCALE_DUE (10) due at each
  tick. product = one scheduler tick as the product runs it (the due rows read by SE_NEXT_RUN and claimed in a
  batch, then one MIN(SE_NEXT_RUN) for the sleep); peer = the tick before SE_NEXT_RUN, measured in the same run on
  the same catalog: every event read and judged in Python, each due one claimed by its compare-and-set, then every
  event read again for the sleep. Milliseconds per tick (mean); ratio = peer / product (higher is better). Each
  tick queues its DUE runs on the catalog's broker (django-q2 ORM), in both. scheduler_idle_tick_10k_events: the
  same with no event due (the reads alone).
- follower_round_1k_subs: BENCH_SCALE_SUBSCRIPTIONS (1,000) followed in-sync subscriptions of one idle SQLite
  publication (nothing new arrives: the cost is the loop's own). product = a round of the follower (follow_loop, as
  `replfollow` runs it) holding the lease of every subscription, its lease renewals included; peer = a round of the
  follower serving every in-sync subscription without leases (the loop before leases). Milliseconds per round
  (mean over the rounds after the first few; the best of two interleaved runs each); ratio = peer / product.
- follower_round_1k_subs_two_hosts: the same, with a second follower (on another host identity) holding half the
  leases: product = a round of this follower (its 500); peer = the round without leases serving all 1,000.
- follower_lease_renewal_1k_subs: one renewal of the leases (1,000 subscriptions, two followers): product = its
  milliseconds, peer = a round of the follower without leases (a renewal runs once per heartbeat, every few seconds).

Asserted: each due event is claimed once per tick by both, and the followers hold every subscription; nothing about
time.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import timedelta

import pytest
from django.db import models
from django.utils import timezone

from replication_admin.core import events, heartbeats
from replication_admin.core.follow_leases import FollowLeases
from replication_admin.engine.schedule import due_events, seconds_to_next
from replication_admin.models import FollowLease, ProcessHeartbeat, ReplSubscriber, ScheduledEvent
from replication_admin.tasks import scheduler_tick
from replication_admin.transactional import sync as trx_sync
from replication_admin.transactional.capture import visible_count
from tests.faults.test_self_healing import run
from tests.tables import execute as execute_sql

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

EVENTS = int(os.environ.get("BENCH_SCALE_EVENTS", "10000"))
DUE = int(os.environ.get("BENCH_SCALE_DUE", "10"))
TICKS = int(os.environ.get("BENCH_SCALE_TICKS", "10"))
SUBSCRIPTIONS = int(os.environ.get("BENCH_SCALE_SUBSCRIPTIONS", "1000"))
ROUNDS = int(os.environ.get("BENCH_SCALE_ROUNDS", "100"))
WARM_ROUNDS = 10


def report(name: str, product: float, peer: float) -> None:
    print(f"\nBENCH {name}: product={product:.3f}ms peer={peer:.3f}ms ratio={peer / product:.2f}")


# --- the scheduler ----------------------------------------------------------------------------------------


def tick_before_next_run() -> list[str]:
    """The scheduler's tick and sleep as they were before SE_NEXT_RUN: every event read twice per tick."""
    now = timezone.now()
    handed = []
    for event, at in due_events((e.times() for e in ScheduledEvent.objects.all()), now):
        rows = ScheduledEvent.objects.filter(name=event.name)
        rows = (
            rows.filter(last_slot__isnull=True) if event.last_slot is None else rows.filter(last_slot=event.last_slot)
        )
        if not models.QuerySet.update(rows, last_slot=at):  # the compare-and-set alone, as it was
            continue
        events.hand_out(event.name, at)
        handed.append(event.name)
    seconds_to_next([e.times() for e in ScheduledEvent.objects.all()], timezone.now(), 5.0)
    return handed


def tick_now() -> list[str]:
    handed = scheduler_tick()
    events.seconds_to_next(timezone.now(), 5.0)
    return handed


def make_due_again(names: list[str]) -> None:
    """The due events' last run a slot back, as if their next slot had come (not timed)."""
    for event in ScheduledEvent.objects.filter(name__in=names):
        event.last_slot -= timedelta(minutes=event.interval)
        event.save(update_fields=["last_slot"])


def time_ticks(tick, due: list[str]) -> float:
    spent = []
    for _ in range(TICKS):
        make_due_again(due)
        started = time.perf_counter()
        handed = tick()
        spent.append(time.perf_counter() - started)
        assert sorted(handed) == due  # each due event claimed once, nothing else
    return statistics.mean(spent) * 1000


def test_scheduler_tick_cost_on_10k_events(transactional_db, settings):
    settings.JOBS_SYNC = False  # the runs are queued on the broker, as in production
    now = timezone.now()
    # Events every 2 to 24 hours whose latest slot was handed out a minute ago (none comes by itself during the
    # bench), and DUE of them made due before each tick.
    rows = []
    for n in range(EVENTS):
        interval = 120 + (n % 12) * 120
        last = now - timedelta(minutes=1)
        rows.append(ScheduledEvent(name=f"bench{n:06}", start=last - timedelta(minutes=interval * (1 + n % 5)),
                                   interval=interval, sql="UPDATE SNAPSHOT nowhere.t", last_slot=last))  # fmt: skip
    ScheduledEvent.objects.bulk_create(rows, batch_size=500)
    due = sorted(f"bench{n:06}" for n in range(0, EVENTS, EVENTS // DUE))[:DUE]
    make_due_again(due)
    assert sorted(tick_now()) == due  # warm
    assert sorted(tick_before_next_run()) == []
    peer = time_ticks(tick_before_next_run, due)
    product = time_ticks(tick_now, due)
    report(f"scheduler_tick_{EVENTS // 1000}k_events", product, peer)
    # A tick with nothing due (most ticks): the reads alone.
    report(
        f"scheduler_idle_tick_{EVENTS // 1000}k_events", time_ticks(tick_now, []), time_ticks(tick_before_next_run, [])
    )


# --- the followers ----------------------------------------------------------------------------------------


@pytest.fixture
def idle_subscriptions(make_server, jobs_sync) -> list[int]:
    """SUBSCRIPTIONS in-sync subscriptions of one idle SQLite publication, caught up (nothing to apply)."""
    pub = make_server("sqlite", "spub")
    execute_sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", context=pub)
    caught_up = visible_count(pub, "acct")  # nothing new for any of them: no step runs, the loop's cost alone
    ReplSubscriber.objects.bulk_create(
        [ReplSubscriber(server="spub", account="acct", subscriber=f"ssub{n:05}", follow=True, init_state="done",
                        state=ReplSubscriber.IN_SYNC, count=caught_up, created_at=timezone.now())
         for n in range(SUBSCRIPTIONS)]
    )  # fmt: skip
    return list(ReplSubscriber.objects.values_list("pk", flat=True))


def round_cost(leased: bool) -> float:
    """Mean milliseconds of a follow_loop round (after WARM_ROUNDS), the loop running in this thread."""
    marks: list[float] = []

    def stop() -> bool:
        marks.append(time.perf_counter())
        return len(marks) > ROUNDS + WARM_ROUNDS

    applied = trx_sync.follow_loop(stop, interval=0.0, reaps=False, leased=leased)
    assert applied == 0
    assert ReplSubscriber.objects.filter(state=ReplSubscriber.IN_SYNC).count() == SUBSCRIPTIONS  # no step failed
    gaps = [b - a for a, b in zip(marks[WARM_ROUNDS:], marks[WARM_ROUNDS + 1 :], strict=False)]
    return statistics.mean(gaps) * 1000


def other_host_holds(subs: list[int]) -> None:
    """A follower on another host, alive, holding the leases of every other subscription."""
    now = timezone.now()
    ProcessHeartbeat.objects.create(kind=heartbeats.Kind.FOLLOWER, host="bench-other-host", pid=1, started_at=now,
                                    renewed_at=now + timedelta(hours=1), details={})  # fmt: skip
    FollowLease.objects.bulk_create(
        [FollowLease(subscription_id=s, holder="bench-other-host/1/x", host="bench-other-host", pid=1, taken_at=now,
                     expires_at=now + timedelta(hours=1)) for s in subs[::2]]
    )  # fmt: skip


def test_follower_round_cost_on_1k_subscriptions(transactional_db, idle_subscriptions, settings):
    subs = idle_subscriptions
    settings.FOLLOW_THREADS = 2
    # Interleaved, the best of two each: the machine's load moves between runs.
    peers, products = [], []
    for _ in range(2):
        peers.append(round_cost(leased=False))
        products.append(round_cost(leased=True))
        assert not FollowLease.objects.exists()  # given back when the loop ended
    peer, product = min(peers), min(products)
    report(f"follower_round_{SUBSCRIPTIONS // 1000}k_subs", product, peer)

    other_host_holds(subs)
    product_half = min(round_cost(leased=True) for _ in range(2))
    report(f"follower_round_{SUBSCRIPTIONS // 1000}k_subs_two_hosts", product_half, peer)

    leases = FollowLeases(trx_sync.followable)
    leases.renew()
    assert len(leases.held) == len(subs) - len(subs[::2]) and leases.counts.live == 2
    spent = []
    for _ in range(20):
        started = time.perf_counter()
        leases.renew()
        spent.append(time.perf_counter() - started)
    assert FollowLease.objects.count() == len(subs)
    report(f"follower_lease_renewal_{SUBSCRIPTIONS // 1000}k_subs", statistics.mean(spent) * 1000, peer)

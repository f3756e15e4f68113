"""The scheduler claims due events in the catalog in batches (core/events.py): a tick reads only the rows whose
SE_NEXT_RUN has come (an indexed column every write keeps), claims them a batch at a time (PostgreSQL: SELECT … FOR
UPDATE SKIP LOCKED; SQLite: one write transaction) and sleeps until one MIN(SE_NEXT_RUN). Ticks on several hosts
(here: threads with connections of their own) hand each due event out once per slot. The hand-outs are the
django-q2 tasks queued on the catalog's broker, read back as a worker would."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.models import OrmQ

from replication_admin.core import events
from replication_admin.engine.schedule import slot_at
from replication_admin.models import ScheduledEvent
from replication_admin.tasks import scheduler_tick

DUE, LATER, PAUSED = 60, 15, 5


def make_events(now: datetime, due: int = DUE, later: int = LATER, paused: int = PAUSED) -> None:
    """`due` events whose slot has come (every minute since half an hour ago), `later` ones that start in an hour
    and `paused` disabled ones."""
    ScheduledEvent.objects.bulk_create(
        [ScheduledEvent(name=f"due{n:05}", start=now - timedelta(minutes=30, seconds=n % 50), interval=1,
                        sql="UPDATE SNAPSHOT nowhere.t") for n in range(due)]
        + [ScheduledEvent(name=f"later{n:05}", start=now + timedelta(hours=1), interval=1,
                          sql="UPDATE SNAPSHOT nowhere.t") for n in range(later)]
        + [ScheduledEvent(name=f"paused{n:05}", start=now - timedelta(minutes=30), interval=1, disabled=1,
                          sql="UPDATE SNAPSHOT nowhere.t") for n in range(paused)]
    )  # fmt: skip


def handed_out() -> list[tuple[str, datetime]]:
    """The runs queued for the workers: (event, the scheduled time it is for)."""
    return [(row.task["args"][0], row.task["args"][1]) for row in OrmQ.objects.all()]


def tick_in_threads(tickers: int = 2, ticks: int = 4) -> list[list[str]]:
    """`tickers` threads, each with its own catalog connection, tick `ticks` times each, all at once."""
    start = threading.Barrier(tickers)
    handed: list[list[str]] = [[] for _ in range(tickers)]
    failures: list[BaseException] = []

    def ticker(index: int) -> None:
        try:
            start.wait()
            for _ in range(ticks):
                handed[index] += scheduler_tick()
        except BaseException as exc:  # reported by the test below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=ticker, args=(i,)) for i in range(tickers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    return handed


def test_due_events_across_two_tickers_are_each_handed_out_once_per_slot(transactional_db, settings):
    settings.JOBS_SYNC = False  # queued on the broker, for a worker (none runs here)
    settings.SCHEDULER_BATCH = 7  # several batches per tick
    now = timezone.now()
    make_events(now)
    due = {f"due{n:05}" for n in range(DUE)}

    handed = tick_in_threads()
    assert Counter(handed[0] + handed[1]) == Counter(due)  # each due event once, by one ticker or the other
    runs = handed_out()
    assert len(runs) == DUE and {name for name, _ in runs} == due
    events_by_name = {e.name: e for e in ScheduledEvent.objects.all()}
    for name, at in runs:
        event = events_by_name[name]
        assert at == event.last_slot == slot_at(event.times(), at)  # the latest slot that had come
        assert event.next_run == at + timedelta(minutes=1)  # the next slot, not earlier
    assert scheduler_tick() == []  # nothing due again until the next slot

    # The next slot comes (every event as if it had happened a minute earlier): each runs once more, for it.
    first = dict(runs)
    ScheduledEvent.objects.update(
        start=F("start") - timedelta(minutes=1), last_slot=F("last_slot") - timedelta(minutes=1)
    )
    OrmQ.objects.all().delete()
    handed = tick_in_threads()
    assert Counter(handed[0] + handed[1]) == Counter(due)
    runs = handed_out()
    assert len(runs) == DUE and {name for name, _ in runs} == due
    for name, at in runs:  # the slot after the first run's (moved a minute earlier with its event)
        assert at == first[name] - timedelta(minutes=1) + timedelta(minutes=1)
        assert ScheduledEvent.objects.get(name=name).last_slot == at


def tick_queries(settings) -> list[str]:
    """The statements one tick and the following sleep computation send to the catalog."""
    settings.JOBS_SYNC = False
    with CaptureQueriesContext(connection) as captured:
        handed = scheduler_tick()
        events.seconds_to_next(timezone.now(), 5.0)
    assert sorted(handed) == [f"due{n:05}" for n in range(3)]
    return [q["sql"] for q in captured.captured_queries]


@pytest.mark.parametrize("later", [20, 5000])
def test_a_tick_reads_only_the_due_events_whatever_the_number_of_events(db, settings, later):
    make_events(timezone.now(), due=3, later=later, paused=later // 10)
    statements = tick_queries(settings)
    on_events = [q for q in statements if "SYS_SCHEDULED_EVENT" in q]
    reads = [q for q in on_events if q.lstrip().upper().startswith("SELECT")]
    # One read of the due rows (with its LIMIT: a batch), and one MIN() for the sleep: never a read of every event.
    assert len(reads) == 2, reads
    assert "SE_NEXT_RUN" in reads[0] and "LIMIT" in reads[0].upper() and "<=" in reads[0]
    if connection.vendor == "postgresql":
        assert "FOR UPDATE SKIP LOCKED" in reads[0].upper()
    assert "MIN(" in reads[1].upper() and "SE_NEXT_RUN" in reads[1]
    # Then one compare-and-set per due event (its slot and its next run in one UPDATE), and the hand-outs.
    updates = [q for q in on_events if q.lstrip().upper().startswith("UPDATE")]
    assert len(updates) == 3 and all("SE_LAST_SLOT" in q and "SE_NEXT_RUN" in q for q in updates)
    assert len(statements) <= 4 + 3 * 3  # the reads, the claims, and each hand-out's broker insert (a fixed few)


def test_the_query_count_of_a_tick_does_not_grow_with_the_events_that_are_not_due(db, settings):
    make_events(timezone.now(), due=3, later=10, paused=0)
    few = len(tick_queries(settings))
    ScheduledEvent.objects.all().delete()
    OrmQ.objects.all().delete()
    make_events(timezone.now(), due=3, later=3000, paused=300)
    assert len(tick_queries(settings)) == few


def test_every_write_keeps_the_next_run_so_a_tick_never_misses_an_event(db, settings):
    settings.JOBS_SYNC = False
    now = timezone.now()
    event = ScheduledEvent.objects.create(name="e", start=now + timedelta(hours=1), interval=5, sql="x")
    assert event.next_run == now + timedelta(hours=1)
    ScheduledEvent.objects.filter(name="e").update(start=now - timedelta(minutes=7))  # an update() of a column
    assert ScheduledEvent.objects.get(name="e").next_run == now - timedelta(minutes=7)
    ScheduledEvent.objects.filter(name="e").update(disabled=1)
    assert ScheduledEvent.objects.get(name="e").next_run is None and scheduler_tick() == []
    event = ScheduledEvent.objects.get(name="e")
    event.disabled = 0
    event.save(update_fields=["disabled"])  # a save() of some fields
    assert ScheduledEvent.objects.get(name="e").next_run == now - timedelta(minutes=7)
    assert scheduler_tick() == ["e"]
    claimed = ScheduledEvent.objects.get(name="e")
    assert claimed.last_slot == now - timedelta(minutes=2) and claimed.next_run == now + timedelta(minutes=3)
    # A failed run is tried again a minute after it started, sooner than its next slot.
    ScheduledEvent.objects.filter(name="e").update(last_started=now - timedelta(minutes=2), last_error="boom")
    assert ScheduledEvent.objects.get(name="e").next_run == now - timedelta(minutes=1)
    assert scheduler_tick() == ["e"]
    # A next run written wrong by hand (too early) is put right by the next tick, without a run.
    ScheduledEvent.objects.filter(name="e").update(next_run=now - timedelta(hours=1))
    assert scheduler_tick() == []
    assert ScheduledEvent.objects.get(name="e").next_run == now + timedelta(minutes=3)

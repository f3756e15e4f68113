"""The follower's latency path (FollowMemo in transactional/sync.py): a step that applies a one-row transaction reads
and writes almost nothing in the catalog once the follower's memory is warm, the catalog's progress is still written
(when due, and when the follower stops), and a remembered position that another apply moved costs a step, never a
transaction applied twice. Counts and rows are asserted, never time."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from replication_admin.models import ReplSubscriber
from replication_admin.transactional import schema as trx_schema
from replication_admin.transactional import sync as trx_sync
from replication_admin.transactional.positions import subscriber_position
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import (
    rep,  # noqa: F401 - the fixture: rep1 publishes (triggers or the WAL), rep2 subscribes
    run,
    sql,
    subscribed_in_sync,
    value,
)

# Catalog statements of one warm step that applies one transaction: the item lock's (taken in one INSERT, given back
# in one DELETE). The servers, the publication (and with it how its count is read: its capture mode), the
# subscriber's position and table descriptions, the registry's values and the progress come from the follower's
# memory (FollowMemo); without it the same step ran about twenty.
STEP_STATEMENTS = 2


@pytest.fixture
def steps(monkeypatch) -> trx_sync.FollowSteps:
    """Inline steps (the test's catalog transaction) whose memory does not expire during the test: what a step reads
    is then decided by what it remembers, not by how fast the machine is."""
    monkeypatch.setattr(trx_sync, "FOLLOW_PROGRESS_SECONDS", 3600.0)
    monkeypatch.setattr(trx_sync, "FOLLOW_POSITION_SECONDS", 3600.0)
    monkeypatch.setattr(trx_schema, "CHECK_EVERY", 3600.0)
    made = trx_sync.FollowSteps(0, trx_sync.BacklogWatch())
    made.registry.seconds = made.memo.seconds = 3600.0
    return made


def step(steps: trx_sync.FollowSteps) -> list[ReplSubscriber]:
    """One round as the loop does it: the rows read, checked against the memory, handed out."""
    read_at = time.monotonic()
    subs = trx_sync.followed()
    steps.memo.check(subs, read_at)
    applied = steps.applied
    steps.hand_out(subs, read_at, lambda: None)
    assert steps.applied == applied + 1
    return subs


def catalog_count(sub: ReplSubscriber) -> int:
    return ReplSubscriber.objects.get(pk=sub.pk).count


def test_a_warm_step_applying_one_row_runs_at_most_two_statements_in_the_catalog(rep, steps):  # noqa: F811
    rep1, rep2 = rep
    sub = subscribed_in_sync(rep1, rep2)
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (500, \'warm\')')
    step(steps)  # reads the servers, the publication, the position; writes the progress (the first is due)
    written = catalog_count(sub)
    for key in (501, 502, 503):
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'one row\')')
        subs = trx_sync.followed()
        with CaptureQueriesContext(connection) as queries:
            steps.hand_out(subs, time.monotonic(), lambda: None)
        assert value(rep2, f'SELECT COUNT(*) FROM `ab "cd` WHERE `id key` = {key}') == 1
        assert len(queries) <= STEP_STATEMENTS, [q["sql"] for q in queries]
    # Not written yet (not due): the subscriber's own position is three transactions further.
    position = subscriber_position(steps.memo.server("rep2"), "rep1", "tbl")
    assert position is not None and catalog_count(sub) == written == position[1] - 3
    steps.close()  # the follower stops: what is pending is written
    assert catalog_count(sub) == position[1]
    assert same(rep1, rep2, 'ab "cd')["equal"]


def test_progress_left_pending_is_written_by_the_loop_once_due(rep, steps, monkeypatch):  # noqa: F811
    rep1, rep2 = rep
    sub = subscribed_in_sync(rep1, rep2)
    for key in (600, 601):
        sql(rep1, f'INSERT INTO "ab ""cd" VALUES ({key}, \'pending\')')
        step(steps)
    position = subscriber_position(steps.memo.server("rep2"), "rep1", "tbl")
    assert position is not None and catalog_count(sub) == position[1] - 1
    monkeypatch.setattr(trx_sync, "FOLLOW_PROGRESS_SECONDS", 0.0)
    steps.memo.write_due(steps.idle)
    assert catalog_count(sub) == position[1]
    assert not steps.memo.pending

    # Another writer (a copy, a sync) put its count in the catalog after the follower's last apply: it stands.
    monkeypatch.setattr(trx_sync, "FOLLOW_PROGRESS_SECONDS", 3600.0)
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (602, \'pending\')')
    step(steps)
    assert steps.memo.pending
    ReplSubscriber.objects.filter(pk=sub.pk).update(count=position[1] - 1)
    steps.memo.write_due(steps.idle, force=True)
    assert catalog_count(sub) == position[1] - 1 and not steps.memo.pending


def test_a_position_another_apply_moved_is_read_again_and_nothing_is_applied_twice(rep, steps):  # noqa: F811
    rep1, rep2 = rep
    sub = subscribed_in_sync(rep1, rep2)
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (700, \'follower\')')
    step(steps)
    # A sync job applies the next ones meanwhile (it records its count in the catalog): the memory is stale.
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (701, \'job\')', 'INSERT INTO "ab ""cd" VALUES (702, \'job\')')
    assert run(rep2, "REPL_SYNC ('rep1', 'tbl')")[0].details["applied"] == 2
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (703, \'follower\')')
    step(steps)  # the catalog's count is not the one the follower wrote: the position is read again
    assert same(rep1, rep2, 'ab "cd')["equal"]

    # A position remembered wrong (no catalog write to tell) is caught by the apply's own check: one step is lost.
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (704, \'stale\')')
    pk = sub.pk
    steps.memo.positions[pk] = (time.monotonic(), steps.memo.positions[pk][1] - 2)
    [again] = trx_sync.followed()
    steps.hand_out([again], time.monotonic(), lambda: None)
    assert pk not in steps.memo.positions  # LevelMoved: forgotten, nothing applied
    step(steps)
    assert same(rep1, rep2, 'ab "cd')["equal"]
    position = subscriber_position(steps.memo.server("rep2"), "rep1", "tbl")
    steps.close()
    assert position is not None and catalog_count(sub) == position[1]


def test_the_rows_a_step_kept_current_serve_the_next_round_and_rows_read_before_it_or_out_of_sync_do_not(
    rep,  # noqa: F811
    steps,
):
    rep1, rep2 = rep
    subscribed_in_sync(rep1, rep2)
    earlier_at = time.monotonic()
    earlier = trx_sync.followed()  # read, then left aside: another round's rows
    read_at = time.monotonic()
    subs = trx_sync.followed()
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (800, \'first\')')
    steps.hand_out(subs, read_at, lambda: None)
    # The step ended after the rows were read, with an outcome: its row is current, the next round may use it ...
    assert steps.reusable(subs, read_at)
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (801, \'second\')')
    applied = steps.applied
    steps.hand_out(subs, read_at, lambda: None)
    assert steps.applied == applied + 1
    # ... but not a row read before the step ended that the step did not hold (a halt's retry_at, a state set meanwhile)
    assert not steps.reusable(earlier, earlier_at)
    # ... nor rows of which one is no longer in sync.
    subs[0].state = ReplSubscriber.DISCONNECTED
    assert not steps.reusable(subs, read_at)
    steps.close()
    assert same(rep1, rep2, 'ab "cd')["equal"]

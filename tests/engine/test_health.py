"""Health states of replication items (engine/health.py): the rules the status API and metrics report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from replication_admin.engine.health import (
    FAILING,
    INVALID,
    LAGGING,
    NEVER,
    OK,
    STALE_AFTER,
    TRX_DISCONNECTED,
    TRX_IN_SYNC,
    TRX_OFF,
    TRX_SYNCING,
    bidir_publication_state,
    bidir_subscriber_state,
    event_state,
    snapshot_state,
    trx_lag,
    trx_subscriber_state,
    worst,
)

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_the_worst_state_wins_and_nothing_at_all_is_ok():
    assert worst([]) == OK
    assert worst([OK, NEVER]) == NEVER
    assert worst([NEVER, LAGGING, OK]) == LAGGING
    assert worst([LAGGING, INVALID]) == INVALID
    assert worst([INVALID, FAILING, OK]) == FAILING


@pytest.mark.parametrize(
    ("last_job_state", "has_succeeded", "last_ts", "expected"),
    [
        ("failed", True, NOW, FAILING),
        ("failed", False, None, FAILING),
        (None, False, None, NEVER),
        ("running", False, None, NEVER),
        ("succeeded", True, None, OK),
        (None, False, NOW, OK),
        ("running", True, NOW, OK),
        ("cancelled", True, NOW, OK),
    ],
)
def test_a_snapshot_fails_with_its_latest_refresh_and_is_never_until_one_succeeds(
    last_job_state, has_succeeded, last_ts, expected
):
    assert snapshot_state(last_job_state, has_succeeded, last_ts) == expected


def test_a_bidirectional_subscriber_with_an_error_is_failing_even_before_its_copy():
    assert bidir_subscriber_state("push failed", True, NOW, NOW) == FAILING
    assert bidir_subscriber_state("push failed", False, None, None) == FAILING


def test_a_bidirectional_subscriber_without_its_initial_copy_has_never_synchronised():
    assert bidir_subscriber_state("", False, None, NOW) == NEVER


def test_a_bidirectional_subscriber_left_out_of_later_syncs_is_lagging():
    assert bidir_subscriber_state("", True, NOW - timedelta(hours=1), NOW) == LAGGING
    assert bidir_subscriber_state("", True, None, NOW) == LAGGING
    assert bidir_subscriber_state("", True, NOW - STALE_AFTER, NOW) == OK  # within the sync's own run time
    assert bidir_subscriber_state("", True, None, None) == OK  # the publication never synchronised either


def test_a_bidirectional_publication_fails_with_its_last_sync_else_takes_its_worst_subscriber():
    assert bidir_publication_state("pull from b: refused", [OK]) == FAILING
    assert bidir_publication_state("", [OK, LAGGING, NEVER]) == LAGGING
    assert bidir_publication_state("", []) == OK


def test_the_lag_is_the_difference_of_the_counts_and_unknown_without_a_publication():
    assert trx_lag(120, 100) == 20
    assert trx_lag(100, 100) == 0
    assert trx_lag(100, 105) == 0
    assert trx_lag(None, 5) is None


def trx(**changes):
    values = {
        "valid": 1,
        "sync_state": TRX_IN_SYNC,
        "last_error": "",
        "init_done": True,
        "lag": 0,
        "last_sync_at": NOW,
        "now": NOW,
        "max_backlog": 10000,
    }
    return trx_subscriber_state(**(values | changes))


def test_a_transactional_subscriber_in_step_is_ok():
    assert trx() == OK
    assert trx(sync_state=TRX_OFF, last_sync_at=NOW - timedelta(days=3)) == OK  # nothing to apply


def test_a_transactional_subscriber_whose_level_is_not_valid_is_invalid_before_anything_else():
    assert trx(valid=0) == INVALID
    assert trx(valid=0, last_error="gone", sync_state=TRX_DISCONNECTED, init_done=False, lag=500) == INVALID


def test_a_disconnected_transactional_subscriber_with_an_error_is_failing():
    assert trx(sync_state=TRX_DISCONNECTED, last_error="connection refused") == FAILING
    assert trx(sync_state=TRX_OFF, last_error="an old error") == OK  # the error alone does not fail it
    assert trx(sync_state=TRX_DISCONNECTED) == OK


def test_a_transactional_subscriber_without_its_initial_copy_has_never_synchronised():
    assert trx(init_done=False, lag=40, last_sync_at=None, sync_state=TRX_OFF) == NEVER


def test_a_transactional_subscriber_behind_and_not_syncing_for_more_than_five_minutes_is_lagging():
    old = NOW - STALE_AFTER - timedelta(seconds=1)
    assert trx(lag=3, sync_state=TRX_OFF, last_sync_at=old) == LAGGING
    assert trx(lag=3, sync_state=TRX_SYNCING, last_sync_at=None) == LAGGING
    assert trx(lag=3, sync_state=TRX_OFF, last_sync_at=NOW - STALE_AFTER) == OK
    assert trx(lag=3, sync_state=TRX_IN_SYNC, last_sync_at=old) == OK  # in-sync mode keeps up on its own


def test_a_transactional_subscriber_more_than_half_its_backlog_limit_behind_is_lagging_even_in_sync():
    assert trx(lag=5001, max_backlog=10000) == LAGGING
    assert trx(lag=5000, max_backlog=10000) == OK
    assert trx(lag=51, max_backlog=100, sync_state=TRX_IN_SYNC) == LAGGING


def test_a_scheduled_event_with_an_error_is_failing():
    assert event_state("no such table") == FAILING
    assert event_state("") == OK
    assert event_state(None) == OK

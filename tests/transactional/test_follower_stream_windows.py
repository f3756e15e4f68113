"""A follower's open WAL stream hands what it just stored to the steps (WalStream.fresh, SharedWindows.offer): the
subscription's step applies those transactions from memory instead of reading them back from the log, and a part
too large to keep is read from the log as before. The log's reads are counted; the subscriber's rows compared with
the publisher's. Live PostgreSQL (wal_level = logical) publisher, MariaDB subscriber."""

from __future__ import annotations

import time

import pytest

from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import sync as trx_sync
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_follow_latency_path import steps  # noqa: F401 - the fixture: inline steps
from tests.transactional.test_trx_replication import PUBLISHER_TABLES, run, sql, subscribed_in_sync, value

pytestmark = [pytest.mark.live_db]

KEY = ("rep1", "tbl")


@pytest.fixture
def streamed(make_server, jobs_sync, spark):
    """rep1 (PostgreSQL, WAL capture) publishes TEST and "ab ""cd" to rep2 (MariaDB), in sync; a follower's WAL
    streams, closed at the end."""
    rep1, rep2 = make_server("pgwal", "rep1"), make_server("mysql", "rep2")
    sql(rep1, *PUBLISHER_TABLES)
    run(rep1, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'DB.DBA.TEST', 2, 0, null); "
              "REPL_PUB_ADD ('tbl', 'DB.DBA.ab \"cd', 2, 0, null)")  # fmt: skip
    subscribed_in_sync(rep1, rep2)
    streams = trx_sync.WalStreams()
    try:
        yield rep1, rep2, streams
    finally:
        streams.close()


def current(streams, steps, rep1) -> int:  # noqa: F811
    """The stream opened and the subscriber current with what it stored; returns that count."""
    subs = pump_until_stored(streams, steps, trx_capture.publisher_count(rep1, "tbl"))
    steps.memo.check(subs, time.monotonic())
    steps.hand_out(subs, time.monotonic(), lambda: None)
    return streams.counts[KEY]


def pump_until_stored(streams, steps, count: int) -> list:  # noqa: F811
    """One loop round's reading of the rows and pumping of the streams, until the stream stored `count`
    transactions (they arrive over the socket a moment after their commit); returns the followed rows."""
    deadline = time.monotonic() + 30
    while True:
        subs = trx_sync.followed()
        steps.windows.followed([(s.server, s.account) for s in subs], streamed=streams.open)
        streams.pump(subs, {}, steps.offer)
        steps.memo.stream_counts = dict(streams.counts)
        if streams.counts.get(KEY, 0) >= count:
            return subs
        assert time.monotonic() < deadline, f"the stream stored {streams.counts.get(KEY)} of {count} transactions"
        time.sleep(0.01)


def log_reads(monkeypatch) -> list[tuple[str, int, int]]:
    """Every read of the log by a step, as (how, after, upto): for an apply (read_for_apply, which may read its
    entries in turn) or entry by entry (read_window)."""
    reads: list[tuple[str, int, int]] = []
    for name, how in (("read_for_apply", "runs"), ("read_window", "entries")):
        original = getattr(trx_capture, name)

        def counted(server, account, after, upto, *args, _original=original, _how=how, **kwargs):
            reads.append((_how, after, upto))
            return _original(server, account, after, upto, *args, **kwargs)

        monkeypatch.setattr(trx_capture, name, counted)
    return reads


def test_the_step_applies_what_the_stream_just_stored_without_reading_the_log_back(streamed, steps, monkeypatch):  # noqa: F811
    rep1, rep2, streams = streamed
    start = current(streams, steps, rep1)
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (900, \'streamed\')')
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (901, \'streamed\')')
    sql(rep1, 'UPDATE "ab ""cd" SET "ef ""gh" = \'x\' WHERE "id key" = 900')
    subs = pump_until_stored(streams, steps, start + 3)
    reads = log_reads(monkeypatch)
    steps.memo.check(subs, time.monotonic())
    applied = steps.applied
    steps.hand_out(subs, time.monotonic(), lambda: None)
    assert steps.applied == applied + 3
    assert reads == []
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd` WHERE `id key` IN (900, 901)') == 2
    assert value(rep2, 'SELECT `ef "gh` FROM `ab "cd` WHERE `id key` = 900') == "x"
    assert same(rep1, rep2, 'ab "cd')["equal"]


def test_a_part_too_large_to_keep_is_read_from_the_log(streamed, steps, monkeypatch):  # noqa: F811
    rep1, rep2, streams = streamed
    monkeypatch.setattr(trx_capture, "STREAM_FRESH_CHARS", 0)
    start = current(streams, steps, rep1)
    sql(rep1, 'INSERT INTO "ab ""cd" VALUES (910, \'from the log\')')
    subs = pump_until_stored(streams, steps, start + 1)
    reads = log_reads(monkeypatch)
    steps.memo.check(subs, time.monotonic())
    steps.hand_out(subs, time.monotonic(), lambda: None)
    assert reads[0] == ("runs", start, start + 1)  # as a step of a publication not streamed reads it
    assert value(rep2, 'SELECT COUNT(*) FROM `ab "cd` WHERE `id key` = 910') == 1
    assert same(rep1, rep2, 'ab "cd')["equal"]

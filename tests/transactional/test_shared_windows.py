"""The follower's subscriptions of one publication share the log windows its steps read (capture.SharedWindows): a
step finds the transactions another step of the same publication just read, within its own bounds, and reads only
what lies past them; a window of another log (the publication made anew) or of a publication followed by one
subscription is never taken. Shown by purging the log after a read: what still arrives came from the kept window."""

from __future__ import annotations

import pytest

from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import lookups as trx_lookups
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.live_db]


@pytest.fixture
def source(make_server):
    server = make_server("postgresql")
    run_sql(server, "CREATE TABLE w (id integer PRIMARY KEY, v varchar(20))")
    trx_capture.create_log(server, "tbl")
    trx_capture.add_capture(server, "tbl", trx_lookups.describe(server, "w"))
    for i in range(1, 11):
        run_sql(server, "INSERT INTO w (id, v) VALUES (?, ?)", [i, f"v{i}"])
    return server


def counts(txns) -> list[int]:
    return [t.count for t in txns]


def ids(txns) -> list[int]:
    return [int(e.new["id"]) for t in txns for e in t.entries]


def test_a_second_subscription_of_a_publication_takes_the_window_the_first_read(source):
    windows = trx_capture.SharedWindows()
    windows.followed([(source.name, "tbl"), (source.name, "tbl")])
    count = trx_capture.publisher_count(source, "tbl")
    first = windows.read(source, "tbl", 0, count, 100, 10**6, log=1)
    assert counts(first) == list(range(1, 11)) and ids(first) == list(range(1, 11))
    trx_capture.purge_log(source, "tbl", count)  # gone from the publisher: only the kept window has them
    assert trx_capture.read_transactions(source, "tbl", 0, count) == []
    again = windows.read(source, "tbl", 0, count, 100, 10**6, log=1)
    assert ids(again) == list(range(1, 11))
    # Within the reader's own bounds, from its own level.
    assert counts(windows.read(source, "tbl", 0, count, 3, 10**6, log=1)) == [1, 2, 3]
    assert counts(windows.read(source, "tbl", 6, count, 100, 10**6, log=1)) == [7, 8, 9, 10]
    # Another log under the same name takes nothing of it.
    assert windows.read(source, "tbl", 0, count, 100, 10**6, log=2) == []


def test_a_step_past_the_kept_window_reads_the_rest_from_the_log(source):
    windows = trx_capture.SharedWindows()
    windows.followed([(source.name, "tbl"), (source.name, "tbl")])
    count = trx_capture.publisher_count(source, "tbl")
    assert counts(windows.read(source, "tbl", 0, count, 100, 10**6, log=1)) == list(range(1, 11))
    for i in range(11, 14):
        run_sql(source, "INSERT INTO w (id, v) VALUES (?, ?)", [i, f"v{i}"])
    newer = trx_capture.publisher_count(source, "tbl")
    trx_capture.purge_log(source, "tbl", 8)  # what is kept of 1..10 comes from the window; 11..13 from the log
    assert ids(windows.read(source, "tbl", 5, newer, 100, 10**6, log=1)) == list(range(6, 14))


def test_a_publication_one_subscription_follows_keeps_no_window(source):
    windows = trx_capture.SharedWindows()
    windows.followed([(source.name, "tbl"), (source.name, "other")])
    count = trx_capture.publisher_count(source, "tbl")
    assert counts(windows.read(source, "tbl", 0, count, 100, 10**6, log=1)) == list(range(1, 11))
    trx_capture.purge_log(source, "tbl", count)
    assert windows.read(source, "tbl", 0, count, 100, 10**6, log=1) == []
    assert windows.kept == {}


def test_what_a_stream_offers_is_read_from_memory_joined_when_it_follows_on_and_bounded(source, monkeypatch):
    windows = trx_capture.SharedWindows()
    key = (source.name, "tbl")
    windows.followed([key], streamed=[key])  # one subscription, its publication streamed
    count = trx_capture.publisher_count(source, "tbl")
    rows = trx_capture.read_window(source, "tbl", 0, count)
    by_count = {n: [r for r in rows if r[0] == n] for n in range(1, count + 1)}
    windows.offer(key, 1, [r for n in (1, 2, 3) for r in by_count[n]], {})
    windows.offer(key, 1, [r for n in (4, 5) for r in by_count[n]], {})  # follows on: joined
    trx_capture.purge_log(source, "tbl", count)  # only the offered parts are left
    assert ids(windows.read(source, "tbl", 0, 5, 100, 10**6, log=1)) == [1, 2, 3, 4, 5]
    assert windows.read(source, "tbl", 0, 5, 100, 10**6, log=2) == []  # another log's window is not taken
    windows.offer(key, 1, by_count[8], {})  # a gap (7 was stored in a part too large to keep): replaced
    assert counts(windows.read(source, "tbl", 7, 8, 100, 10**6, log=1)) == [8]
    assert windows.read(source, "tbl", 0, 5, 100, 10**6, log=1) == []  # not kept any more, and purged
    monkeypatch.setattr(trx_capture, "STREAM_FRESH_CHARS", 1)
    windows.offer(key, 1, by_count[9], {})
    windows.offer(key, 1, by_count[10], {})
    assert [t.count for t, _rows, _size in windows.kept[key][2]] == [10]  # past the bound: the oldest dropped
    windows.followed([key])  # no longer streamed, one subscription: nothing kept
    assert windows.kept == {}

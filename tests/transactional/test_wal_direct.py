"""A WAL publication's only subscriber, current with the log, applies what the slot decoded straight from memory:
the log counts those transactions without storing them, and stores what that subscriber did not apply (a halt) or
what another subscriber still needs. Live PostgreSQL (wal_level = logical) and MariaDB."""

from __future__ import annotations

import pytest

from replication_admin.core import connections
from replication_admin.models import ReplSubscriber
from replication_admin.transactional import capture as trx_capture
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = [pytest.mark.live_db]


@pytest.fixture(params=["sql", "stream"])
def slot_read(request, settings, monkeypatch):
    """The slot read by SQL (a peek) or over the replication protocol (any backlog streamed); yields the streamed
    reads' counts (None: read by SQL), checked after the test: every read went the way asked for."""
    settings.WAL_STREAM_BYTES = 0 if request.param == "sql" else 1
    streamed: list[int | None] = []
    stream_direct = trx_capture._stream_direct

    def counted(*args, **kwargs):
        streamed.append(stream_direct(*args, **kwargs))
        return streamed[-1]

    monkeypatch.setattr(trx_capture, "_stream_direct", counted)
    yield streamed
    if request.param == "stream":
        assert streamed and all(n is not None for n in streamed)
    else:
        assert not streamed


def published(make_server):
    pub = make_server("pgwal", "w1")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), price numeric(10, 2))")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)")
    return pub


def subscribed(make_server, dialect: str, name: str):
    sub = make_server(dialect, name)
    run(sub, "REPL_SERVER ('w1', 'w1'); REPL_SUBSCRIBE ('w1', 'acct'); REPL_INIT_COPY ('w1', 'acct')")
    return sub


def write(pub, first: int, count: int, rows: int = 1) -> None:
    with connections.connect(pub, autocommit=False) as conn:
        cursor = conn.cursor()
        for n in range(first, first + count):
            for r in range(rows):
                key = n * 1000 + r
                cursor.execute("INSERT INTO items (id, name, price) VALUES (?, ?, ?)", key, f"row {key}", "1.25")
            if n % 3 == 0:
                cursor.execute("UPDATE items SET name = 'changed' WHERE id = ?", n * 1000)
            if n % 5 == 0:
                cursor.execute("DELETE FROM items WHERE id = ?", n * 1000 + rows - 1)
            conn.commit()


def log_of(pub) -> tuple[int, int, int]:
    """(the log's count, transactions stored, entries stored)."""
    with connections.connect(pub) as conn:
        cursor = conn.cursor()
        return (
            int(cursor.execute('SELECT "N" FROM "RTSEQ_acct"').fetchone()[0]),
            int(cursor.execute('SELECT COUNT(*) FROM "RTTX_acct"').fetchone()[0]),
            int(cursor.execute('SELECT COUNT(*) FROM "RTLOG_acct"').fetchone()[0]),
        )


def test_the_only_subscriber_applies_a_backlog_straight_from_the_slot_and_the_log_stores_none_of_it(
    make_server, jobs_sync, spark, slot_read
):
    pub = published(make_server)
    sub = subscribed(make_server, "mysql", "w2")
    count, stored, entries = log_of(pub)  # the table's creating statement, stored when the copy read the count
    write(pub, 1, 40, rows=3)
    outcome = run(sub, "REPL_SYNC ('w1', 'acct')")[0]
    assert outcome.details["applied"] == 40
    assert same(pub, sub, "items")["equal"]
    assert log_of(pub) == (count + 40, stored, entries)
    assert ReplSubscriber.objects.get(subscriber="w2").count == count + 40
    write(pub, 41, 5)
    run(sub, "REPL_SYNC ('w1', 'acct')")
    assert same(pub, sub, "items")["equal"] and log_of(pub) == (count + 45, stored, entries)


def test_a_transaction_the_only_subscriber_halts_at_and_those_after_it_are_stored_and_applied_from_the_log(
    make_server, jobs_sync, spark, slot_read
):
    pub = published(make_server)
    sub = subscribed(make_server, "mysql", "w2")
    sql(sub, "ALTER TABLE items ADD CONSTRAINT small CHECK (id < 5000)")
    count, stored, _entries = log_of(pub)
    write(pub, 1, 8)  # keys 1000 .. 8000: the fifth transaction is refused
    assert "halted" in refused(sub, "REPL_SYNC ('w1', 'acct')")
    # The four applied are counted, not stored; the halted one and the three after it are stored.
    assert log_of(pub)[:2] == (count + 8, stored + 4)
    assert ReplSubscriber.objects.get(subscriber="w2").count == count + 4
    assert value(sub, "SELECT COUNT(*) FROM items") == 4
    sql(sub, "ALTER TABLE items DROP CONSTRAINT small")
    run(sub, "REPL_SYNC ('w1', 'acct')")
    assert same(pub, sub, "items")["equal"]


def test_with_a_second_subscriber_the_log_keeps_every_transaction_for_it(make_server, jobs_sync, spark):
    pub = published(make_server)
    first = subscribed(make_server, "mysql", "w2")
    second = subscribed(make_server, "postgresql", "w3")
    count, stored, _entries = log_of(pub)
    write(pub, 1, 12, rows=2)
    run(first, "REPL_SYNC ('w1', 'acct')")
    assert log_of(pub)[:2] == (count + 12, stored + 12)
    run(second, "REPL_SYNC ('w1', 'acct')")
    assert same(pub, first, "items")["equal"] and same(pub, second, "items")["equal"]

"""The publisher's log of a transactional publication: its tables and capture (triggers, or on PostgreSQL a
logical decoding slot read into the log: engine.wal_capture), the sequencer that gives complete transactions
their levels in commit order, reading and purging the log."""

from __future__ import annotations

import contextlib
import logging
import queue
import secrets
import select
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyodbc
from django.conf import settings

from replication_admin.core import connections
from replication_admin.core.introspection import lookup_table
from replication_admin.core.times import aware
from replication_admin.core.transactions import (
    is_retryable,
    run_each,
    run_in_transaction,
    run_with_undo,
)
from replication_admin.engine import bidir_sql, wal_capture
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.dialects import KEEPALIVE_COUNT, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, Dialect, keepalive_ms
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.models import (
    ReplAccount,
    Server,
)
from replication_admin.transactional.lookups import (
    TrxError,
    _d,
    describe,
    schema_of,
)

UNDEFINED_FUNCTION = "42883"  # PostgreSQL's SQLSTATE

log = logging.getLogger(__name__)


def uses_wal(server: Server, account: str) -> bool:
    """Whether the publication captures from the write-ahead log (a push log of a subscriber never does)."""
    return ReplAccount.objects.filter(server=server.name, account=account, capture=ReplAccount.Capture.WAL).exists()


def wal_unavailable(server: Server) -> str | None:
    """Why `server` cannot capture from its WAL, or None when it can."""
    d = _d(server)
    if not d.decodes_wal:
        return f"{d.label} has no logical decoding (capture from the WAL is for PostgreSQL)"
    try:
        with connections.connect(server, readonly=True) as conn:
            level, may, free = conn.cursor().execute(wal_capture.availability_sql()).fetchone()
    except (pyodbc.Error, connections.ConnectionFailed) as exc:
        return f"{server.name} did not answer: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return wal_capture.unavailable_reason(str(level), bool(may), int(free), server.user)


def _slot(server: Server, account: str) -> str:
    return wal_capture.slot_name(server.database, schema_of(server), account)


_VERSIONED_LOGS: set[tuple[str, str, str, str]] = set()  # (server, database, schema, account) seen versioned


def _log_d(server: Server, account: str) -> Dialect:
    """The dialect as it captures into this publication's log: where the dialect versions the log (MariaDB), a
    log made by an earlier version (RTLOG not versioned) keeps its writers' numbering (Dialect.earlier_log).

    A log once seen versioned stays so (the product makes no other), so only earlier logs are looked at again."""
    d = _d(server)
    if not d.versioned_log:
        return d
    schema = schema_of(server)
    key = (server.name, server.database, schema, account)
    if key in _VERSIONED_LOGS:
        return d
    names = sql.log_names(d, account)
    with connections.connect(server, readonly=True) as conn:
        found = conn.cursor().execute(sql.log_versioned_sql(d, schema), [names.log]).fetchone()
    if found is None or not found[0]:
        return d.earlier_log
    _VERSIONED_LOGS.add(key)
    return d


def create_log(server: Server, account: str, wal: bool = False, writer: str | None = None) -> None:
    """The publication's log tables and capture objects; with `writer` (its sync user), that role may write the
    log entries that its replayed changes make (trigger capture fires under the role that changed the rows)."""
    d = _d(server)
    schema = schema_of(server)
    names = sql.log_names(d, account)
    for name in (names.seq, names.tx, names.log):
        if lookup_table(server, name) is not None:
            raise TrxError(f"{server.name} already has a table {name}; drop it or choose another publication name")
    statements = [*sql.context_ddl(d, schema), *sql.log_ddl(d, account, schema), *sql.text_table_ddl(d, schema)]
    drop = [*sql.drop_log_ddl(d, account, schema)]
    if wal:
        slot = _slot(server, account)
        statements += wal_capture.log_ddl(slot, d.qualify(names.seq, schema), d.qualify(sql.TEXT_TABLE, schema))
        drop = [*wal_capture.drop_log_ddl(slot), *drop]
    else:
        text = sql.text_capture_objects(d, account, server.name, schema)
        statements += text.create
        drop = [*text.drop, *drop]
    if d.trigger_functions:
        append, drop_append = sql.append_function_ddl(d, account, server.name, schema, wal=wal)
        statements += append
        drop = [*drop_append, *drop]
    if writer:
        statements += d.grant_log_sql([d.qualify(n, schema) for n in (names.tx, names.log)], writer)
    run_with_undo(server, statements, drop)
    if wal:
        try:  # not in a transaction that wrote: the slot waits for the transactions under way to end
            run_each(server, [wal_capture.create_slot_sql(_slot(server, account))])
        except pyodbc.Error as exc:
            run_each(server, drop, ignore_errors=True)
            raise TrxError(
                f"{server.name} could not create the publication's replication slot: {exc.args[-1]}"
            ) from None


def drop_log(server: Server, account: str) -> None:
    d = _d(server)
    schema = schema_of(server)
    text = sql.text_capture_objects(d, account, server.name, schema)
    drop_append = sql.append_function_ddl(d, account, server.name, schema)[1] if d.trigger_functions else []
    drop_wal = wal_capture.drop_log_ddl(_slot(server, account)) if d.decodes_wal else []
    run_each(server, [*drop_wal, *drop_append, *text.drop, *sql.drop_log_ddl(d, account, schema)], ignore_errors=True)
    _untrack(server, account, None)


def drop_shared_objects(server: Server, *, publishes: bool, subscribes: bool) -> None:
    """What every publication of a server shares, once the last one is gone: REPL_TEXT (applications log their
    calls there) and, while the server subscribes to nothing either, the replay context table (SQLite's RTCTX,
    which its applies read too)."""
    if publishes:
        return
    d = _d(server)
    schema = schema_of(server)
    drops = [*sql.drop_text_table_ddl(d, schema), *([] if subscribes else sql.drop_context_ddl(d, schema))]
    run_each(server, drops, ignore_errors=True)


def _untrack(server: Server, account: str, table: str | None) -> None:
    """Stop logging the schema changes of a table (None: of every table of the account) in place."""
    d = _d(server)
    if not d.has_ddl_triggers:
        return
    schema = schema_of(server)
    try:
        run_in_transaction(server, [(sql.untrack_sql(d, schema), [account, table, table])])
        with connections.connect(server, readonly=True) as conn:
            left = int(conn.cursor().execute(sql.tracked_count_sql(d, schema)).fetchone()[0])
    except pyodbc.Error:
        return  # never tracked: no RTPUBTBL
    if not left:  # the last tracked table: the event trigger and its objects go too
        run_each(server, sql.schema_tracking_ddl(d, schema)[1], ignore_errors=True)


def add_capture(
    server: Server, account: str, table: TableInfo, updateable: bool = False, local: str | None = None
) -> None:
    """The capture triggers of a published table (with ROWGUID and its triggers when updateable)."""
    d = _d(server)
    local = local or server.name
    if not table.primary_key:
        raise TrxError(f"table {table.name!r} has no primary key; a published table needs one")
    statements: list[str] = []
    undo: list[str] = []
    if updateable:
        try:
            guid = sql.rowguid_objects(d, table, local)
            if bidir_sql.check_rowguid(table) is None:
                run_with_undo(server, [bidir_sql.add_rowguid_ddl(d, table)], [])
            run_each(server, [bidir_sql.fill_rowguid_sql(d, table, local)])
        except (sql.TrxError, bidir_sql.BidirError) as exc:
            raise TrxError(str(exc)) from None
        table = describe(server, table.name)
        statements += list(guid.create)
        undo += list(guid.drop)
    if uses_wal(server, account):
        made, dropped = wal_capture.add_table_ddl(_slot(server, account), d.qualify(table.name, table.schema))
        run_with_undo(server, [*statements, *made], [*dropped, *undo])
        return
    objects = sql.capture_objects(_log_d(server, account), account, table, local)
    run_with_undo(server, [*statements, *objects.create], [*objects.drop, *undo])


def drop_capture(server: Server, account: str, table_name: str) -> None:
    d = _d(server)
    info = lookup_table(server, table_name) or TableInfo(
        name=table_name, columns=(Column("k", "int", sql.COUNT, False, 1),), schema=schema_of(server)
    )
    drops = list(sql.capture_objects(d, account, info, server.name).drop)
    if uses_wal(server, account):
        drops += wal_capture.add_table_ddl(_slot(server, account), d.qualify(info.name, info.schema))[1]
    if _d(server).supports_updateable_publications:
        drops += list(sql.rowguid_objects(d, info, server.name).drop)
    run_each(server, drops, ignore_errors=True)
    _untrack(server, account, info.name)


def append_entry(server: Server, account: str, op: str, table: str, payload: str) -> None:
    """Log one entry (a REPL_TEXT call, a creating statement) as a transaction of its own."""
    d = _d(server)
    if uses_wal(server, account):
        run_in_transaction(
            server, [(wal_capture.emit_entry_sql(), wal_capture.entry_message(account, op, table, payload))]
        )
        return
    d = _log_d(server, account)
    run_in_transaction(server, sql.append_entry_sql(d, account, op, table, payload, server.name, schema_of(server)))
    sequence(server, account)


def sequence(server: Server, account: str) -> None:
    """SQLite: number the entries written since the last pass (see engine.trx); elsewhere nothing."""
    if not _d(server).single_writer:
        return
    d = _d(server)
    schema = schema_of(server)
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            rows = cursor.execute(sql.unnumbered_sql(d, account, schema)).fetchall()
            if rows:
                count = int(cursor.execute(sql.count_sql(d, account, schema)).fetchone()[0])
                add_tx, mark_log, set_count = sql.number_run_sql(d, account, schema)
                for first, last, origin in sql.runs_of_origin([(int(r[0]), r[1]) for r in rows]):
                    count += 1
                    cursor.execute(add_tx, [count, count, origin or server.name])
                    cursor.execute(mark_log, [count, first, last])
                cursor.execute(set_count, [count])
            cursor.execute("COMMIT")
        except BaseException:
            cursor.execute("ROLLBACK")
            raise


def publisher_count(server: Server, account: str, direct: DirectApply | None = None, wal: bool | None = None) -> int:
    """How many transactions of the publication a reader may take: committed, numbered and closed. `direct`: see
    read_wal (a publication that captures from the WAL; ignored elsewhere). `wal`: whether it captures from the WAL,
    as the caller's row of the publication says (None: asked here)."""
    d = _d(server)
    schema = schema_of(server)
    if d.single_writer:
        sequence(server, account)
    if d.decodes_wal and (uses_wal(server, account) if wal is None else wal):
        return read_wal(server, account, direct)
    d = _log_d(server, account)
    steps = sql.number_steps_sql(d, account, schema)
    if steps:
        return _number(server, account, steps)
    if d.numbers_when_read:
        for attempt in range(2):
            try:
                with connections.connect(server) as conn:  # commits the numbers it gave
                    return int(conn.cursor().execute(sql.number_sql(d, account, schema)).fetchone()[0])
            except pyodbc.Error as exc:
                if attempt or not exc.args or exc.args[0] != UNDEFINED_FUNCTION:
                    raise
            # A log made before readers numbered (its writers still number at commit): give it the function.
            run_each(server, d.numbering_ddl(sql.log_names(d, account), schema))
    if not d.numbers_at_first_change:
        with connections.connect(server, readonly=True) as conn:
            return int(conn.cursor().execute(sql.count_sql(d, account, schema)).fetchone()[0])
    lock, close = sql.close_sql(d, account, schema)
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        try:
            count, _conn = cursor.execute(lock).fetchone()
            cursor.execute(close)
            conn.commit()
            return int(count)
        except pyodbc.Error as exc:
            conn.rollback()
            if not is_retryable(exc):
                raise
    # A writer holds the counter: its number may still grow, the ones before it are complete.
    with connections.connect(server) as conn:
        count, open_conn = conn.cursor().execute(sql.counter_sql(d, account, schema)).fetchone()
    return int(count) - (0 if open_conn is None else 1)


NUMBER_BATCH = 1000  # transactions numbered per statement


def _number(server: Server, account: str, steps: list[str]) -> int:
    """Number the committed transactions not numbered yet (Dialect.number_steps_sql); returns the count."""
    d = _d(server)
    tx = d.qualify(sql.log_names(d, account).tx, schema_of(server))
    begin, lock, order, store = steps
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        try:
            cursor.execute(begin)
            count = int(cursor.execute(lock).fetchone()[0])
            txids = [int(r[0]) for r in cursor.execute(order).fetchall()]
            if txids:
                for first in range(0, len(txids), NUMBER_BATCH):
                    cursor.execute(d.number_assign_sql(tx, count + first, txids[first : first + NUMBER_BATCH]))
                count += len(txids)
                cursor.execute(store, [count])
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
    return count


STREAM_LOCK_WAIT = "5s"  # how long a reader waits for the slot's advisory lock before looking again


class _WalLog:
    """Stores decoded transactions of one publication in its log (RTTX, RTLOG, RTSEQ's count and position)."""

    def __init__(self, server: Server, account: str) -> None:
        d, schema = _d(server), schema_of(server)
        names = sql.log_names(d, account)
        self.seq, tx, log = (d.qualify(n, schema) for n in (names.seq, names.tx, names.log))
        self.statements = wal_capture.store_sql(tx, log, self.seq)
        self.local = server.name

    def position(self, cursor) -> tuple[int, int]:
        """(count, the WAL position stored with it)."""
        count, stored = cursor.execute(wal_capture.position_sql(self.seq)).fetchone()
        return int(count), int(stored)

    def store(self, cursor, txns: list[wal_capture.Decoded], count: int, upto: int, base: int | None = None) -> int:
        """Store `txns` after `count` (in the caller's transaction); returns the new count. `base`: the count they
        are numbered after when the transactions up to it were applied straight to the only subscriber (they are
        counted, not stored)."""
        base = count if base is None else base
        if not txns and base == count:
            return count
        add_tx, add_entries, set_seq = self.statements
        tx_rows, entries, new_count = wal_capture.store_parameters(txns, base, self.local)
        if txns:
            cursor.execute(add_tx, [tx_rows])
            cursor.execute(add_entries, [entries])
        cursor.execute(set_seq, [new_count, upto, count])
        if cursor.rowcount != 1:
            raise TrxError(f"the log's count moved from {count} while its slot was read")
        return new_count

    def rows(self, txns: Sequence[wal_capture.Decoded], count: int) -> tuple[list[tuple], dict[int, int]]:
        """`txns` numbered after `count` as the rows entries_sql would read once they are stored (N, ORIGIN, AT,
        SEQ, TBL, OP, NEW, OLD; SEQ: the entry's place among them), and the rows of those that hold a run's list,
        by their place (sql.pack_transactions then need not parse them to count)."""
        out: list[tuple] = []
        parts: dict[int, int] = {}
        for n, txn in enumerate(txns, count + 1):
            origin = txn.origin or self.local
            parts.update((len(out) + i, rows) for i, rows in txn.parts.items())
            out.extend((n, origin, txn.at, len(out) + 1, *entry) for entry in txn.entries)
        return out, parts


# Applies transactions read from the slot straight to a publication's only subscriber before they are stored: given
# the log's count, the rows and their lists' rows (as _WalLog.rows gives them, numbered after it), it returns the
# count that subscriber has durably reached (the count itself when it applied nothing). What lies past it is stored
# as usual.
DirectApply = Callable[[int, list[tuple], dict[int, int]], int]


def _slot_gone(server: Server, account: str, slot: str) -> TrxError:
    return TrxError(
        f"the replication slot {slot} of the publication {account} on {server.name} is gone; "
        "changes made since cannot be read: publish again and re-initialise the subscribers"
    )


def read_wal(server: Server, account: str, direct: DirectApply | None = None) -> int:
    """Move what the publication's slot decoded into its log; returns the publication's count.

    The order that keeps it exact (engine.wal_capture): store and commit, then advance the slot; changes
    a crash left stored but not advanced over are recognised by their position and skipped. While a
    follower streams the slot (WalStream), it stores as changes arrive: the count stored is the answer.

    `direct`: a sync of the publication's only subscriber, current with the log, applies what was decoded
    straight from memory first (its level committed on the subscriber); the log then counts those transactions
    without storing them and stores only the rest. A crash before the log's count moved reads the same
    transactions again with the same numbers: they are stored, and the subscriber's level already covers them."""
    slot = _slot(server, account)
    if direct is not None and settings.WAL_STREAM_BYTES:
        streamed = _stream_direct(server, account, direct)
        if streamed is not None:
            return streamed
    log = _WalLog(server, account)
    decoder = wal_capture.PgOutputDecoder(account, sql.TEXT_TABLE)
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        if not _lock_slot(cursor, server, account, slot):
            count = log.position(cursor)[0]  # a stream holds the slot and stores as changes arrive
            conn.rollback()
            return count
        try:
            while True:
                position = cursor.execute(wal_capture.slot_position_sql(), [slot]).fetchone()
                if position is None:
                    raise _slot_gone(server, account, slot)
                confirmed, flushed = int(position[0]), int(position[1])
                count, stored = log.position(cursor)
                rows = cursor.execute(
                    wal_capture.peek_sql(), [slot, flushed, wal_capture.PEEK_CHANGES, slot]
                ).fetchall()
                txns = decoder.feed([r[0] for r in rows], after=stored)
                complete = len(rows) < wal_capture.PEEK_CHANGES
                upto = flushed if complete else decoder.last_end
                base = count
                if direct is not None and txns:
                    conn.rollback()  # no snapshot held while the subscriber applies (the advisory lock stays)
                    base = max(count, min(count + len(txns), direct(count, *log.rows(txns, count))))
                count = log.store(cursor, txns[base - count :], count, upto, base)
                conn.commit()
                if upto > confirmed:
                    cursor.execute(wal_capture.advance_sql(), [slot, upto]).fetchall()
                    conn.commit()
                if complete:
                    return count
        finally:
            conn.rollback()
            cursor.execute(_d(server).unlock_sql(), [wal_capture.lock_key(slot)]).fetchall()
            conn.commit()


# A streamed read that has received nothing for this long, and has not heard that the server sent everything up to
# where it started, ends with what it stored (the next sync goes on from there).
STREAM_QUIET_SECONDS = 10.0


def _stream_direct(server: Server, account: str, direct: DirectApply) -> int | None:
    """read_wal for a sync applying straight to the only subscriber, over the replication protocol (WalStream)
    where the slot holds at least settings.WAL_STREAM_BYTES of WAL: the server decodes the next changes while the
    subscriber applies these, instead of decoding a whole peek first and waiting while it applies. The order is
    read_wal's: applied, then counted (and whatever the apply left stored), committed, then confirmed. Ends when the
    server says it has sent everything up to the WAL flushed when the read began (a reply it is asked for).

    None: a smaller backlog, or no stream (a follower holds the slot, the role may not replicate, psycopg2 is
    missing): read_wal reads the slot by SQL."""
    slot = _slot(server, account)
    with connections.connect(server, readonly=True) as conn:
        row = conn.cursor().execute(wal_capture.slot_backlog_bytes_sql(), [slot]).fetchone()
    if row is None or int(row[0] or 0) < settings.WAL_STREAM_BYTES:
        return None
    try:
        stream = WalStream(server, account)
    except Exception as exc:  # any reason a stream cannot start: the SQL reader says what is wrong, if anything
        log.info("%s/%s: the slot is read by SQL (%s)", server.name, account, exc)
        return None
    try:
        cursor = stream.conn.cursor()
        position = cursor.execute(wal_capture.slot_position_sql(), [slot]).fetchone()
        stream.conn.rollback()
        if position is None:
            raise _slot_gone(server, account, slot)
        return _apply_streamed(stream, cursor, direct, int(position[1]))
    finally:
        stream.close()


# Messages a streamed read decodes per part: the next part is decoded while the subscriber applies this one.
STREAM_PART_MESSAGES = 10_000


def _next_parts(parts: queue.Queue) -> tuple[list[wal_capture.Decoded], int, bool]:
    """The next decoded part, joined with those already waiting behind it (one apply, one durable commit and one
    count for them all instead of one each): (transactions, the position after them, whether the read ended)."""
    txns: list[wal_capture.Decoded] = []
    upto, last = 0, False
    block = True
    while not last:
        try:
            part = parts.get(block=block)
        except queue.Empty:
            break
        if isinstance(part, BaseException):
            raise part
        txns.extend(part[0])
        upto, last, block = max(upto, part[1]), part[2], False
    return txns, upto, last


def _apply_streamed(stream: WalStream, cursor, direct: DirectApply, flushed: int) -> int:
    """_stream_direct's reading: a thread of its own takes the stream's messages and decodes them, part by part,
    while this one applies each decoded part to the subscriber, counts it (storing what the apply left), commits
    and hands back the position to confirm, which the reading thread sends (the stream's socket is its alone).
    Nothing but the stream is touched there (no catalog, no subscriber). Returns the log's count."""
    parts: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()
    confirmed = [0]  # the position stored and committed here, for the reading thread to confirm
    after = stream.stored  # transactions the log stored before this stream started are skipped

    def read() -> None:
        try:
            while not stop.is_set():
                messages, sent = stream.receive(STREAM_PART_MESSAGES, flushed, STREAM_QUIET_SECONDS, confirmed, stop)
                txns = stream.decoder.feed(messages, after=after)
                caught_up = sent and not stream.decoder.in_transaction
                upto = max(stream.decoder.last_end, flushed) if caught_up else stream.decoder.last_end
                last = caught_up or not messages or stop.is_set()
                parts.put((txns, upto, last))
                if last:
                    return
        except BaseException as exc:  # raised where the part would have been applied
            parts.put(exc)

    reader = threading.Thread(target=read, name=f"wal stream {stream.slot}", daemon=True)
    reader.start()
    count = stream.count
    try:
        while True:
            txns, upto, last = _next_parts(parts)
            base = count
            if txns:
                base = max(count, min(count + len(txns), direct(count, *stream.log.rows(txns, count))))
            count = stream.log.store(cursor, txns[base - count :], count, upto, base)
            stream.conn.commit()
            confirmed[0] = max(confirmed[0], upto)
            if last:
                return count
    finally:
        stop.set()
        while reader.is_alive():  # a reader waiting to hand over a part is let go
            with contextlib.suppress(queue.Empty):
                parts.get(timeout=0.1)
        reader.join()
        if confirmed[0]:
            stream.stream.send_feedback(flush_lsn=confirmed[0], force=True)


def _lock_slot(cursor, server: Server, account: str, slot: str) -> bool:
    """Take the publication's advisory lock to read its slot: True once taken (and the slot free), False when
    a WalStream holds them (its count is the answer)."""
    d, key = _d(server), wal_capture.lock_key(slot)
    if not _try_lock(cursor, server, key):
        if _streamed(cursor, server, account, slot):
            cursor.connection.rollback()
            return False
        try:  # another reader: wait for its turn
            cursor.execute(d.lock_timeout_sql(STREAM_LOCK_WAIT))
            cursor.execute(d.lock_sql(), [key]).fetchall()
        except pyodbc.Error as exc:
            cursor.connection.rollback()
            if exc.args and exc.args[0] == d.lock_not_available_state and _streamed(cursor, server, account, slot):
                cursor.connection.rollback()
                return False
            raise
    cursor.connection.commit()
    # Holding the lock, no stream is open; the server process of one that just closed may hold the slot a moment.
    deadline = time.monotonic() + 10
    while _streamed(cursor, server, account, slot):
        cursor.connection.rollback()
        if time.monotonic() > deadline:
            cursor.execute(d.unlock_sql(), [key]).fetchall()
            cursor.connection.commit()
            raise TrxError(f"the replication slot {slot} on {server.name} is held by a process that is not ours")
        time.sleep(0.01)
    cursor.connection.rollback()
    return True


def _try_lock(cursor, server: Server, key: int) -> bool:
    """Take the session-level lock `key` if it is free."""
    return bool(int(cursor.execute(_d(server).try_lock_sql(), [key]).fetchone()[0]))


def _streamed(cursor, server: Server, account: str, slot: str) -> bool:
    """Whether a replication connection (a follower's WalStream) holds the slot."""
    row = cursor.execute(wal_capture.slot_active_sql(), [slot]).fetchone()
    if row is None:
        raise _slot_gone(server, account, slot)
    return bool(int(row[0]))


# Messages a follower's stream decodes and stores at a time (a round's 50,000 in several parts): what one store holds
# in memory (the messages, their decoded images, the JSON sent) stays a few MB.
STREAM_PUMP_MESSAGES = 5_000
# A pumped part of at most this many image characters, read at the head of the stream, is kept in memory for the
# follower's steps (WalStream.fresh): a step then applies it without reading the log back. Larger parts, and the
# full parts of a backlog, are read from the log: the follower holds no second copy of a backlog's images.
STREAM_FRESH_CHARS = 1_000_000


class WalStream:
    """A follower's open reader of a publication's slot, over PostgreSQL's streaming replication protocol
    (psycopg2's LogicalReplicationConnection): changes arrive as they commit, and the decoding goes on
    from where it is instead of from the slot's restart point on every read (engine.wal_capture says
    why that matters). It holds the slot and the publication's advisory lock while open: other readers
    take the count it stored. Stored first, confirmed after (send_feedback), as with the SQL reader."""

    def __init__(self, server: Server, account: str) -> None:
        import psycopg2  # noqa: PLC0415 - only followers of WAL publications need it
        from psycopg2.extras import LogicalReplicationConnection  # noqa: PLC0415

        self.server, self.account = server, account
        self.slot = _slot(server, account)
        self.log = _WalLog(server, account)
        self.decoder = wal_capture.PgOutputDecoder(account, sql.TEXT_TABLE)
        self.conn = connections.open_connection(server, autocommit=False)
        self.repl = None
        # The rows of the last part stored (entries_sql's shape, numbered as stored) and their lists' rows, for
        # the steps to take instead of reading them back (SharedWindows.offer); None when it was too large.
        self.fresh: tuple[list[tuple], dict[int, int]] | None = None
        try:
            cursor = self.conn.cursor()
            # Not waiting: the holder is a reader about to finish or another follower's stream; the caller
            # tries again later instead of stalling its loop.
            if not _try_lock(cursor, server, wal_capture.lock_key(self.slot)):
                raise TrxError(f"the slot {self.slot} of {account} on {server.name} is being read elsewhere")
            self.conn.commit()
            self.count, self.stored = self.log.position(cursor)
            self.conn.rollback()
            address = connections.address_for(server)
            self.repl = psycopg2.connect(
                host=address.host,
                port=address.port or 5432,
                dbname=address.database,
                user=address.user,
                password=address.password,
                connection_factory=LogicalReplicationConnection,
                connect_timeout=address.connect_timeout,
                keepalives=1,
                keepalives_idle=KEEPALIVE_IDLE,
                keepalives_interval=KEEPALIVE_INTERVAL,
                keepalives_count=KEEPALIVE_COUNT,
                tcp_user_timeout=keepalive_ms(),
            )
            self.stream = self.repl.cursor()
            self.stream.start_replication(
                slot_name=self.slot, decode=False, options=wal_capture.stream_options(self.slot), status_interval=1
            )
        except BaseException:
            self.close()
            raise

    def pump(self, limit: int = wal_capture.PEEK_CHANGES) -> int:
        """Store every transaction that arrived (up to about `limit` messages, STREAM_PUMP_MESSAGES at a time);
        returns how many."""
        stored = 0
        self.fresh = None
        for _ in range(max(1, -(-limit // STREAM_PUMP_MESSAGES))):
            count, more = self._pump_part(min(limit, STREAM_PUMP_MESSAGES))
            stored += count
            if not more:
                break
        return stored

    def _pump_part(self, limit: int) -> tuple[int, bool]:
        """Store what arrived of up to `limit` messages: (transactions stored, whether `limit` were read)."""
        messages: list[bytes] = []
        while len(messages) < limit:
            message = self.stream.read_message()
            if message is None:
                break
            messages.append(message.payload)
        txns = self.decoder.feed(messages, after=self.stored)
        if txns:
            before = self.count
            cursor = self.conn.cursor()
            try:
                self.count = self.log.store(cursor, txns, self.count, self.decoder.last_end)
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise
            self.stored = self.decoder.last_end
            # Kept only once committed (what a step takes from memory is what the log holds under those numbers),
            # and only at the head of the stream: a full part is a backlog's, which its step reads from the log.
            if len(messages) < limit:
                rows, parts = self.log.rows(txns, before)
                self.fresh = (rows, parts) if _image_size(rows) <= STREAM_FRESH_CHARS else None
        confirm = self.decoder.last_end
        if len(messages) < limit and not self.decoder.in_transaction:
            # Caught up, everything read is stored: the server's keepalives carry how far it has decoded (past
            # other tables' transactions too); confirming that keeps the slot from holding WAL while the
            # publication's tables are idle. A transaction committing later ends after it and is still sent.
            confirm = max(confirm, int(self.stream.wal_end or 0))
        if confirm:
            self.stream.send_feedback(flush_lsn=confirm)
        return len(txns), len(messages) >= limit

    def receive(
        self,
        limit: int,
        until: int,
        quiet: float,
        confirmed: list[int] | None = None,
        stop: threading.Event | None = None,
    ) -> tuple[list[bytes], bool]:
        """Up to `limit` messages, taken as they arrive: (the messages, whether the server has sent everything up to
        the WAL position `until`). With none waiting, the server is asked how far it has sent (it answers at once
        with a keepalive, whose position follows every message sent before it); it returns early with
        STREAM_PUMP_MESSAGES or more in hand (applied while the server decodes on), or after `quiet` seconds without
        a message, or once `stop` is set. `confirmed`: the position stored so far, sent to the server as it moves."""
        messages: list[bytes] = []
        silent_until = time.monotonic() + quiet
        asked_at = 0.0
        told = 0
        while len(messages) < limit and not (stop is not None and stop.is_set()):
            if confirmed is not None and confirmed[0] > told:
                told = confirmed[0]
                self.stream.send_feedback(flush_lsn=told)
            message = self.stream.read_message()
            if message is not None:
                messages.append(message.payload)
                silent_until = time.monotonic() + quiet
                continue
            if int(self.stream.wal_end or 0) >= until:
                return messages, True
            if len(messages) >= STREAM_PUMP_MESSAGES:
                return messages, False
            now = time.monotonic()
            if now >= silent_until:
                return messages, False
            if now - asked_at >= 1.0:  # asked again when no answer came within a second
                self.stream.send_feedback(reply=True)
                asked_at = now
            select.select([self.fileno()], [], [], min(silent_until - now, 0.2))
        return messages, False

    def fileno(self) -> int:
        """The replication connection's socket: readable when the server sent something (a follower waits on it)."""
        if self.repl is None:
            raise TrxError(f"the stream of {self.account} on {self.server.name} is not open")
        return int(self.repl.fileno())

    def close(self) -> None:
        # The replication connection first: a reader that then takes the lock waits for the slot to be free.
        with contextlib.suppress(Exception):
            if self.repl is not None:
                self.repl.close()
        with contextlib.suppress(Exception):
            self.conn.rollback()
            self.conn.cursor().execute(_d(self.server).unlock_all_sql()).fetchall()
            self.conn.commit()
        with contextlib.suppress(Exception):
            self.conn.close()


LIVE_TIMEOUT = "1200ms"  # a live slot read: within core.live.READ_TIMEOUT; more is reported unknown, never guessed


@dataclass(frozen=True)
class WalBacklog:
    """What a WAL publication's slot holds, read live: `stored` transactions are in the log (RTSEQ), `pending`
    committed ones are still in the slot (the publication's count is their sum), the oldest of them committed at
    `oldest_pending_at`; `complete` False: `pending` is a lower bound and `note` says why."""

    slot: str
    stored: int
    pending: int
    oldest_pending_at: datetime | None
    complete: bool
    active: bool  # a follower's stream holds the slot
    wal_status: str  # reserved, extended, unreserved, lost ("" when the slot is gone)
    safe_wal_size: int | None
    retained_bytes: int | None  # WAL the slot keeps on the publisher (its end minus restart_lsn)
    unread_bytes: int  # WAL written after the slot's confirmed position
    note: str = ""

    @property
    def count(self) -> int:
        return self.stored + self.pending


def wal_backlog(server: Server, account: str) -> WalBacklog:
    """Read the slot without consuming it: its WAL figures, and the committed transactions of the publication it
    holds after what the log stored, counted in the server (wal_capture.backlog_sql). A slot a follower streams
    cannot be peeked: a temporary copy of it at its confirmed position is. Bounded by LIVE_TIMEOUT (a statement
    timeout is raised, and the caller reports the count unknown)."""
    slot = _slot(server, account)
    log = _WalLog(server, account)
    with connections.connect(server, readonly=True, autocommit=False) as conn:
        cursor = conn.cursor()
        cursor.execute(_d(server).statement_timeout_sql(LIVE_TIMEOUT))
        stored, stored_lsn = log.position(cursor)
        row = cursor.execute(wal_capture.slot_state_sql(), [slot]).fetchone()
        if row is None:
            return WalBacklog(slot, stored, 0, None, False, False, "", None, None, 0,
                              note=f"the replication slot {slot} is gone: changes since cannot be read")  # fmt: skip
        active, status, safe, retained, unread = bool(int(row[0])), str(row[1] or ""), row[2], row[3], row[4]
        figures: dict = {
            "active": active, "wal_status": status, "safe_wal_size": None if safe is None else int(safe),
            "retained_bytes": None if retained is None else int(retained), "unread_bytes": int(unread or 0),
        }  # fmt: skip
        if status == "lost":
            lost = f"the replication slot {slot} lost WAL it needed: changes since cannot be read"
            return WalBacklog(slot, stored, 0, None, False, **figures, note=lost)
        target, copy = slot, None
        try:
            if active:
                copy = wal_capture.copy_name(slot, secrets.token_hex(4))
                try:
                    cursor.execute(wal_capture.copy_slot_sql(), [slot, copy]).fetchall()
                except pyodbc.Error as exc:
                    copy = None
                    return WalBacklog(slot, stored, 0, None, False, **figures, note=(
                        f"a follower streams the slot and it could not be copied to count it "
                        f"({connections.driver_message(exc)}): counted from what the follower stored, "
                        f"{int(unread or 0)} bytes of WAL not yet confirmed"))  # fmt: skip
                target = copy
            pending, oldest, changes = cursor.execute(
                wal_capture.backlog_sql(account), [stored_lsn, target, wal_capture.PEEK_CAP, slot]
            ).fetchone()
        finally:
            conn.rollback()
            if copy is not None:
                with contextlib.suppress(pyodbc.Error):
                    cursor.execute(_d(server).drop_slot_sql(), [copy]).fetchall()
                    conn.commit()
    complete = int(changes) < wal_capture.PEEK_CAP
    note = "" if complete else f"at least: counted in the first {wal_capture.PEEK_CAP} changes the slot holds"
    return WalBacklog(slot, stored, int(pending), aware(oldest) if oldest is not None else None, complete,
                      **figures, note=note)  # fmt: skip


ADVANCE_TIMEOUT = "10s"


def advance_idle_slot(server: Server, account: str) -> bool:
    """The heartbeat of an idle publication read by syncs: when nothing it publishes waits in its slot, move the
    slot to the WAL flushed now, so that other tables' writes do not pile up behind it. Never waits for the slot
    (a reader or a stream holding it is moving it anyway); returns whether it moved."""
    slot = _slot(server, account)
    d, key = _d(server), wal_capture.lock_key(slot)
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        if not _try_lock(cursor, server, key):
            conn.rollback()
            return False
        try:
            conn.commit()
            if _streamed(cursor, server, account, slot):
                return False
            cursor.execute(d.statement_timeout_sql(ADVANCE_TIMEOUT))
            position = cursor.execute(wal_capture.slot_position_sql(), [slot]).fetchone()
            confirmed, flushed = int(position[0]), int(position[1])
            stored = _WalLog(server, account).position(cursor)[1]
            if flushed <= confirmed:
                return False
            # Flushed was taken first: a transaction of the publication that committed before it is in this peek.
            pending = cursor.execute(
                wal_capture.backlog_sql(account), [stored, slot, wal_capture.PEEK_CAP, slot]
            ).fetchone()[0]
            if int(pending):
                return False
            cursor.execute(wal_capture.advance_sql(), [slot, flushed]).fetchall()
            conn.commit()
            return True
        finally:
            conn.rollback()
            cursor.execute(d.unlock_sql(), [key]).fetchall()
            conn.commit()


def visible_count(server: Server, account: str, wal: bool | None = None) -> int:
    """How many transactions a reader would find, read without numbering or locking anything (a probe).
    `wal`: whether the publication captures from the WAL, when the caller knows (None: looked up)."""
    d, schema = _d(server), schema_of(server)
    with connections.connect(server, readonly=True) as conn:
        cursor = conn.cursor()
        count = int(cursor.execute(sql.visible_count_sql(d, account, schema)).fetchone()[0])
        if d.decodes_wal and (uses_wal(server, account) if wal is None else wal):
            pending = cursor.execute(wal_capture.pending_sql(), [_slot(server, account)]).fetchone()
            return count + (1 if pending is not None and int(pending[0] or 0) else 0)
        if d.single_writer and cursor.execute(sql.first_unnumbered_sql(d, account, schema)).fetchone()[0]:
            count += 1  # entries the sequencer has not numbered yet make at least one more transaction
    return count


def oldest_count(server: Server, account: str) -> int | None:
    d = _d(server)
    with connections.connect(server, readonly=True) as conn:
        value = conn.cursor().execute(sql.oldest_count_sql(d, account, schema_of(server))).fetchone()[0]
    return None if value is None else int(value)


# A window bounded by bytes is read in parts: the first of FIRST_READ_ROWS entries, each next one of as many as the
# bytes left would hold at the sizes read so far. A log of large images is then never read max_rows entries at a time
# (50,000 images of a megabyte) only to keep the few that fit.
FIRST_READ_ROWS = 1000


def read_transactions(
    server: Server,
    account: str,
    after: int,
    upto: int,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> list[sql.Transaction]:
    """The transactions after < N <= upto, in order; with bounds, only the whole transactions that fit within
    `max_rows` log entries and `max_bytes` of row images (at least the first one, however large). What is read
    stays within the bounds too (the bytes' to about one part's rows): see FIRST_READ_ROWS."""
    return sql.group_transactions(read_window(server, account, after, upto, max_rows, max_bytes))


# A window holding a transaction of more image characters than this is read entry by entry: a run's joined images
# come back as one value, which the server sends within its max_allowed_packet.
PACKED_TRANSACTION_CHARS = 4 * 1024 * 1024


def read_for_apply(
    server: Server,
    account: str,
    after: int,
    upto: int,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> list[sql.Transaction]:
    """read_transactions for an apply. Where the publisher's server joins runs of images (Dialect.log_runs_sql) the
    window is read in runs (sql.PackedTransaction): one value per run of a transaction's consecutive entries of one
    table and kind instead of a row per entry, the bulk apply sending those images as the server joined them. The
    window is the same: whole transactions within `max_rows` entries and `max_bytes` of images (the first however
    large)."""
    d = _d(server)
    schema = schema_of(server)
    if sql.log_runs_sql(d, account, after, upto, schema) is None:
        # Read entry by entry; runs worth sending as text are joined here, with no image decoded.
        return sql.read_in_runs(read_window(server, account, after, upto, max_rows, max_bytes))
    with connections.connect(server, readonly=True) as conn:
        cursor = conn.cursor()
        # The window's entries are summed up to its bound only (see entries_bound_sql).
        limit = max(sql.TEXT_RUN_ROWS, max_rows + 1 if max_rows is not None else 0)
        bound, counted = cursor.execute(
            sql.entries_bound_sql(d, account, after, upto, limit, schema, counted=True)
        ).fetchone()
        if bound is None:
            return []
        if int(counted) < sql.TEXT_RUN_ROWS:
            # A few entries: no run would be sent as text; they are read as they are (whole up to `upto`).
            few = [tuple(r) for r in cursor.execute(sql.entries_sql(d, account, after, upto, schema))]
            return sql.group_transactions(sql.bounded_window(few, max_rows, max_bytes, False)[0])
        end = min(upto, int(bound)) if max_rows is not None else upto
        found = sql.log_runs_sql(d, account, after, end, schema)
        assert found is not None
        kept, entries, size, largest, longest, last = 0, 0, 0, 0, 0, after
        for n, rows, chars in cursor.execute(found[0]).fetchall():
            rows, chars = int(rows), int(chars or 0)
            if kept and not _fits(entries + rows, size + chars, max_rows, max_bytes):
                break
            kept, entries, size, last = kept + 1, entries + rows, size + chars, int(n)
            largest, longest = max(largest, chars), max(longest, rows)
        if not kept:
            return []
        if longest < sql.TEXT_RUN_ROWS:
            # Small transactions: no run would be sent as text; their entries are read as they are.
            return sql.group_transactions(
                [tuple(r) for r in cursor.execute(sql.entries_sql(d, account, after, last, schema))]
            )
        txns = None
        if largest <= PACKED_TRANSACTION_CHARS:
            runs = sql.log_runs_sql(d, account, after, last, schema)
            assert runs is not None
            for statement in runs[1][:-1]:
                cursor.execute(statement)
            txns = sql.packed_transactions(cursor.execute(runs[1][-1]).fetchall())
    if txns is None or len(txns) != kept:  # a run the server cut, or a transaction too large to join
        return read_transactions(server, account, after, upto, max_rows, max_bytes)
    return list(txns)


class ReadAhead:
    """A sync's next log window, read on a thread of its own while the current one applies: reading (the
    publisher's query, the driver's fetch, joining runs) and applying (the subscriber's statements) overlap instead
    of taking turns. Only the publisher is read there, on the thread's own connection, and nothing of the catalog.
    A window read ahead is taken only by a read of that very window (after the same count, up to the same bound):
    a numbered transaction never changes, so it is what reading it then would give; any other read drops it."""

    def __init__(self, server: Server, account: str, max_rows: int | None, max_bytes: int | None) -> None:
        self.server, self.account, self.max_rows, self.max_bytes = server, account, max_rows, max_bytes
        self._thread: threading.Thread | None = None
        self._window: tuple[int, int] | None = None
        self._found: list[sql.Transaction] | None = None
        self._error: BaseException | None = None
        self.taken = 0  # windows a read took from here (what the overlap served)

    def read(self, after: int, upto: int) -> list[sql.Transaction]:
        """read_for_apply's window after < N <= upto: the one read ahead when it is that one."""
        window, found, error = self._wait()
        if window == (after, upto):
            if error is not None:
                raise error
            if found is not None:
                self.taken += 1
                return found
        return read_for_apply(self.server, self.account, after, upto, self.max_rows, self.max_bytes)

    def ahead(self, after: int, upto: int) -> None:
        """Start reading the window after < N <= upto."""
        self._wait()
        self._window = (after, upto)

        def read() -> None:
            try:
                self._found = read_for_apply(self.server, self.account, after, upto, self.max_rows, self.max_bytes)
            except BaseException as exc:  # raised by the read that takes this window, if one does
                self._error = exc

        self._thread = threading.Thread(target=read, name=f"read-ahead {self.server.name}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Wait for a read still going and drop what it read."""
        self._wait()

    def _wait(self) -> tuple[tuple[int, int] | None, list[sql.Transaction] | None, BaseException | None]:
        if self._thread is not None:
            self._thread.join()
        taken = (self._window, self._found, self._error)
        self._thread, self._window, self._found, self._error = None, None, None, None
        return taken


def read_window(
    server: Server,
    account: str,
    after: int,
    upto: int,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> list[Sequence[Any]]:
    """read_transactions' log entries as entries_sql reads them, not yet grouped into transactions."""
    d = _d(server)
    schema = schema_of(server)
    with connections.connect(server, readonly=True) as conn:
        cursor = conn.cursor()

        def read(start: int, end: int, limit: int | None = None) -> list[Sequence[Any]]:
            if limit is not None:  # the window's end at `limit` entries first: see entries_bound_sql
                bound = cursor.execute(sql.entries_bound_sql(d, account, start, end, limit, schema)).fetchone()[0]
                if bound is None:
                    return []
                end = min(end, int(bound))
            # Row by row: the driver's rows and their tuples are not both held for the whole part.
            return [tuple(r) for r in cursor.execute(sql.entries_sql(d, account, start, end, schema, limit))]

        if max_rows is None and max_bytes is None:
            return read(after, upto)
        rows: list[Sequence[Any]] = []
        size, start, part = 0, after, FIRST_READ_ROWS
        while start < upto:
            room = None if max_rows is None else max_rows - len(rows)
            left = None if max_bytes is None else max_bytes - size
            limit = None if room is None else room + 1
            if left is not None:
                part = left * len(rows) // max(1, size) + 1 if rows else part
                limit = part + 1 if limit is None else min(limit, part + 1)
            read_rows = read(start, upto, limit)
            truncated = limit is not None and len(read_rows) >= limit
            over = (room is not None and len(read_rows) > room) or (left is not None and _image_size(read_rows) > left)
            window, read_whole = sql.bounded_window(read_rows, room, left, truncated)
            if read_whole:
                if rows:
                    break  # the next transaction is larger than this part: the window ends before it
                if truncated and not over:
                    part *= 4  # the first transaction goes on past this part only: read a larger one
                    continue
                rows = read(after, after + 1)  # one transaction larger than the bounds: applied whole, alone
                break
            rows.extend(window)
            size += _image_size(window)
            # Go on only when this part stopped at its own limit, not at the window's bounds.
            if not window or not truncated or over:
                break
            start = int(window[-1][0])
    return rows


class SharedWindows:
    """The log windows one follower's steps read, shared by the subscriptions of a publication: its subscribers
    mostly stand at the same level (under a steady load, at the publisher's), and each step would read and decode
    the same transactions again. The last window read of each publication that more than one followed subscription
    takes (`followed`) is kept; a step whose level lies in it takes its transactions from there, within its own
    bounds, and reads only the rest. One step reads a publication's log at a time, so the others find its window.

    Kept: one window per such publication, bounded as every window is (TRX_BATCH_ROWS, TRX_BATCH_BYTES); the
    transactions are shared read-only (an apply does not change them)."""

    # A kept window older than this is read again: steps of one round share it; a log made anew meanwhile (the
    # publication dropped and published again under its name: another `log`) never is.
    KEEP_SECONDS = 5.0

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.shared: set[tuple[str, str]] = set()
        # The publications whose follower's stream offers what it stored (`offer`); with one subscription, a window
        # read from the log is not kept for them: nobody else would take it, and a backlog's would hold memory.
        self.streamed: set[tuple[str, str]] = set()
        self.locks: dict[tuple[str, str], threading.Lock] = {}
        # publication -> (its log's identity, when read, its last window: (transaction, its log entries, its image
        # characters) in order)
        self.kept: dict[tuple[str, str], tuple[object, float, list[tuple[sql.Transaction, int, int]]]] = {}

    def followed(self, publications: Sequence[tuple[str, str]], streamed: Iterable[tuple[str, str]] = ()) -> None:
        """The publications of the subscriptions followed now (one pair per subscription), and those of them whose
        WAL the follower streams (their stream offers what it stored: `offer`)."""
        shared = {key for key, subscriptions in Counter(publications).items() if subscriptions > 1}
        with self.guard:
            self.shared, self.streamed = shared, set(streamed) & set(publications)
            for key in [k for k in self.kept if k not in shared and k not in self.streamed]:
                del self.kept[key]

    def offer(self, key: tuple[str, str], log: object, rows: list[tuple], parts: dict[int, int]) -> None:
        """What a follower's WalStream just stored of the publication `key` (entries_sql's rows, numbered as stored,
        and their lists' rows), kept as the publication's window (after the window kept, when it follows on, within
        STREAM_FRESH_CHARS of images): its subscribers' steps apply it without reading the log back. `log`: the
        identity of the publication's log, as a step gives it to read."""
        window = _sized(rows, parts)
        with self.guard:
            self.streamed.add(key)
            kept_log, _at, kept = self.kept.get(key, (None, 0.0, []))
            if window and kept and kept_log == log and kept[-1][0].count + 1 == window[0][0].count:
                # The parts pumped since a step last took them: joined, the oldest dropped past the bound.
                window = kept + window
                size = sum(images for _txn, _rows, images in window)
                while len(window) > 1 and size > STREAM_FRESH_CHARS:
                    size -= window.pop(0)[2]
            self.kept[key] = (log, time.monotonic(), window)

    def read(
        self,
        server: Server,
        account: str,
        after: int,
        upto: int,
        max_rows: int | None = None,
        max_bytes: int | None = None,
        *,
        log: object = None,
    ) -> list[sql.Transaction]:
        """read_transactions, from the kept window as far as it goes; `log`: the identity of the publication's log
        (its catalog row), a window of another is not taken."""
        key = (server.name, account)
        with self.guard:
            shared = key in self.shared
            lock = self.locks.setdefault(key, threading.Lock()) if shared or key in self.streamed else None
        if lock is None:
            return read_for_apply(server, account, after, upto, max_rows, max_bytes)
        with lock:
            found: list[sql.Transaction] = []
            entries = size = 0
            kept_log, read_at, kept = self.kept.get(key, (None, 0.0, []))
            if kept_log != log or time.monotonic() - read_at > self.KEEP_SECONDS:
                kept = []
            for txn, rows, images in kept:
                if txn.count <= after + len(found):
                    continue
                if txn.count != after + len(found) + 1 or txn.count > upto:
                    break
                if found and not _fits(entries + rows, size + images, max_rows, max_bytes):
                    return found
                found.append(txn)
                entries, size = entries + rows, size + images
            start = after + len(found)
            if start >= upto:
                return found
            room = None if max_rows is None else max_rows - entries
            left = None if max_bytes is None else max_bytes - size
            if found and ((room is not None and room <= 0) or (left is not None and left <= 0)):
                return found
            if not shared:  # streamed, one subscription: the rest is read as an unshared step reads it
                return found + read_for_apply(server, account, start, upto, room, left)
            window = _sized(read_window(server, account, start, upto, room, left))
            with self.guard:
                if key in self.shared:
                    self.kept[key] = (log, time.monotonic(), window)
            for txn, rows, images in window:
                if found and not _fits(entries + rows, size + images, max_rows, max_bytes):
                    break  # over what the kept part left (read alone, it would be taken whole): next time
                found.append(txn)
                entries, size = entries + rows, size + images
            return found


def _fits(entries: int, size: int, max_rows: int | None, max_bytes: int | None) -> bool:
    return (max_rows is None or entries <= max_rows) and (max_bytes is None or size <= max_bytes)


def _sized(
    rows: Sequence[Sequence[Any]], parts: dict[int, int] | None = None
) -> list[tuple[sql.Transaction, int, int]]:
    """Entries as transactions, each with its count of log entries and of image characters (`parts`: the rows of the
    lists among them, by their place, when the caller knows them)."""
    counts: dict[int, list[int]] = {}
    for row in rows:
        figures = counts.setdefault(int(row[0]), [0, 0])
        figures[0] += 1
        figures[1] += len(row[6] or "") + len(row[7] or "")
    return [(txn, *counts[txn.count]) for txn in sql.read_in_runs(rows, parts)]  # type: ignore[misc]


def _image_size(rows: Sequence[Sequence[Any]]) -> int:
    """The image text of entries_sql's rows, as bounded_window counts it."""
    return sum(len(r[6] or "") + len(r[7] or "") for r in rows)


def purge_log(server: Server, account: str, upto: int) -> int:
    """Delete the log of the transactions numbered at or below `upto`; returns how many went."""
    d = _d(server)
    schema = schema_of(server)
    names = sql.log_names(d, account)
    with connections.connect(server, readonly=True) as conn:
        q = d.quote
        before = (
            conn.cursor()
            .execute(f"SELECT COUNT(*) FROM {d.qualify(names.tx, schema)} WHERE {q('N')} <= ?", [upto])
            .fetchone()[0]
        )
    run_in_transaction(server, [(text, [upto]) for text in sql.purge_sql(d, account, schema)])
    run_each(server, sql.purge_history_sql(_log_d(server, account), account, schema))
    if settings.MARIADB_REGISTRY_TRUNCATE:
        clear_registry(server)
    return int(before)


def clear_registry(server: Server) -> bool:
    """Empty the server's registry of versioning transactions (settings.MARIADB_REGISTRY_TRUNCATE) when no table of
    the server but the product's logs is versioned by transaction; whether it did. A refusal (no DROP privilege on
    the registry) is logged and leaves the purge done."""
    d = _d(server)
    statements = d.registry_purge_sql(sql.log_names(d, "").log)
    if statements is None:
        return False
    others, truncate = statements
    with connections.connect(server) as conn:
        cursor = conn.cursor()
        if int(cursor.execute(others).fetchone()[0]):
            log.info("%s: the transaction registry is kept (other tables are versioned by transaction)", server.name)
            return False
        try:
            cursor.execute(truncate)
        except pyodbc.Error as exc:
            log.warning(
                "%s: the transaction registry was not emptied: %s", server.name, connections.driver_message(exc)
            )
            return False
    return True

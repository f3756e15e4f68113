"""Transactional replication (pure SQL generation and row decoding; no I/O here).

A publication (an account of SYS_REPL_ACCOUNTS) keeps its log in the publisher's database:

- `RTSEQ_<account>`: one row, N = how many transactions the publication has. N never wraps; the
  level a subscriber sees is levels.level_of(N) (1 .. 0x7fffffff, then 1 again).
- `RTTX_<account>`: one row per replicated transaction: TXID (the database's id of the writing
  transaction), N (its place in the publication), ORIGIN (the server that made the change) and AT
  (UTC, when it was numbered; on PostgreSQL and MariaDB when it first changed a published table).
- `RTLOG_<account>`: the transaction's entries in the order they were made: SEQ, TXID, TBL, OP and
  the row images NEW / OLD as JSON. OP is I/U/D for a row, T for a REPL_TEXT call (NEW = the
  statement and its arguments) and C for a published table's creating statement (NEW = its
  columns and primary key), so a subscriber creates the table before its data arrives.

Triggers `<table>_I`, `<table>_U`, `<table>_D` (the reference's names) write the entries inside the
writing transaction. How a transaction gets its N decides the order subscribers replay in, and it must
be commit order:

- PostgreSQL: the first entry of a transaction inserts its RTTX row (TXID = pg_current_xact_id(), N
  NULL, AT = that moment); a transaction-local setting tells its later entries that the row is there.
  Writers touch no row another writer touches, so they never wait for each other. Readers number:
  before reading, a reader (one at a time, holding the RTSEQ row) gives the committed transactions
  that have no number yet the next numbers, in the order of their last entry. A transaction that
  changed a row another one had changed waited for that one's commit before logging, so it comes
  after it: every row's changes replay in the order they were made, with no gaps (a rolled-back
  transaction leaves no row). Inserts and deletes are logged by statement triggers over the
  statement's transition table (one INSERT … SELECT per statement), updates by row triggers.
- MariaDB: RTLOG is versioned with transaction precision (`TXID bigint unsigned GENERATED ALWAYS AS ROW
  START`, `WITH SYSTEM VERSIONING`), so the server itself stores the writing transaction's id in each entry:
  the id a trigger could not otherwise read (information_schema.INNODB_TRX is a cache refreshed at most every
  0.1 s). Each entry then makes sure of its transaction's RTTX row (N NULL) by reading its own TXID back
  (LAST_INSERT_ID(), one key lookup) and an INSERT … ON DUPLICATE KEY UPDATE that changes nothing when the row
  is there: not once per transaction, as a session variable could not tell a transaction's first entry from
  one whose statement failed and took back the row it added. Writers touch no row another writer touches.
  Readers number as on PostgreSQL, in statements of their own (Dialect.number_steps_sql): read committed,
  holding the RTSEQ row, they give the committed transactions with no number yet the next numbers in the
  order of their last entry, by key, so they neither wait for writers under way nor make them wait. Not the
  order of the server's registry of commits (mysql.transaction_registry): a transaction that met a duplicate
  key after it logged is missing from it. RTLOG rows are never updated; a purge's deletes become history rows,
  which the purge then deletes (DELETE HISTORY). The server registers each versioning transaction in
  mysql.transaction_registry, a log table no statement may delete from: one row per captured transaction
  stays there. A log made by an earlier version (RTLOG not versioned) keeps working as it was made
  (dialects.mysql.EarlierLog, chosen per log by transactional.capture): the first entry of a transaction locks
  the RTSEQ row and takes the next number, so its writers commit one at a time, and a reader closes the
  current number before it reads (close_sql). Publishing it again makes a versioned log.
- SQLite has one writer at a time. Entries are written without a number; the sequencer (run by the
  console under BEGIN IMMEDIATE, i.e. holding the write lock) numbers everything written since its
  last pass in SEQ order, one transaction per run of entries with the same origin. Transactions
  committed between two passes therefore share a number: they are replayed together, atomically.

Changes that replication itself applies are either not captured (`nolog`: a subscriber replaying its
publisher) or captured with the origin they came from (a publisher replaying an updateable
subscriber, so the other subscribers get them and the originator does not). PostgreSQL keeps that in
transaction-local settings, MariaDB in session variables, SQLite in the one-row table RTCTX.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from replication_admin.engine import levels, wal_capture
from replication_admin.engine.compare import family_of
from replication_admin.engine.dialects import Dialect, ImageColumn
from replication_admin.engine.objects import (
    NOLOG_SETTING,
    ORIGIN_SETTING,
    CaptureObjects,
    bounded_name,
    key_columns,
    new_guid_sql,
)
from replication_admin.engine.objects import ROWGUID_COLUMN as ROWGUID_COLUMN  # re-exported
from replication_admin.engine.schema import Column, Default, Index, TableInfo
from replication_admin.engine.types import LogicalType
from replication_admin.engine.values import binder

SERVER = LogicalType("varchar", length=128)
TABLE = LogicalType("varchar", length=320)
OP = LogicalType("varchar", length=1)
COUNT = LogicalType("bigint")
IMAGE = LogicalType("long_varchar")
TIMESTAMP = LogicalType("timestamp")
CONTEXT_TABLE = "RTCTX"
LEVEL_TABLE = "RTLEVEL"
TEXT_TABLE = "REPL_TEXT"


class TrxError(ValueError):
    """A table or publication cannot be replicated transactionally as asked."""


@dataclass(frozen=True)
class LogNames:
    seq: str
    tx: str
    log: str


def log_names(d: Dialect, account: str) -> LogNames:
    limit = d.max_identifier
    return LogNames(
        seq=bounded_name(f"RTSEQ_{account}", limit),
        tx=bounded_name(f"RTTX_{account}", limit),
        log=bounded_name(f"RTLOG_{account}", limit),
    )


def trigger_names(table: str, limit: int) -> dict[str, str]:
    return {op: bounded_name(f"{table}_{op}", limit) for op in ("I", "U", "D")}


def _now(d: Dialect) -> str:
    return d.clock_now_sql


def _col(d: Dialect, name: str, logical: LogicalType, extra: str = "") -> str:
    return f"{d.quote(name)} {d.render_type(logical)}{extra}"


def _serial(d: Dialect) -> str:
    return d.serial_key_ddl("SEQ")


def log_ddl(d: Dialect, account: str, schema: str = "") -> list[str]:
    """The publication's log tables (and PostgreSQL's commit-time numbering)."""
    names = log_names(d, account)
    q = d.quote
    seq, tx, log = (d.qualify(n, schema) for n in (names.seq, names.tx, names.log))
    tx_n = "" if d.numbers_when_read else " NOT NULL"
    txid, log_columns, log_options = d.log_txid_ddl()
    ddl = [
        f"CREATE TABLE {seq} ({q('ID')} integer NOT NULL PRIMARY KEY, {_col(d, 'N', COUNT, ' NOT NULL')}, "
        f"{_col(d, 'CONN', COUNT)}, {_col(d, 'ORIGIN', SERVER)})",
        f"INSERT INTO {seq} ({q('ID')}, {q('N')}) VALUES (1, 0)",
        f"CREATE TABLE {tx} ({_col(d, 'TXID', COUNT, ' NOT NULL PRIMARY KEY')}, {_col(d, 'N', COUNT, tx_n)}, "
        f"{_col(d, 'ORIGIN', SERVER)}, {_col(d, 'AT', TIMESTAMP)})",
        f"CREATE UNIQUE INDEX {q(bounded_name(names.tx + '_N', d.max_identifier))} ON {tx} ({q('N')})",
        # Entries are found by (TXID, SEQ) only; a key of SEQ alone would be a second index for every entry.
        f"CREATE TABLE {log} ({d.serial_column_ddl('SEQ')}, {txid}, "
        f"{_col(d, 'TBL', TABLE, ' NOT NULL')}, {_col(d, 'OP', OP, ' NOT NULL')}, "
        f"{_col(d, 'NEW', IMAGE)}, {_col(d, 'OLD', IMAGE)}, {_col(d, 'ORIGIN', SERVER)}{log_columns}){log_options}",
        # (TXID, SEQ): a transaction's entries in order, and its last entry in one probe (the reader's numbering).
        f"CREATE INDEX {q(bounded_name(names.log + '_TXID', d.max_identifier))} ON {log} ({q('TXID')}, {q('SEQ')})",
    ]
    return ddl + d.numbering_ddl(names, schema)


def drop_log_ddl(d: Dialect, account: str, schema: str = "") -> list[str]:
    names = log_names(d, account)
    drops = [f"DROP TABLE IF EXISTS {d.qualify(n, schema)}" for n in (names.log, names.tx, names.seq)]
    return drops + d.drop_numbering_ddl(names, schema)


def context_ddl(d: Dialect, schema: str = "") -> list[str]:
    """SQLite's replay context (PostgreSQL and MariaDB keep it in settings / session variables)."""
    return d.replay_context_ddl(d.qualify(CONTEXT_TABLE, schema))


def drop_context_ddl(d: Dialect, schema: str = "") -> list[str]:
    """The replay context table's drop, where the dialect keeps one (context_ddl)."""
    return [f"DROP TABLE IF EXISTS {d.qualify(CONTEXT_TABLE, schema)}"] if context_ddl(d, schema) else []


def drop_text_table_ddl(d: Dialect, schema: str = "") -> list[str]:
    return [f"DROP TABLE IF EXISTS {d.qualify(TEXT_TABLE, schema)}"]


def replay_context_sql(d: Dialect, nolog: bool, origin: str | None, schema: str = "") -> list[str]:
    """Statements that open an apply transaction: what the capture triggers should do with its changes."""
    return d.replay_context_sql(nolog, origin, d.qualify(CONTEXT_TABLE, schema))


def reset_context_sql(d: Dialect, schema: str = "") -> list[str]:
    """Run before committing an apply transaction (MariaDB's variables outlive transactions)."""
    return d.reset_context_sql(d.qualify(CONTEXT_TABLE, schema))


# --- capture triggers -------------------------------------------------------------------------------------


def _image(d: Dialect, table: TableInfo, ref: str) -> str:
    return d.row_image_sql(ref, [(c.name, family_of(c.logical)) for c in table.columns])


def row_image_sql(d: Dialect, table: TableInfo, ref: str) -> str:
    """The row `ref` (a trigger's row, or a table's alias in a SELECT) as the JSON image the capture logs."""
    return _image(d, table, ref)


@dataclass(frozen=True)
class _Tables:
    """The quoted tables a capture trigger writes (RTCTX only matters where it exists)."""

    seq: str
    tx: str
    log: str
    ctx: str


def _tables(d: Dialect, names: LogNames, schema: str) -> _Tables:
    seq, tx, log = (d.qualify(n, schema) for n in (names.seq, names.tx, names.log))
    return _Tables(seq, tx, log, d.qualify(CONTEXT_TABLE, schema))


def _entry(d: Dialect, names: LogNames, schema: str, table: str, op: str, new: str, old: str, local: str) -> str:
    """The trigger statements that log one entry for the current transaction."""
    return d.capture_entry_sql(_tables(d, names, schema), table, op, new, old, local)


def capture_objects(d: Dialect, account: str, table: TableInfo, local: str) -> CaptureObjects:
    """The I/U/D triggers that log a published table's changes into the account's log."""
    key_columns(table)  # refuses a table without a primary key
    names = log_names(d, account)
    schema = table.schema
    triggers = trigger_names(table.name, d.max_identifier)
    src = d.qualify(table.name, schema)
    new, old = _image(d, table, "NEW"), _image(d, table, "OLD")
    bodies = {
        "I": ("AFTER INSERT", _entry(d, names, schema, table.name, "I", new, "NULL", local)),
        "U": ("AFTER UPDATE", _entry(d, names, schema, table.name, "U", new, old, local)),
        "D": ("AFTER DELETE", _entry(d, names, schema, table.name, "D", "NULL", old, local)),
    }
    create: list[str] = []
    drop: list[str] = []
    for op, (when, body) in bodies.items():
        if d.has_transition_tables and op in ("I", "D"):
            # A bulk insert or delete is logged by one INSERT … SELECT over the statement's rows. Updates stay
            # row triggers: a transition table does not pair a row's old image with its new one.
            rows = "rt_rows"
            families = [(c.name, family_of(c.logical)) for c in table.columns]
            body = d.capture_rows_sql(_tables(d, names, schema), table.name, op, rows, local, families)
            made, dropped = d.statement_trigger_ddl(triggers[op], when, src, rows, body, schema)
        else:
            made, dropped = d.row_trigger_ddl(triggers[op], when, src, body, schema)
        create += made
        drop += dropped
    return CaptureObjects(tuple(triggers.values()), tuple(create), tuple(drop))


def text_table_ddl(d: Dialect, schema: str = "") -> list[str]:
    """REPL_TEXT for applications: inserting (ACCOUNT, STMT, ARGS) logs a call in that transaction."""
    return [
        f"CREATE TABLE IF NOT EXISTS {d.qualify(TEXT_TABLE, schema)} ({_serial(d)}, "
        f"{_col(d, 'ACCOUNT', SERVER, ' NOT NULL')}, {_col(d, 'STMT', IMAGE, ' NOT NULL')}, {_col(d, 'ARGS', IMAGE)})"
    ]


def text_capture_objects(d: Dialect, account: str, local: str, schema: str = "") -> CaptureObjects:
    """A trigger on REPL_TEXT that logs the account's calls (one trigger per publication)."""
    names = log_names(d, account)
    name = bounded_name(f"{names.log}_T", d.max_identifier)
    table = d.qualify(TEXT_TABLE, schema)
    q = d.quote
    new = d.text_image_sql(f"NEW.{q('STMT')}", f"NEW.{q('ARGS')}")
    body = _entry(d, names, schema, "", "T", new, "NULL", local)
    create, drop = d.text_trigger_ddl(name, table, schema, d.literal(account), body)
    return CaptureObjects((name,), tuple(create), tuple(drop))


# --- appending entries from the console (REPL_TEXT, creating statements) ------------------------------------


def append_entry_sql(
    d: Dialect, account: str, op: str, table: str, new: str, local: str, schema: str = ""
) -> list[tuple[str, list[str]]]:
    """(statement, parameters) that log one entry as a transaction of its own, run in one transaction.

    The same bookkeeping as the triggers; on SQLite the sequencer numbers the entry afterwards."""
    return d.append_entry_sql(_tables(d, log_names(d, account), schema), op, table, new, local)


# --- the SQLite sequencer -----------------------------------------------------------------------------------


def unnumbered_sql(d: Dialect, account: str, schema: str = "") -> str:
    names = log_names(d, account)
    q = d.quote
    return (
        f"SELECT {q('SEQ')}, {q('ORIGIN')} FROM {d.qualify(names.log, schema)} "
        f"WHERE {q('TXID')} IS NULL ORDER BY {q('SEQ')}"
    )


def runs_of_origin(rows: Sequence[tuple[int, str | None]]) -> list[tuple[int, int, str | None]]:
    """(first SEQ, last SEQ, origin) for each run of consecutive entries with the same origin."""
    runs: list[tuple[int, int, str | None]] = []
    for seq, origin in rows:
        if runs and runs[-1][2] == origin:
            runs[-1] = (runs[-1][0], seq, origin)
        else:
            runs.append((seq, seq, origin))
    return runs


def number_run_sql(d: Dialect, account: str, schema: str = "") -> list[str]:
    """Parameters: (n, n, origin) for RTTX, then (n, first, last) for RTLOG, then (n,) for RTSEQ."""
    names = log_names(d, account)
    q = d.quote
    return [
        f"INSERT INTO {d.qualify(names.tx, schema)} ({q('TXID')}, {q('N')}, {q('ORIGIN')}, {q('AT')}) "
        f"VALUES (?, ?, ?, {_now(d)})",
        f"UPDATE {d.qualify(names.log, schema)} SET {q('TXID')} = ? "
        f"WHERE {q('TXID')} IS NULL AND {q('SEQ')} BETWEEN ? AND ?",
        f"UPDATE {d.qualify(names.seq, schema)} SET {q('N')} = ? WHERE {q('ID')} = 1",
    ]


# --- reading the log ----------------------------------------------------------------------------------------


def count_sql(d: Dialect, account: str, schema: str = "") -> str:
    names = log_names(d, account)
    return f"SELECT {d.quote('N')} FROM {d.qualify(names.seq, schema)} WHERE {d.quote('ID')} = 1"


def number_sql(d: Dialect, account: str, schema: str = "") -> str:
    """Where transactions are numbered when read: number the committed ones and return the count."""
    return d.number_sql(log_names(d, account), schema)


def number_steps_sql(d: Dialect, account: str, schema: str = "") -> list[str]:
    """Where readers number in statements of their own (MariaDB): Dialect.number_steps_sql; empty elsewhere."""
    return d.number_steps_sql(log_names(d, account), schema)


def log_versioned_sql(d: Dialect, schema: str = "") -> str:
    """Whether a log table (the parameter) is versioned by the server (MariaDB: TXID is the writer's id)."""
    where = "TABLE_SCHEMA = DATABASE()" if not schema else f"TABLE_SCHEMA = {d.literal(schema)}"
    return (
        "SELECT CASE WHEN TABLE_TYPE = 'SYSTEM VERSIONED' THEN 1 ELSE 0 END FROM information_schema.TABLES "
        f"WHERE {where} AND TABLE_NAME = ?"
    )


def visible_count_sql(d: Dialect, account: str, schema: str = "") -> str:
    """How many transactions a reader would count now, without numbering them (read-only: the console's lag)."""
    if not d.numbers_when_read:
        return count_sql(d, account, schema)
    names = log_names(d, account)
    q = d.quote
    unnumbered = f"(SELECT COUNT(*) FROM {d.qualify(names.tx, schema)} WHERE {q('N')} IS NULL)"
    return f"SELECT {q('N')} + {unnumbered} FROM {d.qualify(names.seq, schema)} WHERE {q('ID')} = 1"


def close_sql(d: Dialect, account: str, schema: str = "") -> list[str]:
    """MariaDB: end the current number so no later transaction of its connection joins it (run in one
    transaction; the first statement fails at once when a writer holds the counter)."""
    names = log_names(d, account)
    q = d.quote
    seq = d.qualify(names.seq, schema)
    return [
        f"SELECT {q('N')}, {q('CONN')} FROM {seq} WHERE {q('ID')} = 1 FOR UPDATE NOWAIT",
        f"UPDATE {seq} SET {q('CONN')} = NULL WHERE {q('ID')} = 1",
    ]


def counter_sql(d: Dialect, account: str, schema: str = "") -> str:
    names = log_names(d, account)
    q = d.quote
    return f"SELECT {q('N')}, {q('CONN')} FROM {d.qualify(names.seq, schema)} WHERE {q('ID')} = 1"


def entries_sql(d: Dialect, account: str, after: int, upto: int, schema: str = "", limit: int | None = None) -> str:
    """Entries of the transactions with after < N <= upto, in replay order (at most `limit` of them).

    The bounds are literals (integers), not parameters: a plan made for unknown bounds (a server-side
    prepared statement's generic plan) hash-joins a full scan of the log instead of looking the window's
    transactions up on the indexes of N and TXID."""
    q = d.quote
    return (
        f"SELECT t.{q('N')}, t.{q('ORIGIN')}, t.{q('AT')}, l.{q('SEQ')}, l.{q('TBL')}, l.{q('OP')}, "
        f"l.{q('NEW')}, l.{q('OLD')} {_window_entries(d, account, after, upto, schema)} "
        f"ORDER BY t.{q('N')}, l.{q('SEQ')}" + (f" LIMIT {int(limit)}" if limit is not None else "")
    )


def _window_entries(d: Dialect, account: str, after: int, upto: int, schema: str) -> str:
    """FROM … WHERE of the log entries (l) of the transactions (t) with after < N <= upto."""
    names = log_names(d, account)
    q = d.quote
    tx, log = d.qualify(names.tx, schema), d.qualify(names.log, schema)
    return (
        f"FROM {tx} t JOIN {log} l ON l.{q('TXID')} = t.{q('TXID')} "
        f"WHERE t.{q('N')} > {int(after)} AND t.{q('N')} <= {int(upto)}"
    )


def log_runs_sql(d: Dialect, account: str, after: int, upto: int, schema: str = "") -> tuple[str, list[str]] | None:
    """The window after < N <= upto read in runs, where the dialect can (Dialect.log_runs_sql): (the query of its
    transactions' sizes, the statements that read its runs, the query last)."""
    return d.log_runs_sql(_window_entries(d, account, after, upto, schema))


def entries_bound_sql(
    d: Dialect, account: str, after: int, upto: int, limit: int, schema: str = "", counted: bool = False
) -> str:
    """The N of the transaction holding the `limit`-th entry after `after` (NULL: no entry up to `upto`); `counted`:
    and how many entries up to `upto` there are, counted up to `limit`.

    entries_sql's LIMIT comes after its sort on (N, SEQ), columns of both tables: a server sorts every entry of
    the window before it keeps the first `limit` (MariaDB: the whole backlog, for each part of a bounded read).
    Ordered on N alone, this walks the index of N and stops at `limit` entries; entries_sql bounded by it sorts
    only about `limit` entries and returns the same rows."""
    q = d.quote
    return (
        f"SELECT MAX(w.{q('N')}){', COUNT(*)' if counted else ''} "
        f"FROM (SELECT t.{q('N')} {_window_entries(d, account, after, upto, schema)} "
        f"ORDER BY t.{q('N')} LIMIT {int(limit)}) w"
    )


def bounded_window(
    rows: Sequence[Sequence[Any]], max_rows: int | None, max_bytes: int | None, truncated: bool
) -> tuple[list[Sequence[Any]], bool]:
    """Rows of entries_sql cut before the first transaction that takes the window past `max_rows` entries or
    `max_bytes` of image text (whole transactions only; `truncated`: the read stopped at its limit, so the last
    transaction may be incomplete). Returns (the rows kept, whether the first transaction alone is over the bounds
    and incomplete: it is to be read whole)."""
    size = 0
    first_of_txn = 0
    for i, row in enumerate(rows):
        if i and row[0] != rows[i - 1][0]:
            first_of_txn = i
        size += len(row[6] or "") + len(row[7] or "")
        if (max_rows is not None and i + 1 > max_rows) or (max_bytes is not None and size > max_bytes):
            if first_of_txn:
                return list(rows[:first_of_txn]), False
            break  # the first transaction alone is over the bounds: it is applied whole
    else:
        if not truncated:
            return list(rows), False
        # Read up to the limit: the last transaction may go on past it.
        last = rows[-1][0] if rows else None
        keep = [r for r in rows if r[0] != last]
        return (keep, False) if keep else ([], True)
    last = rows[0][0]
    whole = [r for r in rows if r[0] == last]
    return whole, truncated and len(whole) == len(rows)


def first_unnumbered_sql(d: Dialect, account: str, schema: str = "") -> str:
    """SQLite: the first entry the sequencer has not numbered yet (NULL when none; one index lookup)."""
    names = log_names(d, account)
    q = d.quote
    return f"SELECT MIN({q('SEQ')}) FROM {d.qualify(names.log, schema)} WHERE {q('TXID')} IS NULL"


def first_after_at_sql(d: Dialect, account: str, schema: str = "") -> str:
    """When the first transaction after a count was numbered (its AT, UTC): the oldest a subscriber at that count
    has not applied. Parameter: the count. Two lookups on the unique index on N."""
    names = log_names(d, account)
    q = d.quote
    tx = d.qualify(names.tx, schema)
    first = f"SELECT {q('AT')} FROM {tx} WHERE {q('N')} = (SELECT MIN({q('N')}) FROM {tx} WHERE {q('N')} > ?)"
    if not d.numbers_when_read:
        return first
    # Committed transactions no reader has numbered yet are unapplied too (AT: their first change).
    return f"SELECT LEAST(({first}), (SELECT MIN({q('AT')}) FROM {tx} WHERE {q('N')} IS NULL))"


def levels_read_sql(d: Dialect, schema: str = "") -> str:
    """Every level a subscriber database records: SERVER, ACCOUNT, N (one row per publication it subscribes)."""
    q = d.quote
    return f"SELECT {q('SERVER')}, {q('ACCOUNT')}, {q('N')} FROM {d.qualify(LEVEL_TABLE, schema)}"


def oldest_count_sql(d: Dialect, account: str, schema: str = "") -> str:
    names = log_names(d, account)
    return f"SELECT MIN({d.quote('N')}) FROM {d.qualify(names.tx, schema)}"


def purge_sql(d: Dialect, account: str, schema: str = "") -> list[str]:
    """Drop the log of transactions numbered at or below a count. Parameter: the count (twice)."""
    names = log_names(d, account)
    q = d.quote
    tx, log = d.qualify(names.tx, schema), d.qualify(names.log, schema)
    delete_log = d.delete_via_alias_sql(
        log,
        "l",
        f"JOIN {tx} t ON l.{q('TXID')} = t.{q('TXID')} WHERE t.{q('N')} <= ?",
        f"{q('TXID')} IN (SELECT {q('TXID')} FROM {tx} WHERE {q('N')} <= ?)",
    )
    return [delete_log, f"DELETE FROM {tx} WHERE {q('N')} <= ?"]


def purge_history_sql(d: Dialect, account: str, schema: str = "") -> list[str]:
    """What purging a versioned log adds, run after the purge (Dialect.purge_history_sql)."""
    return d.purge_history_sql(d.qualify(log_names(d, account).log, schema))


# --- the subscriber's level ---------------------------------------------------------------------------------


def level_table_ddl(d: Dialect, schema: str = "") -> str:
    q = d.quote
    return (
        f"CREATE TABLE IF NOT EXISTS {d.qualify(LEVEL_TABLE, schema)} ({_col(d, 'SERVER', SERVER, ' NOT NULL')}, "
        f"{_col(d, 'ACCOUNT', SERVER, ' NOT NULL')}, {_col(d, 'LVL', COUNT, ' NOT NULL')}, "
        f"{_col(d, 'N', COUNT, ' NOT NULL')}, {_col(d, 'AT', TIMESTAMP)}, PRIMARY KEY ({q('SERVER')}, {q('ACCOUNT')}))"
    )


def level_read_sql(d: Dialect, schema: str = "") -> str:
    q = d.quote
    return (
        f"SELECT {q('LVL')}, {q('N')} FROM {d.qualify(LEVEL_TABLE, schema)} "
        f"WHERE {q('SERVER')} = ? AND {q('ACCOUNT')} = ?"
    )


def level_advance_sql(d: Dialect, schema: str = "") -> str:
    """Move the level from an expected count to a new one. Parameters: level, count, server, account,
    expected count. Zero rows updated means another apply got there first."""
    q = d.quote
    return (
        f"UPDATE {d.qualify(LEVEL_TABLE, schema)} SET {q('LVL')} = ?, {q('N')} = ?, {q('AT')} = {_now(d)} "
        f"WHERE {q('SERVER')} = ? AND {q('ACCOUNT')} = ? AND {q('N')} = ?"
    )


def level_confirm_sql(d: Dialect, schema: str = "") -> str:
    """Rewrite the level row as it is and give it (LVL, N): a write whose commit waits for its flush, which takes
    every commit before it to disk too (positions.durable_position). Parameters: server, account."""
    q = d.quote
    return (
        f"UPDATE {d.qualify(LEVEL_TABLE, schema)} SET {q('LVL')} = {q('LVL')} "
        f"WHERE {q('SERVER')} = ? AND {q('ACCOUNT')} = ? RETURNING {q('LVL')}, {q('N')}"
    )


def level_set_sql(d: Dialect, schema: str = "") -> list[str]:
    """Set a level outright (initial copy). Parameters: server, account; then level, count, server, account."""
    q = d.quote
    table = d.qualify(LEVEL_TABLE, schema)
    return [
        f"DELETE FROM {table} WHERE {q('SERVER')} = ? AND {q('ACCOUNT')} = ?",
        f"INSERT INTO {table} ({q('LVL')}, {q('N')}, {q('AT')}, {q('SERVER')}, {q('ACCOUNT')}) "
        f"VALUES (?, ?, {_now(d)}, ?, ?)",
    ]


# --- decoding entries and applying them ----------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    seq: int
    table: str
    op: str
    new: dict[str, Any] | None
    old: dict[str, Any] | None
    part: int = 0  # the row's place among the rows of one statement logged as one entry (PostgreSQL)

    @property
    def change_id(self) -> str:
        """The entry's place in its transaction, unique within it."""
        return str(self.seq) if not self.part else f"{self.seq}.{self.part}"


@dataclass
class Transaction:
    count: int  # N on the publisher
    origin: str | None
    at: object
    entries: list[Entry]

    @property
    def level(self) -> int:
        return levels.level_of(self.count)

    def entries_of(self, ops: str | Sequence[str]) -> list[Entry]:
        """The entries of these kinds (a packed transaction decodes only the runs of these kinds)."""
        return [e for e in self.entries if e.op in ops]


# A run of inserts or deletes of at least this many entries is sent to a subscriber as the publisher's server joined
# its images, with no Python per image (transactional.apply); a window of smaller transactions is read entry by entry.
TEXT_RUN_ROWS = 64


@dataclass(frozen=True)
class Run:
    """Consecutive entries of one transaction of one table, kind and image shape, as the server joined them: their
    images stay JSON text (each run's images one array without its brackets) until something needs them decoded."""

    table: str
    op: str
    rows: int
    seqs: str  # the entries' SEQs, joined by commas (a row of a statement's list: SEQ.part, see Entry.part)
    new: str  # the new images joined by commas ('null' for none)
    old: str
    names: tuple[str, ...] | None  # the images' column names in their order (None: not objects)

    def entries(self) -> list[Entry]:
        places = [s.partition(".") for s in self.seqs.split(",")]
        news = _images_of(self.new, len(places))
        olds = _images_of(self.old, len(places))
        out: list[Entry] = []
        for (seq, _dot, part), new, old in zip(places, news, olds, strict=True):
            if part:
                out.append(Entry(int(seq), self.table, self.op, new, old, part=int(part)))
                continue
            out.extend(_entries_of(int(seq), self.table, self.op, new, old))
        return out


def _images_of(joined: str, rows: int) -> list[Any]:
    images: list[Any] = json.loads("[" + joined + "]", parse_float=Decimal)
    if len(images) != rows or any(i is not None and not isinstance(i, dict | list) for i in images):
        raise TrxError(f"a log run of {rows} entries holds {len(images)} images, not one row per entry")
    return images


class PackedTransaction(Transaction):
    """A transaction read in runs (Run): its entries are decoded the first time something asks for them (a halt's
    keys, a skipped gap, a run the apply writes value by value); the bulk apply sends the runs' text as it is."""

    def __init__(self, count: int, origin: str | None, at: object, runs: list[Run]) -> None:
        self.count, self.origin, self.at, self.runs = count, origin, at, runs
        self._entries: list[Entry] | None = None

    @property
    def entries(self) -> list[Entry]:
        if self._entries is None:
            self._entries = [e for run in self.runs for e in run.entries()]
        return self._entries

    @entries.setter
    def entries(self, value: list[Entry]) -> None:
        self._entries = value

    def entries_of(self, ops: str | Sequence[str]) -> list[Entry]:
        if self._entries is not None:
            return super().entries_of(ops)
        return [e for run in self.runs if run.op in ops for e in run.entries()]


def packed_transactions(rows: Sequence[Sequence[Any]]) -> list[PackedTransaction] | None:
    """Rows of Dialect.log_runs_sql's runs query as transactions; None when a run's joined images are not whole (the
    server cut them): the window is then to be read entry by entry."""
    out: list[PackedTransaction] = []
    for n, origin, at, tbl, op, rows_of, seqs, new, old, new_chars, old_chars in rows:
        entries = int(rows_of)
        joined = entries - 1  # the commas GROUP_CONCAT adds
        if new is None or old is None or seqs is None:
            return None
        if len(new) != int(new_chars) + joined or len(old) != int(old_chars) + joined:
            return None
        names = _first_names(new if op != "D" else old)
        run = Run(tbl, op, entries, seqs, new, old, names)
        if not out or out[-1].count != int(n):
            out.append(PackedTransaction(int(n), origin, at, []))
        out[-1].runs.append(run)
    return out


# A statement's list of rows shorter than this holds fewer than TEXT_RUN_ROWS rows ("{}," per row at least): counted
# as one row when a window is looked over for a run worth sending as text, not parsed.
_LIST_CHARS_OF_A_RUN = 3 * TEXT_RUN_ROWS


def _run_text(op: str, new: str | None, old: str | None) -> str | None:
    """The image an insert (its new) or a delete (its old) is sent with; None: another kind."""
    return new if op == "I" else old if op == "D" else None


def _has_long_run(rows: Sequence[Sequence[Any]], parts: dict[int, int]) -> bool:
    """Whether entries_sql's rows hold a run of at least TEXT_RUN_ROWS inserts or deletes of one transaction and
    table (a statement's list counting its rows; a short one counted as one, a lower bound). `parts`: filled with
    the rows of the lists it counted, by their place in `rows`."""
    key: tuple[Any, ...] | None = None
    length = 0
    for i, (n, _origin, _at, _seq, tbl, op, new, old) in enumerate(rows):
        text = _run_text(op, new, old)
        if text is None:
            key = None
            continue
        if (n, tbl, op) != key:
            key, length = (n, tbl, op), 0
        if i in parts:
            length += parts[i]
        elif text[:1] == "[" and len(text) >= _LIST_CHARS_OF_A_RUN:
            try:
                parts[i] = len(json.loads(text))
            except ValueError:
                return False  # a malformed image: decoded entry by entry, which names it
            length += parts[i]
        else:
            length += 1
        if length >= TEXT_RUN_ROWS:
            return True
    return False


def pack_transactions(
    rows: Sequence[Sequence[Any]], parts: dict[int, int] | None = None
) -> list[PackedTransaction] | None:
    """Rows of entries_sql, in order, as transactions read in runs (PackedTransaction) by joining their text, with
    no image decoded: consecutive entries of one transaction of one table and kind are one run, and a statement's
    list of rows (PostgreSQL's statement triggers) gives its rows' text (the list without its brackets) and the
    places SEQ.part its rows take when decoded one by one (group_transactions). The images of one table in one
    transaction have one shape: a schema change between them is an entry of its own (a run of another kind).

    None where no run of at least TEXT_RUN_ROWS inserts or deletes would be sent as text (group_transactions then
    decodes the window in one parse, cheaper than a parse per run), or where an image is not what a run holds.
    `parts`: the rows of lists the caller knows, by their place in `rows` (they are not parsed to count them)."""
    counted: dict[int, int] = dict(parts or {})
    if not _has_long_run(rows, counted):
        return None
    out: list[PackedTransaction] = []
    total, i = len(rows), 0
    while i < total:
        n, origin, at, _seq, tbl, op = rows[i][:6]
        seqs: list[str] = []
        news: list[str] = []
        olds: list[str] = []
        while i < total and rows[i][0] == n and rows[i][4] == tbl and rows[i][5] == op:
            seq, new, old = rows[i][3], rows[i][6], rows[i][7]
            text = _run_text(op, new, old)
            if text is not None and text[:1] == "[":
                try:
                    listed = counted[i] if i in counted else len(json.loads(text))
                except ValueError:
                    return None
                if not listed:
                    return None
                inner = text.strip()[1:-1]
                seqs.extend(str(seq) if not p else f"{seq}.{p}" for p in range(listed))
                nulls = ",".join(["null"] * listed)
                news.append(inner if op == "I" else nulls)
                olds.append(inner if op == "D" else nulls)
            elif (new is not None and new[:1] == "[") or (old is not None and old[:1] == "["):
                return None  # a list of rows of another kind of entry
            else:
                seqs.append(str(seq))
                news.append("null" if new is None else new)
                olds.append("null" if old is None else old)
            i += 1
        joined_new, joined_old = ",".join(news), ",".join(olds)
        names = _first_names(joined_new if op != "D" else joined_old)
        run = Run(tbl, op, len(seqs), ",".join(seqs), joined_new, joined_old, names)
        if not out or out[-1].count != int(n):
            out.append(PackedTransaction(int(n), origin, at, []))
        out[-1].runs.append(run)
    return out


def read_in_runs(rows: Sequence[Sequence[Any]], parts: dict[int, int] | None = None) -> list[Transaction]:
    """Rows of entries_sql as the transactions an apply takes: in runs where one is worth sending as text
    (pack_transactions, given `parts`), else decoded (group_transactions)."""
    packed = pack_transactions(rows, parts)
    return group_transactions(rows) if packed is None else list(packed)


def _first_names(joined: str) -> tuple[str, ...] | None:
    """The column names of the first of a run's joined images (None: not an object)."""
    try:
        first = json.JSONDecoder().raw_decode(joined)[0]
    except ValueError:
        return None
    return tuple(first) if isinstance(first, dict) else None


def _entries_of(seq: int, tbl: str, op: str, new: Any, old: Any) -> list[Entry]:
    """One logged entry as entries: an image that is a list holds every row one statement changed (logged by a
    statement trigger), each its own entry in the statement's order."""
    if isinstance(new, list) or isinstance(old, list):
        out = []
        for part, image in enumerate((new if isinstance(new, list) else old) or []):
            if not isinstance(image, dict):
                raise TrxError(f"a log entry holds {type(image).__name__}, not a row")
            entry_new, entry_old = (image, None) if isinstance(new, list) else (None, image)
            out.append(Entry(seq, tbl, op, entry_new, entry_old, part=part))
        return out
    return [Entry(seq, tbl, op, new, old)]


def load_image(text: str | None) -> dict[str, Any] | list[dict[str, Any]] | None:
    """A row image (or, from a statement trigger, the list of a statement's row images)."""
    if text is None:
        return None
    value = json.loads(text, parse_float=Decimal)
    if not isinstance(value, dict | list):
        raise TrxError(f"a log entry holds {type(value).__name__}, not a row")
    return value


def group_transactions(rows: Sequence[Sequence[Any]]) -> list[Transaction]:
    """Rows of entries_sql, in order, as transactions. The images of the whole window are decoded by one JSON
    parse (one call instead of two per entry); a window with a malformed image is decoded entry by entry, so
    the error names the entry. An entry whose image is a list holds every row one statement changed (logged
    by a statement trigger): it becomes one entry per row, in the statement's order."""
    texts = [text for row in rows for text in (row[6], row[7])]
    try:
        images = json.loads("[" + ",".join("null" if t is None else t for t in texts) + "]", parse_float=Decimal)
        if len(images) != len(texts) or any(i is not None and not isinstance(i, dict | list) for i in images):
            raise ValueError("not one row per image")
    except ValueError:
        images = [load_image(t) for t in texts]
    out: list[Transaction] = []
    for i, (n, origin, at, seq, tbl, op, _new, _old) in enumerate(rows):
        n = int(n)
        if not out or out[-1].count != n:
            out.append(Transaction(n, origin, at, []))
        new, old = images[2 * i], images[2 * i + 1]
        if isinstance(new, list) or isinstance(old, list):
            out[-1].entries.extend(_entries_of(int(seq), tbl, op, new, old))
            continue
        out[-1].entries.append(Entry(int(seq), tbl, op, new, old))
    return out


def _decoder(logical: LogicalType, dest_dialect: str) -> Callable[[Any], Any]:
    """The function that turns a non-NULL JSON value of a row image into what the destination stores."""
    family = family_of(logical)
    if family == "binary":

        def from_hex(value: Any) -> bytes:
            text = str(value)
            return bytes.fromhex(text[2:] if text.startswith("\\x") else text)

        return from_hex
    bind = binder(logical, dest_dialect)
    if family == "decimal":
        return lambda value: str(value) if isinstance(value, Decimal) else bind(value)
    if family == "timestamp":
        return lambda value: bind(value.replace("T", " ") if isinstance(value, str) else value)
    return bind


_ABSENT = object()


def _image_value(image: dict[str, Any], name: str) -> Any:
    """A column's value in a row image; names match case-insensitively (MariaDB and SQLite fold case)."""
    if name in image:
        return image[name]
    folded = [v for k, v in image.items() if k.lower() == name.lower()]
    return folded[0] if folded else None


@dataclass(frozen=True)
class RowCodec:
    """A table's row images decoded for one destination, each column's decoder worked out once."""

    names: tuple[str, ...]
    decoders: tuple[Callable[[Any], Any], ...]
    key_positions: tuple[int, ...]

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def of(table: TableInfo, dest_dialect: str) -> RowCodec:
        keys = [k.name for k in key_columns(table)]
        names = tuple(c.name for c in table.columns)
        return RowCodec(
            names=names,
            decoders=tuple(_decoder(c.logical, dest_dialect) for c in table.columns),
            key_positions=tuple(names.index(k) for k in keys),
        )

    def _value(self, image: dict[str, Any], position: int) -> Any:
        name = self.names[position]
        value = image.get(name, _ABSENT)  # the exact name first: one lookup for nearly every value
        if value is _ABSENT:
            value = _image_value(image, name)
        return None if value is None else self.decoders[position](value)

    def row(self, image: dict[str, Any]) -> list[Any]:
        return [self._value(image, p) for p in range(len(self.names))]

    def key(self, image: dict[str, Any]) -> list[Any]:
        return [self._value(image, p) for p in self.key_positions]

    def key_of(self, row: list[Any]) -> list[Any]:
        """The key of a decoded row."""
        return [row[p] for p in self.key_positions]


def image_table(table: TableInfo, image: dict[str, Any]) -> TableInfo:
    """`table` with only the columns `image` carries (names match case-insensitively): a row is written with
    those, so a column the image lacks (the copy's own, or another shape's around a schema change) keeps its
    value instead of becoming NULL."""
    present = {k.lower() for k in image}
    columns = tuple(c for c in table.columns if c.name in image or c.name.lower() in present)
    return table if len(columns) == len(table.columns) else replace(table, columns=columns)


def row_values(image: dict[str, Any], table: TableInfo, dest_dialect: str) -> list[Any]:
    """The image's values in the order of `table`'s columns."""
    return RowCodec.of(table, dest_dialect).row(image)


def upsert_sql(d: Dialect, table: TableInfo, rows: int) -> str:
    """Insert rows or, when the key exists, overwrite them (parameters: every column, per row)."""
    q = d.quote
    names = [c.name for c in table.columns]
    keys = [k.name for k in key_columns(table)]
    one = "(" + ", ".join("?" for _ in names) + ")"
    head = f"INSERT INTO {d.qualify(table.name, table.schema)} ({', '.join(q(n) for n in names)}) VALUES "
    values = ", ".join(one for _ in range(rows))
    others = [n for n in names if n not in keys]
    return d.upsert_sql(f"{head}{values}", [q(k) for k in keys], [q(n) for n in others])


def image_names(table: TableInfo, image: dict[str, Any]) -> tuple[str, ...]:
    """For each of `table`'s columns, its name in `image` (the exact name, else the first that matches
    case-insensitively, as RowCodec reads it)."""
    names = []
    for column in table.columns:
        if column.name in image:
            names.append(column.name)
        else:
            names.append(next((k for k in image if k.lower() == column.name.lower()), column.name))
    return tuple(names)


def _image_columns(table: TableInfo, columns: Sequence[Column], names: dict[str, str]) -> list[ImageColumn]:
    return [
        ImageColumn(c.name, names.get(c.name, c.name), family_of(c.logical), c.logical.kind, c.declared)
        for c in columns
    ]


def images_upsert_sql(d: Dialect, table: TableInfo, names: Sequence[str]) -> str | None:
    """The set-based upsert of a run of images that carry `table`'s columns under `names` (image_names): one JSON
    array parameter. None where the dialect cannot decode a column exactly as RowCodec does."""
    by_column = dict(zip((c.name for c in table.columns), names, strict=True))
    columns = _image_columns(table, table.columns, by_column)
    keys = _image_columns(table, key_columns(table), by_column)
    return d.images_upsert_sql(d.qualify(table.name, table.schema), columns, keys)


def images_delete_sql(d: Dialect, table: TableInfo, key_names: Sequence[str]) -> str | None:
    """The set-based delete of a run of images whose key columns are named `key_names` (in key order)."""
    keys = key_columns(table)
    by_column = dict(zip((k.name for k in keys), key_names, strict=True))
    return d.images_delete_sql(d.qualify(table.name, table.schema), _image_columns(table, keys, by_column))


def images_parameter(images: Sequence[dict[str, Any]]) -> str:
    """A run of decoded row images as the one JSON array a set-based statement reads: re-serialised in C, the
    decimals (decoded as Decimal) as their exact text."""
    return json.dumps(images, default=str, ensure_ascii=False, check_circular=False)


def delete_sql(d: Dialect, table: TableInfo) -> str:
    keys = key_columns(table)
    where = " AND ".join(f"{d.quote(k.name)} = ?" for k in keys)
    return f"DELETE FROM {d.qualify(table.name, table.schema)} WHERE {where}"


def delete_many_sql(d: Dialect, table: TableInfo, rows: int) -> str:
    """Delete rows by key (parameters: the key columns, per row)."""
    keys = key_columns(table)
    target = d.qualify(table.name, table.schema)
    if len(keys) == 1:
        return f"DELETE FROM {target} WHERE {d.quote(keys[0].name)} IN ({', '.join('?' for _ in range(rows))})"
    one = "(" + " AND ".join(f"{d.quote(k.name)} = ?" for k in keys) + ")"
    return f"DELETE FROM {target} WHERE {' OR '.join(one for _ in range(rows))}"


def key_values(image: dict[str, Any], table: TableInfo, dest_dialect: str) -> list[Any]:
    return RowCodec.of(table, dest_dialect).key(image)


# --- the creating statement of a published table -----------------------------------------------------------


def table_definition(table: TableInfo) -> str:
    """What a 'C' entry carries: the columns with their logical types, NOT NULLs and portable defaults, the
    primary key, the indexes, and what of the table a copy cannot carry."""
    columns = [
        {
            "name": c.name,
            "kind": c.logical.kind,
            "length": c.logical.length,
            "precision": c.logical.precision,
            "scale": c.logical.scale,
            "nullable": c.nullable,
            "default": [c.default.kind, c.default.value] if c.default is not None else None,
        }
        for c in table.columns
    ]
    return json.dumps(
        {
            "table": table.name,
            "columns": columns,
            "key": [k.name for k in table.primary_key],
            "indexes": [{"name": i.name, "columns": list(i.columns), "unique": i.unique} for i in table.indexes],
            "untranslated": list(table.untranslated),
        }
    )


def definition_table(definition: dict[str, Any]) -> TableInfo:
    """The table a 'C' entry describes (entries written before constraints were carried have none)."""
    key = list(definition["key"])
    columns = tuple(
        Column(
            name=c["name"],
            declared="",
            logical=LogicalType(c["kind"], length=c.get("length"), precision=c.get("precision"), scale=c.get("scale")),
            nullable=c.get("nullable", True),
            pk_position=key.index(c["name"]) + 1 if c["name"] in key else 0,
            default=Default(*c["default"]) if c.get("default") else None,
        )
        for c in definition["columns"]
    )
    indexes = tuple(
        Index(name=i["name"], columns=tuple(i["columns"]), unique=bool(i["unique"]))
        for i in definition.get("indexes", [])
    )
    return TableInfo(
        name=definition["table"],
        columns=columns,
        indexes=indexes,
        untranslated=tuple(definition.get("untranslated", [])),
    )


# --- REPL_TEXT replay ---------------------------------------------------------------------------------------


def text_call(d: Dialect, statement: str) -> str:
    """A logged call as the subscriber's dialect runs it: Virtuoso writes `proc (?, ?)`; PostgreSQL and
    MariaDB run procedures with CALL. Anything else is run as written."""
    stripped = statement.strip().rstrip(";").strip()
    head = stripped.split("(", 1)[0].strip()
    words = head.split()
    if len(words) == 1 and "(" in stripped and words[0].upper() not in {"SELECT", "CALL", "INSERT", "UPDATE", "DELETE"}:
        return f"CALL {stripped}"
    return stripped


# --- updateable publications: ROWGUID -------------------------------------------------------------------------


def rowguid_objects(d: Dialect, table: TableInfo, local: str) -> CaptureObjects:
    """BEFORE triggers that give every local insert, and every local update that leaves ROWGUID alone,
    a new `<server>@<uuid>`; rows replication writes keep the ROWGUID they carry."""
    if not d.supports_updateable_publications:
        raise TrxError(
            f"updateable transactional publications need PostgreSQL or MariaDB; {d.label} cannot set ROWGUID "
            "before a row is logged"
        )
    names, create, drop = d.rowguid_triggers(table, new_guid_sql(d, local), ROWGUID_COLUMN)
    return CaptureObjects(names, create, drop)


def push_account(account: str) -> str:
    """The subscriber-side log of an updateable subscription (Virtuoso's "!ACCT" push-back account)."""
    return "!" + account


def retag_origin_sql(d: Dialect, account: str, origin: str, schema: str = "") -> list[str]:
    """Give the current transaction's log another origin (a pushed transaction with a conflict goes back
    to its originator too, so it ends with the publisher's decision)."""
    names = log_names(d, account)
    return d.retag_origin_sql(d.qualify(names.tx, schema), d.qualify(names.seq, schema), d.literal(origin))


def row_select_sql(d: Dialect, table: TableInfo, lock: bool = True) -> str:
    keys = key_columns(table)
    where = " AND ".join(f"{d.quote(k.name)} = ?" for k in keys)
    cols = ", ".join(d.quote(c.name) for c in table.columns)
    return f"SELECT {cols} FROM {d.qualify(table.name, table.schema)} WHERE {where}" + (" FOR UPDATE" if lock else "")


def touch_sql(d: Dialect, table: TableInfo) -> str:
    """Give a publisher row a new ROWGUID so its current version is logged again. Parameters: the
    new ROWGUID, then the key."""
    keys = key_columns(table)
    where = " AND ".join(f"{d.quote(k.name)} = ?" for k in keys)
    return f"UPDATE {d.qualify(table.name, table.schema)} SET {d.quote(ROWGUID_COLUMN)} = ? WHERE {where}"


# --- published procedures (PostgreSQL publishers) ---------------------------------------------------------------

PROC_TABLE = "RTPROC"
EVENT_TRIGGER = "repladmin_procedures"
WRAPPING_SETTING = "repladmin.wrapping"
CALLS, DEFINITION = 1, 2


def append_function(d: Dialect, account: str, schema: str = "") -> str:
    return d.qualify(bounded_name(f"{log_names(d, account).log}_append", d.max_identifier), schema or "public")


def append_function_ddl(
    d: Dialect, account: str, local: str, schema: str = "", wal: bool = False
) -> tuple[list[str], list[str]]:
    """PostgreSQL: a function that logs one entry for the current transaction (used by the wrappers of
    published procedures and by the definition tracker); with `wal`, as a message in the WAL."""
    function = append_function(d, account, schema)
    body = wal_capture.append_function_body(account) if wal else _append_body(d, account, local, schema)
    return (
        [
            f"CREATE FUNCTION {function}(p_op text, p_tbl text, p_new text) RETURNS void LANGUAGE plpgsql "
            f"AS $rt$ {body} $rt$"
        ],
        [f"DROP FUNCTION IF EXISTS {function}(text, text, text)"],
    )


def _append_body(d: Dialect, account: str, local: str, schema: str) -> str:
    """The append function's body where triggers capture: the entry goes into the log tables directly."""
    names = log_names(d, account)
    q = d.quote
    tx, log = d.qualify(names.tx, schema), d.qualify(names.log, schema)
    txid = "pg_current_xact_id()::text::bigint"
    origin = f"coalesce(nullif(current_setting('{ORIGIN_SETTING}', true), ''), {d.literal(local)})"
    return (
        f"BEGIN IF coalesce(current_setting('{NOLOG_SETTING}', true), '') <> 'on' THEN "
        f"INSERT INTO {tx} ({q('TXID')}, {q('ORIGIN')}) VALUES ({txid}, {origin}) "
        f"ON CONFLICT ({q('TXID')}) DO NOTHING; "
        f"INSERT INTO {log} ({q('TXID')}, {q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}) "
        f"VALUES ({txid}, p_tbl, p_op, p_new, NULL); END IF; END"
    )


def proc_table_ddl(d: Dialect, schema: str = "") -> list[str]:
    q = d.quote
    return [
        f"CREATE TABLE IF NOT EXISTS {d.qualify(PROC_TABLE, schema)} ({q('NAME')} varchar(320) PRIMARY KEY, "
        f"{q('ACCOUNT')} varchar(128) NOT NULL, {q('OPTIONS')} integer NOT NULL, {q('IDENT')} text NOT NULL, "
        f"{q('BODY')} varchar(320), {q('BODY_IDENT')} text, {q('WRAPPER')} text, {q('APPEND')} text NOT NULL, "
        f"{q('DEF')} text NOT NULL)"
    ]


def event_trigger_ddl(d: Dialect, schema: str = "") -> tuple[list[str], list[str]]:
    """PostgreSQL: when a published procedure is created again (CREATE OR REPLACE replaces its wrapper),
    move the new body under the wrapper, put the wrapper back and log the new definition."""
    q = d.quote
    table = d.qualify(PROC_TABLE, schema)
    function = d.qualify("repladmin_procedure_changed", schema or "public")
    body = f"""
DECLARE r record; p record; def text;
BEGIN
  IF coalesce(current_setting('{WRAPPING_SETTING}', true), '') = 'on' THEN RETURN; END IF;
  FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE object_type IN ('procedure', 'function') LOOP
    FOR p IN SELECT * FROM {table} WHERE {q("IDENT")} = r.object_identity LOOP
      PERFORM set_config('{WRAPPING_SETTING}', 'on', true);
      def := pg_get_functiondef(r.objid);
      IF p.{q("WRAPPER")} IS NOT NULL THEN
        EXECUTE 'DROP PROCEDURE IF EXISTS ' || p.{q("BODY_IDENT")};
        EXECUTE 'ALTER PROCEDURE ' || r.object_identity || ' RENAME TO ' || quote_ident(p.{q("BODY")});
        EXECUTE p.{q("WRAPPER")};
      END IF;
      UPDATE {table} SET {q("DEF")} = def WHERE {q("NAME")} = p.{q("NAME")};
      IF p.{q("OPTIONS")} IN (2, 3) THEN
        EXECUTE 'SELECT ' || p.{q("APPEND")} || '($1, $2, $3)'
          USING 'P', '', json_build_object('name', p.{q("NAME")}, 'definition', def)::text;
      END IF;
      PERFORM set_config('{WRAPPING_SETTING}', '', true);
    END LOOP;
  END LOOP;
END"""
    return (
        [
            f"CREATE OR REPLACE FUNCTION {function}() RETURNS event_trigger LANGUAGE plpgsql AS $rt$ {body} $rt$",
            f"DROP EVENT TRIGGER IF EXISTS {EVENT_TRIGGER}",
            f"CREATE EVENT TRIGGER {EVENT_TRIGGER} ON ddl_command_end "
            f"WHEN TAG IN ('CREATE PROCEDURE', 'CREATE FUNCTION') EXECUTE FUNCTION {function}()",
        ],
        [f"DROP EVENT TRIGGER IF EXISTS {EVENT_TRIGGER}", f"DROP FUNCTION IF EXISTS {function}()"],
    )


@dataclass(frozen=True)
class Procedure:
    name: str  # as it is called
    schema: str
    arguments: str  # pg_get_function_arguments: "i integer, d text"
    names: tuple[str, ...]
    types: tuple[str, ...]
    definition: str

    @property
    def identity(self) -> str:
        return f"{self.schema}.{self.name}({', '.join(self.types)})" if self.schema else self.name

    def body_name(self, d: Dialect) -> str:
        return bounded_name(f"{self.name}__repl", d.max_identifier)


def wrapper_ddl(d: Dialect, proc: Procedure, account: str, schema: str = "") -> str:
    """The procedure callers call: it logs the call (name, arguments and their types), then runs the real
    body with logging off (the reference: what a published procedure does is not logged itself)."""
    q = d.quote
    args = ", ".join(q(n) for n in proc.names)
    types = ", ".join(d.literal(t) for t in proc.types)
    stmt = d.literal(f"{proc.name} ({', '.join('?' for _ in proc.names)})")
    entry = (
        f"json_build_object('stmt', {stmt}, 'args', json_build_array({args}), 'types', json_build_array({types}))::text"
        if proc.names
        else f"json_build_object('stmt', {stmt}, 'args', json_build_array())::text"
    )
    target = d.qualify(proc.name, schema or proc.schema)
    body = d.qualify(proc.body_name(d), schema or proc.schema)
    return (
        f"CREATE PROCEDURE {target}({proc.arguments}) LANGUAGE plpgsql AS $rt$ "
        f"DECLARE prev text := coalesce(current_setting('{NOLOG_SETTING}', true), ''); BEGIN "
        f"PERFORM {append_function(d, account, schema or proc.schema)}('T', '', {entry}); "
        f"PERFORM set_config('{NOLOG_SETTING}', 'on', true); CALL {body}({args}); "
        f"PERFORM set_config('{NOLOG_SETTING}', prev, true); END $rt$"
    )


def typed_call(d: Dialect, statement: str, types: Sequence[str] | None) -> str:
    """A logged call for the subscriber: PostgreSQL resolves procedures by argument type, so the
    publisher's types are written as casts."""
    call = text_call(d, statement)
    if not d.resolves_procedures_by_type or not types:
        return call
    parts = call.split("?")
    if len(parts) - 1 != len(types):
        return call
    out = parts[0]
    for piece, kind in zip(parts[1:], types, strict=True):
        out += f"CAST(? AS {kind})" + piece
    return out


# --- schema changes of published tables (PostgreSQL publishers log them in place) -------------------------------

SCHEMA_TABLE = "RTPUBTBL"
COLUMNS_FUNCTION = "repladmin_columns"


def schema_event_trigger(schema: str) -> str:
    """One per database and publishing schema (event triggers are database-wide)."""
    return bounded_name(f"repladmin_schema_{schema or 'public'}", 63)


def columns_function(d: Dialect, schema: str = "") -> str:
    return d.qualify(COLUMNS_FUNCTION, schema or "public")


def schema_tracking_ddl(d: Dialect, schema: str = "") -> tuple[list[str], list[str]]:
    """PostgreSQL: the published tables' definitions as last logged (RTPUBTBL), the function that reads a
    table's column rows (engine.schema_changes; attnum as the position, exact across renames), and the event
    trigger that, when ALTER TABLE, CREATE INDEX or DROP INDEX changed a published table (its columns, unique
    constraints or indexes, foreign keys), logs an 'S' entry with the definitions before
    and after in the altering transaction itself: every row change before it has the old shape, every one
    after it the new."""
    q = d.quote
    table = d.qualify(SCHEMA_TABLE, schema)
    columns = columns_function(d, schema)
    handler = d.qualify("repladmin_schema_changed", schema or "public")
    key = (
        "COALESCE((SELECT k.ord FROM pg_catalog.pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
        "WHERE i.indrelid = rel AND i.indisprimary AND k.attnum = a.attnum), 0)"
    )
    # The tables an ALTER TABLE or CREATE INDEX touched (an index's table for the latter); a DROP INDEX names no
    # table (its index is gone): every tracked table that still exists is looked at.
    touched = (
        "SELECT c.objid FROM pg_event_trigger_ddl_commands() c WHERE c.classid = 'pg_catalog.pg_class'::regclass "
        "UNION SELECT i.indrelid FROM pg_event_trigger_ddl_commands() c JOIN pg_catalog.pg_index i "
        "ON i.indexrelid = c.objid WHERE c.classid = 'pg_catalog.pg_class'::regclass"
    )
    body = f"""
DECLARE p record; now_cols text;
BEGIN
  FOR p IN SELECT * FROM {table} t WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_class k WHERE k.oid = t.{q("REL")})
           AND (TG_TAG = 'DROP INDEX' OR t.{q("REL")} IN ({touched})) LOOP
    now_cols := {columns}(p.{q("REL")});
    IF now_cols IS DISTINCT FROM p.{q("COLS")} THEN
      EXECUTE 'SELECT ' || p.{q("APPEND")} || '($1, $2, $3)' USING 'S', p.{q("TBL")},
        json_build_object('table', p.{q("TBL")}, 'before', p.{q("COLS")}::json, 'after', now_cols::json)::text;
      UPDATE {table} SET {q("COLS")} = now_cols WHERE {q("ACCOUNT")} = p.{q("ACCOUNT")} AND {q("REL")} = p.{q("REL")};
    END IF;
  END LOOP;
END"""
    attname = (
        "(SELECT jsonb_agg(x.attname ORDER BY o.ord) FROM unnest({keys}) WITH ORDINALITY AS o(attnum, ord) "
        "JOIN pg_catalog.pg_attribute x ON x.attrelid = {rel} AND x.attnum = o.attnum{bound})"
    )
    uniques = (
        "(SELECT coalesce(jsonb_agg(jsonb_build_array(ic.relname, "
        + attname.format(keys="i.indkey", rel="rel", bound=" AND o.ord <= i.indnkeyatts")
        + ") ORDER BY ic.relname), '[]') FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic "
        "ON ic.oid = i.indexrelid WHERE i.indrelid = rel AND i.indisunique AND NOT i.indisprimary "
        "AND i.indexprs IS NULL AND i.indpred IS NULL)"
    )
    foreign = (
        "(SELECT coalesce(jsonb_agg(jsonb_build_array(f.conname, "
        + attname.format(keys="f.conkey", rel="rel", bound="")
        + ", fr.relname, "
        + attname.format(keys="f.confkey", rel="f.confrelid", bound="")
        + ", f.confdeltype::text) ORDER BY f.conname), '[]') FROM pg_catalog.pg_constraint f "
        "JOIN pg_catalog.pg_class fr ON fr.oid = f.confrelid WHERE f.conrelid = rel AND f.contype = 'f')"
    )
    trigger = schema_event_trigger(schema)
    return (
        [
            f"CREATE TABLE IF NOT EXISTS {table} ({q('ACCOUNT')} varchar(128) NOT NULL, {q('REL')} oid NOT NULL, "
            f"{q('TBL')} varchar(320) NOT NULL, {q('APPEND')} text NOT NULL, {q('COLS')} text NOT NULL, "
            f"PRIMARY KEY ({q('ACCOUNT')}, {q('REL')}))",
            f"CREATE OR REPLACE FUNCTION {columns}(rel oid) RETURNS text LANGUAGE sql STABLE AS $rt$ "
            "SELECT (coalesce(jsonb_agg(jsonb_build_array(a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
            f"CASE WHEN a.attnotnull THEN 0 ELSE 1 END, {key}, pg_catalog.pg_get_expr(d.adbin, d.adrelid), a.attnum) "
            "ORDER BY a.attnum), '[]') || jsonb_build_array(jsonb_build_object('constraints', "
            f"jsonb_build_object('unique', {uniques}, 'foreign', {foreign}))))::text "
            "FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_attrdef d "
            "ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = rel AND a.attnum > 0 "
            "AND NOT a.attisdropped $rt$",
            f"CREATE OR REPLACE FUNCTION {handler}() RETURNS event_trigger LANGUAGE plpgsql AS $rt$ {body} $rt$",
            f"DROP EVENT TRIGGER IF EXISTS {q(trigger)}",
            f"CREATE EVENT TRIGGER {q(trigger)} ON ddl_command_end "
            "WHEN TAG IN ('ALTER TABLE', 'CREATE INDEX', 'DROP INDEX') "
            f"EXECUTE FUNCTION {handler}()",
        ],
        [
            f"DROP EVENT TRIGGER IF EXISTS {q(trigger)}",
            f"DROP FUNCTION IF EXISTS {handler}()",
            f"DROP FUNCTION IF EXISTS {columns}(oid)",
            f"DROP TABLE IF EXISTS {table}",
        ],
    )


def tracked_count_sql(d: Dialect, schema: str = "") -> str:
    return f"SELECT COUNT(*) FROM {d.qualify(SCHEMA_TABLE, schema)}"


def track_table_sql(d: Dialect, account: str, table: TableInfo, schema: str = "") -> tuple[str, list[str]]:
    """PostgreSQL: start tracking a published table's definition (parameters bound)."""
    q = d.quote
    qualified = d.qualify(table.name, table.schema)
    return (
        f"INSERT INTO {d.qualify(SCHEMA_TABLE, schema)} ({q('ACCOUNT')}, {q('REL')}, {q('TBL')}, {q('APPEND')}, "
        f"{q('COLS')}) SELECT ?, CAST(? AS regclass), ?, ?, {columns_function(d, schema)}(CAST(? AS regclass)) "
        f"ON CONFLICT ({q('ACCOUNT')}, {q('REL')}) DO UPDATE SET {q('COLS')} = EXCLUDED.{q('COLS')}",
        [account, qualified, table.name, append_function(d, account, schema), qualified],
    )


def untrack_sql(d: Dialect, schema: str = "") -> str:
    """Parameters: the account, then the table's name (None: every table of the account)."""
    q = d.quote
    return (
        f"DELETE FROM {d.qualify(SCHEMA_TABLE, schema)} WHERE {q('ACCOUNT')} = ? "
        f"AND (CAST(? AS varchar) IS NULL OR {q('TBL')} = ?)"
    )


def tracked_sql(d: Dialect, schema: str = "") -> str:
    """A tracked table's definition as last logged (parameters: account, table)."""
    q = d.quote
    return f"SELECT {q('COLS')} FROM {d.qualify(SCHEMA_TABLE, schema)} WHERE {q('ACCOUNT')} = ? AND {q('TBL')} = ?"

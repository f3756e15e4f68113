"""PostgreSQL capture from the write-ahead log (pure: names, DDL, the pgoutput decoder; no I/O here).

A publication in WAL mode has no capture triggers. Its tables (REPLICA IDENTITY FULL, so an update or
delete carries the whole old row, TOASTed values included) and REPL_TEXT belong to a PostgreSQL publication,
and a logical replication slot with the built-in `pgoutput` plug-in keeps every committed change of them
until a reader has stored it. The reader (transactional.capture) moves the changes into the same log tables
the trigger mode writes (RTTX_/RTLOG_), so everything that reads a log — subscribers at different levels,
purging, wraparound, updateable subscriptions — is the same in both modes:

1. take the publication's advisory lock (one reader at a time; a slot serves one backend at a time);
2. peek the slot's changes up to the WAL flushed at that moment (pg_logical_slot_peek_binary_changes);
3. in one transaction, give each committed transaction the next number in commit order, store its entries
   and the position read (RTSEQ.LSN);
4. only then advance the slot to that position.

A crash between 3 and 4 peeks the same changes again: transactions ending at or before RTSEQ.LSN are
skipped, so nothing is stored twice; nothing is lost because the slot moves only after the commit.

What it costs. The server decodes the WAL into pgoutput messages; this module turns them into row images in
one pass over each row's bytes: an insert's or a delete's image is written as JSON text straight from the
tuple (the relation's template, each value quoted or copied as it is), exactly what json.dumps of the decoded
values gives, with no dict and no converter call per value (updates, whose unchanged TOASTed values come from
the old row, still go through a dict). The transactions are numbered in the order read, deterministically, so
a reader that reads the same changes again gives them the same numbers. A sync of the publication's only
subscriber, current with the log, uses that (transactional.capture.read_wal, transactional.sync.WalDirect):
between 2 and 3 it applies the decoded transactions to that subscriber straight from memory, each batch with
the subscriber's level in its own transaction, and step 3 then moves the count over what the subscriber
committed without writing those transactions into the log, storing only what it did not apply (a halt, a
schema change that may wait for approval). The slot's position never passes what the log holds or the
subscriber applied: a crash after the subscriber's commit and before 3 reads the same transactions again
under the same numbers; they are stored, and the subscriber's level already covers them.

What the triggers learn from transaction-local settings (the replay context: a subscriber's own apply is
not logged; a publisher replaying an updateable subscriber logs it with that subscriber as origin) travels
in the WAL as transactional logical messages (prefix `repladmin`), written by the same statements that set
the settings. Entries the console appends (a table's creating statement, REPL_TEXT calls, published
procedures' calls) are messages too (prefix `repladmin.entry:<publication>`), so they keep their place
among the rows of their transaction.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii  # json.dumps's own (C) quoting of a string
from typing import Any

from replication_admin.engine.dialects.postgresql import PostgreSQL
from replication_admin.engine.objects import CONTEXT_MESSAGE_PREFIX

PLUGIN = "pgoutput"
CONTEXT_PREFIX = CONTEXT_MESSAGE_PREFIX  # the replay context, written by the PostgreSQL dialect
ENTRY_PREFIX = "repladmin.entry:"
LSN_COLUMN = "LSN"
_PG = PostgreSQL()  # everything here is PostgreSQL's SQL (logical decoding)
PEEK_CHANGES = 50_000  # changes per read: the peek stops after the transaction holding the 50,000th
_EPOCH = dt.datetime(2000, 1, 1)  # PostgreSQL's timestamps count microseconds from here


class WalError(ValueError):
    """The WAL holds something the decoder cannot read (a protocol it does not know)."""


def slot_name(database: str, schema: str, account: str) -> str:
    """The slot's and the PostgreSQL publication's name: slots are per cluster and take only [a-z0-9_],
    so the name is a digest of the database, the log's schema and the publication."""
    digest = hashlib.sha256(f"{database}\0{schema}\0{account}".encode()).hexdigest()[:24]
    return f"repladmin_{digest}"


def lock_key(slot: str) -> int:
    """The advisory lock (a signed 64-bit key) that makes the slot's readers take turns."""
    return int.from_bytes(hashlib.sha256(slot.encode()).digest()[:8], "big", signed=True)


# --- objects ---------------------------------------------------------------------------------------------------


def log_ddl(slot: str, seq: str, text_table: str) -> list[str]:
    """What WAL mode adds to a new log (run with the log's DDL; the slot is made afterwards, outside it)."""
    q = _PG.quote
    return [
        f"ALTER TABLE {seq} ADD COLUMN {q(LSN_COLUMN)} bigint NOT NULL DEFAULT 0",
        # Truncation is not replicated in either mode (no trigger sees it).
        f"CREATE PUBLICATION {q(slot)} FOR TABLE {text_table} WITH (publish = 'insert, update, delete')",
    ]


def create_slot_sql(slot: str) -> str:
    return f"SELECT pg_create_logical_replication_slot('{slot}', '{PLUGIN}')"


def drop_log_ddl(slot: str) -> list[str]:
    return [
        f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'",
        f"DROP PUBLICATION IF EXISTS {_PG.quote(slot)}",
    ]


def add_table_ddl(slot: str, table: str) -> tuple[list[str], list[str]]:
    """A published table joins the slot's publication (create, undo)."""
    q = _PG.quote
    return (
        [f"ALTER TABLE {table} REPLICA IDENTITY FULL", f"ALTER PUBLICATION {q(slot)} ADD TABLE {table}"],
        [f"ALTER PUBLICATION {q(slot)} DROP TABLE {table}", f"ALTER TABLE {table} REPLICA IDENTITY DEFAULT"],
    )


def entry_message(account: str, op: str, table: str, new: str) -> tuple[str, str]:
    """(prefix, content) of an entry the console or a procedure wrapper appends."""
    return ENTRY_PREFIX + account, json.dumps({"op": op, "tbl": table, "new": new})


def emit_entry_sql() -> str:
    """Parameters: prefix, content."""
    return "SELECT pg_logical_emit_message(true, ?, ?)"


def append_function_body(account: str) -> str:
    """The body of the publication's append function (p_op, p_tbl, p_new) in WAL mode."""
    prefix = _PG.literal(ENTRY_PREFIX + account)
    return (
        f"BEGIN PERFORM pg_logical_emit_message(true, {prefix}, "
        "json_build_object('op', p_op, 'tbl', p_tbl, 'new', p_new)::text); END"
    )


# --- reading ---------------------------------------------------------------------------------------------------


def peek_sql() -> str:
    """Parameters: slot, up to where (a number), how many changes, publication. Rows: (message,). The messages
    alone: a commit's message carries its end LSN, and a numeric LSN per row cost the driver a Decimal each."""
    return (
        "SELECT data FROM pg_logical_slot_peek_binary_changes(?, '0/0'::pg_lsn + ?::numeric, "
        "?, 'proto_version', '1', 'publication_names', ?, 'messages', 'true')"
    )


def slot_position_sql() -> str:
    """Parameter: slot. (what the slot has confirmed, what is flushed), as numbers; no row: no such slot.

    A peek reads up to the flush position taken here: a commit is decoded only once flushed, so advancing
    to that point, when the peek returned everything before it, skips nothing."""
    return (
        "SELECT confirmed_flush_lsn - '0/0'::pg_lsn, pg_current_wal_flush_lsn() - '0/0'::pg_lsn "
        "FROM pg_replication_slots WHERE slot_name = ?"
    )


def advance_sql() -> str:
    """Parameters: slot, position (a number)."""
    return "SELECT pg_replication_slot_advance(?, '0/0'::pg_lsn + ?::numeric)"


def slot_active_sql() -> str:
    """Parameter: slot. Whether a replication connection holds it (no row: no such slot)."""
    return "SELECT active::int FROM pg_replication_slots WHERE slot_name = ?"  # psqlODBC reads booleans as '0'/'1'


def stream_options(slot: str) -> dict[str, str]:
    """pgoutput's options for START_REPLICATION (the same as the SQL reader's)."""
    return {"proto_version": "1", "publication_names": slot, "messages": "true"}


def slot_backlog_bytes_sql() -> str:
    """Parameter: slot. The bytes of WAL flushed after the slot's confirmed position (no row: no such slot)."""
    return "SELECT pg_current_wal_flush_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = ?"


def pending_sql() -> str:
    """Parameter: slot. Whether WAL was flushed after the slot's confirmed position (NULL: no such slot)."""
    return (
        "SELECT (confirmed_flush_lsn < pg_current_wal_flush_lsn())::int FROM pg_replication_slots WHERE slot_name = ?"
    )


PEEK_CAP = 200_000  # changes a live count decodes at most (2,000 small transactions are 6,000 changes)


def slot_state_sql() -> str:
    """Parameter: slot. (held by a stream, wal_status, safe_wal_size, retained WAL bytes (the server's end minus
    restart_lsn), WAL not yet confirmed (bytes)); no row: no such slot. NULL sizes: a lost slot."""
    return (
        "SELECT active::int, wal_status, safe_wal_size, pg_current_wal_lsn() - restart_lsn, "
        "pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = ?"
    )


def copy_slot_sql() -> str:
    """Parameters: slot, copy. A temporary copy at the slot's position: a slot a stream holds cannot be peeked,
    its copy can (dropped by the caller, or at the end of the session)."""
    return "SELECT 1 FROM pg_copy_logical_replication_slot(?, ?, true)"


def copy_name(slot: str, token: str) -> str:
    return f"{slot}_peek_{token}"


def _hex(text: str) -> str:
    return (text.encode() + b"\0").hex()


def backlog_sql(account: str) -> str:
    """Parameters: stored position (a number), slot to peek, PEEK_CAP, publication. One row: (the publication's
    committed transactions in the slot ending after the stored position, the commit time of the oldest of them
    (UTC), changes decoded). Counted inside the server, nothing consumed: a transaction counts when it has a row
    change or an entry of the publication and no replay context that keeps it out of the log (as the decoder);
    its commit time is its BEGIN's (Int64 microseconds since 2000-01-01 after the final LSN)."""
    kind = "get_byte(c.data, 0)"
    entry, context = _hex(ENTRY_PREFIX + account), _hex(CONTEXT_PREFIX)
    nolog = b'"nolog": true'.hex()
    return (
        "SELECT count(*) FILTER (WHERE t.keep), min(t.at) FILTER (WHERE t.keep), coalesce(sum(t.n), 0) FROM ("
        f"SELECT (bool_or({kind} IN (73, 85, 68) OR ({kind} = 77 AND substring(c.data FROM 11 FOR "
        f"{len(entry) // 2}) = decode('{entry}', 'hex'))) "
        f"AND NOT coalesce(bool_or({kind} = 77 AND substring(c.data FROM 11 FOR {len(context) // 2}) = "
        f"decode('{context}', 'hex') AND position(decode('{nolog}', 'hex') IN c.data) > 0), false) "
        f"AND max(c.lsn - '0/0'::pg_lsn) FILTER (WHERE {kind} = 67) > ?::numeric) AS keep, "
        "min(timestamp '2000-01-01' + ('x' || encode(substring(c.data FROM 10 FOR 8), 'hex'))::bit(64)::bigint "
        f"* interval '1 microsecond') FILTER (WHERE {kind} = 66) AS at, count(*) AS n "
        "FROM pg_logical_slot_peek_binary_changes(?, NULL, ?::int, 'proto_version', '1', 'publication_names', ?, "
        "'messages', 'true') AS c GROUP BY c.xid) AS t"
    )


def availability_sql() -> str:
    """wal_level, whether the role may make slots, free slots."""
    return (
        "SELECT current_setting('wal_level'), "
        "(SELECT (rolsuper OR rolreplication)::int FROM pg_roles WHERE rolname = current_user), "
        "current_setting('max_replication_slots')::int - (SELECT count(*) FROM pg_replication_slots)"
    )


def unavailable_reason(wal_level: str, may_replicate: bool, free_slots: int, role: str = "") -> str | None:
    """Why WAL mode cannot be used on a server, or None when it can."""
    if wal_level != "logical":
        return f"wal_level is {wal_level}; decoding the WAL needs wal_level = logical (set it and restart the server)"
    if not may_replicate:
        return f"the role {role or 'connecting'} may not create replication slots (it needs REPLICATION)"
    if free_slots <= 0:
        return "every replication slot is taken (raise max_replication_slots and restart the server)"
    return None


def store_sql(tx: str, log: str, seq: str) -> list[str]:
    """Store decoded transactions: parameters (transactions JSON), (entries JSON), (count, count, position)."""
    q = _PG.quote
    return [
        f"INSERT INTO {tx} ({q('TXID')}, {q('N')}, {q('ORIGIN')}, {q('AT')}) "
        f"SELECT r.txid, r.n, r.origin, r.at FROM json_to_recordset(?::json) AS r(txid bigint, n bigint, "
        f"origin text, at timestamp)",
        f"INSERT INTO {log} ({q('TXID')}, {q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}) "
        "SELECT (e.v->>0)::bigint, e.v->>1, e.v->>2, e.v->>3, e.v->>4 "
        "FROM json_array_elements(?::json) WITH ORDINALITY AS e(v, i) ORDER BY e.i",
        f"UPDATE {seq} SET {q('N')} = ?, {q(LSN_COLUMN)} = ? WHERE {q('ID')} = 1 AND {q('N')} = ?",
    ]


def position_sql(seq: str) -> str:
    q = _PG.quote
    return f"SELECT {q('N')}, {q(LSN_COLUMN)} FROM {seq} WHERE {q('ID')} = 1"


# --- the pgoutput decoder ------------------------------------------------------------------------------------------

_INTEGERS = {20, 21, 23, 26}  # int8, int2, int4, oid
_FLOATS = {700, 701}
_BOOL = 16


def _float(text: str) -> float | str:
    return float(text) if text not in ("NaN", "Infinity", "-Infinity") else text


def _boolean(text: str) -> bool:
    return text == "t"


def converter(oid: int) -> Callable[[str], Any] | None:
    """How a column's text becomes what the trigger capture gives: numbers and booleans as JSON, the rest
    (None) as the text."""
    if oid == _BOOL:
        return _boolean
    if oid in _INTEGERS:
        return int
    if oid in _FLOATS:
        return _float
    return None  # JSON documents too: they travel as their text (see PostgreSQL.row_image_sql)


# How a column's text is written into the image's JSON: as a JSON string, as it is (integers: PostgreSQL's text of
# an integer is its JSON number), as a float (repr of float(): json.dumps's), as true/false.
_STRING, _INTEGER, _FLOAT, _BOOLEAN = 0, 1, 2, 3


def _kind(oid: int) -> int:
    if oid == _BOOL:
        return _BOOLEAN
    if oid in _INTEGERS:
        return _INTEGER
    return _FLOAT if oid in _FLOATS else _STRING


@dataclass(frozen=True)
class Relation:
    name: str
    columns: tuple[tuple[str, Callable[[str], Any] | None], ...]  # (name, converter)
    kinds: tuple[int, ...] = ()  # per column: _STRING, _INTEGER, _FLOAT or _BOOLEAN
    # The image's JSON text with a %s per value: '{"id": %s, "name": %s}', as json.dumps separates them.
    template: str = "{}"

    @staticmethod
    def of(name: str, columns: Sequence[tuple[str, int]]) -> Relation:
        """A relation from its (column, type oid) pairs."""
        keys = [json.dumps(c).replace("%", "%%") + ": %s" for c, _oid in columns]
        return Relation(
            name,
            tuple((c, converter(oid)) for c, oid in columns),
            tuple(_kind(oid) for _c, oid in columns),
            "{" + ", ".join(keys) + "}",
        )


@dataclass
class Decoded:
    """One committed transaction, its entries as (TBL, OP, NEW, OLD) with the images as JSON text."""

    end: int  # the LSN just past its commit record
    at: dt.datetime  # commit time, UTC
    origin: str | None = None
    entries: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    # The rows of each entry that holds a run of one table's inserts or deletes (a JSON list), by the entry's place.
    parts: dict[int, int] = field(default_factory=dict)


_COUNT, _SIZE, _RELID = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">I")
_BEGIN, _COMMIT, _FLAGS_LSN = struct.Struct(">qqI"), struct.Struct(">bqqq"), struct.Struct(">bq")
_TYPE = struct.Struct(">Ii")
_TEXT, _NULL, _UNCHANGED = ord("t"), ord("n"), ord("u")
_B, _C, _R, _M, _I, _U, _D = (ord(k) for k in "BCRMIUD")
_SKIPPED = {ord(k) for k in "OYT"}  # origins (not used), types (oids suffice), truncations (not published)
_OLD_MARKERS = (ord("K"), ord("O"))


def _string(data: bytes, at: int) -> tuple[str, int]:
    end = data.index(b"\0", at)
    return data[at:end].decode(), end + 1


def _image(data: bytes, at: int, relation: Relation, old: dict[str, Any] | None) -> tuple[dict[str, Any], int]:
    """A TupleData as a row image: per column 'n' (NULL), 'u' (an unchanged TOASTed value: the full old row,
    REPLICA IDENTITY FULL, has it) or 't' and the text."""
    (count,) = _COUNT.unpack_from(data, at)
    at += 2
    if count != len(relation.columns):
        raise WalError(f"a row of {relation.name} with {count} columns, its relation has {len(relation.columns)}")
    image: dict[str, Any] = {}
    for name, convert in relation.columns:
        kind = data[at]
        at += 1
        if kind == _TEXT:
            (size,) = _SIZE.unpack_from(data, at)
            at += 4
            text = data[at : at + size].decode()
            at += size
            image[name] = text if convert is None else convert(text)
        elif kind == _NULL:
            image[name] = None
        elif kind == _UNCHANGED:
            image[name] = (old or {}).get(name)
        else:
            raise WalError(f"a column sent as {chr(kind)!r}; only text columns are read")
    return image, at


def _image_text(data: bytes, at: int, relation: Relation) -> str:
    """A TupleData as its row image's JSON text, written straight from the bytes: exactly what json.dumps of
    `_image` gives, without a dict or a converter call per value. Every value of a backlog's inserts and
    deletes passes here: one pass with local names, the values put into the relation's template at once."""
    (count,) = _COUNT.unpack_from(data, at)
    at += 2
    kinds = relation.kinds
    if count != len(kinds):
        raise WalError(f"a row of {relation.name} with {count} columns, its relation has {len(kinds)}")
    values: list[str] = []
    append, size_of, quote = values.append, _SIZE.unpack_from, encode_basestring_ascii
    for kind in kinds:
        marker = data[at]
        if marker == _TEXT:
            (size,) = size_of(data, at + 1)
            at += 5
            raw = data[at : at + size]
            at += size
            if kind == _STRING:
                append(quote(raw.decode()))
            elif kind == _INTEGER:
                append(raw.decode())
            elif kind == _BOOLEAN:
                append("true" if raw == b"t" else "false")
            else:
                append(json.dumps(_float(raw.decode())))
        elif marker in (_NULL, _UNCHANGED):  # unchanged: no old row to take it from (no insert or delete has one)
            append("null")
            at += 1
        else:
            raise WalError(f"a column sent as {chr(marker)!r}; only text columns are read")
    return relation.template % tuple(values)


class PgOutputDecoder:
    """Turns pgoutput messages (protocol 1, text values) into the publication's transactions.

    Relations are remembered across calls (a peek re-sends those it needs, so a fresh decoder works too).
    Entries a replay context marks `nolog` are dropped; a transaction without entries is dropped. The images of
    inserts and deletes (a backlog's bulk) are written as JSON text straight from the message bytes; updates
    (whose unchanged TOASTed values come from the old row) and REPL_TEXT rows go through a dict."""

    def __init__(self, account: str, text_table: str) -> None:
        self.account = account
        self.text_table = text_table
        self.relations: dict[int, Relation] = {}
        self._txn: Decoded | None = None
        self._nolog = False
        self._group: tuple[str, int] | None = None  # (table, op) of the open bulk entry
        self._rows: list[str] = []  # the open bulk entry's images (JSON text)
        self.last_end = 0  # the LSN past the last commit read

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction's BEGIN was read and not yet its COMMIT."""
        return self._txn is not None

    def feed(self, messages: Sequence[bytes], after: int = 0) -> list[Decoded]:
        """The transactions the messages commit, skipping those ending at or before `after` (already stored)."""
        out: list[Decoded] = []
        rows = self._rows
        relations = self.relations
        for message in messages:
            data = bytes(message)
            kind = data[0]
            if kind in (_I, _D):
                # The bulk of a backlog, inlined: a run of one table's inserts (or deletes) is one entry.
                relation = relations[_RELID.unpack_from(data, 1)[0]]
                if self._nolog:
                    continue
                if relation.name == self.text_table:
                    self._on_row(kind, relation, data)
                    continue
                if self._group != (relation.name, kind):
                    self._close_group()
                    self._current()
                    self._group = (relation.name, kind)
                rows.append(_image_text(data, 6, relation))  # after the relation id and the 'N', 'K' or 'O' byte
                continue
            done = self._message(kind, data)
            if done is not None and done.end > after and done.entries:
                out.append(done)
        return out

    def _message(self, kind: int, data: bytes) -> Decoded | None:
        if kind == _B:
            _final, micros, _xid = _BEGIN.unpack_from(data, 1)
            self._txn = Decoded(end=0, at=_EPOCH + dt.timedelta(microseconds=micros))
            self._nolog = False
        elif kind == _C:
            _flags, _commit, end, _micros = _COMMIT.unpack_from(data, 1)
            self._close_group()
            txn, self._txn = self._current(), None
            txn.end = self.last_end = end
            return txn
        elif kind == _R:
            (relid,) = _RELID.unpack_from(data, 1)
            _namespace, at = _string(data, 5)
            name, at = _string(data, at)
            (count,) = _COUNT.unpack_from(data, at + 1)  # after the replica identity setting
            at += 3
            columns = []
            for _ in range(count):
                column, at = _string(data, at + 1)  # after the column's flags
                oid, _typmod = _TYPE.unpack_from(data, at)
                at += 8
                columns.append((column, oid))
            self.relations[relid] = Relation.of(name, columns)
        elif kind == _M:
            flags, _lsn = _FLAGS_LSN.unpack_from(data, 1)
            prefix, at = _string(data, 10)
            (size,) = _SIZE.unpack_from(data, at)
            content = data[at + 4 : at + 4 + size].decode()
            if flags & 1:
                self._on_message(prefix, content)
        elif kind == _U:
            self._on_row(kind, self.relations[_RELID.unpack_from(data, 1)[0]], data)
        elif kind not in _SKIPPED:
            raise WalError(f"pgoutput message {chr(kind)!r} is not one this reader knows")
        return None

    def _current(self) -> Decoded:
        if self._txn is None:
            raise WalError("a change outside a transaction")
        return self._txn

    def _on_message(self, prefix: str, content: str) -> None:
        txn = self._current()
        if prefix == CONTEXT_PREFIX:
            context = json.loads(content)
            self._nolog = bool(context.get("nolog"))
            txn.origin = context.get("origin") or None
        elif prefix == ENTRY_PREFIX + self.account and not self._nolog:
            entry = json.loads(content)
            self._add(entry["tbl"], entry["op"], entry["new"], None)

    def _on_row(self, kind: int, relation: Relation, data: bytes) -> None:
        """An update, or a row of the REPL_TEXT table, decoded into dicts."""
        old: dict[str, Any] | None = None
        at = 5
        marker = data[at]
        if marker in _OLD_MARKERS:
            old, at = _image(data, at + 1, relation, None)  # an update's new tuple follows its own 'N'
        new = _image(data, at + 1, relation, old)[0] if kind != _D else None
        if self._nolog:
            return
        if relation.name == self.text_table:
            if kind == _I and new is not None and new.get("ACCOUNT") == self.account:
                args = new.get("ARGS")
                image = {"stmt": new.get("STMT"), "args": json.loads(args) if args else []}
                self._add("", "T", json.dumps(image), None)
            return
        self._add(relation.name, "U", json.dumps(new), json.dumps(old) if old is not None else None)

    def _add(self, table: str, op: str, new: str | None, old: str | None) -> None:
        self._close_group()
        self._current().entries.append((table, op, new, old))

    def _close_group(self) -> None:
        if self._group is None:
            return
        table, kind = self._group
        images = "[" + ", ".join(self._rows) + "]"
        txn = self._current()
        txn.parts[len(txn.entries)] = len(self._rows)
        txn.entries.append((table, "I", images, None) if kind == _I else (table, "D", None, images))
        self._group = None
        self._rows.clear()


def store_parameters(txns: Sequence[Decoded], base: int, local: str) -> tuple[str, str, int]:
    """(transactions JSON, entries JSON, new count) for store_sql; TXID is the commit's end LSN (unique)."""
    tx_rows = [
        {"txid": t.end, "n": base + i + 1, "origin": t.origin or local, "at": t.at.isoformat(sep=" ")}
        for i, t in enumerate(txns)
    ]
    entries = [[t.end, tbl, op, new, old] for t in txns for (tbl, op, new, old) in t.entries]
    return json.dumps(tx_rows), json.dumps(entries), base + len(txns)

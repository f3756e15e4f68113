"""The pgoutput decoder (engine.wal_capture) on messages built here byte by byte: the images it writes straight
from the bytes are exactly json.dumps of the values the capture gives, entry by entry."""

from __future__ import annotations

import json
import struct

from replication_admin.engine import wal_capture

BOOL, INT4, INT8, FLOAT8, NUMERIC, TEXT, TIMESTAMP, BYTEA = 16, 23, 20, 701, 1700, 25, 1114, 17
COLUMNS = [("id", INT8), ("name", TEXT), ("price", NUMERIC), ("ok", BOOL), ('ra%s "tio', FLOAT8), ("seen", TIMESTAMP)]


def _s(text: str) -> bytes:
    return text.encode() + b"\0"


def relation(relid: int, name: str, columns: list[tuple[str, int]]) -> bytes:
    body = b"R" + struct.pack(">I", relid) + _s("public") + _s(name) + struct.pack(">bh", ord("f"), len(columns))
    for column, oid in columns:
        body += struct.pack(">b", 1) + _s(column) + struct.pack(">Ii", oid, -1)
    return body


def tuple_data(values: list[str | None]) -> bytes:
    body = struct.pack(">h", len(values))
    for value in values:
        if value is None:
            body += b"n"
        elif value == "<unchanged>":
            body += b"u"
        else:
            raw = value.encode()
            body += b"t" + struct.pack(">i", len(raw)) + raw
    return body


def begin(micros: int = 0) -> bytes:
    return b"B" + struct.pack(">qqI", 0, micros, 7)


def commit(end: int) -> bytes:
    return b"C" + struct.pack(">bqqq", 0, end - 1, end, 0)


def insert(relid: int, values: list[str | None]) -> bytes:
    return b"I" + struct.pack(">I", relid) + b"N" + tuple_data(values)


def delete(relid: int, values: list[str | None]) -> bytes:
    return b"D" + struct.pack(">I", relid) + b"O" + tuple_data(values)


def update(relid: int, old: list[str | None], new: list[str | None]) -> bytes:
    return b"U" + struct.pack(">I", relid) + b"O" + tuple_data(old) + b"N" + tuple_data(new)


def message(prefix: str, content: str) -> bytes:
    raw = content.encode()
    return b"M" + struct.pack(">bq", 1, 0) + _s(prefix) + struct.pack(">i", len(raw)) + raw


ROWS = [
    ["1", "a'b \"c\\ é ☃\n", "12.30", "t", "1.5", "2026-11-22 10:11:12.123456"],
    ["-9223372036854775808", "", "-0.01", "f", "100000", None],
    ["3", None, None, None, "NaN", "2026-01-01 00:00:00"],
    ["4", "x\u0001\ty", "1e+30", "t", "-Infinity", "1999-12-31 23:59:59"],
]


def expected(values: list[str | None]) -> dict:
    """The image the capture gives: numbers and booleans as JSON, the rest as its text."""
    image: dict = {}
    for (column, oid), value in zip(COLUMNS, values, strict=True):
        convert = wal_capture.converter(oid)
        image[column] = None if value is None else (value if convert is None else convert(value))
    return image


def test_a_backlog_of_inserts_and_deletes_is_logged_as_json_dumps_of_each_row_in_one_entry_per_run():
    decoder = wal_capture.PgOutputDecoder("acct", "REPL_TEXT")
    messages = [
        relation(5, "items", COLUMNS),
        begin(1_000_000),
        *(insert(5, row) for row in ROWS),
        *(delete(5, row) for row in ROWS[:2]),
        insert(5, ROWS[3]),
        commit(100),
    ]
    [txn] = decoder.feed(messages)
    assert txn.end == 100 and str(txn.at) == "2000-01-01 00:00:01"
    assert txn.entries == [
        ("items", "I", json.dumps([expected(r) for r in ROWS]), None),
        ("items", "D", None, json.dumps([expected(r) for r in ROWS[:2]])),
        ("items", "I", json.dumps([expected(ROWS[3])]), None),
    ]
    assert json.loads(txn.entries[0][2])[1]['ra%s "tio'] == 100000.0  # float8's '100000' as json.dumps writes 100000.0


def test_an_update_takes_an_unchanged_toasted_value_from_the_old_row_and_the_context_and_entries_keep_their_place():
    decoder = wal_capture.PgOutputDecoder("acct", "REPL_TEXT")
    old, new = ROWS[0], [*ROWS[0][:1], "<unchanged>", "13.00", *ROWS[0][3:]]
    messages = [
        relation(5, "items", COLUMNS),
        begin(),
        message(wal_capture.CONTEXT_PREFIX, json.dumps({"nolog": False, "origin": "sub1"})),
        insert(5, ROWS[1]),
        update(5, old, new),
        message(*wal_capture.entry_message("acct", "T", "", '{"stmt": "x"}')),
        message(*wal_capture.entry_message("other", "T", "", '{"stmt": "y"}')),
        commit(10),
        begin(),
        message(wal_capture.CONTEXT_PREFIX, json.dumps({"nolog": True})),
        insert(5, ROWS[2]),
        commit(20),
        begin(),
        insert(5, ROWS[3]),
        commit(30),
    ]
    txns = decoder.feed(messages, after=10)
    assert [t.end for t in txns] == [30]  # the first is stored already, the second is a subscriber's own apply
    decoder = wal_capture.PgOutputDecoder("acct", "REPL_TEXT")
    first = decoder.feed(messages)[0]
    assert first.origin == "sub1"
    assert first.entries == [
        ("items", "I", json.dumps([expected(ROWS[1])]), None),
        ("items", "U", json.dumps({**expected(old), "price": "13.00"}), json.dumps(expected(old))),
        ("", "T", '{"stmt": "x"}', None),
    ]

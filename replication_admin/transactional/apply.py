"""Applying whole publisher transactions on a subscriber, in order, the level moved in the same transaction.
A transaction that cannot be applied halts its subscription there, or (on_error = skip, or a person's
decision) is skipped and recorded as a gap; the keys of a gap can be repaired from the publisher's rows."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyodbc
from django.conf import settings

from replication_admin.core import connections
from replication_admin.core.conflicts import key_text
from replication_admin.core.introspection import lookup_table, with_constraints
from replication_admin.core.transactions import (
    is_retryable,
    run_each,
    with_retries,
)
from replication_admin.engine import dialects, levels, schema_changes
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.constraints import copy_table_ddl
from replication_admin.engine.objects import key_columns
from replication_admin.engine.row_filter import FilterError, RowFilter, compile_filters
from replication_admin.engine.schema import TableInfo
from replication_admin.models import (
    Server,
    SkippedTransaction,
)
from replication_admin.transactional import lookups, tracers
from replication_admin.transactional.lookups import (
    TrxError,
    _d,
    schema_of,
)

# At most this many keys are listed for a halted or skipped transaction (a bulk change lists its first ones).
KEYS_LISTED = 1000

log = logging.getLogger(__name__)


@dataclass
class Target:
    """A subscriber and the tables it replays into (described once per sync, and again after a schema change)."""

    server: Server
    publisher: str
    account: str
    tables: dict[str, TableInfo] = field(default_factory=dict)
    source_dialect: str = ""  # the publisher's: a schema change's column rows are read with it
    replay_user: str = ""  # REPL_SUBSCRIBE's replaying user: the rows are written with its privileges
    # Rows of held conflicts (table, key_text): the subscriber keeps its version until a person decides.
    held: set[tuple[str, str]] = field(default_factory=set)
    # An updateable subscription's push-back log: its capture triggers follow a schema change of the copy.
    push_account: str = ""
    # Per table: whether its copy has a unique index besides the primary key (other_unique).
    uniques: dict[str, bool] = field(default_factory=dict)
    # Kept from an earlier step (a follower's FollowMemo.target): its descriptions may predate a change of the tables.
    remembered: bool = False
    # The subscription's apply timeout (profile.apply_timeout), seconds; 0: none. Set by the sync for each step.
    timeout: int = 0
    # The subscription's row filters and column lists by table (use_filters), and what they were compiled from.
    filters: dict[str, RowFilter] = field(default_factory=dict)
    filter_source: dict = field(default_factory=dict)
    # The publication's table names (a foreign key to a table outside them is not replicated), read when needed.
    published: set[str] | None = None

    def use_filters(self, stored: Mapping[str, Any]) -> Target:
        """Apply with the subscription's row filters (ReplSubscriber.row_filters), compiled again only when changed."""
        if dict(stored) != self.filter_source:
            try:
                self.filters = compile_filters(stored, self.source_dialect or self.server.dialect)
            except FilterError as exc:
                raise TrxError(f"{self.server.name}'s row filter: {exc}") from None
            self.filter_source = dict(stored)
        return self

    def published_names(self) -> set[str] | None:
        """The publication's table names as the catalog has them (None: not known here)."""
        if self.published is None:
            try:
                account = lookups.publication(self.publisher, self.account)
            except TrxError:
                return None
            self.published = {lookups.item_table(i.item) for i in lookups.table_items(account)}
        return self.published

    def forget_tables(self) -> None:
        """Describe the tables again when next used."""
        self.tables.clear()
        self.uniques.clear()
        self.remembered = False

    @property
    def d(self):
        return _d(self.server)

    def is_held(self, table: str, key: list) -> bool:
        return bool(self.held) and (table, key_text(key)) in self.held

    def other_unique(self, name: str, cursor) -> bool:
        """Whether the subscriber's copy of `name` has a unique index besides its primary key (any, on columns, an
        expression or part of the rows), read on the apply's `cursor` once per sync."""
        if name not in self.uniques:
            d = self.d
            rows = cursor.execute(*d.indexes_sql(schema_of(self.server), self.table(name).name)).fetchall()
            self.uniques[name] = any(int(r[1] or 0) for r in rows)
        return self.uniques[name]

    def table(self, name: str) -> TableInfo:
        if name not in self.tables:
            info = lookup_table(self.server, name)
            if info is None:
                raise TrxError(f"table {name!r} does not exist on {self.server.name}")
            self.tables[name] = info
        return self.tables[name]


def create_table_from(target: Target, definition: dict) -> bool:
    """A 'C' entry: create the published table on the subscriber when it is missing (DDL runs outside
    the apply transaction: MariaDB would commit it). Returns True when it was created."""
    name = definition["table"]
    if lookup_table(target.server, name) is not None:
        return False
    table = sql.definition_table(definition)
    run_each(target.server, copy_table_ddl(target.d, name, schema_of(target.server), table))
    for item in table.untranslated:
        log.warning("%s.%s: not copied: %s", target.server.name, name, item)
    target.tables.pop(name, None)
    return True


@dataclass(frozen=True)
class _Shape:
    """A table's images of one shape (the columns they carry), as the apply writes them: the subscriber's table as
    far as the images carry columns, its codec, and the set-based statements (None: that run goes value by value)."""

    table: TableInfo
    codec: sql.RowCodec
    names: tuple[str, ...]  # each column's name in the images
    key_names: tuple[str, ...]  # the key columns' names in the images, in key order
    upsert: str | None
    delete: str | None


# Images sent in one JSON array at most (a window bounded by rows sends fewer), and its characters at most (MariaDB
# takes a statement of up to max_allowed_packet, 16 MiB by default, in UTF-8): a larger array is sent in halves.
IMAGES_PER_STATEMENT = 5000
PARAMETER_CHARS = 4 * 1024 * 1024
# A run of inserts or deletes of a transaction read in runs (sql.PackedTransaction) with at least sql.TEXT_RUN_ROWS
# entries is sent as the publisher's server joined its images, with no Python per image; a shorter one is decoded and
# goes with its neighbours (whose deletes may be held back behind the writes, which a run sent as text never is).
TEXT_RUN_ROWS = sql.TEXT_RUN_ROWS


class _Replay:
    """Replays a batch's transactions in order inside one subscriber transaction.

    Consecutive row writes (inserts and updates) of one table are sent together, and consecutive deletes of one
    table too, across the transactions of the batch: the batch commits as a whole, so only the order of the changes
    matters, not their grouping. Set-based where the subscriber's dialect can read every column from JSON exactly as
    RowCodec decodes it: the run's images go as one JSON array parameter that the server expands (an upsert keeping
    the last image of each key, a delete joined to the keys), with no Python per value. Otherwise (a column of a type
    of its own, a dialect without the statements) the run is decoded value by value and sent as multi-row
    parameterised upserts and deletes, a key written twice keeping its last image. Anything else (a call, another
    table or shape) sends what is pending first.

    A set-based delete arriving while writes of its table are pending is held back behind them (`deferred`) instead
    of cutting the run, unless the table has a unique index besides its key: a workload that inserts, updates and
    deletes in each transaction then goes in two statements per batch, not two per transaction. The pending writes go
    first, then the held-back deletes; a write of a key whose delete is held back sends both first. Per key the order
    is kept; across keys a delete goes later than on the publisher, which no constraint can refuse: the row is gone
    from the publisher before the batch ends, nothing written after its delete can refer to it, and with no other
    unique index no later write can need its values to be free."""

    def __init__(self, cursor, target: Target) -> None:
        self.cursor, self.target = cursor, target
        self.d, self.dialect = target.d, target.server.dialect
        # What is pending: ("json", statement, shape, deleting), ("text", statement, shape, deleting) or
        # ("rows", table, deleting).
        self.run: tuple | None = None
        self.texts: list[tuple[str, int]] = []  # a text run's parts: (images joined by commas, how many)
        self.rows: dict[tuple, list] = {}  # key -> the row's last image (or its key), in first-change order
        self.images: list[dict] = []  # the pending images of a set-based run, in order
        # By table name and the image's column names (hashing a TableInfo per entry costs).
        self.shapes: dict[tuple[str, tuple[str, ...]], _Shape] = {}
        self.last_shape: tuple[str, Any, _Shape] | None = None  # the last one found: (table, its image's keys, shape)
        self.statements = 0  # statements sent for rows (what set-based saves)
        # Deletes held back behind a pending set-based write run of their table: (statement, shape), their images
        # in order, and their keys.
        self.deferred: tuple[str, _Shape] | None = None
        self.deferred_images: list[dict] = []
        self.deferred_keys: set[tuple] = set()

    def flush(self) -> None:
        run, rows, images = self.run, list(self.rows.values()), self.images
        self.run, self.rows, self.images = None, {}, []
        if run is not None and run[0] == "text":
            images, self.texts = self.texts, []  # type: ignore[assignment]
        deferred, held_back = self.deferred, self.deferred_images
        self.deferred, self.deferred_images, self.deferred_keys = None, [], set()
        if run is not None:
            self._flush_run(run, rows, images)
        if deferred is not None:
            self._flush_run(("json", deferred[0], deferred[1], True), [], held_back)

    def _flush_run(self, run: tuple, rows: list, images: list) -> None:
        if run[0] == "text":
            self._send_texts(run[1], run[2], run[3], images)
            return
        if run[0] == "json":
            _kind, statement, shape, deleting = run
            for start in range(0, len(images), IMAGES_PER_STATEMENT):
                self._send(statement, shape, deleting, images[start : start + IMAGES_PER_STATEMENT])
            return
        _kind, table, deleting = run
        if not rows:
            return
        width = len(rows[0])
        per = max(1, 900 // max(1, width))
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            statement = (sql.delete_many_sql if deleting else sql.upsert_sql)(self.d, table, len(chunk))
            self.cursor.execute(statement, [v for row in chunk for v in row])
            self.statements += 1

    def _send(self, statement: str, shape: _Shape, deleting: bool, window: list[dict]) -> None:
        """One set-based statement for `window`, halved while its JSON is over PARAMETER_CHARS (in order: of the
        images of one key, the last is still written last)."""
        parameter = sql.images_parameter(window)
        if len(parameter) > PARAMETER_CHARS and len(window) > 1:
            half = len(window) // 2
            self._send(statement, shape, deleting, window[:half])
            self._send(statement, shape, deleting, window[half:])
            return
        if not self.d.json_text_holds_nul and "\\u0000" in parameter:
            # A text with NUL, which this server's JSON functions cut there: this window goes value by value.
            self._by_value(shape, deleting, window)
            return
        self.cursor.execute(statement, [parameter])
        self.statements += 1

    def _send_texts(self, statement: str, shape: _Shape, deleting: bool, parts: list[tuple[str, int]]) -> None:
        """A text run's parts (images as the publisher's server joined them) in statements of at most
        IMAGES_PER_STATEMENT images and PARAMETER_CHARS characters; a part larger than that alone is decoded and
        sent as a run of images is (_send halves it)."""
        group: list[str] = []
        images = chars = 0
        for text, rows in [*parts, ("", 0)]:
            if group and (not rows or images + rows > IMAGES_PER_STATEMENT or chars + len(text) > PARAMETER_CHARS):
                parameter = "[" + ",".join(group) + "]"
                if not self.d.json_text_holds_nul and "\\u0000" in parameter:
                    self._by_value(shape, deleting, sql.load_image(parameter))  # type: ignore[arg-type]
                else:
                    self.cursor.execute(statement, [parameter])
                    self.statements += 1
                group, images, chars = [], 0, 0
            if not rows:
                break
            if rows > IMAGES_PER_STATEMENT or len(text) > PARAMETER_CHARS:
                self._flush_run(("json", statement, shape, deleting), [], sql.load_image("[" + text + "]"))  # type: ignore[arg-type]
                continue
            group.append(text)
            images, chars = images + rows, chars + len(text) + 1

    def _text_run(self, run: sql.Run) -> bool:
        """Pend a run of inserts or deletes as its joined images (see TEXT_RUN_ROWS); False where it is to be decoded:
        a short run, another kind, images that are not objects, held keys to look for, or no set-based statement."""
        if run.op not in ("I", "D") or run.rows < TEXT_RUN_ROWS or run.names is None or self.target.held:
            return False
        if run.table in self.target.filters:
            return False  # each image is looked at
        shape = self.shape(run.table, dict.fromkeys(run.names))
        deleting = run.op == "D"
        statement = shape.delete if deleting else shape.upsert
        if statement is None:
            return False
        if self.deferred is not None or (
            self.run is not None and (self.run[0] != "text" or self.run[1] is not statement)
        ):
            self.flush()  # what is pending goes first: a text run is not looked into for the keys it writes
        if self.run is None:
            self.run = ("text", statement, shape, deleting)
        self.texts.append((run.old if deleting else run.new, run.rows))
        return True

    def _by_value(self, shape: _Shape, deleting: bool, images: list[dict]) -> None:
        """Images of a set-based run written as the value-by-value apply writes them."""
        whole = self.target.table(shape.table.name)
        for image in images:
            if deleting:
                self._pend(whole, True, shape.codec.key(image), shape.codec.key(image))
            else:
                row = shape.codec.row(image)
                self._pend(shape.table, False, shape.codec.key_of(row), row)
        self.flush()

    def _pend(self, table: TableInfo, deleting: bool, key: list, row: list) -> None:
        run = ("rows", table, deleting)
        if self.run is not None and (self.run[0] != "rows" or self.run[1] is not table or self.run[2] != deleting):
            self.flush()
        self.run = run
        self.rows[tuple(key)] = row

    def _pend_image(self, statement: str, image: dict, shape: _Shape, deleting: bool) -> None:
        run = self.run
        if self.deferred_keys and not deleting and tuple(image.get(n) for n in shape.key_names) in self.deferred_keys:
            self.flush()  # the key's held-back delete goes before this write of it
            run = None
        if run is not None and run[1] is statement and run[0] == "json":  # the run goes on (one statement per shape)
            self.images.append(image)
            return
        if run is not None and (run[0] != "json" or run[1] != statement):
            self.flush()
        if self.run is None:
            self.run = ("json", statement, shape, deleting)
        self.images.append(image)

    def delete(self, table: TableInfo, key: list) -> None:
        self._pend(table, True, key, key)

    def _delete_image(self, shape: _Shape, image: dict) -> None:
        """Delete the row of `image`'s key (set-based where the shape has a delete statement; held back behind the
        pending writes of its table where that keeps every constraint, see the class)."""
        if shape.delete is not None:
            if self._may_defer(shape):
                self.deferred = self.deferred or (shape.delete, shape)
                self.deferred_images.append(image)
                self.deferred_keys.add(tuple(image.get(n) for n in shape.key_names))
                return
            self._pend_image(shape.delete, image, shape, True)
        else:
            self.delete(self.target.table(shape.table.name), shape.codec.key(image))

    def _may_defer(self, shape: _Shape) -> bool:
        """Whether a delete of `shape` can be held back behind the pending run: set-based writes of the same table,
        deletes held back (if any) of the same shape, and no unique index on the copy besides its key."""
        run, deferred = self.run, self.deferred
        if run is None or run[0] != "json" or run[3] or run[2].table.name != shape.table.name:
            return False
        if deferred is not None and deferred[0] is not shape.delete:
            return False
        return not self.target.other_unique(shape.table.name, self.cursor)

    def _held(self, entry_table: str, shape: _Shape, image: dict) -> bool:
        # Only an updateable subscription holds keys: decoding the key costs nothing elsewhere.
        return bool(self.target.held) and self.target.is_held(entry_table, shape.codec.key(image))

    def transaction(self, txn: sql.Transaction) -> None:
        if txn.origin == self.target.server.name:
            return  # the subscriber's own change, pushed earlier: it has it already
        if isinstance(txn, sql.PackedTransaction) and any(r.rows >= TEXT_RUN_ROWS for r in txn.runs):
            for run in txn.runs:
                if not self._text_run(run):
                    for entry in run.entries():
                        self.entry(entry)
            return
        for entry in txn.entries:
            self.entry(entry)

    def entry(self, entry: sql.Entry) -> None:
        """Replay one entry (after the ones before it)."""
        d, cursor = self.d, self.cursor
        if self.target.filters and entry.op in ("I", "U", "D"):
            row_filter = self.target.filters.get(entry.table)
            if row_filter is not None:
                filtered = _filtered(entry, row_filter)
                if filtered is None:
                    return
                entry = filtered
        if entry.op in ("I", "U"):
            assert entry.new is not None
            shape = self.shape(entry.table, entry.new)
            if shape.upsert is None:
                self._write_row(entry, shape)
                return
            if self._held(entry.table, shape, entry.new):
                return
            if entry.op == "U" and entry.old is not None:
                old = entry.old
                old_names = self.shape(entry.table, old).key_names
                if [old.get(n) for n in old_names] != [entry.new.get(n) for n in shape.key_names]:
                    self._delete_image(self.shape(entry.table, old), old)
            self._pend_image(shape.upsert, entry.new, shape, False)
            return
        if entry.op == "C":
            return  # created before the transaction (create_table_from)
        if entry.op == "P":
            self.flush()
            if not d.has_ddl_triggers:
                raise TrxError(
                    f"the new definition of {(entry.new or {}).get('name')} is PostgreSQL's; "
                    f"{self.target.server.name} is not PostgreSQL (publish the procedure's calls only and "
                    "define it there)"
                )
            cursor.execute(str((entry.new or {}).get("definition", "")))
            return
        if entry.op == "T":
            self.flush()
            payload = entry.new or {}
            statement = sql.typed_call(d, str(payload.get("stmt", "")), payload.get("types"))
            args = list(payload.get("args") or [])
            cursor.execute(statement, args) if args else cursor.execute(statement)
            return
        if entry.op == "S":
            self.flush()
            self.schema_change(entry.new or {})
            return
        if entry.op == tracers.MARKER:
            return  # a tracer token: timed by the apply once committed, nothing to write here
        assert entry.old is not None
        shape = self.shape(entry.table, entry.old)
        if not self._held(entry.table, shape, entry.old):
            self._delete_image(shape, entry.old)

    def _write_row(self, entry: sql.Entry, shape: _Shape) -> None:
        """An insert or update decoded value by value (its shape cannot go set-based)."""
        assert entry.new is not None
        row = shape.codec.row(entry.new)
        key = shape.codec.key_of(row)
        if self.target.is_held(entry.table, key):
            return
        if entry.op == "U" and entry.old is not None:
            old_key = shape.codec.key(entry.old)
            if old_key != key:
                self.delete(self.target.table(entry.table), old_key)
        self._pend(shape.table, False, key, row)

    def codec(self, name: str, image: dict) -> tuple[TableInfo, sql.RowCodec]:
        shape = self.shape(name, image)
        return shape.table, shape.codec

    def shape(self, name: str, image: dict) -> _Shape:
        """The subscriber's table as far as `image` carries columns, its codec and set-based statements: a row is
        written with the columns its image has (the subscriber's own columns, and those of another shape of the
        publisher's table around a schema change, are left as they are)."""
        last = self.last_shape
        if last is not None and last[0] == name and last[1] == image.keys():
            return last[2]  # the same columns as the entry before (a run's images): no key tuple made
        found = self.shapes.get((name, tuple(image)))
        if found is None:
            whole = self.target.table(name)
            table = sql.image_table(whole, image)
            if len(table.primary_key) != len(whole.primary_key):
                raise TrxError(
                    f"a change of {name} carries no value for a key column of {self.target.server.name}'s copy"
                )
            names = sql.image_names(table, image)
            by_column = dict(zip((c.name for c in table.columns), names, strict=True))
            key_names = tuple(by_column[k.name] for k in table.primary_key)
            found = self.shapes[(name, tuple(image))] = _Shape(
                table=table,
                codec=sql.RowCodec.of(table, self.dialect),
                names=names,
                key_names=key_names,
                upsert=sql.images_upsert_sql(self.d, table, names),
                delete=sql.images_delete_sql(self.d, whole, key_names),
            )
        self.last_shape = (name, image.keys(), found)
        return found

    def constraints_dropped_first(self, txns: Sequence[sql.Transaction]) -> None:
        """The constraints the first 'S' entry of each table in the batch drops (NOT NULLs too), dropped before the
        batch's rows.
        A MariaDB or SQLite publisher logs its entry when the change is seen, after rows the publisher took
        without the constraint; dropped early, a constraint refuses nothing the publisher had (its rows met it
        until then). The entry itself finds them gone."""
        seen: set[str] = set()
        for txn in txns:
            if txn.origin == self.target.server.name:
                continue
            for entry in txn.entries_of(("S",)):
                name = str((entry.new or {}).get("table", ""))
                if name not in seen:
                    seen.add(name)
                    self.schema_change(entry.new or {}, drops_only=True)

    def schema_change(self, payload: dict, drops_only: bool = False) -> None:
        """An 'S' entry: the publisher's table changed shape here; the copy follows (what it has already, it keeps).
        With `drops_only`, only the constraints it drops (schema_changes.RELAXING_KINDS)."""
        name = str(payload.get("table", ""))
        source = dialects.get(self.target.source_dialect or self.dialect)
        before, after = payload.get("before") or [], payload.get("after") or []
        found = schema_changes.between(source, name, before, after, self.target.published_names())
        row_filter = self.target.filters.get(name)
        if row_filter is not None and row_filter.spec.columns:
            found = [c for c in found if _in_column_list(c, row_filter.kept)]
        if drops_only:
            found = [c for c in found if c.kind in schema_changes.RELAXING_KINDS]
            if not found:
                return
        copy = with_constraints(self.target.server, self.target.table(name), conn=self.cursor.connection)
        try:
            steps = schema_changes.copy_steps(self.d, copy, found)
        except schema_changes.SchemaChangeError as exc:
            raise TrxError(f"{self.target.server.name}.{name} cannot follow {self.target.publisher}: {exc}") from None
        statements = [statement for _change, part in steps for statement in part]
        for change, part in steps:
            for statement in part:
                try:
                    self.cursor.execute(statement)
                except pyodbc.Error as exc:
                    if change.kind not in schema_changes.REFUSABLE_KINDS or is_retryable(exc):
                        raise
                    # One line naming the change and why the copy refuses it (its rows break it, most often:
                    # a duplicate under a new UNIQUE, a NULL under a new NOT NULL).
                    reason = " ".join(str(exc.args[-1]).split())
                    raise TrxError(
                        f"{self.target.server.name}.{name} cannot follow {self.target.publisher}'s change "
                        f"'{change}': {reason}"
                    ) from None
        if drops_only and not statements:
            return
        for line in schema_changes.left_out(self.d, found):
            log.info("%s: %s follows %s without: %s", self.target.server.name, name, self.target.publisher, line)
        # Described on this connection: where DDL is transactional, others see the old shape until the commit.
        changed = connections.describe_table(self.target.server, copy.name, conn=self.cursor.connection)
        self.target.tables[name] = changed
        self.target.uniques.pop(name, None)
        if statements and self.target.push_account:
            # The copy's own changes go back through triggers that name its columns (MariaDB): made anew.
            objects = sql.capture_objects(self.d, self.target.push_account, changed, self.target.server.name)
            for statement in self.d.replace_objects_sql(objects.drop, objects.create):
                self.cursor.execute(statement)
        for shape in [s for s in self.shapes if s[0] == name]:
            del self.shapes[shape]
        self.last_shape = None
        if statements:
            log.info(
                "%s: %s follows %s: %s",
                self.target.server.name,
                name,
                self.target.publisher,
                "; ".join(map(str, found)),
            )


def _in_column_list(change: schema_changes.Change, kept: set[str]) -> bool:
    """Whether a copy holding only the `kept` columns (lower case) follows `change`: a column or constraint outside
    them is not its (drops always are: they change nothing where there is nothing)."""
    if change.kind in (schema_changes.DROP, schema_changes.DROP_UNIQUE, schema_changes.DROP_FOREIGN_KEY):
        return True
    if change.unique is not None:
        return all(c.lower() in kept for c in change.unique.columns)
    if change.foreign_key is not None:
        return all(c.lower() in kept for c in change.foreign_key.columns)
    return change.column.lower() in kept


def _filtered(entry: sql.Entry, row_filter: RowFilter) -> sql.Entry | None:
    """The entry as the subscriber's copy of a filtered table takes it: a row whose new image is out of the filter is
    not written, or deleted when an update takes it out; the images carry the listed columns only. None: nothing."""
    if entry.op == "D":
        return replace(entry, old=row_filter.project(entry.old)) if entry.old is not None else entry
    assert entry.new is not None
    if row_filter.matches(entry.new):
        old = row_filter.project(entry.old) if entry.old is not None else None
        return replace(entry, new=row_filter.project(entry.new), old=old)
    if entry.op == "I":
        return None
    # An update out of the filter: the copy's row goes (it may not be there; a delete of no row changes nothing).
    gone = entry.old if entry.old is not None else entry.new
    return sql.Entry(entry.seq, entry.table, "D", None, row_filter.project(gone), entry.part)


def replay(cursor, target: Target, txns: Iterable[sql.Transaction]) -> int:
    """Replay transactions in order on `cursor`'s open transaction (the context and the level are the caller's).
    Returns how many statements wrote their rows."""
    replaying = _Replay(cursor, target)
    if isinstance(txns, Sequence):
        replaying.constraints_dropped_first(txns)
    for txn in txns:
        replaying.transaction(txn)
    replaying.flush()
    return replaying.statements


def replay_rows(cursor, target: Target, rows: Iterable[tuple[str, dict]]) -> int:
    """Rows given as (table, row image) written as inserts-or-updates in the apply's batches, on `cursor`'s
    open transaction (REPL_INIT_COPY from an image). Returns how many."""
    replaying = _Replay(cursor, target)
    n = 0
    for table, image in rows:
        n += 1
        replaying.transaction(
            sql.Transaction(count=n, origin=None, at=None, entries=[sql.Entry(n, table, "I", image, None)])
        )
    replaying.flush()
    return n


class LevelMoved(RuntimeError):
    """The subscriber's level is not where this apply started: another apply got there first."""


class ApplyTimedOut(TrxError):
    """A statement of the apply ran past the subscription's apply timeout: cancelled, the whole apply transaction
    rolled back. Nothing against the transactions it applied (not a halt): the sync is tried again."""

    def __init__(self, target: Target) -> None:
        server = target.server.name
        super().__init__(
            f"an apply statement on {server} ran longer than the subscription's apply timeout ({target.timeout} s) "
            f"and was cancelled, its transaction rolled back; it is tried again (a lock another session of {server} "
            "holds, or a batch too large for the bound: see the subscription's profile)"
        )


def async_commit_sql(server: Server, nolog: bool = True) -> list[str]:
    """What makes an apply on `server` commit without waiting for its flush (settings.APPLY_ASYNC_COMMIT): nothing
    where the server has no per-transaction way, or where the applied rows are captured again (not `nolog`: a
    reader could take them before a crash took them back)."""
    d = _d(server)
    return [d.async_commit_sql] if settings.APPLY_ASYNC_COMMIT and nolog and d.async_commit_sql else []


def _level_back(cursor, target: Target, schema: str, expected: int, new_count: int) -> None:
    """A failed apply on a server whose DDL commits at once (MariaDB): a schema change's DDL committed the level's
    move with it; the level goes back to `expected` so the batch is applied again, not passed over. The rows the
    DDL committed before it are applied again then too (upserts and deletes of keys: harmless)."""
    d = target.d
    try:
        cursor.connection.rollback()
        cursor.execute(
            sql.level_advance_sql(d, schema),
            [levels.level_of(expected), expected, target.publisher, target.account, new_count],
        )
        cursor.connection.commit()
    except pyodbc.Error as exc:
        log.warning("%s: the level could not be moved back to %s: %s", target.server.name, expected, exc)


def apply_batch(target: Target, txns: Sequence[sql.Transaction], expected: int, nolog: bool = True) -> int:
    """Apply whole transactions in order in one subscriber transaction that also moves the level from
    `expected`. Returns the new count. Where async_commit_sql allows, the commit does not wait for the flush: the
    rows and the level are lost together by a crash, and positions.durable_position says what a crash keeps."""
    d = target.d
    schema = schema_of(target.server)
    opening = [*async_commit_sql(target.server, nolog), *sql.replay_context_sql(d, nolog, None, schema)]
    for txn in txns:
        for entry in txn.entries_of(("C",)):
            if entry.new is not None:
                create_table_from(target, entry.new)
    new_count = txns[-1].count

    assume, release = d.replay_role_sql(target.replay_user) if target.replay_user else ([], [])
    # A dialect that cannot bound them (SQLite) leaves a registry-wide timeout aside; a subscription's own is refused.
    timed = bool(target.timeout) and not d.apply_timeout_refused
    bound, unbound = d.apply_timeout_sql(target.timeout) if timed else ([], [])

    def work(cursor) -> int:
        try:
            return statements(cursor)
        except pyodbc.Error as exc:
            if bound and any(text in str(exc) for text in d.apply_timeout_errors):
                raise ApplyTimedOut(target) from exc
            raise

    def statements(cursor) -> int:
        for statement in [*bound, *opening]:
            cursor.execute(statement)
        # The level first: an apply that did not start where the subscriber is (another apply got there, a follower's
        # remembered level was stale) writes no row at all, and a second apply of the same batch waits on this row.
        cursor.execute(
            sql.level_advance_sql(d, schema),
            [levels.level_of(new_count), new_count, target.publisher, target.account, expected],
        )
        if cursor.rowcount != 1:
            raise LevelMoved(f"{target.server.name} is no longer at count {expected}")
        for statement in assume:
            cursor.execute(statement)
        try:
            replay(cursor, target, txns)
        except (pyodbc.Error, TrxError):
            if not d.transactional_ddl:
                _level_back(cursor, target, schema, expected, new_count)
            raise
        for statement in [*release, *unbound, *sql.reset_context_sql(d, schema)]:
            cursor.execute(statement)
        return new_count

    applied = with_retries(target.server, work)
    if ids := tracers.tracer_ids(txns):
        tracers.record_arrivals(target.server.name, ids)
    return applied


def transaction_keys(
    txns: Iterable[sql.Transaction], key_names: Callable[[str], list[str] | None], most: int | None = KEYS_LISTED
) -> list[dict]:
    """The tables and keys the row entries of transactions touch, each once ([{"table": t, "key": [...]}], the
    key's values as its images carry them, in the key's column order; at most `most`). `key_names(table)`: the key
    columns of a published table, None when it is not known (its key is then null)."""
    keys: list[dict] = []
    seen: set[str] = set()
    names: dict[str, list[str] | None] = {}
    for entry in (entry for txn in txns for entry in txn.entries):
        if entry.op not in ("I", "U", "D") or not entry.table:
            continue
        if entry.table not in names:
            names[entry.table] = key_names(entry.table)
        columns = names[entry.table]
        for image in (entry.old, entry.new):
            if not image:
                continue
            folded = {str(k).lower(): v for k, v in image.items()}
            key = None if columns is None else [image.get(c, folded.get(c.lower())) for c in columns]
            marker = json.dumps([entry.table, key], default=str)
            if marker not in seen:
                seen.add(marker)
                keys.append(json.loads(json.dumps({"table": entry.table, "key": key}, default=str)))
            if most is not None and len(keys) >= most:
                return keys
    return keys


def move_past(target: Target, txn: sql.Transaction, expected: int) -> None:
    """Move the level from `expected` past `txn` without applying it; LevelMoved when the level is not at
    `expected` (the transaction was applied, or skipped, meanwhile)."""
    statement = sql.level_advance_sql(target.d, schema_of(target.server))
    params = [txn.level, txn.count, target.publisher, target.account, expected]

    def work(cursor) -> int:
        cursor.execute(statement, params)
        return cursor.rowcount

    if with_retries(target.server, work) != 1:
        raise LevelMoved(f"{target.server.name} is no longer at count {expected}")


def gap_entries(txn: sql.Transaction) -> list[dict]:
    entries = [{"seq": e.seq, "table": e.table, "op": e.op, "new": e.new, "old": e.old} for e in txn.entries]
    return json.loads(json.dumps(entries, default=str))


def skip_transaction(
    target: Target, txn: sql.Transaction, expected: int, error: str, keys: list[dict], skipped_by: str = ""
) -> int:
    """Record a transaction that cannot be applied and move past it (the gap stays visible until repaired).
    The gap is stored first and removed again when the level was not at `expected` (an earlier attempt
    committed it after all): no gap is recorded for a transaction that was applied."""
    gap, created = SkippedTransaction.objects.get_or_create(
        server=target.publisher,
        account=target.account,
        subscriber=target.server.name,
        count=txn.count,
        defaults={
            "level": txn.level, "error": error[:4000], "entries": gap_entries(txn), "keys": keys,
            "skipped_by": skipped_by,
        },
    )  # fmt: skip
    try:
        move_past(target, txn, expected)
    except LevelMoved:
        if created:
            gap.delete()
        raise
    log.warning("%s skipped %s/%s level %s: %s", target.server.name, target.publisher, target.account, txn.level, error)
    return txn.count


def repair_keys(publisher: Server, published: dict[str, TableInfo], target: Target, keys: list[dict]) -> dict:
    """Make the subscriber's rows of exactly `keys` ([{"table", "key"}]) the publisher's current rows, in one
    subscriber transaction written as the apply writes (the replay context, the replaying user): each row is
    read on the publisher as the capture logs it and upserted, or deleted where the publisher has no such key."""
    pd = _d(publisher)
    images: list[tuple[str, str, dict]] = []  # (table, op, image)
    with connections.connect(publisher, readonly=True) as conn:
        cursor = conn.cursor()
        for item in keys:
            name, values = str(item.get("table", "")), item.get("key")
            table = published.get(name)
            if table is None:
                raise TrxError(f"{name!r} is not a published table of {target.publisher}/{target.account}")
            columns = [c.name for c in key_columns(table)]
            if values is None or len(values) != len(columns):
                raise TrxError(f"the key of {name!r} is not known for this gap; compare and repair the table instead")
            key_image = dict(zip(columns, values, strict=True))
            key_table = sql.image_table(table, key_image)
            image = sql.row_image_sql(pd, table, "q")
            where = " AND ".join(f"q.{pd.quote(c)} = ?" for c in columns)
            found = cursor.execute(
                f"SELECT {image} FROM {pd.qualify(table.name, table.schema)} q WHERE {where}",
                sql.RowCodec.of(key_table, publisher.dialect).key(key_image),
            ).fetchone()
            if found is None:
                images.append((name, "D", key_image))
            else:
                images.append((name, "I", json.loads(found[0])))
    d = target.d
    schema = schema_of(target.server)
    assume, release = d.replay_role_sql(target.replay_user) if target.replay_user else ([], [])
    done = {"written": sum(op == "I" for _, op, _ in images), "deleted": sum(op == "D" for _, op, _ in images)}

    def work(cursor) -> dict:
        for statement in [*sql.replay_context_sql(d, True, None, schema), *assume]:
            cursor.execute(statement)
        replaying = _Replay(cursor, target)
        for n, (name, op, image) in enumerate(images, 1):
            entry = sql.Entry(n, name, op, image if op == "I" else None, image if op == "D" else None)
            replaying.transaction(sql.Transaction(count=n, origin=None, at=None, entries=[entry]))
        replaying.flush()
        for statement in [*release, *sql.reset_context_sql(d, schema)]:
            cursor.execute(statement)
        return done

    return with_retries(target.server, work)

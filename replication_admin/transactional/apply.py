"""Applying whole publisher transactions on a subscriber, in order, the level moved in the same transaction; a
transaction that fails is skipped and recorded as a gap."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from replication_admin.core import connections
from replication_admin.core.conflicts import key_text
from replication_admin.core.introspection import lookup_table, with_constraints
from replication_admin.core.transactions import (
    run_each,
    run_in_transaction,
    with_retries,
)
from replication_admin.engine import dialects, levels, schema_changes
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.constraints import copy_table_ddl
from replication_admin.engine.schema import TableInfo
from replication_admin.models import (
    Server,
    SkippedTransaction,
)
from replication_admin.transactional import tracers
from replication_admin.transactional.lookups import (
    TrxError,
    _d,
    schema_of,
)

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

    @property
    def d(self):
        return _d(self.server)

    def is_held(self, table: str, key: list) -> bool:
        return bool(self.held) and (table, key_text(key)) in self.held

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


class _Replay:
    """Replays a batch's transactions in order inside one subscriber transaction.

    Consecutive row writes (inserts and updates) of one table are sent as multi-row upserts, and
    consecutive deletes of one table as one delete, across the transactions of the batch: the batch
    commits as a whole, so only the order of the changes matters, not their grouping. A key written twice
    keeps its last image (an upsert may touch a row once); anything else (a delete after writes, a key
    change, a call, another table) sends what is pending first."""

    def __init__(self, cursor, target: Target) -> None:
        self.cursor, self.target = cursor, target
        self.d, self.dialect = target.d, target.server.dialect
        self.table: TableInfo | None = None
        self.deleting = False  # what is pending: deletes, or writes
        self.rows: dict[tuple, list] = {}  # key -> the row's last image (or its key), in first-change order
        # By table name and the image's column names (hashing a TableInfo per entry costs).
        self.codecs: dict[tuple[str, tuple[str, ...]], tuple[TableInfo, sql.RowCodec]] = {}

    def flush(self) -> None:
        table, rows, deleting = self.table, list(self.rows.values()), self.deleting
        self.table, self.rows = None, {}
        if table is None or not rows:
            return
        width = len(rows[0])
        per = max(1, 900 // max(1, width))
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            statement = (sql.delete_many_sql if deleting else sql.upsert_sql)(self.d, table, len(chunk))
            self.cursor.execute(statement, [v for row in chunk for v in row])

    def _pend(self, table: TableInfo, deleting: bool, key: list, row: list) -> None:
        if self.table is not None and (self.table is not table or self.deleting != deleting):
            self.flush()
        self.table, self.deleting = table, deleting
        self.rows[tuple(key)] = row

    def delete(self, table: TableInfo, key: list) -> None:
        self._pend(table, True, key, key)

    def transaction(self, txn: sql.Transaction) -> None:
        if txn.origin == self.target.server.name:
            return  # the subscriber's own change, pushed earlier: it has it already
        d, cursor = self.d, self.cursor
        for entry in txn.entries:
            if entry.op == "C":
                continue  # created before the transaction (create_table_from)
            if entry.op == "P":
                self.flush()
                if not d.has_ddl_triggers:
                    raise TrxError(
                        f"the new definition of {(entry.new or {}).get('name')} is PostgreSQL's; "
                        f"{self.target.server.name} is not PostgreSQL (publish the procedure's calls only and "
                        "define it there)"
                    )
                cursor.execute(str((entry.new or {}).get("definition", "")))
                continue
            if entry.op == "T":
                self.flush()
                payload = entry.new or {}
                statement = sql.typed_call(d, str(payload.get("stmt", "")), payload.get("types"))
                args = list(payload.get("args") or [])
                cursor.execute(statement, args) if args else cursor.execute(statement)
                continue
            if entry.op == "S":
                self.flush()
                self.schema_change(entry.new or {})
                continue
            if entry.op == tracers.MARKER:
                continue  # a tracer token: timed by the apply once committed, nothing to write here
            if entry.op in ("I", "U"):
                assert entry.new is not None
                table, codec = self.codec(entry.table, entry.new)
                row = codec.row(entry.new)
                key = codec.key_of(row)
                if self.target.is_held(entry.table, key):
                    continue
                if entry.op == "U" and entry.old is not None:
                    old_key = codec.key(entry.old)
                    if old_key != key:
                        self.delete(self.target.table(entry.table), old_key)
                self._pend(table, False, key, row)
                continue
            assert entry.old is not None
            key = self.codec(entry.table, entry.old)[1].key(entry.old)
            if not self.target.is_held(entry.table, key):
                self.delete(self.target.table(entry.table), key)

    def codec(self, name: str, image: dict) -> tuple[TableInfo, sql.RowCodec]:
        """The subscriber's table as far as `image` carries columns, and its codec: a row is written with the
        columns its image has (the subscriber's own columns, and those of another shape of the publisher's
        table around a schema change, are left as they are)."""
        shape = (name, tuple(image))
        found = self.codecs.get(shape)
        if found is None:
            whole = self.target.table(name)
            table = sql.image_table(whole, image)
            if len(table.primary_key) != len(whole.primary_key):
                raise TrxError(
                    f"a change of {name} carries no value for a key column of {self.target.server.name}'s copy"
                )
            found = self.codecs[shape] = (table, sql.RowCodec.of(table, self.dialect))
        return found

    def schema_change(self, payload: dict) -> None:
        """An 'S' entry: the publisher's table changed shape here; the copy follows (what it has already, it keeps)."""
        name = str(payload.get("table", ""))
        source = dialects.get(self.target.source_dialect or self.dialect)
        found = schema_changes.between(source, name, payload.get("before") or [], payload.get("after") or [])
        copy = with_constraints(self.target.server, self.target.table(name), conn=self.cursor.connection)
        try:
            statements = schema_changes.copy_ddl(self.d, copy, found)
        except schema_changes.SchemaChangeError as exc:
            raise TrxError(str(exc)) from None
        for statement in statements:
            self.cursor.execute(statement)
        # Described on this connection: where DDL is transactional, others see the old shape until the commit.
        changed = connections.describe_table(self.target.server, copy.name, conn=self.cursor.connection)
        self.target.tables[name] = changed
        if statements and self.target.push_account:
            # The copy's own changes go back through triggers that name its columns (MariaDB): made anew.
            objects = sql.capture_objects(self.d, self.target.push_account, changed, self.target.server.name)
            for statement in self.d.replace_objects_sql(objects.drop, objects.create):
                self.cursor.execute(statement)
        for shape in [s for s in self.codecs if s[0] == name]:
            del self.codecs[shape]
        if statements:
            log.info(
                "%s: %s follows %s: %s",
                self.target.server.name,
                name,
                self.target.publisher,
                "; ".join(map(str, found)),
            )


def replay_rows(cursor, target: Target, rows: Iterable[tuple[str, dict]]) -> int:
    """Rows given as (table, row image) written as inserts-or-updates in the apply's batches, on `cursor`'s
    open transaction (REPL_INIT_COPY from an image). Returns how many."""
    replay = _Replay(cursor, target)
    n = 0
    for table, image in rows:
        n += 1
        replay.transaction(
            sql.Transaction(count=n, origin=None, at=None, entries=[sql.Entry(n, table, "I", image, None)])
        )
    replay.flush()
    return n


class LevelMoved(RuntimeError):
    """The subscriber's level is not where this apply started: another apply got there first."""


def apply_batch(target: Target, txns: Sequence[sql.Transaction], expected: int, nolog: bool = True) -> int:
    """Apply whole transactions in order in one subscriber transaction that also moves the level from
    `expected`. Returns the new count."""
    d = target.d
    schema = schema_of(target.server)
    for txn in txns:
        for entry in txn.entries:
            if entry.op == "C" and entry.new is not None:
                create_table_from(target, entry.new)
    new_count = txns[-1].count

    assume, release = d.replay_role_sql(target.replay_user) if target.replay_user else ([], [])

    def work(cursor) -> int:
        for statement in [*sql.replay_context_sql(d, nolog, None, schema), *assume]:
            cursor.execute(statement)
        replay = _Replay(cursor, target)
        for txn in txns:
            replay.transaction(txn)
        replay.flush()
        for statement in release:
            cursor.execute(statement)
        cursor.execute(
            sql.level_advance_sql(d, schema),
            [levels.level_of(new_count), new_count, target.publisher, target.account, expected],
        )
        if cursor.rowcount != 1:
            raise LevelMoved(f"{target.server.name} is no longer at count {expected}")
        for statement in sql.reset_context_sql(d, schema):
            cursor.execute(statement)
        return new_count

    applied = with_retries(target.server, work)
    if ids := tracers.tracer_ids(txns):
        tracers.record_arrivals(target.server.name, ids)
    return applied


def skip_transaction(target: Target, txn: sql.Transaction, expected: int, error: str) -> int:
    """Record a transaction that cannot be applied and move past it (the gap stays visible)."""
    d = target.d
    schema = schema_of(target.server)
    entries = [{"seq": e.seq, "table": e.table, "op": e.op, "new": e.new, "old": e.old} for e in txn.entries]
    SkippedTransaction.objects.get_or_create(
        server=target.publisher,
        account=target.account,
        subscriber=target.server.name,
        count=txn.count,
        defaults={"level": txn.level, "error": error[:4000], "entries": json.loads(json.dumps(entries, default=str))},
    )
    run_in_transaction(
        target.server,
        [
            (
                sql.level_advance_sql(d, schema),
                [txn.level, txn.count, target.publisher, target.account, expected],
            )
        ],
    )
    log.warning("%s skipped %s/%s level %s: %s", target.server.name, target.publisher, target.account, txn.level, error)
    return txn.count

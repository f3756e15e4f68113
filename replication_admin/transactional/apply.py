"""Applying whole publisher transactions on a subscriber, in order, the level moved in the same transaction.
A transaction that cannot be applied halts its subscription there, or (on_error = skip, or a person's
decision) is skipped and recorded as a gap; the keys of a gap can be repaired from the publisher's rows."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from replication_admin.core import connections
from replication_admin.core.conflicts import key_text
from replication_admin.core.introspection import lookup_table, with_constraints
from replication_admin.core.transactions import (
    run_each,
    with_retries,
)
from replication_admin.engine import dialects, levels, schema_changes
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.constraints import copy_table_ddl
from replication_admin.engine.objects import key_columns
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
        replay = _Replay(cursor, target)
        for n, (name, op, image) in enumerate(images, 1):
            entry = sql.Entry(n, name, op, image if op == "I" else None, image if op == "D" else None)
            replay.transaction(sql.Transaction(count=n, origin=None, at=None, entries=[entry]))
        replay.flush()
        for statement in [*release, *sql.reset_context_sql(d, schema)]:
            cursor.execute(statement)
        return done

    return with_retries(target.server, work)

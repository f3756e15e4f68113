"""Transactional replication, control plane: publication logs, subscriptions, initial copy, sync.

The log of a publication lives in the publisher's database (engine.trx). A sync reads the
transactions after the subscriber's count and applies them on the subscriber in order. Each
subscriber transaction applies whole publisher transactions only (a batch of them) and moves the
subscriber's level in RTLEVEL, in the same transaction, from the count it started at: a second apply
of the same batch finds the level moved and changes nothing, so every transaction is applied once.

Errors: deadlocks, lock timeouts and lost connections are retried; any other error makes the batch be
applied one transaction at a time, and the transaction that fails is skipped: its level is recorded
in RTLEVEL (so the subscriber goes on) and in REPL_SKIPPED_TX (so the gap shows in the console).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyodbc
from django.utils import timezone

from replication_admin.bidir.sync import error_message, run_with_undo
from replication_admin.core import connections
from replication_admin.engine import dialects, levels
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.refresh_sql import create_table_ddl
from replication_admin.engine.resolvers import DEFAULT_DECISION
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.models import (
    LevelSample,
    RegistryEntry,
    ReplAccount,
    ReplSubscriber,
    Server,
    SkippedTransaction,
    TpItem,
)
from replication_admin.snapshots.refresh import RETRYABLE, run_each
from replication_admin.snapshots.shapes import SnapshotError, lookup_table

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
CONNECTION_LOST = (
    "08S01", "08001", "08003", "08006", "57P01", "server has gone away", "Lost connection",
    "terminating connection", "server closed the connection", "no connection to the server",
)  # fmt: skip


class TrxError(SnapshotError):
    """A transactional replication request that cannot be carried out; the message says why."""


class InvalidSubscriber(TrxError):
    pass


class BacklogExceeded(TrxError):
    pass


def server_named(name: str) -> Server:
    server = Server.objects.filter(name=name).first()
    if server is None:
        raise TrxError(f"server {name!r} is not registered")
    return server


def schema_of(server: Server) -> str:
    return connections.table_schema(server)


def _d(server: Server):
    return dialects.get(server.dialect)


# --- items ------------------------------------------------------------------------------------------------


def item_table(item: str) -> str:
    """The table an item names: Virtuoso writes `DB.DBA.TEST` (qualifier and owner, then the name as
    it is, quotes included: `DB.DBA.ab "cd` is the table `ab "cd`); a bare name is the table."""
    parts = item.split(".", 2)
    if len(parts) == 3 and parts[0] and parts[1]:
        return parts[2]
    if item.startswith('"') and item.endswith('"') and len(item) > 1:
        return item[1:-1].replace('""', '"')
    return item


def table_items(account: ReplAccount) -> list[TpItem]:
    return list(TpItem.objects.filter(server=account.server, acct=account.account, type=2).order_by("id"))


# --- the publisher's log ------------------------------------------------------------------------------------


def create_log(server: Server, account: str) -> None:
    d = _d(server)
    schema = schema_of(server)
    names = sql.log_names(d, account)
    for name in (names.seq, names.tx, names.log):
        if lookup_table(server, name) is not None:
            raise TrxError(f"{server.name} already has a table {name}; drop it or choose another publication name")
    statements = [*sql.context_ddl(d, schema), *sql.log_ddl(d, account, schema), *sql.text_table_ddl(d, schema)]
    text = sql.text_capture_objects(d, account, server.name, schema)
    append, drop_append = (
        sql.append_function_ddl(d, account, server.name, schema) if d.name == "postgresql" else ([], [])
    )
    run_with_undo(
        server,
        [*statements, *text.create, *append],
        [*drop_append, *text.drop, *sql.drop_log_ddl(d, account, schema)],
    )


def drop_log(server: Server, account: str) -> None:
    d = _d(server)
    schema = schema_of(server)
    text = sql.text_capture_objects(d, account, server.name, schema)
    drop_append = sql.append_function_ddl(d, account, server.name, schema)[1] if d.name == "postgresql" else []
    run_each(server, [*drop_append, *text.drop, *sql.drop_log_ddl(d, account, schema)], ignore_errors=True)


def describe(server: Server, table: str) -> TableInfo:
    info = lookup_table(server, table)
    if info is None:
        raise TrxError(f"table {table!r} does not exist on {server.name}")
    return info


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
        from replication_admin.engine import bidir_sql

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
    objects = sql.capture_objects(d, account, table, local)
    run_with_undo(server, [*statements, *objects.create], [*objects.drop, *undo])


def drop_capture(server: Server, account: str, table_name: str) -> None:
    d = _d(server)
    info = lookup_table(server, table_name) or TableInfo(
        name=table_name, columns=(Column("k", "int", sql.COUNT, False, 1),), schema=schema_of(server)
    )
    drops = list(sql.capture_objects(d, account, info, server.name).drop)
    if server.dialect in ("postgresql", "mysql"):
        drops += list(sql.rowguid_objects(d, info, server.name).drop)
    run_each(server, drops, ignore_errors=True)


def with_retries(server: Server, work: Callable):
    """Run work(cursor) in one transaction on `server` and commit it. Deadlocks, lock timeouts and lost
    connections roll back and run the work again on a new connection; any other error propagates."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        with connections.connect(server, autocommit=False) as conn:
            cursor = conn.cursor()
            try:
                result = work(cursor)
                conn.commit()
                return result
            except pyodbc.Error as exc:
                with contextlib.suppress(pyodbc.Error):
                    conn.rollback()  # a lost connection cannot roll back; its transaction is gone anyway
                if attempt < MAX_ATTEMPTS and retryable(exc):
                    time.sleep(0.1 * attempt)
                    continue
                raise
    raise AssertionError("unreachable")


def run_transaction(server: Server, statements: Sequence[tuple[str, list]]) -> None:
    def work(cursor) -> None:
        for text, params in statements:
            cursor.execute(text, params) if params else cursor.execute(text)

    with_retries(server, work)


def append_entry(server: Server, account: str, op: str, table: str, payload: str) -> None:
    """Log one entry (a REPL_TEXT call, a creating statement) as a transaction of its own."""
    d = _d(server)
    run_transaction(server, sql.append_entry_sql(d, account, op, table, payload, server.name, schema_of(server)))
    sequence(server, account)


def sequence(server: Server, account: str) -> None:
    """SQLite: number the entries written since the last pass (see engine.trx); elsewhere nothing."""
    if server.dialect != "sqlite":
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


def publisher_count(server: Server, account: str) -> int:
    """How many transactions of the publication a reader may take: committed, numbered and closed."""
    d = _d(server)
    schema = schema_of(server)
    if server.dialect == "sqlite":
        sequence(server, account)
    if server.dialect != "mysql":
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
            if not retryable(exc):
                raise
    # A writer holds the counter: its number may still grow, the ones before it are complete.
    with connections.connect(server) as conn:
        count, open_conn = conn.cursor().execute(sql.counter_sql(d, account, schema)).fetchone()
    return int(count) - (0 if open_conn is None else 1)


def oldest_count(server: Server, account: str) -> int | None:
    d = _d(server)
    with connections.connect(server, readonly=True) as conn:
        value = conn.cursor().execute(sql.oldest_count_sql(d, account, schema_of(server))).fetchone()[0]
    return None if value is None else int(value)


def read_transactions(server: Server, account: str, after: int, upto: int) -> list[sql.Transaction]:
    d = _d(server)
    with connections.connect(server, readonly=True) as conn:
        rows = conn.cursor().execute(sql.entries_sql(d, account, schema_of(server)), [after, upto]).fetchall()
    return sql.group_transactions([tuple(r) for r in rows])


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
    run_transaction(server, [(text, [upto]) for text in sql.purge_sql(d, account, schema)])
    return int(before)


# --- the subscriber's level ----------------------------------------------------------------------------------


_LEVEL_TABLES: set[tuple] = set()


def ensure_level_table(server: Server) -> None:
    key = (server.name, server.dialect, server.database)
    if key in _LEVEL_TABLES:
        return
    d = _d(server)
    run_each(server, [sql.level_table_ddl(d, schema_of(server)), *sql.context_ddl(d, schema_of(server))])
    _LEVEL_TABLES.add(key)


def subscriber_position(sub: Server, publisher: str, account: str) -> tuple[int, int] | None:
    """(level, count) the subscriber has applied, as its own database records it."""
    d = _d(sub)
    ensure_level_table(sub)
    with connections.connect(sub, readonly=True) as conn:
        row = conn.cursor().execute(sql.level_read_sql(d, schema_of(sub)), [publisher, account]).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def set_subscriber_position(sub: Server, publisher: str, account: str, count: int, cursor=None) -> list:
    d = _d(sub)
    delete, insert = sql.level_set_sql(d, schema_of(sub))
    statements = [(delete, [publisher, account]), (insert, [levels.level_of(count), count, publisher, account])]
    if cursor is not None:
        for text, params in statements:
            cursor.execute(text, params)
    return statements


# --- applying transactions on a subscriber ------------------------------------------------------------------


def retryable(exc: Exception) -> bool:
    text = " ".join(str(a) for a in exc.args)
    return any(code in text for code in (*RETRYABLE, *CONNECTION_LOST))


@dataclass
class Target:
    """A subscriber and the tables it replays into (described once per sync)."""

    server: Server
    publisher: str
    account: str
    tables: dict[str, TableInfo] = field(default_factory=dict)
    published: dict[str, TableInfo] = field(default_factory=dict)  # publisher's description, by item table

    @property
    def d(self):
        return _d(self.server)

    def table(self, name: str) -> TableInfo:
        if name not in self.tables:
            info = lookup_table(self.server, name)
            if info is None:
                raise TrxError(f"table {name!r} does not exist on {self.server.name}")
            source = self.published.get(name)
            if source is not None:
                # Replay writes the columns the publisher has; the subscriber's own extra columns are kept.
                info = TableInfo(
                    name=info.name,
                    schema=info.schema,
                    columns=tuple(c for c in info.columns if source.column(c.name) is not None),
                )
            self.tables[name] = info
        return self.tables[name]


def create_table_from(target: Target, definition: dict) -> bool:
    """A 'C' entry: create the published table on the subscriber when it is missing (DDL runs outside
    the apply transaction: MariaDB would commit it). Returns True when it was created."""
    name = definition["table"]
    if lookup_table(target.server, name) is not None:
        return False
    columns, key = sql.definition_columns(definition)
    ddl = create_table_ddl(target.d, name, schema_of(target.server), columns, key)
    run_each(target.server, [ddl])
    target.tables.pop(name, None)
    return True


def _apply_entries(cursor, target: Target, txn: sql.Transaction) -> None:
    if txn.origin == target.server.name:
        return  # the subscriber's own change, pushed earlier: it has it already
    d = target.d
    dialect = target.server.dialect
    pending: list = []  # consecutive upserts of one table go in one statement
    pending_table: TableInfo | None = None

    def flush() -> None:
        nonlocal pending, pending_table
        if pending and pending_table is not None:
            per = max(1, 900 // max(1, len(pending_table.columns)))
            for start in range(0, len(pending), per):
                chunk = pending[start : start + per]
                cursor.execute(sql.upsert_sql(d, pending_table, len(chunk)), [v for row in chunk for v in row])
        pending, pending_table = [], None

    for entry in txn.entries:
        if entry.op == "C":
            continue  # created before the transaction (create_table_from)
        if entry.op == "P":
            flush()
            if dialect != "postgresql":
                raise TrxError(
                    f"the new definition of {(entry.new or {}).get('name')} is PostgreSQL's; {target.server.name} "
                    "is not PostgreSQL (publish the procedure's calls only and define it there)"
                )
            cursor.execute(str((entry.new or {}).get("definition", "")))
            continue
        if entry.op == "T":
            flush()
            payload = entry.new or {}
            statement = sql.typed_call(d, str(payload.get("stmt", "")), payload.get("types"))
            args = list(payload.get("args") or [])
            cursor.execute(statement, args) if args else cursor.execute(statement)
            continue
        table = target.table(entry.table)
        if entry.op in ("I", "U"):
            assert entry.new is not None
            if entry.op == "U" and entry.old is not None:
                old_key = sql.key_values(entry.old, table, dialect)
                if old_key != sql.key_values(entry.new, table, dialect):
                    flush()
                    cursor.execute(sql.delete_sql(d, table), old_key)
            if pending_table is not None and pending_table.name != table.name:
                flush()
            pending_table = table
            pending.append(sql.row_values(entry.new, table, dialect))
            continue
        flush()
        assert entry.old is not None
        cursor.execute(sql.delete_sql(d, table), sql.key_values(entry.old, table, dialect))
    flush()


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

    def work(cursor) -> int:
        for statement in sql.replay_context_sql(d, nolog, None, schema):
            cursor.execute(statement)
        for txn in txns:
            _apply_entries(cursor, target, txn)
        cursor.execute(
            sql.level_advance_sql(d, schema),
            [levels.level_of(new_count), new_count, target.publisher, target.account, expected],
        )
        if cursor.rowcount != 1:
            raise LevelMoved(f"{target.server.name} is no longer at count {expected}")
        for statement in sql.reset_context_sql(d, schema):
            cursor.execute(statement)
        return new_count

    return with_retries(target.server, work)


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
    run_transaction(
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


# --- sync --------------------------------------------------------------------------------------------------


@dataclass
class SyncOutcome:
    applied: int = 0  # transactions applied
    skipped: int = 0
    level: int = 0
    count: int = 0
    publisher_level: int = 0
    publisher_count: int = 0
    batches: int = 0
    pushed: int = 0  # the subscriber's own transactions sent to the publisher (updateable)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def publication(publisher: str, account: str) -> ReplAccount:
    row = ReplAccount.objects.filter(server=publisher, account=account).first()
    if row is None:
        raise TrxError(f"{publisher} has no publication {account!r}")
    return row


def subscription(subscriber: str, publisher: str, account: str) -> ReplSubscriber:
    row = ReplSubscriber.objects.filter(server=publisher, account=account, subscriber=subscriber).first()
    if row is None or not row.subscribed:
        raise TrxError(f"{subscriber} does not subscribe to {publisher}/{account}")
    return row


def check_request(sub: ReplSubscriber, level: int, pub_level: int, pub_count: int, oldest: int | None) -> None:
    """The publisher's side of a sync request: store RS_LEVEL and RS_VALID as the reference says, and
    refuse an invalid subscriber until an admin marks it valid again."""
    was_valid = bool(sub.valid)
    ok = levels.level_ok(level, pub_level)
    reason = ""
    if not ok:
        reason = f"its level {level} is not at or below the publisher's level {pub_level}"
    elif levels.count_of(level, pub_level, pub_count) < (pub_count + 1 if oldest is None else oldest) - 1:
        ok = False
        reason = f"the transactions after its level {level} have been purged from the log"
    valid = 1 if (ok and was_valid) else 0
    if (sub.level, sub.valid) != (level, valid):
        ReplSubscriber.objects.filter(pk=sub.pk).update(level=level, valid=valid)
        sub.level, sub.valid = level, valid
    if not was_valid:
        raise InvalidSubscriber(
            f"{sub.subscriber} is marked invalid for {sub.server}/{sub.account}; re-initialise it "
            "(REPL_INIT_COPY) and mark it valid before it syncs again"
        )
    if not ok:
        from replication_admin.core.alerts import safely_raise

        message = f"{sub.subscriber} is no longer valid for {sub.server}/{sub.account}: {reason}"
        safely_raise(
            "subscriber_invalid", f"{sub.subscriber} <- {sub.server}/{sub.account}", message, sub.get_absolute_url()
        )
        raise InvalidSubscriber(message)


def sync_once(
    sub: ReplSubscriber,
    max_transactions: int | None = None,
    progress: Callable[[SyncOutcome], None] | None = None,
    max_backlog: int | None = None,
) -> SyncOutcome:
    """Bring a subscriber up to the publisher's current level (or `max_transactions` further)."""
    pub_server = server_named(sub.server)
    sub_server = server_named(sub.subscriber)
    acct = publication(sub.server, sub.account)
    position = subscriber_position(sub_server, sub.server, sub.account)
    if position is None:
        raise TrxError(f"{sub.subscriber} has no level for {sub.server}/{sub.account} yet; run REPL_INIT_COPY first")
    level, _own_count = position
    pub_count = publisher_count(pub_server, sub.account)
    pub_level = levels.level_of(pub_count)
    check_request(sub, level, pub_level, pub_count, oldest_count(pub_server, sub.account))
    count = levels.count_of(level, pub_level, pub_count)
    if count != _own_count:
        # Seen from this publisher's log the level means another count (the log was renumbered).
        run_transaction(
            sub_server,
            [
                (
                    sql.level_advance_sql(_d(sub_server), schema_of(sub_server)),
                    [level, count, sub.server, sub.account, _own_count],
                )
            ],
        )
    outcome = SyncOutcome(level=level, count=count, publisher_level=pub_level, publisher_count=pub_count)
    if max_backlog is not None and pub_count - count > max_backlog:
        raise BacklogExceeded(
            f"{sub.subscriber} is {pub_count - count} transactions behind {sub.server}/{sub.account} "
            f"(more than {max_backlog}); the feed is cut until it syncs again"
        )
    if acct.is_updateable:
        outcome.pushed = push(sub, acct)
    target = Target(sub_server, sub.server, sub.account, published=published_tables(acct, cached=True))
    batch = RegistryEntry.get_int("repl_apply_batch")
    goal = pub_count if max_transactions is None else min(pub_count, count + max_transactions)
    while count < goal:
        upto = min(goal, count + batch)
        txns = read_transactions(pub_server, sub.account, count, upto)
        if not txns or txns[0].count != count + 1:
            raise TrxError(
                f"{sub.server}/{sub.account} has no transaction after level {levels.level_of(count)} "
                f"(the log has been purged past it); re-initialise {sub.subscriber}"
            )
        count = _apply_or_skip(target, txns, count, outcome)
        outcome.batches += 1
        outcome.count, outcome.level = count, levels.level_of(count)
        record_position(sub, count, pub_count)
        if progress is not None:
            progress(outcome)
    return outcome


def _apply_or_skip(target: Target, txns: list[sql.Transaction], count: int, outcome: SyncOutcome) -> int:
    try:
        count = apply_batch(target, txns, count)
        outcome.applied += len(txns)
        return count
    except LevelMoved:
        raise
    except (pyodbc.Error, TrxError, ValueError, KeyError) as exc:
        if len(txns) > 1:
            for txn in txns:
                count = _apply_or_skip(target, [txn], count, outcome)
            return count
        count = skip_transaction(target, txns[0], count, error_message(exc))
        outcome.skipped += 1
        return count


_PUBLISHED: dict[tuple[str, str], tuple[float, dict]] = {}
PUBLISHED_TTL = 30.0  # seconds a follower keeps the description of a publication's tables


def published_tables(account: ReplAccount, cached: bool = False) -> dict[str, TableInfo]:
    key = (account.server, account.account)
    if cached and key in _PUBLISHED and time.monotonic() - _PUBLISHED[key][0] < PUBLISHED_TTL:
        return _PUBLISHED[key][1]
    server = server_named(account.server)
    out = {}
    for item in table_items(account):
        name = item_table(item.item)
        info = lookup_table(server, name)
        if info is not None:
            out[name] = info
    _PUBLISHED[key] = (time.monotonic(), out)
    return out


SAMPLE_EVERY = 5.0  # seconds between two level samples of one subscriber


def record_position(sub: ReplSubscriber, count: int, pub_count: int, force: bool = False) -> None:
    now = timezone.now()
    level = levels.level_of(count)
    pub_level = levels.level_of(max(pub_count, count))
    ReplSubscriber.objects.filter(pk=sub.pk).update(count=count, level=level, last_sync_at=now)
    sub.count, sub.level, sub.last_sync_at = count, level, now
    ReplAccount.objects.filter(server=sub.server, account=sub.account, count__lt=pub_count).update(
        count=pub_count, level=levels.level_of(pub_count)
    )
    last = (
        LevelSample.objects.filter(server=sub.server, account=sub.account, subscriber=sub.subscriber)
        .order_by("-at")
        .values_list("at", flat=True)
        .first()
    )
    threshold = ReplAccount.objects.filter(server=sub.server, account=sub.account).values_list("alert_lag", flat=True)
    behind = pub_count - count
    if threshold and threshold[0] is not None and behind > threshold[0]:
        from replication_admin.core.alerts import safely_raise

        safely_raise(
            "lag",
            f"{sub.subscriber} <- {sub.server}/{sub.account}",
            f"{sub.subscriber} is {behind} transactions behind {sub.server}/{sub.account} (alert above {threshold[0]})",
            sub.get_absolute_url(),
        )
    if force or last is None or (now - last).total_seconds() >= SAMPLE_EVERY:
        LevelSample.objects.create(
            server=sub.server,
            account=sub.account,
            subscriber=sub.subscriber,
            at=now,
            level=level,
            publisher_level=pub_level,
            lag=max(0, pub_count - count),
        )


def set_state(sub: ReplSubscriber, state: int, error: str | None = None) -> None:
    updates: dict = {"state": state}
    if error is not None:
        updates.update(last_error=error[:4000], last_error_at=timezone.now())
    ReplSubscriber.objects.filter(pk=sub.pk).update(**updates)
    sub.state = state


# --- initial copy (REPL_INIT_COPY) ---------------------------------------------------------------------------


def create_subscriber_table(pub_server: Server, sub_server: Server, name: str) -> TableInfo:
    """The subscriber's copy of a published table, created from the publisher's description."""
    existing = lookup_table(sub_server, name)
    if existing is not None:
        return existing
    source = describe(pub_server, name)
    ddl = create_table_ddl(
        _d(sub_server),
        source.name,
        schema_of(sub_server),
        [(c.name, c.logical) for c in source.columns],
        [k.name for k in source.primary_key],
    )
    run_each(sub_server, [ddl])
    return describe(sub_server, source.name)


def init_copy(job, reporter, spark_config) -> dict:
    """Copy every published table to the subscriber and set its level to the publisher's level read
    before the copy: the sync replays what changed during the copy (replays are idempotent)."""
    from jobs import snapshot_refresh as spark_refresh
    from jobs.session import get_spark
    from replication_admin.engine import refresh_sql
    from replication_admin.engine.compare import read_type
    from replication_admin.snapshots.refresh import item_lock
    from replication_admin.snapshots.shapes import inc_shape, moved_columns

    sub = ReplSubscriber.objects.get(pk=job.params["subscription"])
    acct = publication(sub.server, sub.account)
    pub_server, sub_server = server_named(sub.server), server_named(sub.subscriber)
    with item_lock(lock_name(sub), job), connections.reuse():
        ReplSubscriber.objects.filter(pk=sub.pk).update(init_state="copying", init_at=timezone.now())
        ensure_level_table(sub_server)
        count = publisher_count(pub_server, sub.account)
        d = _d(sub_server)
        schema = schema_of(sub_server)
        src_d = _d(pub_server)
        items = table_items(acct)
        staged: list[tuple[TableInfo, str, tuple]] = []
        spark = None
        copied = {}
        try:
            for done, item in enumerate(items):
                name = item_table(item.item)
                source = describe(pub_server, name)
                dest = create_subscriber_table(pub_server, sub_server, name)
                shape = inc_shape(pub_server, source, None, None)
                moved = moved_columns(shape, dest)
                staging = refresh_sql.staging_name(d, dest.name, "RTIC")
                run_each(
                    sub_server,
                    [
                        f"DROP TABLE IF EXISTS {d.qualify(staging, schema)}",
                        create_table_ddl(d, staging, schema, [(m.alias, m.logical) for m in moved], []),
                    ],
                )
                staged.append((dest, staging, moved))
                read_types = {m.alias: read_type(src_d, dict(shape.output)[m.source]) for m in moved}
                keys = [m for m in moved if m.is_key]
                partition = keys[0].alias if len(keys) == 1 and read_types[keys[0].alias] == "BIGINT" else None
                plan = spark_refresh.FullCopy(
                    source=spark_refresh.Endpoint(
                        pub_server.dialect, connections.jdbc_endpoint(pub_server, readonly=True)
                    ),
                    select_sql=refresh_sql.noninc_select(src_d, shape.sql, moved),
                    custom_schema=", ".join(f"{m.alias} {read_types[m.alias]}" for m in moved),
                    partition_alias=partition,
                    moved=moved,
                    read_types=read_types,
                    dest=spark_refresh.Endpoint(sub_server.dialect, connections.jdbc_endpoint(sub_server)),
                    staging_sql=d.qualify(staging, schema),
                    staging_columns=tuple(m.alias for m in moved),
                )
                if spark is None:
                    with reporter.phase("spark_session"):
                        spark = get_spark(spark_config)
                with reporter.phase("spark_copy"):
                    copied[dest.name] = spark_refresh.full_copy(spark, plan)
                reporter.progress(done + 1, len(items) + 1, f"staged {copied[dest.name]} row(s) of {dest.name}")
            definitions = procedure_definitions(pub_server, sub.account)
            if definitions and sub_server.dialect != "postgresql":
                names = ", ".join(n for n, _ in definitions)
                raise TrxError(
                    f"{sub.account} replicates PostgreSQL procedure definitions ({names}); "
                    f"{sub_server.name} is not PostgreSQL"
                )
            statements: list = [(s, []) for s in sql.replay_context_sql(d, True, None, schema)]
            statements += [(definition, []) for _, definition in definitions]
            for dest, staging, moved in staged:
                replace = refresh_sql.replace_content_sql(
                    d, dest.name, schema, staging, moved, [m.alias for m in moved]
                )
                statements += [(s, []) for s in replace]
            statements += set_subscriber_position(sub_server, sub.server, sub.account, count)
            statements += [(s, []) for s in sql.reset_context_sql(d, schema)]
            with reporter.phase("apply"):
                run_transaction(sub_server, statements)
        finally:
            run_each(
                sub_server, [f"DROP TABLE IF EXISTS {d.qualify(s, schema)}" for _, s, _ in staged], ignore_errors=True
            )
        if acct.is_updateable:
            setup_push(sub, acct)
        ReplSubscriber.objects.filter(pk=sub.pk).update(
            init_state="done", count=count, level=levels.level_of(count), last_error="", state=ReplSubscriber.OFF
        )
        record_position(sub, count, count, force=True)
        reporter.progress(
            len(items) + 1, len(items) + 1, f"copied {sum(copied.values())} row(s) at level {levels.level_of(count)}"
        )
        return {"mode": "init", "rows": copied, "level": levels.level_of(count), "count": count}


def lock_name(sub: ReplSubscriber) -> str:
    return f"trx:{sub.subscriber}:{sub.server}:{sub.account}"


def sync_job(job, reporter) -> dict:
    from replication_admin.snapshots.refresh import item_lock

    sub = ReplSubscriber.objects.get(pk=job.params["subscription"])
    with item_lock(lock_name(sub), job), connections.reuse():
        set_state(sub, ReplSubscriber.SYNCING)
        try:
            outcome = sync_once(
                sub,
                progress=lambda o: reporter.progress(
                    o.applied + o.skipped, max(1, o.publisher_count), f"level {o.level}"
                ),
            )
        except Exception as exc:
            set_state(sub, ReplSubscriber.DISCONNECTED, error_message(exc))
            raise
        set_state(sub, ReplSubscriber.IN_SYNC if sub.follow else ReplSubscriber.OFF)
        ReplSubscriber.objects.filter(pk=sub.pk).update(last_error="")
        return outcome.as_dict()


# --- in-sync mode -------------------------------------------------------------------------------------------


def max_backlog(account: ReplAccount) -> int:
    return account.max_backlog or RegistryEntry.get_int("repl_max_backlog")


def follow_step(sub: ReplSubscriber) -> SyncOutcome | None:
    """One look at the publisher for an in-sync subscriber: apply what is new, or cut the feed when the
    backlog is over the publication's threshold (the subscriber re-syncs from its level later)."""
    acct = publication(sub.server, sub.account)
    try:
        return sync_once(sub, max_transactions=RegistryEntry.get_int("repl_apply_batch"), max_backlog=max_backlog(acct))
    except BacklogExceeded as exc:
        set_state(sub, ReplSubscriber.DISCONNECTED, str(exc))
        log.warning("%s", exc)
        return None
    except LevelMoved:
        return None  # a sync job applied the same transactions meanwhile; look again next round
    except Exception as exc:
        set_state(sub, ReplSubscriber.DISCONNECTED, error_message(exc))
        raise


def followed() -> list[ReplSubscriber]:
    return list(
        ReplSubscriber.objects.filter(follow=True, subscribed=True, valid=1, state=ReplSubscriber.IN_SYNC).order_by(
            "id"
        )
    )


def follow_loop(stop: Callable[[], bool], interval: float = 0.1) -> int:
    """Serve every in-sync subscription until `stop()` says so; returns how many transactions it applied."""
    applied = 0
    with connections.reuse():
        while not stop():
            started = time.monotonic()
            for sub in followed():
                try:
                    outcome = follow_step(sub)
                except Exception:
                    log.exception("in-sync apply for %s failed", sub)
                    continue
                if outcome is not None:
                    applied += outcome.applied
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
    return applied


# --- updateable subscriptions: the subscriber's changes go back to the publisher -----------------------------


def setup_push(sub: ReplSubscriber, acct: ReplAccount) -> None:
    """After an initial copy: the subscriber logs its own changes into its push account, and the
    publisher records that it has everything logged so far."""
    pub_server, sub_server = server_named(sub.server), server_named(sub.subscriber)
    push_acct = sql.push_account(sub.account)
    d = _d(sub_server)
    names = sql.log_names(d, push_acct)
    if lookup_table(sub_server, names.seq) is None:
        create_log(sub_server, push_acct)
    for name in published_tables(acct):
        table = describe(sub_server, name)
        drop_capture(sub_server, push_acct, table.name)
        add_capture(sub_server, push_acct, table, updateable=True)
    ensure_level_table(pub_server)
    count = publisher_count(sub_server, push_acct)
    run_transaction(pub_server, set_subscriber_position(pub_server, sub.subscriber, push_acct, count))


def _json_row(values: dict) -> dict:
    from replication_admin.engine.resolvers import to_json_value

    return {k: to_json_value(v) for k, v in values.items()}


def _classify(op: str, current: dict | None, old: dict | None) -> str | None:
    """The reference's conflict rules for a replayed change (None: no conflict)."""
    guid = sql.ROWGUID_COLUMN
    if op == "I":
        return "I" if current is not None else None
    if current is None:
        return "D"  # an update or delete of a row the publisher no longer has
    if (old or {}).get(guid) != current.get(guid):
        return "U" if op == "U" else "D"
    return None


def _decide(acct: ReplAccount, table: TableInfo, ctype: str, current, incoming, old) -> dict:
    from replication_admin.conflicts.actions import chain_for
    from replication_admin.engine.resolvers import ResolverColumn, spark_type
    from replication_admin.models import TransactionalConflictResolver

    chain = [r for r in chain_for(f"{acct.server}.{table.name}", TransactionalConflictResolver) if r.cr_type == ctype]
    if not chain:
        return {"decision": DEFAULT_DECISION[ctype], "resolver": "default", "resolver_id": None, "final": None}
    from jobs.resolve import decide_rows
    from jobs.session import get_spark
    from replication_admin.tasks import spark_config

    columns = [ResolverColumn(c.name, spark_type(c.logical), bool(c.pk_position)) for c in table.columns]
    conflict = {"key": "c", "type": ctype, "pub": current, "new": incoming, "old": old or {}}
    return decide_rows(get_spark(spark_config()), [conflict], chain, columns)[0]


def _current(cursor, d, table: TableInfo, key: list) -> dict | None:
    row = cursor.execute(sql.row_select_sql(d, table), key).fetchone()
    return None if row is None else _json_row(dict(zip([c.name for c in table.columns], row, strict=True)))


def push_transaction(
    acct: ReplAccount, pub_server: Server, tables: dict[str, TableInfo], subscriber: str, txn, expected: int
) -> int:
    """Replay one of the subscriber's transactions on the publisher, deciding conflicts, in one publisher
    transaction that also records how far the subscriber's log has been pushed."""
    import uuid

    from replication_admin.models import ConflictBackup

    d = _d(pub_server)
    schema = schema_of(pub_server)
    push_acct = sql.push_account(acct.account)
    guid = sql.ROWGUID_COLUMN

    def work(cursor) -> int:
        for statement in sql.replay_context_sql(d, False, subscriber, schema):
            cursor.execute(statement)
        conflicted = False
        for entry in txn.entries:
            if entry.op not in ("I", "U", "D") or entry.table not in tables:
                continue  # calls and other tables are not replicated back
            table = tables[entry.table]
            image = entry.new if entry.op != "D" else entry.old
            key = sql.key_values(image, table, d.name)
            current = _current(cursor, d, table, key)
            incoming = _json_row(entry.new) if entry.new else None
            old = _json_row(entry.old) if entry.old else None
            ctype = _classify(entry.op, current, old)
            if ctype is None:
                _write(cursor, d, table, entry.op, entry.new, key)
                continue
            conflicted = True
            decision = _decide(acct, table, ctype, current, incoming, old)
            code = int(decision["decision"]) or DEFAULT_DECISION[ctype]
            fresh = f"{acct.server}@{uuid.uuid4()}"
            if code == 1:
                _write(cursor, d, table, entry.op, entry.new, key)
                winner, loser = incoming, current
            elif code == 2 and entry.op != "D":
                final = {**(decision.get("final") or incoming), guid: fresh}
                _write(cursor, d, table, "U", final, key)
                winner, loser = final, current
            else:  # the publisher's version stands and goes out again, to the originator too
                if current is not None:
                    cursor.execute(sql.touch_sql(d, table), [fresh, *key])
                winner, loser = current, incoming or old
                code = code if code in (3, 5) else DEFAULT_DECISION[ctype]
            ConflictBackup.objects.update_or_create(
                item=f"{acct.server}.{table.name}",
                source=subscriber,
                change_guid=f"{subscriber}:{txn.count}:{entry.seq}",
                defaults={
                    "kind": "transactional",
                    "table_name": table.name,
                    "publisher": acct.server,
                    "origin": txn.origin or subscriber,
                    "primary_key": {k.name: v for k, v in zip(table.primary_key, key, strict=True)},
                    "conflict_type": ctype,
                    "operation": entry.op,
                    "decision": code,
                    "resolver_id": decision.get("resolver_id"),
                    "resolver": decision.get("resolver") or "default",
                    "publisher_row": current,
                    "incoming_row": incoming or old,
                    "old_rowguid": (old or {}).get(guid),
                    "winning_row": winner,
                    "losing_row": loser,
                    "note": decision.get("note") or "",
                },
            )
        if conflicted:
            for statement in sql.retag_origin_sql(d, acct.account, acct.server, schema):
                cursor.execute(statement)
        cursor.execute(
            sql.level_advance_sql(d, schema),
            [levels.level_of(txn.count), txn.count, subscriber, push_acct, expected],
        )
        if cursor.rowcount != 1:
            raise LevelMoved(f"{acct.server} has already taken {subscriber}'s transaction {txn.count}")
        for statement in sql.reset_context_sql(d, schema):
            cursor.execute(statement)
        return txn.count

    return with_retries(pub_server, work)


def _write(cursor, d, table: TableInfo, op: str, image: dict | None, key: list) -> None:
    if op == "D":
        cursor.execute(sql.delete_sql(d, table), key)
        return
    assert image is not None
    cursor.execute(sql.upsert_sql(d, table, 1), sql.row_values(image, table, d.name))


def push(sub: ReplSubscriber, acct: ReplAccount) -> int:
    """Send the subscriber's own transactions, in order, to the publisher. Returns how many went."""
    pub_server, sub_server = server_named(sub.server), server_named(sub.subscriber)
    push_acct = sql.push_account(sub.account)
    position = subscriber_position(pub_server, sub.subscriber, push_acct)
    if position is None:
        return 0
    pushed = position[1]
    available = publisher_count(sub_server, push_acct)
    if available <= pushed:
        return 0
    tables = published_tables(acct, cached=True)
    sent = 0
    batch = RegistryEntry.get_int("repl_apply_batch")
    while pushed < available:
        for txn in read_transactions(sub_server, push_acct, pushed, min(available, pushed + batch)):
            pushed = push_transaction(acct, pub_server, tables, sub.subscriber, txn, pushed)
            sent += 1
    return sent


# --- published procedures (PostgreSQL publishers) ----------------------------------------------------------


def describe_procedure(server: Server, name: str) -> tuple[sql.Procedure, str]:
    """A procedure of the publisher's schema and the identity PostgreSQL reports for it."""
    if server.dialect != "postgresql":
        raise TrxError(
            f"publishing procedures needs a PostgreSQL publisher; {server.name} is {server.get_dialect_display()}, "
            "which has no DDL triggers to keep a redefined procedure's calls logged (use REPL_TEXT there)"
        )
    schema = schema_of(server) or "public"
    with connections.connect(server, readonly=True) as conn:
        rows = conn.cursor().execute(sql.procedure_sql(), [schema, name]).fetchall()
        if not rows:
            raise TrxError(f"procedure {name!r} does not exist on {server.name}")
        if len(rows) > 1:
            raise TrxError(f"{name!r} is overloaded on {server.name}; a published procedure must have one signature")
        oid, kind, arguments, argnames, types, modes, definition = rows[0]
        identity = (
            conn.cursor()
            .execute("SELECT (pg_identify_object('pg_proc'::regclass, ?::oid, 0)).identity", [int(oid)])
            .fetchone()[0]
        )
    if kind != "p":
        raise TrxError(f"{name!r} is a function; only procedures are published (calls return nothing to replay)")
    if modes and any(m != "i" for m in str(modes).split(",")):
        raise TrxError(f"{name!r} has output parameters; only procedures with input parameters can be replicated")
    names = tuple(n for n in str(argnames or "").strip("{}").split(",") if n)
    type_list = tuple(t for t in str(types or "").split(",") if t)
    if len(names) != len(type_list):
        raise TrxError(f"every parameter of {name!r} needs a name to be published")
    proc = sql.Procedure(name, schema, str(arguments or ""), names, type_list, str(definition))
    return proc, str(identity)


def publish_procedure(server: Server, account: str, name: str, options: int) -> None:
    """Wrap the procedure so its calls are logged (options 1, 3) and track its definition (2, 3)."""
    d = _d(server)
    schema = schema_of(server)
    proc, identity = describe_procedure(server, name)
    events, _ = sql.event_trigger_ddl(d, schema)
    try:
        run_each(server, [*sql.proc_table_ddl(d, schema), *events])
    except pyodbc.Error as exc:
        raise TrxError(
            f"{server.name} refused the DDL trigger that tracks published procedures "
            f"({connections.driver_message(exc)}); it needs a superuser connection"
        ) from None
    q = d.quote
    body = proc.body_name(d)
    wrapper = sql.wrapper_ddl(d, proc, account, schema) if options & sql.CALLS else None
    statements: list = [(f"SELECT set_config('{sql.WRAPPING_SETTING}', 'on', true)", [])]
    if wrapper:
        statements += [(f"ALTER PROCEDURE {identity} RENAME TO {q(body)}", []), (wrapper, [])]
    columns = ", ".join(
        q(c) for c in ("NAME", "ACCOUNT", "OPTIONS", "IDENT", "BODY", "BODY_IDENT", "WRAPPER", "APPEND", "DEF")
    )
    body_identity = f"{d.qualify(body, proc.schema)}({', '.join(proc.types)})"
    statements.append(
        (
            f"INSERT INTO {d.qualify(sql.PROC_TABLE, schema)} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                proc.name,
                account,
                options,
                identity,
                body if wrapper else None,
                body_identity if wrapper else None,
                wrapper,
                sql.append_function(d, account, schema),
                proc.definition,
            ],
        )
    )
    run_transaction(server, statements)


def unpublish_procedure(server: Server, name: str) -> None:
    d = _d(server)
    schema = schema_of(server)
    q = d.quote
    table = d.qualify(sql.PROC_TABLE, schema)
    with connections.connect(server, readonly=True) as conn:
        row = (
            conn.cursor()
            .execute(f"SELECT {q('IDENT')}, {q('BODY')}, {q('WRAPPER')} FROM {table} WHERE {q('NAME')} = ?", [name])
            .fetchone()
        )
    if row is None:
        return
    identity, body, wrapper = row
    statements: list = [(f"SELECT set_config('{sql.WRAPPING_SETTING}', 'on', true)", [])]
    if wrapper:
        statements += [
            (f"DROP PROCEDURE IF EXISTS {identity}", []),
            (f"ALTER PROCEDURE {d.qualify(body, schema or 'public')} RENAME TO {q(name)}", []),
        ]
    statements.append((f"DELETE FROM {table} WHERE {q('NAME')} = ?", [name]))
    run_transaction(server, statements)


def procedure_definitions(server: Server, account: str) -> list[tuple[str, str]]:
    """(name, definition) of the account's procedures whose definitions are replicated."""
    if server.dialect != "postgresql":
        return []
    d = _d(server)
    q = d.quote
    table = d.qualify(sql.PROC_TABLE, schema_of(server))
    if lookup_table(server, sql.PROC_TABLE) is None:
        return []
    with connections.connect(server, readonly=True) as conn:
        rows = (
            conn.cursor()
            .execute(
                f"SELECT {q('NAME')}, {q('DEF')} FROM {table} WHERE {q('ACCOUNT')} = ? AND {q('OPTIONS')} IN (2, 3) "
                f"ORDER BY {q('NAME')}",
                [account],
            )
            .fetchall()
        )
    return [(str(r[0]), str(r[1])) for r in rows]


def reapply_losing_version(backup) -> str:
    """Conflict inbox, transactional: write the losing version on the publisher as a change of its own
    (a new ROWGUID of the publisher's), so the next syncs send it to every subscriber, its originator too."""
    import uuid

    from replication_admin.models import ConflictBackup

    server = server_named(backup.publisher)
    table = describe(server, backup.table_name)
    d = _d(server)
    key = sql.key_values(backup.primary_key or {}, table, d.name)
    loser = backup.losing_row
    if not loser or (backup.operation == "D" and backup.decision in (3, 5)):
        run_transaction(server, [(sql.delete_sql(d, table), key)])
        message = f"deleted {backup.primary_key} on {server.name}"
    else:
        row = {**loser, sql.ROWGUID_COLUMN: f"{server.name}@{uuid.uuid4()}"}
        run_transaction(server, [(sql.upsert_sql(d, table, 1), sql.row_values(row, table, d.name))])
        message = f"wrote the losing version of {backup.primary_key} on {server.name}; the next syncs send it on"
    ConflictBackup.objects.filter(pk=backup.pk).update(reapplied_at=timezone.now())
    return message

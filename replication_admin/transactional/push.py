"""Updateable subscriptions: the subscriber's own transactions go back to the publisher in order, conflicts
decided by SYS_REPL_CR resolvers in one batch, losing versions kept, and re-applied from the inbox."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from replication_admin.core import connections
from replication_admin.core.conflicts import (
    alert_held,
    decide,
    default_decision,
    json_row,
    key_text,
    new_guid,
    resolver_chain,
)
from replication_admin.core.introspection import lookup_table
from replication_admin.core.transactions import (
    run_in_transaction,
    with_retries,
)
from replication_admin.core.words import key_label
from replication_admin.engine import levels
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.resolvers import DEFAULT_DECISION, HELD, ResolverColumn, spark_type
from replication_admin.engine.schema import TableInfo
from replication_admin.engine.values import same_value
from replication_admin.models import (
    ConflictBackup,
    ReplAccount,
    ReplSubscriber,
    Server,
    TransactionalConflictResolver,
)
from replication_admin.transactional import profile
from replication_admin.transactional.apply import LevelMoved
from replication_admin.transactional.capture import (
    add_capture,
    create_log,
    drop_capture,
    publisher_count,
    read_transactions,
)
from replication_admin.transactional.lookups import (
    TrxError,
    _d,
    describe,
    item_table,
    published_tables,
    schema_of,
    server_named,
    table_items,
)
from replication_admin.transactional.positions import (
    ensure_level_table,
    set_subscriber_position,
    subscriber_position,
)


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
    run_in_transaction(pub_server, set_subscriber_position(pub_server, sub.subscriber, push_acct, count))


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


class _Undecided(Exception):
    """Conflicts met inside a push transaction that resolvers must decide: the transaction is rolled back,
    they are decided together in one Spark job (outside any open transaction), and it runs again."""

    def __init__(self, conflicts: list[tuple[TableInfo, dict]]) -> None:
        super().__init__(f"{len(conflicts)} conflict(s) to decide")
        self.conflicts = conflicts


class Reinitialise(TrxError):
    """A subscriber's change conflicted on a publication that answers conflicts with 'the publisher wins and
    the subscriber is copied again': nothing of it reached the publisher, and every change of the subscriber
    not yet pushed is kept in the conflict inbox; the subscription must be copied again."""

    def __init__(self, subscriber: str, discarded: int) -> None:
        super().__init__(
            f"{subscriber}'s change conflicted: the publisher's rows stand and {subscriber} is copied again "
            f"({discarded} unpushed change(s) kept in the conflict inbox)"
        )
        self.discarded = discarded


class _PublisherWins(Exception):
    """Raised inside the publisher transaction (rolling it back) at the first conflict of a subscriber
    transaction on a publication whose answer is to re-initialise the subscriber."""


MAX_DECISION_ROUNDS = 5  # a row that keeps changing while its conflict is decided is read and decided again


def _decide_all(pending: list[tuple[TableInfo, dict]], chains: dict[str, list], decisions: dict[str, dict]) -> None:
    """Decide every pending conflict, one Spark job per table, and remember each decision with its input."""
    by_table: dict[str, tuple[TableInfo, list[dict]]] = {}
    for table, conflict in pending:
        by_table.setdefault(table.name, (table, []))[1].append(conflict)
    for name, (table, conflicts) in by_table.items():
        columns = [ResolverColumn(c.name, spark_type(c.logical), bool(c.pk_position)) for c in table.columns]
        for conflict, decision in zip(conflicts, decide(conflicts, chains[name], columns), strict=True):
            decisions[conflict["key"]] = {"input": conflict, **decision}


def held_keys(publisher: str, subscriber: str) -> dict[tuple[str, str], int]:
    """The keys of `subscriber`'s held conflicts (decision 4, a person has not decided): (table, key text) ->
    the backup. Neither side's later changes of such a row are applied on the other until it is decided."""
    held = ConflictBackup.objects.filter(
        kind="transactional", publisher=publisher, source=subscriber, decision=ConflictBackup.HELD
    ).values_list("pk", "table_name", "primary_key")
    return {(table, key_text((key or {}).values())): pk for pk, table, key in held}


def _current(cursor, d, table: TableInfo, key: list) -> dict | None:
    row = cursor.execute(sql.row_select_sql(d, table), key).fetchone()
    return None if row is None else json_row(dict(zip([c.name for c in table.columns], row, strict=True)))


def _sync_user_sql(d, acct: ReplAccount, pub_server: Server) -> tuple[list[str], list[str]]:
    if not acct.sync_user:
        return [], []
    if d.replay_user_problem:  # stored before publishing checked it: refused, never ignored
        raise TrxError(f"{pub_server.name} cannot replay as {acct.sync_user!r}: {d.replay_user_problem}")
    return d.replay_role_sql(acct.sync_user)


def push_transaction(
    acct: ReplAccount,
    pub_server: Server,
    tables: dict[str, TableInfo],
    subscriber: str,
    txn,
    expected: int,
    chains: dict[str, list] | None = None,
    *,
    column_level: set[str],
) -> int:
    """Replay one of the subscriber's transactions on the publisher, deciding conflicts, in one publisher
    transaction that also records how far the subscriber's log has been pushed. Conflicts that resolvers
    decide are decided in one batch between two attempts, never while the publisher transaction is open;
    an attempt applies a decision only to the very versions it was made for. `chains` caches the tables'
    resolver chains across the transactions of one push (read when a table first meets a conflict)."""
    chains = {} if chains is None else chains
    decisions: dict[str, dict] = {}
    backups: list[dict] = []  # the attempt that commits leaves its own here
    for _ in range(MAX_DECISION_ROUNDS):
        try:
            pushed = with_retries(
                pub_server,
                lambda cursor: _push_work(
                    cursor,
                    acct,
                    pub_server,
                    tables,
                    subscriber,
                    txn,
                    expected,
                    chains,
                    decisions,
                    backups,
                    column_level,
                ),
            )
        except _Undecided as undecided:
            _decide_all(undecided.conflicts, chains, decisions)
            continue
        _show_backups(subscriber, backups)
        return pushed
    raise TrxError(
        f"{subscriber}'s transaction {txn.count}: rows kept changing on {acct.server} while its conflicts were "
        f"decided ({MAX_DECISION_ROUNDS} times); the next sync tries again"
    )


@dataclass(frozen=True)
class ColumnSplit:
    """Which columns of an update each side changed since the version the subscriber changed (column-level
    conflicts): `mine` the subscriber's, `theirs` the publisher's; only `both` conflict."""

    mine: frozenset[str]
    theirs: frozenset[str]

    @property
    def both(self) -> frozenset[str]:
        return self.mine & self.theirs

    def image(self, table: TableInfo, keyed: dict, sources: dict[str, dict], guid: str) -> dict:
        """A partial image to write: the key (from `keyed`), the columns each source gives (`sources`: column -> its
        row), and a new ROWGUID (a version of the publisher's: it goes out to every subscriber, its originator too)."""
        image = {k.name: keyed.get(k.name) for k in table.primary_key}
        image.update({column: row.get(column) for column, row in sources.items()})
        image[sql.ROWGUID_COLUMN] = guid
        return image

    def versions(self, old: dict, current: dict, incoming: dict, kept: dict[str, str]) -> dict:
        """What the conflict backup records of each conflicting column, and the columns merged without one."""
        conflicted = {
            c: {"old": old.get(c), "publisher": current.get(c), "incoming": incoming.get(c), "kept": kept[c]}
            for c in sorted(self.both)
        }
        return {"conflicted": conflicted, "merged": sorted(self.mine - self.both)}


def column_split(table: TableInfo, old: dict, incoming: dict, current: dict) -> ColumnSplit:
    """The columns the subscriber's update changed (its new image against its old) and those the publisher's row
    changed since that old version (its current row against the subscriber's old image), values compared as
    values: the images of two dialects write 10.5 and 10.50, a time with 'T' or ' '."""
    columns = [c for c in table.columns if not c.pk_position and c.name != sql.ROWGUID_COLUMN and c.name in old]
    mine = frozenset(c.name for c in columns if c.name in incoming
                     and not same_value(incoming[c.name], old[c.name], c.logical))  # fmt: skip
    theirs = frozenset(c.name for c in columns if not same_value(current.get(c.name), old[c.name], c.logical))
    return ColumnSplit(mine, theirs)


def column_level_tables(acct: ReplAccount) -> set[str]:
    """The publication's tables whose conflicts are decided column by column (TpItem.column_conflicts)."""
    return {item_table(i.item) for i in table_items(acct) if i.column_conflicts}


def _push_work(
    cursor,
    acct: ReplAccount,
    pub_server: Server,
    tables: dict[str, TableInfo],
    subscriber: str,
    txn,
    expected: int,
    chains: dict[str, list],
    decisions: dict[str, dict],
    backups: list[dict],
    column_level: set[str],
) -> int:
    """One attempt at the publisher transaction. The conflict backups of its decisions are saved pending
    just before it commits (an attempt that rolls back or stops at undecided conflicts saves none); the
    caller shows them once it has committed."""
    backups.clear()
    d = _d(pub_server)
    schema = schema_of(pub_server)
    push_acct = sql.push_account(acct.account)
    guid = sql.ROWGUID_COLUMN
    for statement in sql.replay_context_sql(d, False, subscriber, schema):
        cursor.execute(statement)
    # REPL_PUBLISH's sync user: the subscriber's changes are written with its privileges, the bookkeeping below
    # (origin, level) with the login's. A dialect that cannot act as another user refused it at publish time.
    assume, release = _sync_user_sql(d, acct, pub_server)
    for statement in assume:
        cursor.execute(statement)
    conflicted = False
    undecided: list[tuple[TableInfo, dict]] = []
    held = held_keys(acct.server, subscriber)
    for entry in txn.entries:
        if entry.op not in ("I", "U", "D") or entry.table not in tables:
            continue  # calls and other tables are not replicated back
        table = tables[entry.table]
        image = entry.new if entry.op != "D" else entry.old
        key = sql.key_values(image, table, d.name)
        incoming = json_row(entry.new) if entry.new else None
        behind = held.get((table.name, key_text(key)))
        if behind is not None:
            # A later change of a held row waits behind the conflict: the person's pick covers it.
            backups.append({"behind": behind, "incoming_row": incoming, "operation": entry.op})
            continue
        current = _current(cursor, d, table, key)
        old = json_row(entry.old) if entry.old else None
        ctype = _classify(entry.op, current, old)
        if ctype is None:
            _write(cursor, d, table, entry.op, entry.new, key)
            continue
        split = None
        if ctype == "U" and entry.op == "U" and table.name in column_level and old and incoming and current:
            split = column_split(table, old, incoming, current)
            if not split.both:
                # No column changed on both sides: the subscriber's columns merge into the publisher's row, which
                # goes back to the subscriber too (it lacks the publisher's columns).
                image = split.image(table, incoming, dict.fromkeys(split.mine, incoming), new_guid(acct.server))
                _write(cursor, d, table, "U", image, key)
                conflicted = True
                continue
        if acct.on_conflict == ReplAccount.OnConflict.REINITIALIZE:
            raise _PublisherWins()
        conflicted = True
        change = f"{subscriber}:{txn.count}:{entry.change_id}"
        conflict: dict[str, Any] = {"key": change, "type": ctype, "pub": current, "new": incoming, "old": old or {}}
        if split is not None:
            conflict["columns"] = sorted(split.both)
        if table.name not in chains:
            chains[table.name] = resolver_chain(f"{acct.server}.{table.name}", TransactionalConflictResolver)
        if not any(spec.cr_type == ctype for spec in chains[table.name]):
            decision = default_decision(conflict)
        elif change in decisions and decisions[change]["input"] == conflict:
            decision = decisions[change]
        else:
            undecided.append((table, conflict))
            continue
        code = int(decision["decision"]) or DEFAULT_DECISION[ctype]
        fresh = new_guid(acct.server)
        if code == HELD:
            # Held: nothing is written; each side keeps its version until a person picks one (conflict inbox).
            held[(table.name, key_text(key))] = 0
            backups.append(
                _backup(acct, table, txn, subscriber, entry, key, current, incoming or old, ctype, code, None, None)
                | {"resolver_id": decision.get("resolver_id"), "resolver": decision.get("resolver") or "default",
                   "note": "held: both sides keep their version until a person picks one"}
            )  # fmt: skip
            continue
        if split is not None and incoming is not None and current is not None and old is not None:
            # Column by column: the decision is the conflicting columns'; the subscriber's other columns merge.
            resolved: dict[str, Any] = decision.get("final") or incoming
            taken = {c: ("incoming" if code == 1 else "resolver" if code == 2 else "publisher") for c in split.both}
            sources = dict.fromkeys(split.mine - split.both, incoming)
            sources |= {c: incoming if code == 1 else resolved for c in split.both if taken[c] != "publisher"}
            image = split.image(table, incoming, sources, fresh)
            _write(cursor, d, table, "U", image, key)
            code = code if code in (1, 2) else DEFAULT_DECISION[ctype]
            versions = split.versions(old, current, incoming, taken)
            merged = {**current, **image}
            backups.append(
                _backup(acct, table, txn, subscriber, entry, key, current, incoming, ctype, code, merged, incoming)
                | {"resolver_id": decision.get("resolver_id"), "resolver": decision.get("resolver") or "default",
                   "note": decision.get("note") or "", "column_versions": versions}
            )  # fmt: skip
            continue
        if code == 1:
            _write(cursor, d, table, entry.op, entry.new, key)
            winner, loser = incoming, current
        elif code == 2 and entry.op != "D":
            assert incoming is not None  # an insert or update carries its new row
            final = {**(decision.get("final") or incoming), guid: fresh}
            _write(cursor, d, table, "U", final, key)
            winner, loser = final, current
        else:  # the publisher's version stands and goes out again, to the originator too
            if current is not None:
                cursor.execute(sql.touch_sql(d, table), [fresh, *key])
            winner, loser = current, incoming or old
            code = code if code in (3, 5) else DEFAULT_DECISION[ctype]
        backups.append(
            _backup(acct, table, txn, subscriber, entry, key, current, incoming or old, ctype, code, winner, loser)
            | {
                "resolver_id": decision.get("resolver_id"),
                "resolver": decision.get("resolver") or "default",
                "note": decision.get("note") or "",
            }
        )
    for statement in release:
        cursor.execute(statement)
    if undecided:
        raise _Undecided(undecided)
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
    _save_pending(subscriber, backups)
    return txn.count


def _backup(
    acct: ReplAccount,
    table: TableInfo,
    txn,
    subscriber: str,
    entry,
    key: list,
    current: dict | None,
    incoming: dict | None,
    ctype: str,
    code: int,
    winner: dict | None,
    loser: dict | None,
) -> dict:
    """A conflict backup of one subscriber change (without who decided it, which the caller adds)."""
    old = json_row(entry.old) if entry.old else None
    primary_key = {k.name: v for k, v in zip(table.primary_key, key, strict=True)}
    return {
        "item": f"{acct.server}.{table.name}", "change_guid": f"{subscriber}:{txn.count}:{entry.change_id}",
        "pending": True, "kind": "transactional", "table_name": table.name, "publisher": acct.server,
        "origin": txn.origin or subscriber, "primary_key": primary_key,
        "conflict_type": ctype, "operation": entry.op, "decision": code, "publisher_row": current,
        "incoming_row": incoming, "old_rowguid": (old or {}).get(sql.ROWGUID_COLUMN), "winning_row": winner,
        "losing_row": loser,
    }  # fmt: skip


def _save_pending(subscriber: str, backups: list[dict]) -> None:
    """Backups keyed by (item, source, change): a retried attempt updates the rows it saved before. A change
    behind a held conflict becomes that conflict's subscriber version (the latest)."""
    with transaction.atomic():
        for backup in backups:
            fields = dict(backup)
            if "behind" in fields:
                ConflictBackup.with_pending.filter(pk=fields.pop("behind")).update(**fields)
                continue
            ConflictBackup.with_pending.update_or_create(
                item=fields.pop("item"), source=subscriber, change_guid=fields.pop("change_guid"), defaults=fields
            )


def _show_backups(subscriber: str, backups: list[dict]) -> None:
    """The publisher transaction committed: its conflict backups become visible in the inbox."""
    for backup in backups:
        if "behind" in backup:
            continue
        ConflictBackup.with_pending.filter(
            item=backup["item"], source=subscriber, change_guid=backup["change_guid"], pending=True
        ).update(pending=False)
        if backup["decision"] == HELD:
            alert_held(backup["item"], subscriber, backup["primary_key"])


def settle_pending_backups(publisher: str, subscriber: str, pushed: int) -> None:
    """Backups a push left pending (it stopped between its commit and showing them): visible when the
    publisher has taken their transaction (its count is at most `pushed`), dropped when it has not."""
    pending = ConflictBackup.with_pending.filter(
        kind="transactional", publisher=publisher, source=subscriber, pending=True
    )
    taken: list[int] = []
    dropped: list[int] = []
    for pk, change in pending.values_list("pk", "change_guid"):
        count = int(change.rsplit(":", 2)[1])
        (taken if count <= pushed else dropped).append(pk)
    with transaction.atomic():
        ConflictBackup.with_pending.filter(pk__in=taken).update(pending=False)
        ConflictBackup.with_pending.filter(pk__in=dropped).delete()


def _write(cursor, d, table: TableInfo, op: str, image: dict | None, key: list) -> None:
    if op == "D":
        cursor.execute(sql.delete_sql(d, table), key)
        return
    assert image is not None
    table = sql.image_table(table, image)  # a column the publisher added or renamed since keeps its value
    cursor.execute(sql.upsert_sql(d, table, 1), sql.row_values(image, table, d.name))


def push(sub: ReplSubscriber, acct: ReplAccount) -> int:
    """Send the subscriber's own transactions, in order, to the publisher. Returns how many went."""
    pub_server, sub_server = server_named(sub.server), server_named(sub.subscriber)
    push_acct = sql.push_account(sub.account)
    position = subscriber_position(pub_server, sub.subscriber, push_acct)
    if position is None:
        return 0
    pushed = position[1]
    settle_pending_backups(acct.server, sub.subscriber, pushed)
    available = publisher_count(sub_server, push_acct)
    if available <= pushed:
        return 0
    tables = published_tables(acct, cached=True)
    sent = 0
    batch = profile.apply_batch(sub)
    chains: dict[str, list] = {}  # the tables' resolver chains, read once per push
    column_level = column_level_tables(acct)
    while pushed < available:
        for txn in read_transactions(sub_server, push_acct, pushed, min(available, pushed + batch)):
            try:
                pushed = push_transaction(
                    acct, pub_server, tables, sub.subscriber, txn, pushed, chains, column_level=column_level
                )
            except _PublisherWins:
                raise Reinitialise(
                    sub.subscriber, _keep_unpushed(acct, pub_server, sub_server, sub.subscriber, pushed, available)
                ) from None
            sent += 1
    return sent


def _keep_unpushed(
    acct: ReplAccount, pub_server: Server, sub_server: Server, subscriber: str, pushed: int, available: int
) -> int:
    """Every change of the subscriber's log after `pushed` as a conflict backup (the publisher's version won;
    the inbox can re-apply each one): the copy about to be made replaces them on the subscriber."""
    tables = published_tables(acct, cached=True)
    d = _d(pub_server)
    push_acct = sql.push_account(acct.account)
    backups: list[dict] = []
    with connections.connect(pub_server) as conn:  # reads the rows as the push does (FOR UPDATE, autocommit)
        cursor = conn.cursor()
        for txn in read_transactions(sub_server, push_acct, pushed, available):
            for entry in txn.entries:
                if entry.op not in ("I", "U", "D") or entry.table not in tables:
                    continue
                table = tables[entry.table]
                image = (entry.new if entry.op != "D" else entry.old) or {}
                key = sql.key_values(image, table, d.name)
                current = _current(cursor, d, table, key)
                incoming = json_row(entry.new) if entry.new else None
                old = json_row(entry.old) if entry.old else None
                ctype = _classify(entry.op, current, old)
                note = (
                    "conflicted: the publisher's row stands"
                    if ctype
                    else ("not pushed: the subscriber was copied again after a conflict")
                )
                backups.append(
                    _backup(acct, table, txn, subscriber, entry, key, current, incoming or old, ctype or entry.op, 3,
                            current, incoming or old)
                    | {"resolver_id": None, "resolver": "publisher wins, reinitialise", "note": note}
                )  # fmt: skip
    _save_pending(subscriber, backups)
    _show_backups(subscriber, backups)
    return len(backups)


def reapply_losing_version(backup) -> str:
    """Conflict inbox, transactional: write the losing version on the publisher as a change of its own
    (a new ROWGUID of the publisher's), so the next syncs send it to every subscriber, its originator too."""
    server = server_named(backup.publisher)
    table = describe(server, backup.table_name)
    d = _d(server)
    key = sql.key_values(backup.primary_key or {}, table, d.name)
    loser = backup.losing_row
    if not loser or (backup.operation == "D" and backup.decision in (3, 5)):
        run_in_transaction(server, [(sql.delete_sql(d, table), key)])
        message = f"deleted {key_label(backup.primary_key)} on {server.name}"
    else:
        row = {**loser, sql.ROWGUID_COLUMN: new_guid(server.name)}
        run_in_transaction(server, [(sql.upsert_sql(d, table, 1), sql.row_values(row, table, d.name))])
        shown = key_label(backup.primary_key)
        message = f"wrote the losing version of {shown} on {server.name}; the next syncs send it on"
    ConflictBackup.objects.filter(pk=backup.pk).update(reapplied_at=timezone.now())
    return message


def carry_out_choice(backup: ConflictBackup, choice: int, edited: dict | None, by: str) -> str:
    """A person's pick for a held transactional conflict, written on the publisher as a change of its own (a new
    ROWGUID of the publisher's), so the next syncs bring every subscriber, the originator too, to it. The hold
    is released first: the subscriber then applies what follows for the row again."""
    server = server_named(backup.publisher)
    table = describe(server, backup.table_name)
    d = _d(server)
    key = sql.key_values(backup.primary_key or {}, table, d.name)
    with connections.connect(server) as conn:
        current = _current(conn.cursor(), d, table, key)
    subscriber_row = backup.incoming_row if backup.operation != "D" else None
    if choice == 3:
        version = current
    elif choice == 1:
        version = subscriber_row
    else:
        version = {**(subscriber_row or current or {}), **(edited or {}), **(backup.primary_key or {})}
    ConflictBackup.objects.filter(pk=backup.pk, decision=ConflictBackup.HELD).update(
        decision=choice, chosen=choice, chosen_row=edited, winning_row=version,
        losing_row=subscriber_row if choice == 3 else current, decided_at=timezone.now(), decided_by=by,
    )  # fmt: skip
    if version is None:
        if current is None:
            # Neither keeps the row, but the subscriber may: a write and a delete make every copy drop it.
            row = {**(backup.incoming_row or backup.publisher_row or {}), sql.ROWGUID_COLUMN: new_guid(server.name)}
            statements = [
                (sql.upsert_sql(d, table, 1), sql.row_values(row, table, d.name)),
                (sql.delete_sql(d, table), key),
            ]
        else:
            statements = [(sql.delete_sql(d, table), key)]
        run_in_transaction(server, statements)
        return f"{backup.table_name} {key_label(backup.primary_key)}: deleted everywhere with the next syncs"
    row = {**version, sql.ROWGUID_COLUMN: new_guid(server.name)}
    run_in_transaction(server, [(sql.upsert_sql(d, table, 1), sql.row_values(row, table, d.name))])
    label = dict(ConflictBackup.CHOICES)[choice]
    return f"{backup.table_name} {key_label(backup.primary_key)}: {label} goes to every copy with the next syncs"

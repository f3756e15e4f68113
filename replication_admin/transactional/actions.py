"""Transactional replication actions: every change of publications and subscriptions, used alike by the
statement language, the console and the scheduler. Preconditions fail with the reference's messages."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from replication_admin.core import connections
from replication_admin.core.alerts import resolve_alerts, resolve_alerts_of
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import lookup_table, with_constraints
from replication_admin.core.jobs import do_start_job
from replication_admin.core.locks import item_lock
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.engine import dialects, levels, row_filter, transactional_sql
from replication_admin.engine.statements import string_literal
from replication_admin.models import (
    Alert,
    AuditEntry,
    ConflictBackup,
    DeclaredServer,
    JobRun,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    SchemaChange,
    Server,
    SkippedTransaction,
    SnapshotLog,
    SnapshotPublication,
    TpGrant,
    TpItem,
)
from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import durability, profile, tracers
from replication_admin.transactional import image as trx_image
from replication_admin.transactional import initial_copy as trx_initial_copy
from replication_admin.transactional import lookups as trx_lookups
from replication_admin.transactional import positions as trx_positions
from replication_admin.transactional import procedures as trx_procedures
from replication_admin.transactional import push as trx_push
from replication_admin.transactional import row_filters as trx_row_filters
from replication_admin.transactional import schema as trx_schema
from replication_admin.transactional import sync as trx_sync
from replication_admin.transactional.apply import Target, gap_entries, move_past, repair_keys, transaction_keys
from replication_admin.transactional.runs import ReloadParams, SubscriptionParams, TrxInit, TrxReload, TrxSync

log = logging.getLogger(__name__)

TABLE, PROCEDURE = 2, 3


def _failed(actor: Actor, action: str, target: str, error: Exception) -> None:
    record(actor, action, target, AuditEntry.Outcome.ERROR, {"error": str(error)})


def _guarded(actor: Actor, action: str, target: str):
    """Context: a ReplicationError raised inside is recorded in the audit log, then passed on."""

    class Guard:
        def __enter__(self):
            return self

        def __exit__(self, kind, exc, tb):
            if exc is not None and isinstance(exc, ReplicationError):
                _failed(actor, action, target, exc)
            return False

    return Guard()


def publication(server: Server, account: str) -> ReplAccount:
    row = ReplAccount.objects.filter(server=server.name, account=account).first()
    if row is None:
        raise trx_lookups.TrxError(f"publication {account!r} does not exist on {server.name}")
    return row


# --- publisher side ------------------------------------------------------------------------------------------


def choose_capture(server: Server, asked: str) -> tuple[str, str]:
    """(capture, why) for a new publication: `asked` is auto, triggers or wal. Auto decodes the WAL where the
    server allows it (no cost to writers) and falls back to triggers, saying why."""
    if asked == ReplAccount.Capture.TRIGGERS:
        return ReplAccount.Capture.TRIGGERS, "chosen at publication"
    reason = trx_capture.wal_unavailable(server)
    if reason is None:
        return ReplAccount.Capture.WAL, "the server decodes its WAL (wal_level = logical)"
    if asked == ReplAccount.Capture.WAL:
        raise trx_lookups.TrxError(f"cannot capture from the WAL of {server.name}: {reason}")
    return ReplAccount.Capture.TRIGGERS, reason


def do_publish(
    actor: Actor,
    server: Server,
    account: str,
    log_file: str | None,
    updateable: bool,
    sync_user: str | None,
    *,
    capture: str = "auto",
) -> ReplAccount:
    """REPL_PUBLISH: the publication and its log (RTSEQ_, RTTX_, RTLOG_) in the publisher's database, with its
    capture: triggers, or on PostgreSQL with wal_level = logical a replication slot (engine.wal_capture)."""
    target = f"{server.name}/{account}"
    require(actor, EDIT, "trx.publish", target)
    with _guarded(actor, "trx.publish", target):
        if ReplAccount.objects.filter(server=server.name, account=account).exists():
            raise trx_lookups.TrxError(f"The publication '{account}' already exists on {server.name}")
        if sync_user:
            # The subscribers' changes are replayed on the publisher with this user's privileges (push.py).
            _check_replay_user(server, sync_user)
        mode, why = choose_capture(server, capture)
        trx_capture.create_log(server, account, wal=mode == ReplAccount.Capture.WAL, writer=sync_user)
    now = timezone.now()
    with transaction.atomic():
        row = ReplAccount.objects.create(
            server=server.name,
            account=account,
            is_updateable=1 if updateable else 0,
            sync_user=sync_user,
            log_file=log_file or f"{account}.log",
            log_started_at=now,
            created_at=now,
            purge_every=levels.DEFAULT_PURGE_MINUTES,
            capture=mode,
            capture_note=why[:255],
        )
        schedule_purger(row)
        record(actor, "trx.publish", target, detail={"log": row.log_file, "updateable": updateable, "capture": mode})
    return row


def do_unpublish(actor: Actor, account: ReplAccount) -> str:
    """REPL_UNPUBLISH: triggers and log go; subscribers keep their copies and are unsubscribed."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.unpublish", target)
    server = trx_lookups.server_named(account.server)
    for item in trx_lookups.table_items(account):
        trx_capture.drop_capture(server, account.account, trx_lookups.item_table(item.item))
    for item in TpItem.objects.filter(server=account.server, acct=account.account, type=PROCEDURE):
        trx_procedures.unpublish_procedure(server, trx_lookups.item_table(item.item))
    trx_capture.drop_log(server, account.account)
    with transaction.atomic():
        TpItem.objects.filter(server=account.server, acct=account.account).delete()
        TpGrant.objects.filter(acct=account.account).delete()
        subscribers = ReplSubscriber.objects.filter(server=account.server, account=account.account)
        names = [s.subscriber for s in subscribers]
        subscribers.delete()
        ScheduledEvent.objects.filter(name__in=[schedule_event_name(n, account) for n in names]).delete()
        ScheduledEvent.objects.filter(name=purge_event_name(account)).delete()
        account.delete()
        record(actor, "trx.unpublish", target)
    trx_capture.drop_shared_objects(
        server,
        publishes=ReplAccount.objects.filter(server=account.server).exists(),
        subscribes=ReplSubscriber.objects.filter(subscriber=account.server, subscribed=True).exists(),
    )
    return f"dropped the publication {target}"


def do_pub_add(
    actor: Actor, account: ReplAccount, item: str, item_type: int, is_copy: int, options: int | None
) -> TpItem:
    """REPL_PUB_ADD: a table gets its I/U/D triggers and its creating statement goes into the log first."""
    target = f"{account.server}/{account.account}: {item}"
    require(actor, EDIT, "trx.pub_add", target)
    server = trx_lookups.server_named(account.server)
    with _guarded(actor, "trx.pub_add", target):
        if item_type == PROCEDURE:
            return _pub_add_procedure(actor, account, server, item, is_copy, options or 3, target)
        name = trx_lookups.item_table(item)
        info = trx_lookups.describe(server, name)
        if any(
            i.item == item or trx_lookups.item_table(i.item) == info.name
            for i in TpItem.objects.filter(server=account.server, type=TABLE)
        ):
            raise trx_lookups.TrxError(f"table {info.name!r} is already published on {server.name}")
        if not info.primary_key:
            raise trx_lookups.TrxError(f"table {info.name!r} has no primary key; a published table needs one")
        trx_capture.add_capture(server, account.account, info, updateable=bool(account.is_updateable))
        info = trx_lookups.describe(server, info.name)  # with its ROWGUID column when the publication is updateable
        try:
            definition = transactional_sql.table_definition(with_constraints(server, info))
            trx_capture.append_entry(server, account.account, "C", info.name, definition)
            trx_schema.track(server, account.account, info.name)
            columns = trx_schema.definition_now(server, account.account, info.name)[0]
        except Exception:
            trx_capture.drop_capture(server, account.account, info.name)
            raise
    with transaction.atomic():
        row = TpItem.objects.create(
            server=account.server, acct=account.account, type=TABLE, item=item, options=None, is_copy=is_copy,
            definition=columns,
        )  # fmt: skip
        record(actor, "trx.pub_add", target)
    return row


def _pub_add_procedure(
    actor: Actor, account: ReplAccount, server: Server, item: str, is_copy: int, options: int, target: str
) -> TpItem:
    if account.is_updateable:
        raise trx_lookups.TrxError(
            "procedure calls cannot be replicated bi-directionally; "
            "publish them in a publication that is not updateable"
        )
    name = trx_lookups.item_table(item)
    if TpItem.objects.filter(server=account.server, type=PROCEDURE, item=item).exists():
        raise trx_lookups.TrxError(f"procedure {name!r} is already published on {server.name}")
    trx_procedures.publish_procedure(server, account.account, name, options)
    with transaction.atomic():
        row = TpItem.objects.create(
            server=account.server, acct=account.account, type=PROCEDURE, item=item, options=options, is_copy=is_copy
        )
        record(actor, "trx.pub_add", target, detail={"options": options})
    return row


def find_item(account: ReplAccount, item: str, item_type: int) -> TpItem:
    row = TpItem.objects.filter(server=account.server, acct=account.account, type=item_type, item=item).first()
    if row is None:
        name = trx_lookups.item_table(item)
        row = (
            next((i for i in trx_lookups.table_items(account) if trx_lookups.item_table(i.item) == name), None)
            if item_type == TABLE
            else None
        )
    if row is None:
        raise trx_lookups.TrxError(f"'{item}' is not an item of the publication {account.account}")
    return row


def do_set_column_conflicts(actor: Actor, account: ReplAccount, table: str, on: bool) -> str:
    """REPL_COLUMN_CONFLICTS: decide the conflicts of one table of an updateable publication column by column (on)
    or whole rows (off, the reference's way). Refused in one line, and audited, for a publication that is not
    updateable (no subscriber change meets the publisher's) or a table it does not publish."""
    target = f"{account.server}/{account.account}: {table}"
    require(actor, EDIT, "trx.column_conflicts", target)
    try:
        if not account.is_updateable:
            raise trx_lookups.TrxError(
                f"{account.account} is not updateable: its subscribers' changes never meet the publisher's, so it "
                "has no conflicts to decide by column"
            )
        item = find_item(account, table, TABLE)
    except ReplicationError as exc:
        _failed(actor, "trx.column_conflicts", target, exc)
        raise
    with transaction.atomic(durable=True):
        TpItem.objects.filter(pk=item.pk).update(column_conflicts=on)
        record(actor, "trx.column_conflicts", target, detail={"before": item.column_conflicts, "after": on})
    name = trx_lookups.item_table(item.item)
    if on:
        return (
            f"{name}: conflicts are decided column by column (a subscriber's update conflicts only in the columns "
            "the publisher changed too; its other columns merge)"
        )
    return f"{name}: conflicts are decided for whole rows"


def do_pub_remove(actor: Actor, account: ReplAccount, item: TpItem, drop: bool = False) -> str:
    target = f"{account.server}/{account.account}: {item.item}"
    require(actor, EDIT, "trx.pub_remove", target)
    server = trx_lookups.server_named(account.server)
    if item.type == PROCEDURE:
        trx_procedures.unpublish_procedure(server, trx_lookups.item_table(item.item))
    else:
        trx_capture.drop_capture(server, account.account, trx_lookups.item_table(item.item))
    with transaction.atomic():
        item.delete()
        subs = ReplSubscriber.objects.filter(server=account.server, account=account.account, subscribed=True)
        trx_row_filters.refresh(list(subs), trx_row_filters.publication_filters(account))  # its filter goes too
        record(actor, "trx.pub_remove", target, detail={"drop": drop})
    return f"removed {item.item} from {account.account}"


def do_grant(actor: Actor, account: ReplAccount, grantee: str) -> str:
    require(actor, EDIT, "trx.grant", f"{account.account} -> {grantee}")
    with transaction.atomic():
        TpGrant.objects.get_or_create(acct=account.account, grantee=grantee)
        record(actor, "trx.grant", f"{account.account} -> {grantee}")
    return f"{grantee} may subscribe to {account.account}"


def do_revoke(actor: Actor, account: ReplAccount, grantee: str) -> str:
    require(actor, EDIT, "trx.revoke", f"{account.account} -> {grantee}")
    with transaction.atomic():
        deleted, _ = TpGrant.objects.filter(acct=account.account, grantee=grantee).delete()
        # The subscriptions the remaining grants no longer let in: every sync and the follower refuse them now.
        left = trx_lookups.grantees_of(account.account)
        subs = ReplSubscriber.objects.filter(server=account.server, account=account.account, subscribed=True)
        stopped = [sub.subscriber for sub in subs.order_by("subscriber") if trx_lookups.grant_refusal(sub, left)]
        record(actor, "trx.revoke", f"{account.account} -> {grantee}", detail={"not_fed": stopped})
    if not deleted:
        raise trx_lookups.TrxError(f"{grantee} has no grant on {account.account}")
    if stopped:
        return (
            f"{grantee} may no longer subscribe to {account.account}; not fed until granted again: {', '.join(stopped)}"
        )
    return f"{grantee} may no longer subscribe to {account.account}"


def do_repl_text(actor: Actor, account: ReplAccount, statement: str, args: tuple) -> int:
    """REPL_TEXT: log a statement (a procedure call) with its arguments as a transaction of its own."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.text", target)
    server = trx_lookups.server_named(account.server)
    trx_capture.append_entry(server, account.account, "T", "", json.dumps({"stmt": statement, "args": list(args)}))
    count = trx_capture.publisher_count(server, account.account)
    record(actor, "trx.text", target, detail={"statement": statement, "level": levels.level_of(count)})
    return levels.level_of(count)


def do_new_log(actor: Actor, account: ReplAccount, log_file: str) -> str:
    """REPL_NEW_LOG: a new log segment starts at the current level (purging works segment by segment)."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.new_log", target)
    count = trx_capture.publisher_count(trx_lookups.server_named(account.server), account.account)
    with transaction.atomic():
        ReplAccount.objects.filter(pk=account.pk).update(
            log_file=log_file, log_started_at=timezone.now(), log_start_level=levels.level_of(count)
        )
        record(actor, "trx.new_log", target, detail={"log": log_file, "level": levels.level_of(count)})
    return f"{account.account} logs into {log_file} from level {levels.level_of(count)}"


# --- subscriber side -----------------------------------------------------------------------------------------


def do_declare_server(actor: Actor, context: Server, name: str, dsn: str, address: str | None) -> DeclaredServer:
    """REPL_SERVER: `context` learns where the publisher `name` is (it must be registered here)."""
    require(actor, EDIT, "trx.server", f"{context.name}: {name}")
    server = Server.objects.filter(name=name).first()
    if server is None:
        raise trx_lookups.TrxError(f"server {name!r} is not registered on this console; register it first")
    with transaction.atomic():
        row, _ = DeclaredServer.objects.update_or_create(
            subscriber=context.name, server=server.name, defaults={"dsn": dsn, "address": address or dsn}
        )
        record(actor, "trx.server", f"{context.name}: {name}", detail={"dsn": dsn, "address": address})
    return row


def do_subscribe(
    actor: Actor,
    subscriber: Server,
    publisher_name: str,
    account_name: str,
    dav_user: str | None = None,
    dav_group: str | None = None,
    replay_user: str | None = None,
    user: str | None = None,
) -> ReplSubscriber:
    """REPL_SUBSCRIBE, with the reference's preconditions and messages; a replication `user` must hold a grant
    on a publication that has grants (check_grant)."""
    target = f"{subscriber.name} <- {publisher_name}/{account_name}"
    require(actor, EDIT, "trx.subscribe", target)
    with _guarded(actor, "trx.subscribe", target):
        if publisher_name == subscriber.name:
            raise trx_lookups.TrxError("publication and subscription servers have identical names.")
        if not DeclaredServer.objects.filter(subscriber=subscriber.name, server=publisher_name).exists():
            raise trx_lookups.TrxError("Publishing server must be declared with REPL_SERVER before subscribing")
        account = ReplAccount.objects.filter(server=publisher_name, account=account_name).first()
        if account is None:
            raise trx_lookups.TrxError(f"{publisher_name} has no publication '{account_name}'")
        if ReplSubscriber.objects.filter(
            server=publisher_name, account=account_name, subscriber=subscriber.name, subscribed=True
        ).exists():
            raise trx_lookups.TrxError(f"The subscription '{account_name}' already exist")
        grantee = user or ""
        if user:
            check_grant(account, user)
        else:
            grantees = trx_lookups.grantees_of(account_name)
            if grantees and not grantees & {subscriber.name, actor.username}:
                raise trx_lookups.TrxError(f"{subscriber.name} has no grant on the publication '{account_name}'")
            if grantees and subscriber.name not in grantees:
                grantee = actor.username  # the grant that let it subscribe: checked again at every sync
        for item in trx_lookups.table_items(account):
            if lookup_table(subscriber, trx_lookups.item_table(item.item)) is not None:
                raise trx_lookups.TrxError(f"The table '{item.item}' already exists")
        if replay_user:
            _check_replay_user(subscriber, replay_user)
        trx_positions.ensure_level_table(subscriber)
    with transaction.atomic():
        row, _ = ReplSubscriber.objects.update_or_create(
            server=publisher_name,
            account=account_name,
            subscriber=subscriber.name,
            defaults={
                "subscribed": True,
                "level": 0,
                "valid": 1,
                "count": 0,
                "state": ReplSubscriber.OFF,
                "init_state": "none",
                "dav_user": dav_user or "",
                "dav_group": dav_group or "",
                "replay_user": replay_user or "",
                "grantee": grantee,
                "created_at": timezone.now(),
                "row_filters": trx_row_filters.publication_filters(account),
            },
        )
        record(actor, "trx.subscribe", target)
    return row


def account_of(sub: ReplSubscriber) -> ReplAccount:
    account = ReplAccount.objects.filter(server=sub.server, account=sub.account).first()
    if account is None:
        raise trx_lookups.TrxError(f"{sub.server} has no publication '{sub.account}'")
    return account


def check_grant(account: ReplAccount, user: str) -> None:
    """REPL_SUBSCRIBE's and REPL_SYNC's replication user, checked against the publication's grants (REPL_GRANT):
    when it has grants, the user must be one of the grantees. The password names no login here: the publisher is
    reached with its registered server's credentials (docs/design-notes.md)."""
    grantees = trx_lookups.grantees_of(account.account)
    if grantees and user not in grantees:
        raise trx_lookups.TrxError(f"{user!r} has no grant on the publication '{account.account}'")


def _check_replay_user(server: Server, user: str) -> None:
    """A replaying user (REPL_SUBSCRIBE's on a subscriber, REPL_PUBLISH's sync user on a publisher) must be one
    the server's login may act as (PostgreSQL: a role it is a member of); a dialect that cannot switch users
    refuses it rather than ignore it."""
    d = dialects.get(server.dialect)
    if d.replay_user_problem:
        raise trx_lookups.TrxError(f"{server.name} cannot replay as {user!r}: {d.replay_user_problem}")
    with connections.connect(server, readonly=True) as conn:
        row = conn.cursor().execute(d.role_check_sql(), [user]).fetchone()
    if row is None:
        raise trx_lookups.TrxError(f"{server.name} has no user or role {user!r} to replay as")
    if not int(row[0]):
        raise trx_lookups.TrxError(f"{server.name}'s login may not act as {user!r} (grant it the role first)")


def find_subscription(subscriber: Server, publisher_name: str, account_name: str) -> ReplSubscriber:
    return trx_lookups.subscription(subscriber.name, publisher_name, account_name)


def do_unsubscribe(actor: Actor, sub: ReplSubscriber, item: str | None = None) -> str:
    target = sub.label
    require(actor, EDIT, "trx.unsubscribe", target)
    if item is not None:
        raise trx_lookups.TrxError(
            "a subscription is dropped as a whole on this console; call REPL_UNSUBSCRIBE without an item"
        )
    with transaction.atomic():
        ScheduledEvent.objects.filter(name=schedule_event_name(sub.subscriber, sub)).delete()
        sub.delete()
        resolve_alerts_of("validation_drift", f"{target}: ", f"{sub.subscriber} no longer subscribes")
        record(actor, "trx.unsubscribe", target)
    return f"{sub.subscriber} no longer subscribes to {sub.server}/{sub.account}"


def do_init_copy(actor: Actor, sub: ReplSubscriber, sync: bool | None = None, image: str | None = None) -> JobRun:
    """REPL_INIT_COPY: copy the publication to the subscriber (from the publisher, or from an image)."""
    if image:
        trx_image.image_path(image)  # a bad name is refused before anything is queued
    return do_start_job(
        actor,
        TrxInit,
        sub.label,
        SubscriptionParams(subscription=sub.pk, image=image or ""),
        perm=OPERATE,
        sync=sync,
    )


def do_reload_table(actor: Actor, sub: ReplSubscriber, table: str, sync: bool | None = None) -> JobRun:
    """REPL_RELOAD_TABLE: copy one published table to the subscriber again, its level kept (initial_copy.reload_table).
    A name that is not one of the publication's tables is refused before anything is queued."""
    require(actor, OPERATE, "job.trx_reload", sub.label)
    account = trx_lookups.publication(sub.server, sub.account)
    try:
        name = trx_initial_copy.published_table(account, table)
    except trx_lookups.TrxError as exc:
        _failed(actor, "job.trx_reload", sub.label, exc)
        raise
    return do_start_job(actor, TrxReload, f"{sub.label} {name}", ReloadParams(subscription=sub.pk, table=name),
                        perm=OPERATE, sync=sync)  # fmt: skip


def do_set_row_filter(
    actor: Actor, sub: ReplSubscriber, table: str, condition: str = "", columns: str = "", sync: bool | None = None
) -> tuple[str, JobRun | None]:
    """REPL_ROW_FILTER: the subscription's own row filter (a WHERE over the publisher's columns, in the publisher's
    dialect) and column list for one published table, in place of the publication's (REPL_PUB_ROW_FILTER); both
    empty: the publication's again (every row and column if it has none); the condition TRUE: every row whatever the
    publication's says. A copy made already is reloaded at once when what it should hold changes
    (REPL_RELOAD_TABLE), so it holds no row or column the filter leaves out. Refused in one line (and audited) for a
    filter the apply cannot evaluate, a column the table does not have, an updateable publication (a copy's own
    change of a row out of its filter has no row to meet on the way back), or a table not published; nothing
    changes then."""
    target = f"{sub.label} {table}"
    require(actor, EDIT, "trx.row_filter", target)
    every_row = condition.strip().upper() == "TRUE"
    try:
        account = trx_lookups.publication(sub.server, sub.account)
        name = trx_initial_copy.published_table(account, table)
        target = f"{sub.label} {name}"
        spec = _checked_filter(account, name, "" if every_row else condition, columns)
    except ReplicationError as exc:
        _failed(actor, "trx.row_filter", target, exc)
        raise
    own = {k: v for k, v in trx_row_filters.own_filters(sub.row_filters).items() if k != name}
    if every_row or spec.active:
        own[name] = spec.as_json()
    before = sub.row_filters or {}
    with transaction.atomic(durable=True):
        published = trx_row_filters.publication_filters(account)
        filters = trx_row_filters.merged(own, published)
        ReplSubscriber.objects.filter(pk=sub.pk).update(row_filters=filters)
        record(actor, "trx.row_filter", target, detail={"before": before.get(name), "after": filters.get(name)})
    sub.row_filters = filters
    message = f"{target}: {_filter_origin(filters, published, name)}"
    if sub.init_state != "done" or name not in trx_row_filters.changed_tables(before, filters):
        return message, None
    return message, do_reload_table(actor, sub, name, sync=sync)


def do_set_pub_row_filter(
    actor: Actor, account: ReplAccount, table: str, condition: str = "", columns: str = "", sync: bool | None = None
) -> tuple[str, list[JobRun]]:
    """REPL_PUB_ROW_FILTER: the publication's row filter and column list for one of its tables, which every
    subscriber's copy holds unless its subscription has a filter of its own (REPL_ROW_FILTER); both empty: every row
    and column. Each copy made already that follows it is reloaded at once. Refused in one line (and audited) as
    REPL_ROW_FILTER refuses; nothing changes then."""
    target = f"{account.server}/{account.account}: {table}"
    require(actor, EDIT, "trx.pub_row_filter", target)
    try:
        item = find_item(account, table, TABLE)
        name = trx_lookups.item_table(item.item)
        target = f"{account.server}/{account.account}: {name}"
        spec = _checked_filter(account, name, condition, columns)
    except ReplicationError as exc:
        _failed(actor, "trx.pub_row_filter", target, exc)
        raise
    after = spec.as_json() if spec.active else {}
    with transaction.atomic(durable=True):
        TpItem.objects.filter(pk=item.pk).update(row_filter=after)
        subs = ReplSubscriber.objects.filter(server=account.server, account=account.account, subscribed=True)
        changed = trx_row_filters.refresh(list(subs), trx_row_filters.publication_filters(account))
        record(actor, "trx.pub_row_filter", target, detail={
            "before": item.row_filter or None, "after": after or None,
            "subscribers": [sub.subscriber for sub, tables in changed if name in tables],
        })  # fmt: skip
    following = ReplSubscriber.objects.filter(server=account.server, account=account.account, subscribed=True)
    own = sorted(s.subscriber for s in following if trx_row_filters.is_own(s.row_filters, name))
    message = f"{target}: {spec.describe()} for every subscriber" + (
        f" but {', '.join(own)} (a filter of {'its' if len(own) == 1 else 'their'} own)" if own else ""
    )
    jobs = [
        do_reload_table(actor, sub, name, sync=sync)
        for sub, tables in changed
        if name in tables and sub.init_state == "done"
    ]
    return message, jobs


def _checked_filter(account: ReplAccount, table: str, condition: str, columns: str) -> row_filter.FilterSpec:
    """The spec of a filter over the publisher's `table`, or a one-line TrxError naming what is wrong."""
    if account.is_updateable:
        raise trx_lookups.TrxError(
            f"{account.server}/{account.account} is updateable: a subscriber's own change of a row its filter leaves "
            "out would have no row to meet on the publisher, so its copies take every row and column"
        )
    publisher = trx_lookups.server_named(account.server)
    try:
        info = trx_lookups.describe(publisher, table)
    except connections.ConnectionFailed as exc:
        raise trx_lookups.TrxError(str(exc)) from None
    try:
        return row_filter.checked_spec(info, publisher.dialect, condition, columns)
    except row_filter.FilterError as exc:
        raise trx_lookups.TrxError(f"{table}: {exc}") from None


def _filter_origin(filters: dict, published: dict, table: str) -> str:
    """What the copy of `table` holds and whose filter says so, in words."""
    spec = row_filter.FilterSpec.for_table(filters, table)
    if not trx_row_filters.is_own(filters, table):
        return spec.describe() + (" (the publication's)" if table in published else "")
    instead = row_filter.FilterSpec.for_table(published, table)
    return (
        spec.describe()
        + " (this subscription's own"
        + (f", in place of the publication's {instead.describe()})" if instead.active else ")")
    )


def do_write_image(actor: Actor, account: ReplAccount, name: str, bytes_per_file: int | None = None) -> dict:
    """REPL_PUB_INIT_IMAGE: the publication's tables at its current level, written as an image."""
    target = f"{account.server}/{account.account}"
    require(actor, OPERATE, "trx.init_image", target)
    with _guarded(actor, "trx.init_image", target):
        written = trx_image.write_image(account, name, bytes_per_file)
    record(actor, "trx.init_image", target, detail={"image": name, **written})
    return written


def do_sync(actor: Actor, sub: ReplSubscriber, sync: bool | None = None) -> JobRun:
    return do_start_job(
        actor,
        TrxSync,
        sub.label,
        SubscriptionParams(subscription=sub.pk),
        perm=OPERATE,
        sync=sync,
    )


def do_follow(actor: Actor, sub: ReplSubscriber, follow: bool) -> None:
    """SYNC_REPL turns in-sync mode on; REPL_DISCONNECT turns it off."""
    require(
        actor,
        OPERATE,
        "trx.follow" if follow else "trx.disconnect",
        sub.label,
    )
    with transaction.atomic():
        updates: dict = {"follow": follow}
        if not follow:
            updates["state"] = ReplSubscriber.DISCONNECTED
        ReplSubscriber.objects.filter(pk=sub.pk).update(**updates)
        record(
            actor,
            "trx.follow" if follow else "trx.disconnect",
            sub.label,
        )


def do_mark_valid(actor: Actor, sub: ReplSubscriber, valid: bool) -> str:
    """Set Valid / Set Invalid: an invalid subscriber's sync requests are refused."""
    target = sub.label
    require(actor, OPERATE, "trx.mark_valid" if valid else "trx.mark_invalid", target)
    with transaction.atomic():
        ReplSubscriber.objects.filter(pk=sub.pk).update(valid=1 if valid else 0)
        record(actor, "trx.mark_valid" if valid else "trx.mark_invalid", target)
        if valid:
            resolve_alerts("subscriber_invalid", target, f"marked valid by {actor.username or 'an operator'}")
    return f"{sub.subscriber} is marked {'valid' if valid else 'invalid'} for {sub.server}/{sub.account}"


def do_skip_halted_transaction(sub: ReplSubscriber, *, actor: Actor) -> str:
    """A person skips the transaction a subscription is halted at: it is recorded as a gap (skipped by them, with
    its keys), the level moves past exactly that transaction, and the halt ends."""
    target = sub.label
    require(actor, EDIT, "trx.skip_transaction", target)
    with _guarded(actor, "trx.skip_transaction", target), item_lock(trx_lookups.lock_name(sub), None):
        sub.refresh_from_db()
        if sub.halt_count is None:
            raise trx_lookups.TrxError(f"{target} is not halted: there is no transaction to skip")
        subscriber, publisher = trx_lookups.server_named(sub.subscriber), trx_lookups.server_named(sub.server)
        position = trx_positions.subscriber_position(subscriber, sub.server, sub.account)
        count = position[1] if position is not None else None
        if count != sub.halt_count - 1:
            raise trx_lookups.TrxError(
                f"{sub.subscriber} is at transaction {count}, not just before the halted transaction {sub.halt_count} "
                f"of {sub.server}/{sub.account}; sync it first"
            )
        txns = trx_capture.read_transactions(publisher, sub.account, count, sub.halt_count)
        if not txns or txns[0].count != sub.halt_count:
            raise trx_lookups.TrxError(
                f"{sub.server}/{sub.account} no longer has transaction {sub.halt_count} in its log; re-initialise "
                f"{sub.subscriber}"
            )
        txn, keys = txns[0], list(sub.halt_keys or [])
        with transaction.atomic(durable=True):
            SkippedTransaction.objects.create(
                server=sub.server, account=sub.account, subscriber=sub.subscriber, level=txn.level, count=txn.count,
                error=sub.halt_error[:4000], entries=gap_entries(txn), skipped_by=actor.username, keys=keys,
            )  # fmt: skip
            record(actor, "trx.skip_transaction", target, detail={
                "level": txn.level, "count": txn.count, "error": sub.halt_error[:2000], "keys": keys,
            })  # fmt: skip
            trx_positions.record_position(sub, txn.count, txn.count)
            trx_positions.clear_halt(sub, f"transaction {txn.count} skipped by {actor.username}")
            # Last: a level that moved meanwhile (the transaction applied after all) rolls all of this back.
            move_past(Target(subscriber, sub.server, sub.account), txn, count)
    return (
        f"{sub.subscriber} skipped level {txn.level} of {sub.server}/{sub.account} ({len(keys)} key(s) to repair); "
        "it goes on from the next transaction"
    )


def _gap_keys(account: ReplAccount, gaps: list[SkippedTransaction]) -> list[dict]:
    """Every key the gaps' entries touch (all of them, not only the ones listed), each once."""
    published = trx_lookups.published_tables(account)

    def names(table: str) -> list[str] | None:
        info = published.get(table)
        return [c.name for c in info.primary_key] if info is not None and info.primary_key else None

    txns = []
    for gap in gaps:
        if not all(isinstance(e, dict) for e in gap.entries):
            raise trx_lookups.TrxError(
                f"the entries of the gap at level {gap.level} cannot be read; compare and repair"
            )
        kinds = {e.get("op") for e in gap.entries} - {"I", "U", "D", "C", tracers.MARKER}
        if kinds:
            raise trx_lookups.TrxError(
                f"the gap at level {gap.level} holds more than row changes ({', '.join(sorted(map(str, kinds)))}); "
                "re-initialise the subscription instead"
            )
        entries = [
            transactional_sql.Entry(int(e.get("seq") or 0), str(e.get("table") or ""), str(e["op"]), e.get("new"),
                                    e.get("old"))
            for e in gap.entries
        ]  # fmt: skip
        txns.append(transactional_sql.Transaction(count=gap.count, origin=None, at=None, entries=entries))
    return transaction_keys(txns, names, most=None)


def do_repair_gaps(sub: ReplSubscriber, *, actor: Actor, gap: int | None = None) -> str:
    """Repair these keys: the subscriber's rows of the keys of a gap (or of all its unrepaired gaps) become the
    publisher's rows as they are now, in one subscriber transaction; the gaps are marked repaired."""
    target = sub.label
    require(actor, OPERATE, "trx.repair_keys", target)
    with _guarded(actor, "trx.repair_keys", target):
        gaps = SkippedTransaction.objects.filter(
            server=sub.server, account=sub.account, subscriber=sub.subscriber, repaired_at__isnull=True
        ).order_by("count")
        if gap is not None:
            gaps = gaps.filter(pk=gap)
        chosen = list(gaps)
        if not chosen:
            what = f"gap #{gap}" if gap is not None else "gap"
            raise trx_lookups.TrxError(f"{target} has no unrepaired {what}")
        account = publication(trx_lookups.server_named(sub.server), sub.account)
        keys = _gap_keys(account, chosen)
        with item_lock(trx_lookups.lock_name(sub), None):
            publisher, subscriber = trx_lookups.server_named(sub.server), trx_lookups.server_named(sub.subscriber)
            copy = Target(subscriber, sub.server, sub.account, source_dialect=publisher.dialect,
                          replay_user=sub.replay_user).use_filters(sub.row_filters)  # fmt: skip
            done = repair_keys(publisher, trx_lookups.published_tables(account), copy, keys)
        with transaction.atomic(durable=True):
            SkippedTransaction.objects.filter(pk__in=[g.pk for g in chosen]).update(repaired_at=timezone.now())
            record(actor, "trx.repair_keys", target, detail={
                "gaps": [g.count for g in chosen], "keys": keys[:1000], **done,
            })  # fmt: skip
            if not SkippedTransaction.objects.filter(server=sub.server, account=sub.account, subscriber=sub.subscriber,
                                                     repaired_at__isnull=True).exists():  # fmt: skip
                resolve_alerts(Alert.Kind.TRANSACTION_SKIPPED, target, f"keys repaired by {actor.username}")
    return (
        f"repaired {len(keys)} key(s) of {len(chosen)} gap(s) on {sub.subscriber}: {done['written']} row(s) written, "
        f"{done['deleted']} deleted"
    )


def retry_due_halts() -> list[int]:
    """Queue a sync of each halted subscription that no follower serves whose next try is due (and that has
    no sync queued or running); the jobs queued. The scheduler calls it every round."""
    now = timezone.now()
    queued: list[int] = []
    due = ReplSubscriber.objects.filter(halt_count__isnull=False, retry_at__lte=now, follow=False, subscribed=True,
                                        valid=1).order_by("id")  # fmt: skip
    for sub in due:
        try:
            pending = JobRun.objects.filter(
                kind=TrxSync.kind, params__subscription=sub.pk, state__in=[JobRun.State.QUEUED, JobRun.State.RUNNING]
            )
            if pending.exists():
                continue
            # The next try after this one, should this job not even reach the halted transaction.
            later = now + timedelta(seconds=trx_sync.halt_backoff(sub.halt_attempts + 1, sub.retry_most))
            ReplSubscriber.objects.filter(pk=sub.pk).update(retry_at=later)
            job = do_start_job(
                Actor.scheduler(), TrxSync, sub.label,
                SubscriptionParams(subscription=sub.pk),
            )  # fmt: skip
            queued.append(job.pk)
        except Exception:  # one subscription's trouble never stops the others' retries
            log.exception("queueing the retry of the halted %s failed", sub)
    return queued


def subscriptions_of(server: Server):
    return ReplSubscriber.objects.filter(subscriber=server.name, subscribed=True).order_by("server", "account")


def schedule_event_name(subscriber: str, account) -> str:
    return f"repl_{account.server}_{account.account}@{subscriber}"


def purge_event_name(account: ReplAccount) -> str:
    return f"repl_purge_{account.server}_{account.account}"


def do_sub_schedule(actor: Actor, sub: ReplSubscriber, interval: int) -> str:
    """SUB_SCHEDULE: sync this subscription every `interval` minutes (0 removes the schedule)."""
    target = sub.label
    require(actor, OPERATE, "trx.schedule", target)
    name = schedule_event_name(sub.subscriber, sub)
    with transaction.atomic():
        if interval <= 0:
            ScheduledEvent.objects.filter(name=name).delete()
            record(actor, "trx.schedule", target, detail={"interval": 0})
            return f"{target} is no longer scheduled"
        statement = f"REPL_SYNC ({string_literal(sub.server)}, {string_literal(sub.account)})"
        ScheduledEvent.objects.update_or_create(
            name=name,
            defaults={
                "start": timezone.now(),
                "sql": statement,
                "server": sub.subscriber,
                "interval": interval,
                "disabled": 0,
            },
        )
        record(actor, "trx.schedule", target, detail={"interval": interval})
    return f"{target} syncs every {interval} minute(s)"


def do_purge(actor: Actor, account: ReplAccount) -> int:
    """repl_purge: drop the log of transactions every valid subscriber has applied (and of those more
    than REPL_MAX_DELTA behind the publisher, which no subscriber can ask for any more)."""
    target = f"{account.server}/{account.account}"
    require(actor, OPERATE, "trx.purge", target)
    server = trx_lookups.server_named(account.server)
    count = trx_capture.publisher_count(server, account.account)
    subscribers = ReplSubscriber.objects.filter(server=account.server, account=account.account, subscribed=True)
    applied = [_durable_count(s, account, count) for s in subscribers if s.valid]
    upto = min([count, *applied])
    upto = max(upto, count - levels.REPL_MAX_DELTA)
    deleted = trx_capture.purge_log(server, account.account, upto)
    now = timezone.now()
    with transaction.atomic():
        ReplAccount.objects.filter(pk=account.pk).update(purged_upto=upto, last_purge_at=now)
        schedule_purger(ReplAccount.objects.get(pk=account.pk))
        record(
            actor,
            "trx.purge",
            target,
            detail={"upto_level": levels.level_of(upto), "transactions": deleted},
        )
    return deleted


def _durable_count(sub: ReplSubscriber, account: ReplAccount, pub_count: int) -> int:
    """How far a purge may go for `sub`: the catalog's count (written after each apply) where the subscriber's
    applies wait for their flush. Where they do not, no further than what the subscriber has made durable, asked
    after the catalog was read (so it covers the catalog's count, unless a crash took the last applies back and they
    are to be applied again from this log); an unreachable one keeps the log where the last purge left it."""
    subscriber = trx_lookups.server_named(sub.subscriber)
    if not trx_positions.applies_async(subscriber):
        return sub.count
    try:
        position = trx_positions.durable_position(subscriber, sub.server, sub.account)
    except Exception as exc:  # unreachable, refused, no level table: nothing it applied counts as durable yet
        log.info("purge of %s/%s: %s's durable level unknown: %s", sub.server, sub.account, sub.subscriber, exc)
        return account.purged_upto or 0
    pub_level = levels.level_of(pub_count)
    if position is None or not levels.level_ok(position[0], pub_level):
        return account.purged_upto or 0  # no level this log can place: the next sync says what it means
    return min(sub.count, levels.count_of(position[0], pub_level, pub_count))


def schedule_purger(account: ReplAccount) -> ScheduledEvent | None:
    """The purger's event from P_MONTH / P_DAY / P_WDAY / P_TIME; without P_TIME every `purge_every` minutes
    (none when that is NULL too). A run keeps the slots of an interval event (the scheduler anchors them)."""
    name = purge_event_name(account)
    statement = f"REPL_PURGE ({string_literal(account.server)}, {string_literal(account.account)})"
    when = levels.next_purge(timezone.localtime(), account.p_month, account.p_day, account.p_wday, account.p_time)
    if when is not None:
        interval = {"yearly": 525600, "monthly": 43200, "weekly": 10080, "daily": 1440}[
            levels.purge_kind(account.p_month, account.p_day, account.p_wday, account.p_time) or "daily"
        ]
    elif account.purge_every:
        interval = account.purge_every
        event = ScheduledEvent.objects.filter(name=name, interval=interval, sql=statement).first()
        if event is not None:
            return event
        when = timezone.now() + timedelta(minutes=interval)
    else:
        ScheduledEvent.objects.filter(name=name).delete()
        return None
    event, _ = ScheduledEvent.objects.update_or_create(
        name=name,
        defaults={
            "start": when,
            "sql": statement,
            "interval": interval,
            "last_completed": None,
            "disabled": 0,
        },
    )
    return event


def status(sub: ReplSubscriber) -> tuple[int, int]:
    """REPL_STATUS: (level, state) as the subscriber's own database and this console know them."""
    position = trx_positions.subscriber_position(trx_lookups.server_named(sub.subscriber), sub.server, sub.account)
    level = position[0] if position else 0
    return level, sub.state


def do_set_purger(
    actor: Actor,
    account: ReplAccount,
    p_month: int | None,
    p_day: int | None,
    p_wday: int | None,
    p_time,
    *,
    purge_every: int | None = None,
) -> ScheduledEvent | None:
    """The purger form: store P_MONTH / P_DAY / P_WDAY / P_TIME (or every how many minutes) and (re)schedule
    repl_purge."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.purger", target)
    purge_every = None if p_time is not None else purge_every
    with transaction.atomic():
        ReplAccount.objects.filter(pk=account.pk).update(
            p_month=p_month, p_day=p_day, p_wday=p_wday, p_time=p_time, purge_every=purge_every
        )
        ScheduledEvent.objects.filter(name=purge_event_name(account)).delete()  # a new schedule starts afresh
        event = schedule_purger(ReplAccount.objects.get(pk=account.pk))
        detail = {"p_month": p_month, "p_day": p_day, "p_wday": p_wday, "p_time": str(p_time) if p_time else None}
        record(actor, "trx.purger", target, detail={**detail, "every_minutes": purge_every})
    return event


def lag_of(sub: ReplSubscriber, account: ReplAccount) -> int | None:
    """Transactions the subscriber is behind the publisher (None when its level is not valid)."""
    return levels.lag(sub.level, levels.level_of(max(account.count, sub.count)))


def published_table(server: Server, table: str):
    """A table published transactionally on `server` (REPL_ADD_CR names one)."""
    info = trx_lookups.describe(server, trx_lookups.item_table(table))
    for item in TpItem.objects.filter(server=server.name, type=TABLE):
        if trx_lookups.item_table(item.item) == info.name:
            return info
    raise trx_lookups.TrxError(f"{server.name}.{info.name} is not in a transactional publication")


def reapply_losing_version(backup: ConflictBackup) -> str:
    """The conflict inbox's re-apply of a transactional conflict's losing version (on the publisher)."""
    return trx_push.reapply_losing_version(backup)


def choose_held_version(actor: Actor, backup: ConflictBackup, choice: int, edited: dict | None) -> str:
    """The conflict inbox's pick for a held transactional conflict, written on the publisher at once."""
    return trx_push.carry_out_choice(backup, choice, edited, actor.username)


def do_set_ack_policy(actor: Actor, account: ReplAccount, policy: str, timeout: float | None = None) -> str:
    """REPL_PUB_ACK and the publication page: what REPL_WAIT waits for after a commit, and how long."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.ack_policy", target)
    try:
        if policy not in durability.POLICIES:
            raise trx_lookups.TrxError(
                f"unknown acknowledgement policy {policy!r}; use one of {', '.join(durability.POLICIES)}"
            )
        if timeout is not None and not 0 < timeout <= durability.MAX_WAIT:
            raise trx_lookups.TrxError(f"the timeout must be more than 0 and at most {durability.MAX_WAIT:.0f} s")
    except trx_lookups.TrxError as exc:
        _failed(actor, "trx.ack_policy", target, exc)
        raise
    timeout = account.ack_timeout if timeout is None else float(timeout)
    with transaction.atomic():
        ReplAccount.objects.filter(pk=account.pk).update(ack_policy=policy, ack_timeout=timeout)
        record(actor, "trx.ack_policy", target, detail={"policy": policy, "timeout": timeout})
    return f"{target} acknowledges commits with policy {policy} (wait at most {timeout:g} s)"


def do_set_on_conflict(actor: Actor, account: ReplAccount, answer: str) -> str:
    """REPL_PUB_ON_CONFLICT and the publication page: an updateable publication's answer to a subscriber's
    conflicting change: the resolvers decide, or the publisher wins and the subscriber is copied again."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.on_conflict", target)
    try:
        if answer not in ReplAccount.OnConflict.values:
            raise trx_lookups.TrxError(
                f"unknown answer to conflicts {answer!r}; use {' or '.join(ReplAccount.OnConflict.values)}"
            )
        if not account.is_updateable:
            raise trx_lookups.TrxError(f"{target} is not updateable: its subscribers send no changes to conflict")
    except trx_lookups.TrxError as exc:
        _failed(actor, "trx.on_conflict", target, exc)
        raise
    with transaction.atomic():
        ReplAccount.objects.filter(pk=account.pk).update(on_conflict=answer)
        record(actor, "trx.on_conflict", target, detail={"on_conflict": answer})
    return f"{target}: on a conflict, {ReplAccount.OnConflict(answer).label}"


def do_set_schema_policy(actor: Actor, account: ReplAccount, policy: str) -> str:
    """REPL_PUB_SCHEMA_CHANGES and the publication page: a published table's schema change reaches the
    subscribers at once, or waits for an admin's approval."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.schema_policy", target)
    if policy not in ReplAccount.SchemaPolicy.values:
        exc = trx_lookups.TrxError(
            f"unknown schema change policy {policy!r}; use {' or '.join(ReplAccount.SchemaPolicy.values)}"
        )
        _failed(actor, "trx.schema_policy", target, exc)
        raise exc
    with transaction.atomic():
        ReplAccount.objects.filter(pk=account.pk).update(schema_policy=policy)
        record(actor, "trx.schema_policy", target, detail={"schema_policy": policy})
    return f"{target}: schema changes are {ReplAccount.SchemaPolicy(policy).label}"


def do_approve_schema_change(actor: Actor, change: SchemaChange) -> str:
    """Let a pending schema change through to the publication's subscribers."""
    target = str(change)
    require(actor, EDIT, "trx.schema_apply", target)
    with _guarded(actor, "trx.schema_apply", target):
        if change.state != SchemaChange.State.PENDING:
            raise trx_lookups.TrxError(f"the schema change #{change.pk} of {change.table} is already applied")
        trx_schema.apply_change(actor, change)
    return f"{change.server}/{change.account}: the schema change of {change.table} goes to the subscribers"


def do_sched_init(actor: Actor) -> list[str]:
    """REPL_SCHED_INIT: put the scheduler's replication events back as the catalog says they should be (after a
    restore, or events removed by hand): each transactional publication's purger (P_MONTH / P_DAY / P_WDAY /
    P_TIME or every N minutes) and the replay-log purges wherever snapshot logs or bi-directional publications
    exist. Subscriptions' SUB_SCHEDULE events are left as they are. Returns the events it created."""
    require(actor, EDIT, "trx.sched_init", "scheduler")
    created: list[str] = []
    with transaction.atomic():
        for account in ReplAccount.objects.exclude(log_file=""):
            existed = ScheduledEvent.objects.filter(name=purge_event_name(account)).exists()
            event = schedule_purger(account)
            if event is not None and not existed:
                created.append(event.name)
        replay_purges = [
            (SnapshotLog.objects.exists(), "purge_rplogs", "repl_purge_rplogs()"),
            (SnapshotPublication.objects.exists(), "purge_urplogs", "repl_purge_urplogs()"),
        ]
        for needed, name, statement in replay_purges:
            if needed:
                _, made = ScheduledEvent.objects.get_or_create(
                    name=name, defaults={"start": timezone.now(), "sql": statement, "interval": 30}
                )
                if made:
                    created.append(name)
        record(actor, "trx.sched_init", "scheduler", detail={"created": created})
    return created


def do_set_lag_alert(actor: Actor, account: ReplAccount, *, transactions: int | None, seconds: int | None) -> str:
    """The publication page's lag alert: alert (and call a subscriber lagging) above this many transactions behind
    (ACC_ALERT_LAG; None: never by count) or when its oldest unapplied transaction is older than this many seconds
    (ACC_ALERT_LAG_SECONDS; None: REPLADMIN_LAG_ALERT_SECONDS)."""
    target = f"{account.server}/{account.account}"
    require(actor, EDIT, "trx.lag_alert", target)
    if (transactions is not None and transactions < 0) or (seconds is not None and seconds < 1):
        error = trx_lookups.TrxError("a lag limit is at least 0 transactions and at least 1 second")
        _failed(actor, "trx.lag_alert", target, error)
        raise error
    with transaction.atomic(durable=True):
        ReplAccount.objects.filter(pk=account.pk).update(alert_lag=transactions, alert_lag_seconds=seconds)
        record(actor, "trx.lag_alert", target, detail={"transactions": transactions, "seconds": seconds})
    by_count = "never by count" if transactions is None else f"above {transactions} transactions"
    by_time = f"{seconds} s" if seconds is not None else f"the default {settings.LAG_ALERT_SECONDS} s"
    return f"{target} alerts {by_count} or when a subscriber's oldest unapplied transaction is older than {by_time}"


def do_set_subscription_profile(actor: Actor, sub: ReplSubscriber, **values: int | None) -> str:
    """The subscription's own tuning (transactional/profile.py): transactions per subscriber commit, the in-sync
    backlog limit, the lag alert by count and by age, the retry window of a halted apply, the apply timeout (refused
    where the subscriber's dialect cannot cancel a statement). None: the publication's or the registry's value."""
    target = sub.label
    require(actor, EDIT, "trx.profile", target)
    unknown = set(values) - profile.KNOBS.keys()
    wrong = [
        f"{name} must be {knob.low} to {knob.high}"
        for name, knob in profile.KNOBS.items()
        if (value := values.get(name)) is not None and not knob.low <= value <= knob.high
    ]
    if values.get("apply_timeout") is not None and (refused := profile.timeout_refused(sub)):
        wrong.append(f"apply_timeout: {refused}")
    if unknown or wrong:
        error = trx_lookups.TrxError("; ".join([*(f"{name} is not a setting" for name in sorted(unknown)), *wrong]))
        _failed(actor, "trx.profile", target, error)
        raise error
    before = {name: getattr(sub, name) for name in profile.KNOBS}
    after = {name: values.get(name) for name in profile.KNOBS}
    with transaction.atomic(durable=True):
        ReplSubscriber.objects.filter(pk=sub.pk).update(**after)
        record(actor, "trx.profile", target, detail={"before": before, "after": after})
    own = [f"{name} {value}" for name, value in after.items() if value is not None]
    return f"{target}: " + (", ".join(own) if own else "every setting from its publication and the registry")


def advance_idle_slot(server: str, account: str) -> bool:
    """The periodic check's heartbeat of an idle WAL publication (transactional.capture.advance_idle_slot)."""
    return trx_capture.advance_idle_slot(trx_lookups.server_named(server), account)

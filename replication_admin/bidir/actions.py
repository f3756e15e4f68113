"""Bi-directional snapshot publications and subscriptions: create, drop, initial copy, sync, schedule,
and re-applying the losing version of a conflict. Everything is done from the publisher's side, as the
reference says; the catalog rows change only once the objects exist on the servers."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from replication_admin.bidir import objects as bidir_objects
from replication_admin.bidir import sync as bidir_sync
from replication_admin.bidir.objects import BidirError
from replication_admin.bidir.objects import subscription_label as subscription_label  # re-exported
from replication_admin.bidir.runs import BidirInit, BidirSync, InitParams, SyncParams
from replication_admin.core.alerts import resolve_alerts_of
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import require_table
from replication_admin.core.jobs import do_start_job
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.core.schema_follow import live_definition
from replication_admin.core.words import key_label
from replication_admin.engine.statements import Name
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    ScheduledEvent,
    Server,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)

TABLE = 2
URPLOG_PURGE_EVENT = "purge_urplogs"


def _failed(actor: Actor, action: str, target: str, error: Exception) -> None:
    record(actor, action, target, AuditEntry.Outcome.ERROR, {"error": str(error)})


def find_publication(item: str) -> SnapshotPublication:
    publication = SnapshotPublication.objects.select_related("server").filter(item=item, type=TABLE).first()
    if publication is None:
        publication = SnapshotPublication.objects.select_related("server").filter(item__iexact=item).first()
    if publication is None:
        raise BidirError(f"{item} is not published for bi-directional snapshot replication")
    return publication


def publication_for(server: Server, table: str) -> SnapshotPublication:
    return find_publication(bidir_objects.item_name(server, table))


def subscriptions_of(publication: SnapshotPublication) -> QuerySet[SnapshotSubscription]:
    return SnapshotSubscription.objects.filter(item=publication.item, type=publication.type)


def find_subscription(publication: SnapshotPublication, server: Server) -> SnapshotSubscription:
    subscription = subscriptions_of(publication).filter(server=server.name).first()
    if subscription is None:
        raise BidirError(f"{server.name} does not subscribe to {publication.item}")
    return subscription


def publication_event_name(publication: SnapshotPublication) -> str:
    return f"bidir {publication.item}"


def do_create_publication(actor: Actor, server: Server, table: str) -> SnapshotPublication:
    """REPL_CREATE_SNAPSHOT_PUB: ROWGUID column, updateable log, triggers and replay log on the publisher."""
    target = f"{server.name}.{table}"
    require(actor, EDIT, "bidir.publish", target)
    try:
        info = require_table(server, table)
        item = bidir_objects.item_name(server, info.name)
        if SnapshotPublication.objects.filter(item=item, type=TABLE).exists():
            raise BidirError(f"{item} is already published")
        if SnapshotSubscription.objects.filter(server=server.name, item__endswith=f".{info.name}").exists():
            raise BidirError(f"{server.name}.{info.name} is a subscriber's copy; it cannot also be published")
        publication = SnapshotPublication(item=item, type=TABLE, server=server, table=info.name)
        bidir_objects.create_objects(server, info, publication, publisher=True)
        publication.definition = live_definition(server, info.name) or []  # with its ROWGUID column
    except ReplicationError as exc:
        _failed(actor, "bidir.publish", target, exc)
        raise
    with transaction.atomic():
        publication.save()
        # As Virtuoso does, creating a bi-directional publication schedules the replay-log purge.
        ScheduledEvent.objects.get_or_create(
            name=URPLOG_PURGE_EVENT,
            defaults={"start": timezone.now(), "sql": "repl_purge_urplogs()", "interval": 30},
        )
        record(actor, "bidir.publish", item)
    return publication


def do_drop_publication(actor: Actor, publication: SnapshotPublication) -> str:
    """REPL_DROP_SNAPSHOT_PUB: its subscriptions, resolvers and schedule go too; the tables and their
    ROWGUID columns stay (dropping a column of data is the DBA's call)."""
    require(actor, EDIT, "bidir.unpublish", publication.item)
    assert publication.server is not None
    for subscription in subscriptions_of(publication):
        server = Server.objects.filter(name=subscription.server).first()
        if server is not None:
            bidir_objects.drop_objects(server, publication.table, publication)
    bidir_objects.drop_objects(publication.server, publication.table, publication)
    with transaction.atomic():
        subscriptions_of(publication).delete()
        SnapshotConflictResolver.objects.filter(table_name=publication.item).delete()
        ScheduledEvent.objects.filter(name=publication_event_name(publication)).delete()
        item = publication.item
        publication.delete()
        record(actor, "bidir.unpublish", item)
    return f"dropped the publication {item} and its subscriptions"


def do_create_subscription(actor: Actor, publication: SnapshotPublication, server: Server) -> SnapshotSubscription:
    """REPL_CREATE_SNAPSHOT_SUB: the subscriber's table (created when missing), log, triggers, replay log."""
    target = f"{server.name} <- {publication.item}"
    require(actor, EDIT, "bidir.subscribe", target)
    try:
        if publication.server_id == server.name:
            raise BidirError(f"{server.name} is the publisher of {publication.item}; it cannot subscribe to it")
        if subscriptions_of(publication).filter(server=server.name).exists():
            raise BidirError(f"{server.name} already subscribes to {publication.item}")
        if SnapshotPublication.objects.filter(server=server, table__iexact=publication.table).exists():
            raise BidirError(f"{server.name}.{publication.table} is itself published; it cannot subscribe")
        info = bidir_objects.create_subscriber_table(publication, server)
        bidir_objects.create_objects(server, info, publication, publisher=False)
    except ReplicationError as exc:
        _failed(actor, "bidir.subscribe", target, exc)
        raise
    with transaction.atomic():
        subscription = SnapshotSubscription.objects.create(server=server.name, item=publication.item, type=TABLE)
        record(actor, "bidir.subscribe", target)
    return subscription


def do_drop_subscription(actor: Actor, subscription: SnapshotSubscription, drop_table: bool = False) -> str:
    """REPL_DROP_SNAPSHOT_SUB: the subscriber's log, triggers and replay log (and its table if asked)."""
    target = f"{subscription.server} <- {subscription.item}"
    require(actor, EDIT, "bidir.unsubscribe", target)
    publication = find_publication(subscription.item)
    server = Server.objects.filter(name=subscription.server).first()
    if server is not None:
        bidir_objects.drop_objects(server, publication.table, publication, drop_table=drop_table)
    with transaction.atomic():
        subscription.delete()
        resolve_alerts_of("validation_drift", f"{subscription_label(subscription)}: ", f"{target} dropped")
        record(actor, "bidir.unsubscribe", target, detail={"drop_table": drop_table})
    return f"{subscription.server} no longer subscribes to {subscription.item}" + (
        f"; dropped its table {publication.table}" if drop_table else ""
    )


def do_init_subscription(
    actor: Actor, subscription: SnapshotSubscription, rows_per_commit: int = 100, sync: bool | None = None
) -> JobRun:
    """REPL_INIT_SNAPSHOT: copy the publisher's rows to the subscriber, committing every N rows."""
    if not 1 <= int(rows_per_commit) <= 10_000_000:
        raise BidirError("rows per commit must be between 1 and 10,000,000")
    return do_start_job(
        actor,
        BidirInit,
        f"REPL_INIT_SNAPSHOT {subscription.server} {subscription.item} ({rows_per_commit} rows per commit)",
        InitParams(subscription=subscription.pk, rows_per_commit=int(rows_per_commit)),
        sync=sync,
    )


def do_sync_publication(actor: Actor, publication: SnapshotPublication, sync: bool | None = None) -> JobRun:
    """REPL_UPDATE_SNAPSHOT: pull every subscriber's changes, resolve conflicts, push to every subscriber."""
    return do_start_job(
        actor, BidirSync, f"REPL_UPDATE_SNAPSHOT {publication.item}", SyncParams(publication=publication.pk), sync=sync
    )


def sync_within(job: JobRun, reporter, publication: SnapshotPublication) -> dict:
    """A sync of the publication run inside another job (a validation catching its subscribers up), under the
    publication's item lock as a sync job takes it: LockBusy while another sync holds it."""
    return bidir_sync.sync_publication(job, reporter, publication.pk)


def do_schedule_publication(
    actor: Actor, publication: SnapshotPublication, every_minutes: int | None
) -> ScheduledEvent | None:
    """Sync every N minutes (a SYS_SCHEDULED_EVENT running REPL_UPDATE_SNAPSHOT), or stop when None/0."""
    require(actor, OPERATE, "bidir.schedule", publication.item)
    name = publication_event_name(publication)
    with transaction.atomic():
        if not every_minutes:
            ScheduledEvent.objects.filter(name=name).delete()
            record(actor, "bidir.schedule", publication.item, detail={"every_minutes": None})
            return None
        if every_minutes < 1 or every_minutes > 525600:
            raise BidirError("the interval is 1 to 525600 minutes")
        assert publication.server is not None
        quoted = str(Name(publication.table, publication.server.name))  # as the statement language reads it
        literal = "'" + quoted.replace("'", "''") + "'"
        event, _ = ScheduledEvent.objects.update_or_create(
            name=name,
            defaults={
                "start": timezone.now(),
                "sql": f"REPL_UPDATE_SNAPSHOT ({literal}, 2)",
                "interval": every_minutes,
                "disabled": 0,
            },
        )
        record(actor, "bidir.schedule", publication.item, detail={"every_minutes": every_minutes})
    return event


def reapply_losing_version(backup: ConflictBackup) -> str:
    """The conflict inbox's re-apply of a bi-directional conflict's losing version (on the publisher)."""
    return bidir_sync.reapply_losing_version(backup)


def choose_held_version(actor: Actor, backup: ConflictBackup, choice: int, edited: dict | None) -> str:
    """A person's pick for a held bi-directional conflict: kept on the conflict, and carried out by the sync
    queued here (its pull meets the held change again and applies the pick, then the push sends the row)."""
    with transaction.atomic():
        ConflictBackup.objects.filter(pk=backup.pk, decision=ConflictBackup.HELD).update(
            chosen=choice, chosen_row=edited, decided_at=timezone.now(), decided_by=actor.username
        )
    publication = find_publication(backup.item)
    job = do_sync_publication(Actor.scheduler(), publication)
    label = dict(ConflictBackup.CHOICES)[choice]
    return f"{backup.table_name} {key_label(backup.primary_key)}: {label} is carried out by sync job #{job.pk}"


def do_purge_urplogs(actor: Actor) -> int:
    """repl_purge_urplogs(): on each subscriber, pushed changes older than its LAST_PUSH_TS minus
    snp_repl_purge_offset; on the publisher, pulled changes older than anything still in the
    subscriber's log minus the offset. No sync reads those rows again."""
    require(actor, OPERATE, "urplog.purge")
    deleted = 0
    for publication in SnapshotPublication.objects.select_related("server").filter(type=TABLE):
        for subscription in subscriptions_of(publication).filter(init_state="done"):
            server = Server.objects.filter(name=subscription.server).first()
            if server is None or publication.server is None:
                continue
            deleted += bidir_sync.purge_replay_logs(publication, subscription, server)
    record(actor, "urplog.purge", detail={"deleted": deleted})
    return deleted

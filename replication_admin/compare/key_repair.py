"""Repairing chosen keys of a compare: the destination's row of each key becomes the source's row as it is now.

What a direct write means depends on what the destination is:
- a snapshot's destination, or any table: a plain copy (a snapshot's own refreshes are held off meanwhile by
  its item lock);
- a transactional subscriber's copy: the write runs in the replay context the subscriber's own apply uses
  (`nolog`), so the copy's capture triggers of an updateable subscription do not push it back as a change;
- a bi-directional subscriber's copy: refused. Its triggers log every write that does not carry another
  server's ROWGUID as the subscriber's own change, and the next sync would push it to the publisher and decide
  it as a conflict; re-initialise the subscription instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.core.jobs import JobResult, run_counts
from replication_admin.core.locks import item_lock
from replication_admin.core.transactions import with_retries
from replication_admin.engine import key_repair as sql
from replication_admin.engine import transactional_sql
from replication_admin.engine.compare import ComparePlan
from replication_admin.models import (
    JobRun,
    ReplAccount,
    ReplSubscriber,
    Server,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.transactional.selectors import table_item


class RepairRefused(ReplicationError):
    """These keys cannot be repaired by writing the destination directly (the message says why)."""


@dataclass(frozen=True)
class Destination:
    """What the compared destination table is to replication, for a direct write to it."""

    description: str
    lock: str | None = None  # the item lock its own apply takes
    nolog: bool = False  # write in the replay context, unseen by the copy's capture triggers


def destination_of(server: Server, table: str) -> Destination:
    """Raises RepairRefused for a destination a direct write would corrupt."""
    for sub in SnapshotSubscription.objects.filter(server=server.name):
        publication = SnapshotPublication.objects.filter(item=sub.item).first()
        if publication is not None and publication.table.lower() == table.lower():
            raise RepairRefused(
                f"{server.name}.{table} is a bi-directional subscriber's copy of {sub.item}: a direct write would be "
                "logged as the subscriber's own change and pushed to the publisher; re-initialise the subscription"
            )
    for subscription in ReplSubscriber.objects.filter(subscriber=server.name, subscribed=True):
        item = table_item(subscription.server, table)
        if item is not None and item.acct == subscription.account:
            updateable = ReplAccount.objects.filter(
                server=subscription.server, account=subscription.account, is_updateable=1
            ).exists()
            return Destination(
                f"transactional subscriber's copy of {subscription.server}/{subscription.account}", nolog=updateable
            )
    snapshot = Snapshot.objects.filter(dest_server=server, dest_table__iexact=table).first()
    if snapshot is not None:
        return Destination(f"destination of snapshot {snapshot.name}", lock=f"snapshot:{snapshot.name}")
    return Destination("a table no replication writes: a plain copy")


@dataclass(frozen=True)
class RepairKeysResult(JobResult):
    """A repair of chosen keys: how many keys, what the destination is, and the rows written in its transaction."""

    mode: str = "repair_keys"
    keys: int = 0
    destination: str = ""
    updated: int = 0
    inserted: int = 0
    deleted: int = 0

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.keys, written=self.updated + self.inserted + self.deleted)


@contextlib.contextmanager
def _held(destination: Destination, job: JobRun) -> Iterator[None]:
    if destination.lock is None:
        yield
    else:
        with item_lock(destination.lock, job):
            yield


@dataclass(frozen=True)
class ChosenKey:
    """A key to repair: as each side stored it when compared (None on a side that had no such row)."""

    left: list[Any] | None
    right: list[Any] | None


def repair_keys(
    job: JobRun, reporter: Any, plan: ComparePlan, source: Server, dest: Server, keys: list[ChosenKey]
) -> RepairKeysResult:
    """Make the destination's row of each key the source's current row, in one destination transaction: update or
    insert it, or delete it when the source no longer has the key."""
    destination = destination_of(dest, plan.right.table.name)
    reporter.log(f"destination: {destination.description}")
    d = plan.right.dialect
    schema = connections.table_schema(dest)
    with _held(destination, job):
        reporter.progress(0, 2, f"reading {len(keys)} key(s) on {source.name}")
        source_rows: list[tuple[ChosenKey, tuple[Any, ...] | None]] = []
        with connections.connect(source, readonly=True) as conn:
            cursor = conn.cursor()
            read = sql.row_sql(plan.left)
            for key in keys:
                # A key only the destination had is looked up on the source as the destination stores it.
                params = sql.key_parameters(plan.left, key.left if key.left is not None else key.right or [], True)
                row = cursor.execute(read, params).fetchone()
                source_rows.append((key, tuple(row) if row is not None else None))
        reporter.progress(1, 2, f"writing {len(keys)} key(s) on {dest.name}")
        update, insert, delete = sql.update_sql(plan.right), sql.insert_sql(plan.right), sql.delete_sql(plan.right)
        count = sql.count_sql(plan.right)

        def work(cursor: Any) -> RepairKeysResult:
            done = {"updated": 0, "inserted": 0, "deleted": 0}
            if destination.nolog:
                for statement in transactional_sql.replay_context_sql(d, True, None, schema):
                    cursor.execute(statement)
            for key, row in source_rows:
                stored = sql.key_parameters(plan.right, key.right, True) if key.right is not None else None
                if row is None:
                    if stored is not None:
                        cursor.execute(delete, stored)
                        done["deleted"] += max(cursor.rowcount, 0)
                    continue
                values = sql.destination_row(plan.right, row)
                # A key the destination lacked is looked for as the insert writes it (a second run finds it).
                where = stored if stored is not None else sql.key_of(plan.right, values)
                if not cursor.execute(count, where).fetchone()[0]:
                    cursor.execute(insert, values)
                    done["inserted"] += 1
                elif update is not None:
                    cursor.execute(update, sql.update_parameters(plan.right, values, where))
                    done["updated"] += 1
            if destination.nolog:
                for statement in transactional_sql.reset_context_sql(d, schema):
                    cursor.execute(statement)
            return RepairKeysResult(
                keys=len(keys), destination=destination.description, updated=done["updated"],
                inserted=done["inserted"], deleted=done["deleted"],
            )  # fmt: skip

        done = with_retries(dest, work)
    reporter.progress(2, 2, f"{done.updated} updated, {done.inserted} inserted, {done.deleted} deleted")
    return done

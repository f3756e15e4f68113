"""Schema changes of published tables: seeing them, holding them for approval or applying them, and the DDL
each subscriber gets (docs/schema-changes.md).

How a change reaches the subscribers: an 'S' entry in the publication's log, carrying the table's column
rows before and after (engine.schema_changes). A subscriber that replays it brings its copy along
(apply._Replay.schema_change) at that point of the stream, so the rows before it are written in the old
shape and the rows after it in the new one.

- PostgreSQL publishers log the 'S' entry in the ALTER's own transaction (an event trigger over RTPUBTBL):
  the place is exact. Seeing the change (`detect`) records it; with the approval policy, subscribers
  stop before the entry until an admin approves.
- MariaDB and SQLite have no DDL triggers: `detect` compares the live table with the catalog's definition.
  Applying then regenerates the capture triggers (their column lists changed), logs the 'S' entry and
  logs again the rows whose values the old triggers could not carry (an added column's values written in
  between; every row of a renamed column, since a rename cannot be told from a drop and an add there).
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pyodbc
from django.db import transaction
from django.utils import timezone

from replication_admin.core import connections
from replication_admin.core.alerts import safely_raise, safely_resolve
from replication_admin.core.audit import Actor, record
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import lookup_table
from replication_admin.core.schema_follow import copy_ddl_for, live_definition
from replication_admin.core.transactions import run_each, run_in_transaction
from replication_admin.engine import schema_changes
from replication_admin.engine import transactional_sql as sql
from replication_admin.models import ReplAccount, SchemaChange, Server, TpItem
from replication_admin.transactional import lookups
from replication_admin.transactional.capture import append_entry, publisher_count, uses_wal
from replication_admin.transactional.lookups import TrxError, _d, schema_of

log = logging.getLogger(__name__)

ALERT = "schema_change"
CHECK_EVERY = 2.0  # seconds between two looks of a follower at a publication's tables
_last_check: dict[tuple[str, str], float] = {}
# The follower's threads and its loop look at a publication's tables: one throttled look at a time per publication.
_looking: set[tuple[str, str]] = set()
_looking_guard = threading.Lock()


# --- the publisher's side --------------------------------------------------------------------------------------


def track(server: Server, account: str, table: str) -> bool:
    """PostgreSQL: log the table's schema changes in place from now on. False where that cannot be (another
    dialect; a role that may not create event triggers): `detect` compares the live table instead."""
    d = _d(server)
    if not d.has_ddl_triggers:
        return False
    schema = schema_of(server)
    info = lookup_table(server, table)
    if info is None:
        return False
    try:
        run_each(server, sql.schema_tracking_ddl(d, schema)[0])
        run_in_transaction(server, [sql.track_table_sql(d, account, info, schema)])
    except pyodbc.Error as exc:
        log.info("%s: schema changes of %s are seen by comparison: %s", server.name, table, exc.args[-1])
        return False
    return True


def definition_now(server: Server, account: str, table: str) -> tuple[list[list], bool]:
    """The table's column rows as the publisher has them now, and whether its changes are logged in place."""
    d = _d(server)
    if d.has_ddl_triggers:
        try:
            with connections.connect(server, readonly=True) as conn:
                row = conn.cursor().execute(sql.tracked_sql(d, schema_of(server)), [account, table]).fetchone()
        except pyodbc.Error:
            row = None  # no RTPUBTBL: never tracked
        if row is not None:
            return json.loads(row[0]), True
    rows = live_definition(server, table, constraints=True)
    if rows is None:
        raise TrxError(f"table {table!r} does not exist on {server.name}")
    return rows, False


def detect(account: ReplAccount, throttle: bool = False) -> list[SchemaChange]:
    """Look at every published table of `account` for a change of shape: record it (one pending change per
    table, widened while it waits), and apply it at once under the automatic policy. With `throttle`, at
    most once per CHECK_EVERY seconds per publication and never twice at once (the follower calls this every round,
    from its loop and its threads)."""
    key = (account.server, account.account)
    if not throttle:
        _last_check[key] = time.monotonic()
        return _detect(account)
    with _looking_guard:
        if key in _looking or time.monotonic() - _last_check.get(key, 0.0) < CHECK_EVERY:
            return []
        _last_check[key] = time.monotonic()
        _looking.add(key)
    try:
        return _detect(account)
    finally:
        with _looking_guard:
            _looking.discard(key)


def _detect(account: ReplAccount) -> list[SchemaChange]:
    server = lookups.server_named(account.server)
    seen: list[SchemaChange] = []
    for item in lookups.table_items(account):
        table = lookups.item_table(item.item)
        try:
            rows, in_place = definition_now(server, account.account, table)
        except TrxError:
            continue  # the table is gone: the sync says so
        if not item.definition:
            TpItem.objects.filter(pk=item.pk).update(definition=rows)
            continue
        if schema_changes.digest(rows) == schema_changes.digest(item.definition):
            continue
        if not in_place and not schema_changes.between(_d(server), table, item.definition, rows):
            # Nothing a subscriber follows (a definition stored before constraints were followed, read again
            # with them: what they were is unknown, so nothing of them changed): kept as the starting point.
            TpItem.objects.filter(pk=item.pk).update(definition=rows)
            continue
        # Read after the definition: every 'S' entry of the changes seen is at or below this count.
        count = publisher_count(server, account.account)
        change = _record(account, table, item.definition, rows, in_place, count)
        if not in_place:
            # At once, whatever the policy: old triggers naming a renamed or dropped column refuse every write
            # (MariaDB), and an added column's values go uncaptured. Subscribers skip the columns they do not
            # have yet; applying the change logs the rows again for them.
            _new_triggers(server, account, table)
        seen.append(change)
        if account.schema_policy == ReplAccount.SchemaPolicy.AUTO or not change.changes:
            apply_change(Actor.scheduler(), change)  # nothing to approve where nothing changes for a subscriber
    return seen


def _record(account: ReplAccount, table: str, before: list, after: list, in_place: bool, count: int) -> SchemaChange:
    d = _d(lookups.server_named(account.server))
    found = [c.as_json() for c in schema_changes.between(d, table, before, after, published_names(account))]
    with transaction.atomic():
        change = (
            SchemaChange.objects.select_for_update()
            .filter(server=account.server, account=account.account, table=table, state=SchemaChange.State.PENDING)
            .first()
        )
        if change is None:
            change = SchemaChange.objects.create(
                server=account.server, account=account.account, table=table, before=before, after=after,
                changes=found, in_place=in_place, log_count=count, detected_at=timezone.now(),
            )  # fmt: skip
            record(Actor.scheduler(), "trx.schema_change", str(change), detail={"changes": found, "id": change.pk})
        elif change.after != after:
            change.after, change.changes, change.log_count = after, found, max(change.log_count, count)
            change.save(update_fields=["after", "changes", "log_count"])
    if account.schema_policy == ReplAccount.SchemaPolicy.APPROVE and found:
        safely_raise(
            ALERT, f"{account.server}/{account.account} {table}",
            f"a schema change of {table} on {account.server}/{account.account} waits for approval: "
            + "; ".join(c["text"] for c in found),
            change.get_absolute_url(),
        )  # fmt: skip
    return change


def apply_change(actor: Actor, change: SchemaChange) -> SchemaChange:
    """Let a recorded change through to the subscribers (see the module's docstring for the two ways)."""
    account = lookups.publication(change.server, change.account)
    server = lookups.server_named(change.server)
    count = change.log_count
    if not change.in_place:
        count = _log_change(server, account, change)
    with transaction.atomic():
        TpItem.objects.filter(
            pk__in=[i.pk for i in lookups.table_items(account) if lookups.item_table(i.item) == change.table]
        ).update(definition=change.after)
        SchemaChange.objects.filter(pk=change.pk).update(
            state=SchemaChange.State.APPLIED, log_count=count, decided_at=timezone.now(), decided_by=actor.username
        )
        record(actor, "trx.schema_apply", str(change), detail={"id": change.pk, "log_count": count})
    lookups.forget_published(account)
    safely_resolve(ALERT, f"{change.server}/{change.account} {change.table}", f"applied by {actor.username}")
    change.refresh_from_db()
    return change


def _log_change(server: Server, account: ReplAccount, change: SchemaChange) -> int:
    """MariaDB and SQLite (and PostgreSQL where it could not track): new capture triggers, the 'S' entry, and
    the rows the old triggers could not carry logged again. Returns the count that covers the entry."""
    d = _d(server)
    table = _new_triggers(server, account, change.table)
    payload = json.dumps({"table": table.name, "before": change.before, "after": change.after})
    append_entry(server, account.account, "S", table.name, payload)
    count = publisher_count(server, account.account)
    q = d.quote
    target = d.qualify(table.name, table.schema)
    for found in change.changes:
        if found["kind"] == schema_changes.ADD:
            name = q(found["column"])
            run_in_transaction(server, [(f"UPDATE {target} SET {name} = {name} WHERE {name} IS NOT NULL", [])])
        elif found["kind"] == schema_changes.RENAME:
            name = q(found["new_name"])
            run_in_transaction(server, [(f"UPDATE {target} SET {name} = {name}", [])])
    return count


def _new_triggers(server: Server, account: ReplAccount, name: str):
    """The capture triggers of a published table made anew for its columns as they are (no moment without
    them); returns the table's description."""
    d = _d(server)
    table = lookups.describe(server, name)
    if not uses_wal(server, account.account):
        objects = sql.capture_objects(d, account.account, table, server.name)
        run_in_transaction(server, [(s, []) for s in d.replace_objects_sql(objects.drop, objects.create)])
    return table


def published_names(account: ReplAccount) -> set[str]:
    """The publication's table names (a foreign key to a table outside them is not replicated)."""
    return {lookups.item_table(i.item) for i in lookups.table_items(account)}


def may_apply(account: ReplAccount, table: str, count: int) -> SchemaChange | None:
    """Whether the 'S' entry of `table` in the publication's transaction `count` may be replayed: None when it
    may, else the change it waits for (approval policy, not approved yet)."""
    if account.schema_policy == ReplAccount.SchemaPolicy.AUTO:
        return None
    changes = SchemaChange.objects.filter(server=account.server, account=account.account, table=table)
    if changes.filter(state=SchemaChange.State.APPLIED, log_count__gte=count).exists():
        return None
    pending = changes.filter(state=SchemaChange.State.PENDING).first()
    if pending is None:  # logged, not seen yet: look now
        detect(account)
        pending = changes.filter(state=SchemaChange.State.PENDING).first()
        if pending is None and changes.filter(state=SchemaChange.State.APPLIED, log_count__gte=count).exists():
            return None
    return pending or SchemaChange(server=account.server, account=account.account, table=table)


# --- what a subscriber gets ---------------------------------------------------------------------------------------


def subscriber_ddl(change: SchemaChange, subscriber: Server) -> list[str]:
    """The statements `subscriber`'s copy will run when it reaches the change (nothing when it has it already)."""
    published = published_names(lookups.publication(change.server, change.account))
    source = _d(lookups.server_named(change.server))
    found = schema_changes.between(source, change.table, change.before, change.after, published)
    try:
        return copy_ddl_for(subscriber, change.table, found)
    except ReplicationError as exc:
        return [f"-- {exc}"]

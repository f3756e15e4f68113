"""Bi-directional snapshot replication, control plane: objects on the servers, the initial copy and the
sync (REPL_UPDATE_SNAPSHOT). Spark moves the rows (jobs.bidir_sync); every change to a replicated table
happens here, in one transaction per apply that also records the replay log.

A sync runs, for the publication's item: PULL from every subscriber in turn (its pending changes are
applied on the publisher, conflicts decided by the resolver chain and kept in REPL_CONFLICT, then the
pulled rows are consumed from the subscriber's log), then PUSH to every subscriber (the publisher's
changes of the window that did not come from it). A pulled change applied on the publisher is logged
there under its own origin, so PUSH sends it to the other subscribers and never back.

The publisher's rows keep moving while Spark decides (its applications write on): the apply locks the
rows, and the changes whose row moved since their decision are classified and decided again there, on
the locked rows, so each sync applies what it read instead of handing it to the next one.

Decisions and what they write on the publisher (`W` write a version, `D` delete, `N` nothing):
1 subscriber wins: the incoming version (or its delete); 2 subscriber wins and the origin changes: the
incoming row after the resolver's assignments, under a new publisher ROWGUID, so it reaches the
originator too; 3 publisher wins and 5 ignore: the publisher's row is written again under a new
publisher ROWGUID, so every subscriber, the originator included, converges on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyodbc
from django.db import transaction
from django.utils import timezone

from jobs import bidir_sync as spark_bidir
from replication_admin.bidir.apply import Side, _fetch, _insert_rows, run_apply
from replication_admin.bidir.objects import (
    BidirError,
    lock_name,
    publisher_table,
    rplog,
    server_now,
    subscriber_table,
)
from replication_admin.core import alerts, connections, spark_sizing
from replication_admin.core.conflicts import (
    alert_held,
    decide,
    key_text,
    new_guid,
    resolver_chain,
)
from replication_admin.core.locks import item_lock
from replication_admin.core.schema_follow import bring_copy, changed_since, record_followed
from replication_admin.core.spark import endpoint, spark_session
from replication_admin.core.times import aware, naive_utc
from replication_admin.core.transactions import (
    error_message,
    is_retryable,
    run_each,
)
from replication_admin.engine import bidir_sql as sql
from replication_admin.engine.refresh_sql import insert_rows_sql, rows_per_statement
from replication_admin.engine.resolvers import ResolverColumn, spark_type, to_json_value
from replication_admin.engine.snapshot_log import rlog_name
from replication_admin.engine.values import bind_value
from replication_admin.models import (
    ConflictBackup,
    JobRun,
    RegistryEntry,
    SchemaChange,
    Server,
    SnapshotPublication,
    SnapshotSubscription,
)

# --- objects ---------------------------------------------------------------------------------------------


# --- helpers for moving rows -----------------------------------------------------------------------------


# --- initial copy (REPL_INIT_SNAPSHOT) -------------------------------------------------------------------


# --- sync (REPL_UPDATE_SNAPSHOT) --------------------------------------------------------------------------


def _resolver_types(layout: sql.Layout) -> dict[str, str]:
    return {m.alias: spark_type(m.logical) for m in layout.moved}


def _from_json(value):
    if isinstance(value, dict) and "hex" in value:
        return bytes.fromhex(value["hex"])
    return value


@dataclass
class PullOutcome:
    read: int = 0  # changes read from the subscriber's log
    pulled: int = 0  # of them, applied on the publisher (written, or decided to need no write)
    conflicts: int = 0
    replayed: int = 0  # of them, found already applied (an earlier sync stopped before consuming them)
    left: int = 0  # changes whose publisher row kept moving while the sync applied: pulled by the next sync
    held: int = 0  # conflicts held for a person: they stay in the subscriber's log
    redecided: int = 0  # changes decided again under the apply's locks: their publisher row moved meanwhile

    @property
    def applied(self) -> int:
        """Changes read that this sync settled: applied, or found already applied."""
        return self.pulled + self.replayed


@dataclass(frozen=True)
class Redecision:
    """One round of deciding again, under the apply's locks, the changes whose publisher row moved."""

    changes: tuple[str, ...]  # the change ids decided again
    conflicts: tuple[str, ...]  # of them, conflicts staged for the apply (their backups pending)
    held: tuple[str, ...]  # of them, conflicts held for a person
    taken: tuple[str, ...]  # of them, those whose version the publisher takes as it was
    left: tuple[str, ...]  # of them, left for the next sync: a person's pick waits for the next sync


# The backup columns a re-run of the same decision rewrites (the row of a change is unique per item and source).
BACKUP_FIELDS = [
    "pending", "kind", "table_name", "publisher", "origin", "primary_key", "conflict_type", "operation", "decision",
    "resolver_id", "resolver", "publisher_row", "incoming_row", "old_rowguid", "winning_row", "losing_row", "note",
    "job",
]  # fmt: skip


def _held_conflicts(publication, source: Server) -> dict[str, ConflictBackup]:
    """The item's conflicts from `source` held for a person (decision 4), by key."""
    held = ConflictBackup.objects.filter(
        kind="snapshot", item=publication.item, source=source.name, decision=ConflictBackup.HELD
    )
    return {key_text((b.primary_key or {}).values()): b for b in held}


def _conflict_actions(
    publication, pub: Side, source: Server, chunk: list[tuple[dict, dict]], job: JobRun
) -> tuple[list[list], list[str]]:
    """The apply rows of a chunk of decided conflicts (typed row, decision), and the changes held for a person
    (they stay in the subscriber's log, which keeps the publisher's later versions of the row from it, and
    nothing of them is applied). Backups are saved first, in one statement, pending: invisible until the apply
    that carries their decisions has committed (`_settle`); a re-run updates the same rows. A held conflict's
    backup is visible at once; once a person has picked a version, the next pull of its change carries it out."""
    d = pub.d
    guid_name = pub.layout.guid.dest
    rows: list[list] = []
    backups: list[ConflictBackup] = []
    held_changes: list[str] = []
    held = _held_conflicts(publication, source)
    for c, decision in chunk:
        code = int(decision["decision"])
        published, incoming = decision["pub"], decision["new"]
        prior = held.get(key_text(incoming.get(k.dest) for k in pub.layout.keys))
        if prior is not None and prior.change_guid != c["change_id"]:
            # The row changed again on the subscriber: the held conflict follows its latest change.
            ConflictBackup.objects.filter(pk=prior.pk).update(change_guid=c["change_id"], incoming_row=incoming)
        if prior is not None and prior.chosen is not None:
            code = prior.chosen
            if code == 2:
                decision = {**decision, "final": {**incoming, **(prior.chosen_row or {})}}
            decision.update(resolver=f"decided by {prior.decided_by or 'a person'}", resolver_id=None)
        elif prior is not None or code == ConflictBackup.HELD:
            code = ConflictBackup.HELD
            held_changes.append(c["change_id"])
            if prior is None:
                ConflictBackup.objects.update_or_create(
                    item=publication.item, source=source.name, change_guid=c["change_id"],
                    defaults=_backup_fields(publication, pub, source, c, decision, code, None, None, job),
                )  # fmt: skip
                alert_held(publication.item, source.name, {k.dest: incoming.get(k.dest) for k in pub.layout.keys})
            decision["decision"] = code
            continue
        decision["decision"] = code
        if code == 1:
            action, written = ("W", incoming) if c["eff_op"] != "D" else ("D" if published else "N", None)
            winner, loser = (incoming if c["eff_op"] != "D" else None), published
        elif code == 2:
            written = {**(decision.get("final") or incoming), guid_name: new_guid(publication.server.name)}
            action, winner, loser = "W", written, published
        else:  # 3 publisher wins, 5 ignore: the publisher's version goes out again, to everyone
            written = {**published, guid_name: new_guid(publication.server.name)} if published else None
            action = "W" if published else "N"
            winner, loser = written, incoming
        backups.append(
            ConflictBackup(
                item=publication.item, source=source.name, change_guid=c["change_id"], pending=True,
                **_backup_fields(publication, pub, source, c, decision, code, winner, loser, job),
            )
        )  # fmt: skip
        values = written or {}
        key_values = [bind_value(_from_json(incoming[k.dest]), k.logical, d.name) for k in pub.layout.keys]
        row = [
            *key_values,
            action,
            int(c["pub_present"]),
            published.get(guid_name) if published else None,
            c["change_id"],
            bind_value(c["snaptime"], sql.TIMESTAMP, d.name),
        ]
        row += [bind_value(_from_json(values.get(v.dest)), v.logical, d.name) for v in pub.layout.values]
        rows.append(row)
    ConflictBackup.with_pending.bulk_create(
        backups,
        update_conflicts=True,
        unique_fields=["item", "source", "change_guid"],
        update_fields=BACKUP_FIELDS,
    )
    return rows, held_changes


def _backup_fields(
    publication, pub: Side, source: Server, c: dict, decision: dict, code: int, winner, loser, job
) -> dict:
    incoming = decision["new"]
    return {
        "kind": "snapshot", "table_name": publication.table, "publisher": publication.server.name,
        "origin": sql.origin_of(c["change_id"]) or source.name,
        "primary_key": {k.dest: incoming.get(k.dest) for k in pub.layout.keys}, "conflict_type": c["conflict"],
        "operation": c["eff_op"], "decision": code, "resolver_id": decision.get("resolver_id"),
        "resolver": decision.get("resolver") or "default", "publisher_row": decision["pub"],
        "incoming_row": incoming, "old_rowguid": c["old_guid"], "winning_row": winner, "losing_row": loser,
        "note": decision.get("note") or ("held: both sides keep their version until a person picks one"
                                         if code == ConflictBackup.HELD else ""),
        "job": job,
    }  # fmt: skip


def _redecide(
    cursor, publication, pub: Side, source: Server, stages: tuple[str, str], stale: list[str], chain, job: JobRun
) -> Redecision:
    """Decide again, on the publisher's rows as they are now (locked by the apply running on `cursor`), the
    staged changes `stale` whose row moved since they were decided: their staged apply rows are replaced
    (`stages`: the incoming changes, the apply's staging table). The same detection as the pull's and the
    same resolver chain; a conflict's backup is the change's one backup, rewritten (still pending)."""
    d, schema, layout = pub.d, pub.table.schema, pub.layout
    incoming_stage, apply_stage = stages
    guid = layout.guid.alias
    picked = set(
        ConflictBackup.with_pending.filter(
            kind="snapshot", item=publication.item, source=source.name, change_guid__in=stale, pending=True
        )
        .exclude(chosen=None)
        .values_list("change_guid", flat=True)
    )
    rows: list[dict] = []
    for start in range(0, len(stale), 500):
        chunk = stale[start : start + 500]
        cursor.execute(sql.redecide_select(d, pub.table, layout, incoming_stage, len(chunk)), chunk)
        names = [column[0].lower() for column in cursor.description]
        rows.extend(dict(zip(names, r, strict=True)) for r in cursor.fetchall())
        cursor.execute(sql.leave_staged_sql(d, apply_stage, schema, len(chunk)), chunk)
    # The earlier decisions' backups go (a person's pick stays: its change waits for the next sync).
    ConflictBackup.with_pending.filter(
        kind="snapshot", item=publication.item, source=source.name, change_guid__in=stale, pending=True, chosen=None
    ).delete()
    clean: list[str] = []
    conflicts: list[tuple[dict, dict]] = []
    for r in rows:
        if r["change_id"] in picked:
            continue
        present, pub_present = bool(r["present"]), bool(r["pub_present"])
        kind = sql.classify(r["op"], present, r["old_guid"], r["change_id"], pub_present, r["p" + guid])
        if kind.conflict is None:
            restage = [kind.action, int(pub_present), r["p" + guid], r["change_id"]]
            cursor.execute(sql.stage_incoming_sql(d, layout, apply_stage, incoming_stage, schema), restage)
            clean.append(r["change_id"])
            continue
        new_row = {m.dest: to_json_value(r[m.alias if m.is_key else "n" + m.alias]) for m in layout.moved}
        if kind.eff_op == "D":
            new_row = {k.dest: new_row[k.dest] for k in layout.keys}
        published = None
        if pub_present:
            published = {k.dest: to_json_value(r[k.alias]) for k in layout.keys}
            published.update({v.dest: to_json_value(r["p" + v.alias]) for v in layout.values})
        change = {
            "change_id": r["change_id"], "eff_op": kind.eff_op, "pub_present": int(pub_present),
            "old_guid": r["old_guid"], "snaptime": r["snaptime"], "conflict": kind.conflict,
        }  # fmt: skip
        conflict = {
            "key": r["change_id"], "type": kind.conflict, "pub": published, "new": new_row,
            "old": {sql.ROWGUID_COLUMN: r["old_guid"]},
        }  # fmt: skip
        conflicts.append((change, conflict))
    columns = [ResolverColumn(m.dest, spark_type(m.logical), m.is_key) for m in layout.moved]
    decided = decide([conflict for _, conflict in conflicts], chain, columns)
    decided_chunk = [
        (change, {**conflict, **decision}) for (change, conflict), decision in zip(conflicts, decided, strict=True)
    ]
    apply_rows, held = _conflict_actions(publication, pub, source, decided_chunk, job)
    staging_columns = sql.staging_columns(layout)
    per = rows_per_statement(len(staging_columns))
    for start in range(0, len(apply_rows), per):
        part = apply_rows[start : start + per]
        cursor.execute(
            insert_rows_sql(d, apply_stage, schema, staging_columns, len(part)), [v for row in part for v in row]
        )
    won = [change["change_id"] for change, decision in decided_chunk if int(decision["decision"]) == 1]
    return Redecision(
        changes=tuple(r["change_id"] for r in rows if r["change_id"] not in picked),
        conflicts=tuple(change["change_id"] for change, _ in decided_chunk if change["change_id"] not in set(held)),
        held=tuple(held),
        taken=tuple(clean + won),
        left=tuple(sorted(picked)),
    )


def _integer_key(*sides: Side) -> str | None:
    """The alias of the only key column when every side reads it as an integer (reads are split on it)."""
    keys = sides[0].layout.keys
    if len(keys) != 1 or any(side.read_types.get(keys[0].alias) != "BIGINT" for side in sides):
        return None
    return keys[0].alias


def pull(spark, publication, subscription, pub: Side, sub: Side, job: JobRun, reporter) -> PullOutcome:
    """Apply a subscriber's pending changes on the publisher, in one transaction.

    Decisions are made on the publisher's rows as read; the apply re-checks them under row locks. A change
    whose publisher row moved meanwhile (its application kept writing) is decided again under those locks,
    on the row as it now is, and applied with the others: the row cannot move between that decision and
    the write. Only a change whose row still moved after a few such rounds (rows inserted on its key
    meanwhile), or whose held conflict a person has just decided, is left out of the apply and stays in the
    subscriber's log, so the next sync reads it (and the row's new version) again; its conflict backup, if
    any, is dropped."""
    outcome = PullOutcome()
    d_pub, d_sub = pub.d, sub.d
    replay = rplog(publication, d_pub)
    _settle_pending(publication, pub, replay, sub.server.name)
    log_rows = int(_fetch(sub.server, sql.log_count_sql(d_sub, sub.table))[0][0] or 0)
    if not log_rows:
        # A subscriber's log holds only what it has not sent: empty, there is nothing to pull.
        SnapshotSubscription.objects.filter(pk=subscription.pk).update(last_pull_ts=timezone.now())
        return outcome
    keys_stage, apply_stage, consumed_stage = pub.work("BSIN"), pub.work("BSAP"), pub.work("BSCN")
    pulled_stage = sub.work("BSPL")
    pub.recreate(keys_stage, sql.incoming_staging_ddl(d_pub, keys_stage, pub.table.schema, pub.layout))
    pub.recreate(apply_stage, sql.apply_staging_ddl(d_pub, apply_stage, pub.table.schema, pub.layout))
    pub.recreate(consumed_stage, sql.consumed_staging_ddl(d_pub, consumed_stage, pub.table.schema))
    sub.recreate(pulled_stage, sql.pulled_staging_ddl(d_sub, pulled_stage, sub.table.schema, sub.layout))
    pub_rows_schema = ", ".join(
        [
            *(f"{k.alias} {pub.read_types[k.alias]}" for k in pub.layout.keys),
            "change_id STRING",
            "pub_present INT",
            *(f"p{v.alias} {pub.read_types[v.alias]}" for v in pub.layout.values),
        ]
    )
    plan = spark_bidir.PullPlan(
        sub=endpoint(sub.server, readonly=True),
        pub=endpoint(pub.server),
        changes_sql=sql.pull_select(d_sub, sub.table, sub.layout, sub.server.name),
        changes_schema=sql.changes_schema(d_sub, sub.layout, sub.read_types),
        replayed_sql=sql.rplog_guids_select(d_pub, replay, pub.table.schema, sub.server.name, pub.server.name),
        keys_staging_sql=pub.qualify(keys_stage),
        pub_rows_sql=sql.publisher_rows_select(d_pub, pub.table, pub.layout, keys_stage),
        pub_rows_schema=pub_rows_schema,
        apply_staging_sql=pub.qualify(apply_stage),
        consumed_staging_sql=pub.qualify(consumed_stage),
        sub_stage=endpoint(sub.server),
        pulled_staging_sql=sub.qualify(pulled_stage),
        keys=sub.layout.keys,
        values=sub.layout.values,
        sub_read_types=sub.read_types,
        pub_read_types=pub.read_types,
        resolver_types=_resolver_types(pub.layout),
        pub_moved=pub.layout.moved,
        chain=tuple(resolver_chain(publication.item)),
        changes_rows=log_rows,
        split_alias=_integer_key(sub, pub),
        parallelism=spark_sizing.parallelism(),
    )
    subscriber_won: list[str] = []  # conflicts decided "subscriber wins": the publisher took their version

    held: list[str] = []  # changes held for a person: they stay in the subscriber's log
    conflicted: set[str] = set()  # conflicts staged for the apply, their backups pending

    def on_conflicts(chunk: list[tuple[dict, dict]]) -> None:
        rows, held_here = _conflict_actions(publication, pub, sub.server, chunk, job)
        held.extend(held_here)
        _insert_rows(pub.server, apply_stage, pub.table.schema, d_pub, sql.staging_columns(pub.layout), rows)
        subscriber_won.extend(c["change_id"] for c, decision in chunk if int(decision["decision"]) == 1)
        conflicted.update(c["change_id"] for c, _ in chunk if c["change_id"] not in set(held_here))

    def redecide(cursor, stale: list[str]) -> Redecision:
        stages = (keys_stage, apply_stage)
        return _redecide(cursor, publication, pub, sub.server, stages, stale, plan.chain, job)

    # Keys are staged with the publisher's aliases: both layouts share them. Conflicts are decided on
    # Spark and come back chunk by chunk, their backups and apply rows written as they come.
    result = spark_bidir.pull_changes(spark, plan, on_conflicts)
    left: set[str] = set()
    taken_again: set[str] = set()  # decided again: the publisher takes their version as it was
    not_taken: set[str] = set()  # decided again: it does not
    outcome.replayed = result.replayed
    if result.staged:
        apply = sql.apply_sql(
            d_pub,
            pub.table,
            pub.layout,
            apply_stage,
            replay,
            sub.server.name,
            pub.server.name,
            guarded=True,
            decided=True,
        )
        applied = run_apply(pub.server, apply, staging=(apply_stage, pub.table.schema), redecide=redecide)
        left = set(applied.left)
        redecided: set[str] = set()
        for round_ in applied.redecided:  # in order: a later round's decision of a change is its last
            changes = set(round_.changes)
            redecided |= changes
            conflicted.difference_update(changes)
            conflicted.update(round_.conflicts)
            taken_again.difference_update(changes)
            taken_again.update(round_.taken)
            not_taken.update(changes)
            not_taken.difference_update(round_.taken)
            held.extend(round_.held)
            left.update(round_.left)
        conflicted.difference_update(left)
        if result.conflicts or redecided:
            _settle(publication, sub.server.name, left)
        outcome.redecided = len(redecided)
        if redecided:
            reporter.log(
                f"pull from {sub.server.name}: {len(redecided)} change(s) whose row changed on "
                f"{pub.server.name} while the sync decided were decided again under the apply's locks"
            )
        if left:
            reporter.log(
                f"pull from {sub.server.name}: {len(left)} change(s) whose row kept changing on "
                f"{pub.server.name} while the sync applied wait for the next sync"
            )
    outcome.read = result.staged + result.replayed
    outcome.pulled = result.staged - len(left) - len(set(held))
    outcome.conflicts, outcome.left, outcome.held = len(conflicted), len(left), len(set(held))
    taken = (set(subscriber_won) - not_taken) | taken_again
    _consume(sub, pulled_stage, sorted(left | set(held)), sorted(taken), sorted(not_taken - taken_again))
    _forget(pub, replay, sub.server.name, (keys_stage, consumed_stage))
    pub.drop(keys_stage, apply_stage, consumed_stage)
    sub.drop(pulled_stage)
    SnapshotSubscription.objects.filter(pk=subscription.pk).update(last_pull_ts=timezone.now())
    return outcome


def _settle(publication, source: str, left: set[str]) -> int:
    """After the apply committed: the backups of its decisions become visible; those of changes it left
    for the next sync are dropped (that sync decides them again, on the row's new version). Returns how
    many were dropped.

    The pending backups of the item from `source` are exactly the decisions of this apply: the sync
    holds the item's lock, and settles what an earlier one left pending before it decides anything."""
    pending = ConflictBackup.with_pending.filter(kind="snapshot", item=publication.item, source=source, pending=True)
    dropped = 0
    with transaction.atomic():
        ordered = sorted(left)
        for start in range(0, len(ordered), 500):
            chunk = pending.filter(change_guid__in=ordered[start : start + 500])
            # A person's pick that could not be carried out this time: held again, the pick kept for the next.
            chunk.exclude(chosen=None).update(pending=False, decision=ConflictBackup.HELD)
            dropped += chunk.filter(chosen=None).delete()[0]
        pending.update(pending=False)
    return dropped


def _settle_pending(publication, pub: Side, replay: str, source: str) -> None:
    """Backups a sync left pending (it stopped between deciding and settling): visible when the publisher's
    replay log lists their change as applied (recorded in the apply's own transaction), dropped when not."""
    pending = ConflictBackup.with_pending.filter(kind="snapshot", item=publication.item, source=source, pending=True)
    changes = list(pending.values_list("change_guid", flat=True))
    if not changes:
        return
    applied: set[str] = set()
    with connections.connect(pub.server, readonly=True) as conn:
        cursor = conn.cursor()
        for start in range(0, len(changes), 500):
            chunk = changes[start : start + 500]
            listed = sql.rplog_listed_sql(pub.d, replay, pub.table.schema, source, pub.server.name, len(chunk))
            applied.update(r[0] for r in cursor.execute(listed, chunk).fetchall())
    _settle(publication, source, set(changes) - applied)


def _consume(sub: Side, pulled: str, left: list[str], taken: list[str], not_taken: Sequence[str] = ()) -> None:
    """Remove the pulled changes (staged in `pulled`, on the subscriber) from the subscriber's log, in one
    transaction; the ones the apply left for the next sync stay, and a row changed again since has a new
    id and stays.

    Such a row was changed on top of the pulled version: when the publisher took that version as it
    was (no conflict, or the subscriber won), the remaining log row is rebased on it (its OLD_ROWGUID
    becomes the pulled version), so the next pull does not mistake the subscriber's newer change for a
    conflict with its own older one."""
    d, schema = sub.d, sub.table.schema
    with connections.connect(sub.server, autocommit=False) as conn:
        cursor = conn.cursor()
        for start in range(0, len(left), 1000):
            chunk = left[start : start + 1000]
            cursor.execute(sql.pulled_unstage_sql(d, pulled, schema, len(chunk)), chunk)
        for start in range(0, len(not_taken), 1000):
            chunk = list(not_taken[start : start + 1000])
            cursor.execute(sql.pulled_taken_sql(d, pulled, schema, len(chunk), taken=0), chunk)
        for start in range(0, len(taken), 1000):
            chunk = taken[start : start + 1000]
            cursor.execute(sql.pulled_taken_sql(d, pulled, schema, len(chunk)), chunk)
        cursor.execute(sql.consume_sql(d, sub.table, pulled))
        for statement in sql.rebase_sql(d, sub.table, sub.layout, pulled):
            cursor.execute(statement)
        conn.commit()


def _forget(pub: Side, replay: str, source: str, staged: tuple[str, ...]) -> None:
    """The publisher's replay-log rows of consumed changes: those ids are never read again. The pull's work
    tables `staged` list them (the changes it staged for the apply, and those the publisher already had);
    the ones the apply left for the next sync were not applied, so the replay log does not list them."""
    with connections.connect(pub.server, autocommit=False) as conn:
        cursor = conn.cursor()
        for work_table in staged:
            cursor.execute(sql.rplog_forget_sql(pub.d, replay, pub.table.schema, source, work_table))
        conn.commit()


@dataclass
class PushOutcome:
    pushed: int = 0
    waiting: int = 0


def push(spark, publication, subscription, pub: Side, sub: Side, tolerance: int, purge_offset: int) -> PushOutcome:
    d_pub, d_sub = pub.d, sub.d
    stage = sub.work("BSPS")
    replay = rplog(publication, d_sub)
    last_push = subscription.last_push_ts or subscription.init_started_at or timezone.now()
    since = naive_utc(last_push) - timedelta(minutes=tolerance)
    window = _push_window(pub, sub, replay, since)
    if not window:
        return PushOutcome()
    sub.recreate(stage, sql.apply_staging_ddl(d_sub, stage, sub.table.schema, sub.layout))
    plan = spark_bidir.PushPlan(
        pub=endpoint(pub.server, readonly=True),
        sub=endpoint(sub.server),
        changes_sql=sql.push_select(d_pub, pub.table, pub.layout, sub.server.name, since),
        changes_schema=sql.changes_schema(d_pub, pub.layout, pub.read_types),
        replayed_sql=sql.rplog_guids_select(
            d_sub,
            replay,
            sub.table.schema,
            pub.server.name,
            sub.server.name,
            since,
        ),
        apply_staging_sql=sub.qualify(stage),
        keys=sub.layout.keys,
        values=sub.layout.values,
        pub_read_types=pub.read_types,
        changes_rows=window,
        split_alias=_integer_key(pub, sub),
        parallelism=spark_sizing.parallelism(),
    )
    result = spark_bidir.push_changes(spark, plan)
    outcome = PushOutcome()
    newest = result.newest
    if result.staged:
        apply = sql.apply_sql(
            d_sub, sub.table, sub.layout, stage, replay, pub.server.name, sub.server.name, guarded=True
        )
        count_sql, delete_sql = sql.pending_local_sql(d_sub, sub.table, sub.layout, stage)
        measured = run_apply(sub.server, apply, before=[delete_sql], measure=count_sql).measured
        waiting, oldest = (int(measured[0] or 0), measured[1]) if measured else (0, None)
        outcome.pushed, outcome.waiting = result.staged - waiting, waiting
        if waiting and oldest is not None:
            # Changes held back for rows the subscriber changed stay inside the next window.
            held = naive_utc(aware(oldest)) - timedelta(microseconds=1)
            newest = min(newest, held) if newest is not None else held
    sub.drop(stage)
    if newest is not None:
        SnapshotSubscription.objects.filter(pk=subscription.pk).update(last_push_ts=aware(newest))
        before = naive_utc(aware(newest)) - timedelta(minutes=purge_offset)
        run_each(
            sub.server, [sql.rplog_purge_sql(d_sub, replay, sub.table.schema, pub.server.name, sub.server.name, before)]
        )
    return outcome


SMALL_WINDOW = 20_000


def _push_window(pub: Side, sub: Side, replay: str, since: datetime) -> int:
    """How many changes PUSH would read; 0 when every one is already in the subscriber's replay log: the
    usual case for a sync with nothing new, which then costs two small queries instead of a Spark job."""
    ids = _fetch(pub.server, sql.push_window_ids_sql(pub.d, pub.table, sub.server.name, since))
    if not ids or len(ids) > SMALL_WINDOW:
        return len(ids)
    applied = _fetch(
        sub.server,
        sql.rplog_guids_select(sub.d, replay, sub.table.schema, pub.server.name, sub.server.name, since),
    )
    return 0 if {r[0] for r in ids} <= {r[0] for r in applied} else len(ids)


def follow_publisher(publication, subscriptions: list, log) -> list[str]:
    """The subscribers' copies follow the publisher table's schema changes since the last sync, before anything
    moves (ADD, DROP, RENAME COLUMN and type changes; the triggers name only the key and ROWGUID, so they stay).
    Returns the changes in words."""
    server = publication.server
    seen = changed_since(server, publication.table, publication.definition)
    if seen is None:
        return []
    rows, found = seen
    if not found:
        SnapshotPublication.objects.filter(pk=publication.pk).update(definition=rows)
        return []
    ddl = {}
    for subscription in subscriptions:
        copy = Server.objects.get(name=subscription.server)
        ddl[copy.name] = bring_copy(copy, publication.table, found)
    record_followed(
        SchemaChange.Kind.BIDIR, server, publication.table, publication.item, publication.definition, rows, found, ddl
    )
    SnapshotPublication.objects.filter(pk=publication.pk).update(definition=rows)
    texts = [str(c) for c in found]
    for text in texts:
        log(f"the publisher's table changed: {text}; the subscribers follow")
    return texts


def sync_publication(job: JobRun, reporter, publication_id: int) -> dict:
    publication = SnapshotPublication.objects.select_related("server").get(pk=publication_id)
    tolerance = RegistryEntry.get_int("snp_repl_tolerance_offset")
    purge = max(RegistryEntry.get_int("snp_repl_purge_offset"), tolerance)
    summary: dict = {"mode": "sync", "subscribers": {}}
    errors: list[str] = []
    with item_lock(lock_name(publication), job), connections.reuse():
        assert publication.server is not None
        subscriptions = list(
            SnapshotSubscription.objects.filter(item=publication.item, type=publication.type, init_state="done")
        )
        summary["schema_changes"] = follow_publisher(publication, subscriptions, reporter.log)
        pub_table = publisher_table(publication)
        layout = sql.Layout.of(pub_table)
        pub = Side.of(publication.server, pub_table, layout)
        with reporter.phase("spark_session"):
            spark = spark_session()
        sides: dict[int, Side] = {}
        steps = max(2 * len(subscriptions), 1)
        for n, subscription in enumerate(subscriptions):
            reporter.progress(n, steps, f"pulling changes from {subscription.server}")
            try:
                server = Server.objects.get(name=subscription.server)
                sides[subscription.pk] = Side.of(server, subscriber_table(publication, server), layout)
                with reporter.phase(f"pull {subscription.server}"):
                    got = pull(spark, publication, subscription, pub, sides[subscription.pk], job, reporter)
                summary["subscribers"][subscription.server] = {
                    "read": got.read,
                    "applied": got.applied,
                    "pulled": got.pulled,
                    "conflicts": got.conflicts,
                    "already_applied": got.replayed,
                    "decided_again": got.redecided,
                    "held": got.held,
                    "left_for_next_sync": got.left,
                }
            except (BidirError, pyodbc.Error, Server.DoesNotExist) as exc:
                if is_retryable(exc):
                    raise  # a network fault: the job runs again from its start (core.jobs.execute)
                message = error_message(exc)
                errors.append(f"pull from {subscription.server}: {message}")
                SnapshotSubscription.objects.filter(pk=subscription.pk).update(last_error=message)
        for n, subscription in enumerate(subscriptions):
            if subscription.pk not in sides:
                continue
            reporter.progress(len(subscriptions) + n, steps, f"pushing changes to {subscription.server}")
            subscription.refresh_from_db()
            try:
                with reporter.phase(f"push {subscription.server}"):
                    sent = push(spark, publication, subscription, pub, sides[subscription.pk], tolerance, purge)
                entry = summary["subscribers"].setdefault(subscription.server, {})
                entry.update({"pushed": sent.pushed, "waiting": sent.waiting})
                SnapshotSubscription.objects.filter(pk=subscription.pk).update(
                    last_sync_at=timezone.now(), last_error=""
                )
            except (BidirError, pyodbc.Error) as exc:
                if is_retryable(exc):
                    raise  # a network fault: the job runs again from its start (core.jobs.execute)
                message = error_message(exc)
                errors.append(f"push to {subscription.server}: {message}")
                SnapshotSubscription.objects.filter(pk=subscription.pk).update(last_error=message)
    now = timezone.now()
    SnapshotPublication.objects.filter(pk=publication.pk).update(
        last_ts=now, last_sync_at=now, last_sync_error="; ".join(errors)
    )
    alerts.safely_send_notifications()  # the conflicts it decided go out now, not at the next round
    if errors:
        raise BidirError("; ".join(errors))
    reporter.progress(1, 1, "synchronised " + ", ".join(s.server for s in subscriptions) if subscriptions else "")
    summary["conflicts"] = sum(v.get("conflicts", 0) for v in summary["subscribers"].values())
    return summary


def purge_replay_logs(publication: SnapshotPublication, subscription: SnapshotSubscription, server: Server) -> int:
    offset = RegistryEntry.get_int("snp_repl_purge_offset")
    assert publication.server is not None
    pub_table = publisher_table(publication)
    layout = sql.Layout.of(pub_table)
    pub, sub = (
        Side.of(publication.server, pub_table, layout),
        Side.of(server, subscriber_table(publication, server), layout),
    )
    deleted = 0
    if subscription.last_push_ts is not None:
        before = naive_utc(subscription.last_push_ts) - timedelta(minutes=offset)
        purge = sql.rplog_purge_sql(
            sub.d, rplog(publication, sub.d), sub.table.schema, pub.server.name, server.name, before
        )
        with connections.connect(server) as conn:
            deleted += max(conn.cursor().execute(purge).rowcount, 0)
    with connections.connect(server, readonly=True) as conn:
        oldest = (
            conn.cursor()
            .execute(f"SELECT MIN({sub.d.quote('SNAPTIME')}) FROM {sub.qualify(rlog_name(sub.table.name))}")
            .fetchone()[0]
        )
    pending_from = naive_utc(aware(oldest)) if oldest is not None else server_now(server)
    before = pending_from - timedelta(minutes=offset)
    purge = sql.rplog_purge_sql(
        pub.d, rplog(publication, pub.d), pub.table.schema, server.name, pub.server.name, before
    )
    with connections.connect(publication.server) as conn:
        deleted += max(conn.cursor().execute(purge).rowcount, 0)
    return deleted


# --- re-applying a losing version ----------------------------------------------------------------------


def reapply_losing_version(backup: ConflictBackup) -> str:
    """Write the losing version onto the publisher as a new change of the publisher's own; the next sync
    sends it to every subscriber. A losing delete deletes the row."""
    publication = SnapshotPublication.objects.select_related("server").filter(item=backup.item).first()
    if publication is None or publication.server is None:
        raise BidirError(f"the publication {backup.item} no longer exists")
    pub_table = publisher_table(publication)
    layout = sql.Layout.of(pub_table)
    side = Side.of(publication.server, pub_table, layout)
    d = side.d
    q = d.quote
    dst = side.qualify(pub_table.name)
    loser = backup.losing_row
    keys = backup.primary_key or {}
    where = " AND ".join(f"{q(k.dest)} = ?" for k in side.layout.keys)
    key_values = [bind_value(_from_json(keys.get(k.dest)), k.logical, d.name) for k in side.layout.keys]
    with transaction.atomic(), connections.connect(publication.server, autocommit=False) as conn:
        cursor = conn.cursor()
        if not loser or (backup.operation == "D" and backup.decision in (3, 5)):
            cursor.execute(f"DELETE FROM {dst} WHERE {where}", key_values)
            message = f"deleted {keys} on {publication.server.name}"
        else:
            values = [v for v in side.layout.values if v.dest != side.layout.guid.dest]
            data = [bind_value(_from_json(loser.get(v.dest)), v.logical, d.name) for v in values]
            guid = new_guid(publication.server.name)
            sets = ", ".join(f"{q(v.dest)} = ?" for v in values) + f", {q(side.layout.guid.dest)} = ?"
            cursor.execute(f"UPDATE {dst} SET {sets} WHERE {where}", [*data, guid, *key_values])
            if cursor.rowcount == 0:
                columns = [*side.layout.keys, *values]
                names = ", ".join(q(m.dest) for m in columns) + f", {q(side.layout.guid.dest)}"
                marks = ", ".join("?" for _ in columns) + ", ?"
                cursor.execute(f"INSERT INTO {dst} ({names}) VALUES ({marks})", [*key_values, *data, guid])
            message = f"wrote the losing version of {keys} on {publication.server.name}; the next sync sends it on"
        conn.commit()
        ConflictBackup.objects.filter(pk=backup.pk).update(reapplied_at=timezone.now())
    return message

"""Compare actions: start a compare of two tables or of a snapshot's destination with its source query, compare
again, and repair the keys chosen among a compare's listed differences (audited, a refusal too)."""

from __future__ import annotations

import logging

from replication_admin.bidir.actions import BidirError
from replication_admin.compare import validation
from replication_admin.compare.key_repair import RepairRefused, destination_of
from replication_admin.compare.runs import Compare, CompareParams, RepairKeys, RepairKeysParams
from replication_admin.compare.selectors import compared_rows
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.jobs import do_start_job
from replication_admin.core.permissions import OPERATE
from replication_admin.engine.statements import quote_name
from replication_admin.models import AuditEntry, JobRun, ReplSubscriber, Server, Snapshot, SnapshotSubscription
from replication_admin.snapshots import actions as snapshots
from replication_admin.snapshots.actions import SnapshotError
from replication_admin.transactional import selectors as trx

log = logging.getLogger(__name__)
SCHEDULER = Actor.scheduler()


def table_label(server: str, table: str) -> str:
    """server.table as statements write it (the table quoted when its name needs it): demo."Order Lines"."""
    return f"{server}.{quote_name(table)}"


def snapshot_source_label(snapshot: Snapshot) -> str:
    if snapshot.source_table:
        return table_label(snapshot.source_server_id or "", snapshot.source_table)
    return f"{snapshot.source_server_id} (query of {snapshot.name})"


def do_start_compare(actor: Actor, left: Server, left_table: str, right: Server, right_table: str) -> JobRun:
    target = f"{table_label(left.name, left_table)} ↔ {table_label(right.name, right_table)}"
    params = CompareParams(
        left_server=left.name, left_table=left_table, right_server=right.name, right_table=right_table
    )
    return do_start_job(actor, Compare, target, params)


def do_compare_snapshot(actor: Actor, snapshot: Snapshot, sync: bool | None = None) -> JobRun:
    """Compare a snapshot's destination with its source query."""
    params = CompareParams(
        snapshot=snapshot.name,
        left_server=snapshot.source_server_id,
        right_server=snapshot.dest_server_id,
        right_table=snapshot.dest_table,
    )
    target = f"{snapshot_source_label(snapshot)} ↔ {table_label(snapshot.dest_server_id, snapshot.dest_table)}"
    return do_start_job(actor, Compare, target, params, sync=sync)


def _compare_params(job: JobRun) -> CompareParams:
    return CompareParams.from_json(job.params)


def do_compare_again(actor: Actor, job: JobRun, sync: bool | None = None) -> JobRun:
    """The same compare (the same tables, or the same snapshot) as a new job: after a repair, the keys repaired are
    gone from its differences."""
    require(actor, OPERATE, f"job.{Compare.kind}", job.target)
    params = _compare_params(job)  # a repair's parameters hold its compare's
    compared = job
    if job.kind == RepairKeys.kind:
        compared = JobRun.objects.filter(pk=RepairKeysParams.from_json(job.params).compare_job).first() or job
    return do_start_job(actor, Compare, compared.target, params, sync=sync)


def do_repair_keys(actor: Actor, job: JobRun, chosen: list[int], sync: bool | None = None) -> JobRun:
    """Repair the keys of a compare's listed rows at the positions `chosen`: the destination's row of each becomes
    the source's current row (inserted or updated), or is deleted when the source has no such key. One destination
    transaction, run as a job; audited with the keys, a refusal too. ValueError when a chosen row is not listed."""
    require(actor, OPERATE, f"job.{RepairKeys.kind}", f"repair keys: {job.target}")
    rows = compared_rows(job, chosen)
    keys = [list(row.key.values()) for row in rows]
    target = f"repair {len(keys)} key(s): {job.target}"
    params = _compare_params(job)
    right = Server.objects.filter(name=params.right_server).first()
    try:
        if right is None:
            raise RepairRefused(f"server {params.right_server!r} is not registered")
        destination_of(right, params.right_table)
    except RepairRefused as exc:
        detail = {"error": str(exc), "compare_job": job.pk, "keys": keys}
        record(actor, f"job.{RepairKeys.kind}", target, AuditEntry.Outcome.ERROR, detail)
        raise
    # Each side's row is found by the key as that side stored it (None where it had no row).
    repair = RepairKeysParams(
        **params.as_json(), compare_job=job.pk, keys=keys, left_keys=[row.left_key for row in rows],
        right_keys=[row.right_key for row in rows],
    )  # fmt: skip
    return do_start_job(actor, RepairKeys, target, repair, sync=sync)


def do_validate(actor: Actor, sub: ReplSubscriber, table: str | None = None, sync: bool | None = None) -> list[JobRun]:
    """Validate the subscription's published tables now (or the one `table` names): a `trx_validate` job each
    (compare/validation.py). A refusal (not copied yet, not a published table) is audited and raised as TrxError."""
    target = sub.label
    require(actor, OPERATE, f"job.{validation.TrxValidate.kind}", target)
    try:
        if sub.init_state != "done":
            raise trx.TrxError(f"{sub.subscriber} has no initial copy of {sub.server}/{sub.account} yet")
        tables = [trx.validated_table(sub, table)] if table else trx.validated_tables(sub)
        if not tables:
            raise trx.TrxError(f"{sub.server}/{sub.account} publishes no table")
    except trx.TrxError as exc:
        record(actor, f"job.{validation.TrxValidate.kind}", target, AuditEntry.Outcome.ERROR,
               {"error": str(exc), "table": table})  # fmt: skip
        raise
    return [
        do_start_job(actor, validation.TrxValidate, validation.item_target(sub, name),
                     validation.validation_params(sub, name), sync=sync)
        for name in tables
    ]  # fmt: skip


def do_validate_bidir(actor: Actor, subscription: SnapshotSubscription, sync: bool | None = None) -> JobRun:
    """Validate a bi-directional subscription's table now: a `bidir_validate` job (compare/validation.py), which
    syncs the publication itself when the first compare finds differences. A subscription not copied yet is
    refused in one line (audited) as BidirError."""
    label = validation.bidir.subscription_label(subscription)
    require(actor, OPERATE, f"job.{validation.BidirValidate.kind}", label)
    table = validation.bidir_table(subscription)
    try:
        if not table:
            raise BidirError(f"{subscription.item} is no longer published")
        if subscription.init_state != "done":
            raise BidirError(
                f"{subscription.server} has no initial copy of {subscription.item} yet (REPL_INIT_SNAPSHOT)"
            )
    except BidirError as exc:
        record(actor, f"job.{validation.BidirValidate.kind}", label, AuditEntry.Outcome.ERROR, {"error": str(exc)})
        raise
    return do_start_job(actor, validation.BidirValidate, validation.bidir_target(subscription, table),
                        validation.bidir_validation_params(subscription), sync=sync)  # fmt: skip


def do_validate_snapshot(actor: Actor, snapshot: Snapshot, sync: bool | None = None) -> JobRun:
    """Validate an incremental snapshot now: a `snapshot_validate` job (compare/validation.py), which refreshes it
    incrementally when the first compare finds differences. A snapshot that cannot be validated (not incremental,
    no snapshot log, never refreshed) is refused in one line (audited) as SnapshotError."""
    target = validation.snapshot_target(snapshot)
    require(actor, OPERATE, f"job.{validation.SnapshotValidate.kind}", target)
    why_not = snapshots.validatable(snapshot)
    if why_not:
        record(actor, f"job.{validation.SnapshotValidate.kind}", target, AuditEntry.Outcome.ERROR, {"error": why_not})
        raise SnapshotError(why_not)
    return do_start_job(actor, validation.SnapshotValidate, target, validation.snapshot_validation_params(snapshot),
                        sync=sync)  # fmt: skip


def start_due_validations() -> list[JobRun]:
    """The scheduler's round: a validation of each table whose subscription's interval has passed since its last."""
    started = []
    for sub, table in validation.due_tables():
        started += do_validate(SCHEDULER, sub, table)
    for subscription in validation.due_bidir():
        started.append(do_validate_bidir(SCHEDULER, subscription))
    for snapshot in validation.due_snapshots():
        started.append(do_validate_snapshot(SCHEDULER, snapshot))
    return started


def safely_start_due_validations() -> None:
    try:
        start_due_validations()
    except Exception:  # a server that cannot be read now is validated at a later round
        log.exception("scheduled validations could not be started; the next round tries again")

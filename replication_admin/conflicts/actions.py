"""Conflict resolvers of bi-directional snapshot (and transactional) publications: add, edit, move,
remove, and dry runs that decide recorded conflicts again with a saved or proposed chain."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from replication_admin.bidir import actions as bidir_actions
from replication_admin.conflicts.chains import (
    DRY_RUN_LIMIT,
    ConflictError,
    proposed_params,
    proposed_spec,
    table_columns,
)
from replication_admin.conflicts.runs import DryRunParams, ResolverDryRun
from replication_admin.conflicts.selectors import WAITING_FOR_A_PERSON
from replication_admin.core import connections
from replication_admin.core.alerts import safely_resolve
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.conflicts import HELD_ALERT, held_target, resolver_chain
from replication_admin.core.errors import ReplicationError
from replication_admin.core.jobs import do_start_job
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.engine.resolvers import (
    CUSTOM,
    ResolverError,
    check_conflict_type,
    find_column,
    generated_resolver,
    resolver_class,
    resolver_proc_name,
    validate_assignments,
    validate_expression,
)
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    RegistryEntry,
    Server,
    SnapshotConflictResolver,
    TransactionalConflictResolver,
)
from replication_admin.transactional import actions as trx_actions

log = logging.getLogger(__name__)
ORDER_STEP = 10


def _failed(actor: Actor, action: str, target: str, error: Exception) -> None:
    record(actor, action, target, AuditEntry.Outcome.ERROR, {"error": str(error)})


def _is_transactional(model) -> bool:
    return issubclass(model, TransactionalConflictResolver)


def _notify(notify: str | None) -> str:
    notify = (notify or "").strip()
    if notify:
        try:
            validate_email(notify)
        except ValidationError:
            raise ResolverError(f"{notify!r} is not an e-mail address") from None
    return notify


def _next_order(model, table_name: str, cr_type: str) -> int:
    last = model.objects.filter(table_name=table_name, type=cr_type).aggregate(last=Max("order"))["last"]
    return ORDER_STEP if last is None else last + ORDER_STEP


def _suffix(model, table_name: str, cr_type: str, cls: str, column: str | None) -> str:
    """A free suffix made of the class and column: min_price, min_price_2, ..."""
    base = cls if not column else f"{cls}_{column}"
    base = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in base)[:34] or cls
    taken = set(model.objects.filter(table_name=table_name).values_list("proc", flat=True))
    suffix, n = base, 1
    while resolver_proc_name(table_name, cr_type, suffix) in taken:
        n += 1
        suffix = f"{base}_{n}"
    return suffix


def _definition(
    cls: str,
    cr_type: str,
    column: str | None,
    expression: str | None,
    assignments: dict | None,
    columns,
    transactional: bool,
) -> tuple[str, str, dict[str, str], str]:
    """(class, expression, assignments, column) of a new resolver, checked."""
    spec = resolver_class(cls)
    cls = spec.name
    if spec.written:
        if not expression or not str(expression).strip():
            raise ResolverError(f"a {cls} resolver needs an expression returning the code")
        checked = validate_expression(expression, columns, cr_type)
        return cls, checked, validate_assignments(assignments or {}, columns, cr_type), ""
    if (expression and str(expression).strip()) or assignments:
        raise ResolverError(f"the {cls} class makes its own expression; choose {CUSTOM} to write one")
    generated, generated_assignments = generated_resolver(cls, cr_type, column, columns, transactional)
    used_column = ""
    if spec.needs_column:
        found = find_column(columns, column or "")
        used_column = found.name if found else (column or "")
    return cls, generated, generated_assignments, used_column


def do_add_resolver(
    actor: Actor,
    table_name: str,
    columns,
    cr_type: str,
    cls: str,
    order: int | None = None,
    column: str | None = None,
    expression: str | None = None,
    assignments: dict | None = None,
    notify: str = "",
    suffix: str | None = None,
    model=SnapshotConflictResolver,
):
    """REPL_ADD_SNAPSHOT_CR / REPL_ADD_CR: a resolver of a generated class, or a custom expression."""
    target = f"{table_name} {cr_type}"
    require(actor, EDIT, "resolver.add", target)
    try:
        check_conflict_type(cr_type)
        columns = list(columns)
        if not columns:
            raise ResolverError(f"the columns of {table_name} are unknown")
        cls, checked, checked_assignments, used_column = _definition(
            cls, cr_type, column, expression, assignments, columns, _is_transactional(model)
        )
        notify = _notify(notify)
        if order is not None and not isinstance(order, int):
            raise ResolverError(f"the order must be a whole number, not {order!r}")
        with transaction.atomic():
            if suffix is None or suffix == "":
                suffix = _suffix(model, table_name, cr_type, cls, used_column)
            proc = resolver_proc_name(table_name, cr_type, suffix)
            if model.objects.filter(table_name=table_name, proc=proc).exists():
                raise ResolverError(f"{table_name} already has a resolver named {proc}; choose another suffix")
            resolver = model.objects.create(
                table_name=table_name,
                type=cr_type,
                proc=proc,
                order=_next_order(model, table_name, cr_type) if order is None else order,
                resolver_class=cls,
                column=used_column,
                expression=checked,
                assignments=checked_assignments,
                notify=notify,
            )
            record(
                actor,
                "resolver.add",
                f"{table_name} {proc}",
                detail={
                    "type": cr_type,
                    "class": cls,
                    "order": resolver.order,
                    "column": used_column,
                    "expression": checked,
                    "assignments": checked_assignments,
                    "notify": notify,
                },
            )
    except ResolverError as exc:
        _failed(actor, "resolver.add", target, exc)
        raise ConflictError(str(exc)) from None
    return resolver


def do_update_resolver(actor: Actor, resolver, expression: str, assignments: dict | None, notify: str, columns):
    """Edit a resolver's expression, assignments and e-mail. An edited generated resolver becomes custom."""
    target = f"{resolver.table_name} {resolver.proc}"
    require(actor, EDIT, "resolver.update", target)
    try:
        columns = list(columns)
        if not columns:
            raise ResolverError(f"the columns of {resolver.table_name} are unknown")
        checked = validate_expression(expression, columns, resolver.type)
        checked_assignments = validate_assignments(assignments or {}, columns, resolver.type)
        notify = _notify(notify)
    except ResolverError as exc:
        _failed(actor, "resolver.update", target, exc)
        raise ConflictError(str(exc)) from None
    before = {"expression": resolver.expression, "assignments": resolver.assignments, "notify": resolver.notify}
    changed = checked != resolver.expression or checked_assignments != (resolver.assignments or {})
    with transaction.atomic():
        resolver.expression = checked
        resolver.assignments = checked_assignments
        resolver.notify = notify
        if changed and resolver.resolver_class != CUSTOM:
            resolver.resolver_class = CUSTOM
            resolver.column = ""
        resolver.save(update_fields=["expression", "assignments", "notify", "resolver_class", "column"])
        record(
            actor,
            "resolver.update",
            target,
            detail={
                "before": before,
                "after": {"expression": checked, "assignments": checked_assignments, "notify": notify},
            },
        )
    return resolver


def _siblings(resolver) -> list:
    model = type(resolver)
    return list(
        model.objects.select_for_update()
        .filter(table_name=resolver.table_name, type=resolver.type)
        .order_by("order", "id")
    )


def do_move_resolver(actor: Actor, resolver, direction: str):
    """Swap a resolver with its neighbour in its chain (same table and type). Orders that tie are first
    renumbered 10, 20, 30 ... in the current order, so that the swap always changes the sequence."""
    target = f"{resolver.table_name} {resolver.proc}"
    require(actor, EDIT, "resolver.move", target)
    if direction not in ("up", "down"):
        error = ResolverError(f"direction must be up or down, not {direction!r}")
        _failed(actor, "resolver.move", target, error)
        raise ConflictError(str(error))
    model = type(resolver)
    with transaction.atomic():
        chain = _siblings(resolver)
        position = next((i for i, r in enumerate(chain) if r.pk == resolver.pk), None)
        if position is None:
            raise ConflictError(f"resolver {resolver.proc} no longer exists")
        other = position - 1 if direction == "up" else position + 1
        if other < 0 or other >= len(chain):
            return model.objects.get(pk=resolver.pk)
        orders = [r.order for r in chain]
        if len(set(orders)) != len(orders):
            for i, r in enumerate(chain):
                r.order = ORDER_STEP * (i + 1)
        chain[position].order, chain[other].order = chain[other].order, chain[position].order
        before = dict(zip([r.proc for r in chain], orders, strict=True))
        for r in chain:
            model.objects.filter(pk=r.pk).update(order=r.order)
        record(
            actor,
            "resolver.move",
            target,
            detail={"direction": direction, "before": before, "after": {r.proc: r.order for r in chain}},
        )
    return model.objects.get(pk=resolver.pk)


def do_remove_resolver(actor: Actor, resolver) -> str:
    target = f"{resolver.table_name} {resolver.proc}"
    require(actor, EDIT, "resolver.remove", target)
    with transaction.atomic():
        detail = {
            "type": resolver.type,
            "order": resolver.order,
            "class": resolver.resolver_class,
            "expression": resolver.expression,
            "assignments": resolver.assignments,
        }
        type(resolver).objects.filter(pk=resolver.pk).delete()
        record(actor, "resolver.remove", target, detail=detail)
    return f"removed {resolver.proc} from {resolver.table_name}"


# --- dry runs ------------------------------------------------------------------------------------------


def do_start_dry_run(
    actor: Actor, item: str, server, table: str, proposed=None, sync: bool | None = None, kind: str = "snapshot"
) -> JobRun:
    """Queue a dry run: the latest recorded conflicts of `item` decided again by its chain (`kind`: the
    bi-directional chain, SYS_SNAPSHOT_CR, or the transactional one, SYS_REPL_CR), with `proposed` (an unsaved
    resolver, or an edited one with its id) in it."""
    server_name = server.name if isinstance(server, Server) else str(server)
    model = TransactionalConflictResolver if kind == "transactional" else SnapshotConflictResolver
    proposal = proposed_params(proposed)
    if proposal is not None:
        require(actor, OPERATE, "job.resolver_dry_run", f"{item} resolvers")
        try:
            server_row = server if isinstance(server, Server) else Server.objects.get(name=server_name)
            columns = table_columns(server_row, table)
            proposed_spec(proposal, resolver_chain(item, model), columns)
        except Server.DoesNotExist:
            raise ConflictError(f"server {server_name!r} is not registered") from None
        except (ResolverError, connections.ConnectionFailed) as exc:
            raise ConflictError(str(exc)) from None
    params = DryRunParams(item=item, server=server_name, table=table, limit=DRY_RUN_LIMIT, proposed=proposal, kind=kind)
    return do_start_job(actor, ResolverDryRun, f"{item} resolvers", params, perm=OPERATE, sync=sync)


def check_definition(cls: str, cr_type: str, column: str | None, columns, transactional: bool) -> None:
    """Raise ResolverError when a standard resolver of `cls` cannot be made for these columns (the setup
    wizard checks its choices before anything is created)."""
    _definition(cls, cr_type, column, None, None, columns, transactional)


def free_suffix(model, table_name: str, cr_type: str, cls: str, column: str | None) -> str:
    return _suffix(model, table_name, cr_type, cls, column)


def do_reapply_conflict(actor: Actor, backup: ConflictBackup) -> str:
    target = f"conflict #{backup.pk} ({backup.item})"
    require(actor, OPERATE, "conflict.reapply", target)
    if backup.reapplied_at is not None:
        raise ConflictError(f"conflict #{backup.pk} was already re-applied on {backup.reapplied_at:%Y-%m-%d %H:%M}")
    try:
        if backup.kind == "transactional":
            message = trx_actions.reapply_losing_version(backup)
        else:
            message = bidir_actions.reapply_losing_version(backup)
    except ReplicationError as exc:
        _failed(actor, "conflict.reapply", target, exc)
        raise
    ConflictBackup.objects.filter(pk=backup.pk).update(reapplied_by=actor.username)
    record(actor, "conflict.reapply", target, detail={"message": message})
    return message


def is_held(backup: ConflictBackup) -> bool:
    """Held for a person (decision 4) and not decided yet: only do_decide_held settles it."""
    return backup.decision == ConflictBackup.HELD and backup.chosen is None


def do_dismiss_conflict(actor: Actor, backup: ConflictBackup) -> str:
    """Mark a conflict seen and handled without applying its losing version; it stays for the record (and may
    still be re-applied). A held conflict is not dismissed: it waits for a person's pick (do_decide_held)."""
    target = f"conflict #{backup.pk} ({backup.item})"
    require(actor, OPERATE, "conflict.dismiss", target)
    if is_held(backup):
        error = ConflictError(f"conflict #{backup.pk} is held: pick its version on its page instead")
        _failed(actor, "conflict.dismiss", target, error)
        raise error
    if backup.reapplied_at is not None:
        error = ConflictError(f"conflict #{backup.pk} was re-applied; there is nothing left to dismiss")
        _failed(actor, "conflict.dismiss", target, error)
        raise error
    with transaction.atomic():
        dismissed = ConflictBackup.objects.filter(pk=backup.pk, dismissed_at__isnull=True).update(
            dismissed_at=timezone.now(), dismissed_by=actor.username
        )
        record(actor, "conflict.dismiss", target, detail={"already": not dismissed})
    return f"conflict #{backup.pk} dismissed" if dismissed else f"conflict #{backup.pk} was already dismissed"


BULK_ACTIONS = {"reapply": "re-apply", "dismiss": "dismiss"}
BULK_LIMIT = 500  # conflicts handled by one confirmation


@dataclass
class BulkOutcome:
    done: list[tuple[int, str]] = field(default_factory=list)
    failed: list[tuple[int, str]] = field(default_factory=list)
    left_out: list[tuple[int, str]] = field(default_factory=list)


def bulk_left_out(backup: ConflictBackup, action: str) -> str | None:
    """Why a bulk `action` leaves this conflict alone (None: it acts on it)."""
    if is_held(backup):
        return "held for a person: pick its version on its page"
    if backup.reapplied_at is not None:
        return "already re-applied"
    if action == "dismiss" and backup.dismissed_at is not None:
        return "already dismissed"
    return None


def do_bulk_conflicts(actor: Actor, action: str, ids: list[int]) -> BulkOutcome:
    """Re-apply or dismiss the chosen conflicts, each through the action its own page uses (its own transaction
    and audit row, so one that fails leaves the others done), plus one audit row listing what was done."""
    if action not in BULK_ACTIONS:
        raise ConflictError(f"unknown bulk action {action!r}")
    summary = f"conflict.bulk_{action}"
    require(actor, OPERATE, summary, f"{len(ids)} conflict(s)")
    if len(ids) > BULK_LIMIT:
        error = ConflictError(f"at most {BULK_LIMIT} conflicts at once; narrow the filter")
        _failed(actor, summary, f"{len(ids)} conflict(s)", error)
        raise error
    outcome = BulkOutcome()
    single = do_reapply_conflict if action == "reapply" else do_dismiss_conflict
    for backup in ConflictBackup.objects.filter(pk__in=ids).order_by("pk"):
        reason = bulk_left_out(backup, action)
        if reason is not None:
            outcome.left_out.append((backup.pk, reason))
            continue
        try:
            outcome.done.append((backup.pk, single(actor, backup)))
        except ReplicationError as exc:
            outcome.failed.append((backup.pk, str(exc)))
    record(
        actor, summary, f"{len(ids)} conflict(s)",
        AuditEntry.Outcome.OK if not outcome.failed else AuditEntry.Outcome.ERROR,
        {"done": [pk for pk, _ in outcome.done], "failed": dict(outcome.failed), "left_out": dict(outcome.left_out)},
    )  # fmt: skip
    return outcome


def _edited_row(backup: ConflictBackup, edited: dict[str, str]) -> dict:
    """The edited version's values (the form's texts) typed as the rows in the conflict hold them."""
    key = set(backup.primary_key or {})
    samples = {**(backup.incoming_row or {}), **(backup.publisher_row or {})}
    row: dict = {}
    for name in backup.columns:
        if name in key or name.upper() == "ROWGUID" or name not in edited:
            continue
        text, sample = edited[name], samples.get(name)
        if isinstance(sample, bool):
            row[name] = text.strip().lower() in {"1", "true", "t", "yes", "on"}
        elif isinstance(sample, int | float) and text.strip() == "":
            row[name] = None
        elif isinstance(sample, int):
            try:
                row[name] = int(text)
            except ValueError:
                raise ConflictError(f"column {name}: {text!r} is not a whole number") from None
        elif isinstance(sample, float):
            try:
                row[name] = float(text)
            except ValueError:
                raise ConflictError(f"column {name}: {text!r} is not a number") from None
        else:
            row[name] = text
    return row


def do_decide_held(actor: Actor, backup: ConflictBackup, choice: int, edited: dict[str, str] | None = None) -> str:
    """A person picks the version of a held conflict: the publisher's, the subscriber's, or an edited one. The
    row then replicates to every copy (transactional: written on the publisher now; bi-directional: by the
    sync queued now)."""
    target = f"conflict #{backup.pk} ({backup.item})"
    require(actor, OPERATE, "conflict.decide", target)
    try:
        if backup.decision != ConflictBackup.HELD:
            raise ConflictError(f"conflict #{backup.pk} is not held: it was decided ({backup.get_decision_display()})")
        if backup.chosen is not None:
            raise ConflictError(
                f"conflict #{backup.pk}: {backup.decided_by} picked {backup.get_chosen_display()}; the next sync "
                "carries it out"
            )
        if choice not in dict(ConflictBackup.CHOICES):
            raise ConflictError("pick the publisher's version (3), the subscriber's (1) or an edited one (2)")
        row = _edited_row(backup, edited or {}) if choice == 2 else None
        if backup.kind == "transactional":
            message = trx_actions.choose_held_version(actor, backup, choice, row)
        else:
            message = bidir_actions.choose_held_version(actor, backup, choice, row)
    except ReplicationError as exc:
        _failed(actor, "conflict.decide", target, exc)
        raise
    record(actor, "conflict.decide", target, detail={"choice": choice, "edited": row, "message": message})
    still = ConflictBackup.objects.filter(
        item=backup.item, source=backup.source, decision=ConflictBackup.HELD, chosen=None
    ).exists()
    if not still:
        safely_resolve(HELD_ALERT, held_target(backup.item, backup.source), f"decided by {actor.username}")
    return message


# --- retention of conflict backups ------------------------------------------------------------------------

RETENTION_KEY = "conflict_retention_days"
MAX_RETENTION_DAYS = 36_500
PURGE_BATCH = 5_000  # backups deleted per statement: a long purge never holds the catalog for long
PURGE_EVERY = 3_600.0  # seconds between two purges by one scheduler
_last_purge = {"at": float("-inf")}


def retention_days() -> int:
    return RegistryEntry.get_int(RETENTION_KEY)


@transaction.atomic(durable=True)
def do_set_conflict_retention(actor: Actor, days: int) -> str:
    """How many days decided conflicts' backups are kept (0: for ever); the scheduler purges older ones hourly."""
    require(actor, EDIT, "conflict.retention", str(days))
    if not 0 <= days <= MAX_RETENTION_DAYS:
        raise ReplicationError(f"the retention must be 0 (keep every backup) to {MAX_RETENTION_DAYS} days, not {days}")
    RegistryEntry.objects.update_or_create(key=RETENTION_KEY, defaults={"value": str(days)})
    record(actor, "conflict.retention", str(days), detail={"days": days})
    return f"Decided conflicts are kept {days} days" if days else "Every conflict backup is kept"


def expired_conflicts(now: datetime, days: int) -> QuerySet[ConflictBackup]:
    """The backups past the retention: decided before the cutoff and not waiting for a person (a held
    conflict nobody has picked a version for stays, however old; a pending one belongs to a running sync)."""
    return ConflictBackup.objects.filter(created_at__lt=now - timedelta(days=days)).exclude(WAITING_FOR_A_PERSON)


def purge_expired_conflicts(now: datetime | None = None, actor: Actor | None = None) -> int:
    """Delete the backups past the retention (expired_conflicts), in batches; one audit row says how many."""
    days = retention_days()
    if days <= 0:
        return 0
    now = now or timezone.now()
    purged = 0
    while True:
        ids = list(expired_conflicts(now, days).order_by("id").values_list("id", flat=True)[:PURGE_BATCH])
        if not ids:
            break
        with transaction.atomic():
            purged += ConflictBackup.with_pending.filter(pk__in=ids).delete()[0]
    if purged:
        record(actor or Actor.scheduler(), "conflict.purge", f"{purged} backups", detail={"days": days,
               "purged": purged})  # fmt: skip
    return purged


def safely_purge_expired_conflicts() -> None:
    """The scheduler's hourly purge (at most once an hour per process); a failure waits for the next hour."""
    if time.monotonic() - _last_purge["at"] < PURGE_EVERY:
        return
    _last_purge["at"] = time.monotonic()
    try:
        purge_expired_conflicts()
    except Exception:
        log.exception("the purge of old conflict backups failed; it runs again within the hour")

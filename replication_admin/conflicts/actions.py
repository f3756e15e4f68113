"""Conflict resolvers of bi-directional snapshot (and transactional) publications: add, edit, move,
remove, and dry runs that decide recorded conflicts again with a saved or proposed chain."""

from __future__ import annotations

from dataclasses import asdict

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Max

from replication_admin.core import connections
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.jobs import do_start_job
from replication_admin.engine.resolvers import (
    CR_TYPES,
    CUSTOM,
    ResolverColumn,
    ResolverError,
    ResolverSpec,
    check_conflict_type,
    conflict_types_text,
    find_column,
    generated_resolver,
    resolver_class,
    resolver_proc_name,
    spark_type,
    validate_assignments,
    validate_expression,
)
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    Server,
    SnapshotConflictResolver,
    TransactionalConflictResolver,
)
from replication_admin.snapshots.shapes import SnapshotError

EDIT = "replication_admin.edit"
OPERATE = "replication_admin.operate"
ORDER_STEP = 10
DRY_RUN_LIMIT = 200
MAX_DRY_RUN_LIMIT = 5000


def _failed(actor: Actor, action: str, target: str, error: Exception) -> None:
    record(actor, action, target, AuditEntry.Outcome.ERROR, {"error": str(error)})


def _is_transactional(model) -> bool:
    return issubclass(model, TransactionalConflictResolver)


def table_columns(server: Server, table: str) -> list[ResolverColumn]:
    """The table's columns as resolvers see them (name, Spark type, part of the primary key)."""
    try:
        info = connections.describe_table(server, table)
    except connections.TableNotFound as exc:
        raise SnapshotError(str(exc)) from None
    return [ResolverColumn(c.name, spark_type(c.logical), bool(c.pk_position)) for c in info.columns]


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
        raise SnapshotError(str(exc)) from None
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
        raise SnapshotError(str(exc)) from None
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
        raise SnapshotError(str(error))
    model = type(resolver)
    with transaction.atomic():
        chain = _siblings(resolver)
        position = next((i for i, r in enumerate(chain) if r.pk == resolver.pk), None)
        if position is None:
            raise SnapshotError(f"resolver {resolver.proc} no longer exists")
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


def _spec(resolver) -> ResolverSpec:
    return ResolverSpec(
        id=resolver.pk,
        name=resolver.proc,
        cr_type=resolver.type,
        order=resolver.order,
        expression=resolver.expression or "0",
        assignments=dict(resolver.assignments or {}),
    )


def chain_for(table_name: str, model=SnapshotConflictResolver) -> list[ResolverSpec]:
    """Every resolver of the table (all types), in CR_ORDER then CR_ID order."""
    return [_spec(r) for r in model.objects.filter(table_name=table_name).order_by("order", "id")]


def conflict_input(backup: ConflictBackup) -> dict:
    """A recorded conflict as decide_rows takes it."""
    incoming = backup.incoming_row
    if incoming is None and isinstance(backup.primary_key, dict):
        incoming = dict(backup.primary_key)
    return {
        "key": backup.pk,
        "type": backup.conflict_type,
        "pub": backup.publisher_row,
        "new": incoming,
        "old": {"ROWGUID": backup.old_rowguid},
    }


# --- dry runs ------------------------------------------------------------------------------------------


def _proposed_params(proposed) -> dict | None:
    if proposed is None:
        return None
    if isinstance(proposed, ResolverSpec):
        data = asdict(proposed)
        return {
            "id": data["id"],
            "name": data["name"],
            "cr_type": data["cr_type"],
            "order": data["order"],
            "expression": data["expression"],
            "assignments": data["assignments"],
        }
    if not isinstance(proposed, dict):
        raise SnapshotError("a proposed resolver is a mapping of id, cr_type, order, expression, assignments")
    return dict(proposed)


def _proposed_spec(proposed: dict, saved: list[ResolverSpec], columns) -> ResolverSpec:
    """The proposed resolver, checked; it keeps the saved resolver's name when it replaces one."""
    cr_type = proposed.get("cr_type") or proposed.get("type")
    rid = proposed.get("id")
    replaced = next((s for s in saved if rid is not None and s.id == rid), None)
    if rid is not None and replaced is None:
        raise ResolverError(f"resolver {rid} does not exist for this table")
    if cr_type is None and replaced is not None:
        cr_type = replaced.cr_type
    if cr_type not in CR_TYPES:
        raise ResolverError(f"the proposed resolver's type must be {conflict_types_text(False)}, not {cr_type!r}")
    expression = validate_expression(proposed.get("expression") or "", columns, cr_type)
    assignments = validate_assignments(proposed.get("assignments") or {}, columns, cr_type)
    order = proposed.get("order")
    if order is None:
        order = replaced.order if replaced else max((s.order for s in saved if s.cr_type == cr_type), default=0) + 1
    name = replaced.name if replaced else (proposed.get("name") or "proposed")
    return ResolverSpec(rid, name, cr_type, int(order), expression, assignments)


def do_start_dry_run(actor: Actor, item: str, server, table: str, proposed=None, sync: bool | None = None) -> JobRun:
    """Queue a dry run: the latest recorded conflicts of `item` decided again by its chain, with `proposed`
    (an unsaved resolver, or an edited one with its id) in it."""
    server_name = server.name if isinstance(server, Server) else str(server)
    params = {"item": item, "server": server_name, "table": table, "limit": DRY_RUN_LIMIT}
    proposal = _proposed_params(proposed)
    if proposal is not None:
        require(actor, OPERATE, "job.resolver_dry_run", f"{item} resolvers")
        try:
            server_row = server if isinstance(server, Server) else Server.objects.get(name=server_name)
            columns = table_columns(server_row, table)
            _proposed_spec(proposal, chain_for(item), columns)
        except Server.DoesNotExist:
            raise SnapshotError(f"server {server_name!r} is not registered") from None
        except (ResolverError, connections.ConnectionFailed) as exc:
            raise SnapshotError(str(exc)) from None
        params["proposed"] = proposal
    return do_start_job(actor, "resolver_dry_run", f"{item} resolvers", params, perm=OPERATE, sync=sync)


def run_resolver_dry_run(job: JobRun, reporter) -> dict:
    """The job: decide the latest recorded conflicts of an item again, as a sync would now."""
    from jobs.session import get_spark
    from replication_admin.tasks import spark_config

    params = job.params or {}
    item = params.get("item") or ""
    model = TransactionalConflictResolver if params.get("kind") == "transactional" else SnapshotConflictResolver
    try:
        limit = max(1, min(int(params.get("limit") or DRY_RUN_LIMIT), MAX_DRY_RUN_LIMIT))
    except (TypeError, ValueError):
        raise SnapshotError(f"the limit must be a number, not {params.get('limit')!r}") from None
    with reporter.phase("introspect"):
        server = Server.objects.filter(name=params.get("server")).first()
        if server is None:
            raise SnapshotError(f"server {params.get('server')!r} is not registered")
        columns = table_columns(server, params.get("table") or "")
    chain = chain_for(item, model)
    try:
        if params.get("proposed"):
            proposed = _proposed_spec(params["proposed"], chain, columns)
            chain = [s for s in chain if proposed.id is None or s.id != proposed.id] + [proposed]
            reporter.log(f"trying {proposed.name} ({proposed.cr_type}, order {proposed.order}): {proposed.expression}")
    except ResolverError as exc:
        raise SnapshotError(str(exc)) from None
    kind = "transactional" if _is_transactional(model) else "snapshot"
    backups = list(ConflictBackup.objects.filter(item=item, kind=kind).order_by("-created_at", "-id")[:limit])
    reporter.log(f"{len(backups)} recorded conflict(s) of {item}, {len(chain)} resolver(s)")
    decided: list[dict] = []
    if backups:
        with reporter.phase("spark_session"):
            spark = get_spark(spark_config())
        from jobs.resolve import decide_rows

        with reporter.phase("spark_job"):
            try:
                decided = decide_rows(spark, [conflict_input(b) for b in backups], chain, columns)
            except ResolverError as exc:
                raise SnapshotError(str(exc)) from None
    rows = []
    for backup, decision in zip(backups, decided, strict=True):
        same = decision["decision"] == backup.decision
        rows.append(
            {
                "conflict": backup.pk,
                "type": backup.conflict_type,
                "recorded_decision": backup.decision,
                "recorded_resolver": backup.resolver,
                "decision": decision["decision"],
                "resolver": decision["resolver"],
                "resolver_id": decision["resolver_id"],
                "final": decision["final"],
                "note": decision["note"],
                "same": same,
            }
        )
    changed = sum(1 for r in rows if not r["same"])
    reporter.progress(len(rows), max(len(rows), 1), f"{changed} of {len(rows)} decision(s) would change")
    return {"rows": rows, "changed": changed, "conflicts": len(rows), "item": item}


def check_definition(cls: str, cr_type: str, column: str | None, columns, transactional: bool) -> None:
    """Raise ResolverError when a standard resolver of `cls` cannot be made for these columns (the setup
    wizard checks its choices before anything is created)."""
    _definition(cls, cr_type, column, None, None, columns, transactional)


def free_suffix(model, table_name: str, cr_type: str, cls: str, column: str | None) -> str:
    return _suffix(model, table_name, cr_type, cls, column)

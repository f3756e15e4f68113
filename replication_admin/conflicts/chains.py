"""Resolver chains as a dry run sees them: a table's columns, recorded conflicts as decide_rows input,
and proposed (unsaved or edited) resolvers checked against the saved chain."""

from __future__ import annotations

from dataclasses import asdict

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.engine.resolvers import (
    CR_TYPES,
    ResolverColumn,
    ResolverError,
    ResolverSpec,
    conflict_types_text,
    spark_type,
    validate_assignments,
    validate_expression,
)
from replication_admin.models import ConflictBackup, Server

DRY_RUN_LIMIT = 200
MAX_DRY_RUN_LIMIT = 5000


class ConflictError(ReplicationError):
    """A resolver or dry-run request that cannot be carried out; the message says why."""


def table_columns(server: Server, table: str) -> list[ResolverColumn]:
    """The table's columns as resolvers see them (name, Spark type, part of the primary key)."""
    try:
        info = connections.describe_table(server, table)
    except connections.TableNotFound as exc:
        raise ConflictError(str(exc)) from None
    return [ResolverColumn(c.name, spark_type(c.logical), bool(c.pk_position)) for c in info.columns]


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


def proposed_params(proposed) -> dict | None:
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
        raise ConflictError("a proposed resolver is a mapping of id, cr_type, order, expression, assignments")
    return dict(proposed)


def proposed_spec(proposed: dict, saved: list[ResolverSpec], columns) -> ResolverSpec:
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

"""Copies that follow their source table's schema changes (snapshot destinations, bi-directional subscribers):
the live table compared with the definition last followed, the changes between them, the DDL a copy runs, and
the record of it (docs/schema-changes.md). Transactional publications log their changes instead
(transactional.schema)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from replication_admin.core.audit import Actor, record
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import lookup_table, with_constraints
from replication_admin.core.transactions import run_each
from replication_admin.engine import dialects, schema_changes
from replication_admin.models import SchemaChange, Server


def live_definition(server: Server, table: str, constraints: bool = False) -> list[Any] | None:
    """The table's column rows as `server` has it now (None: no such table); with `constraints`, followed by its
    unique constraints and foreign keys (engine.schema_changes.definition_rows)."""
    info = lookup_table(server, table)
    if info is None:
        return None
    full, d = with_constraints(server, info), dialects.get(server.dialect)
    return schema_changes.definition_rows(full, d) if constraints else schema_changes.column_rows(full, d)


def changed_since(
    server: Server, table: str, known: list[list[Any]]
) -> tuple[list[list[Any]], list[schema_changes.Change]] | None:
    """The table's live definition and its changes since `known` (the definition a copy last followed), or None
    when the copy needs nothing: no such table (the job names it), or the same definition. An empty `known` takes
    the live one as its starting point (no changes): the caller stores the definition either way. A NOT NULL set
    is not one the copies follow: they follow before the refresh or sync moves the rows, and their old rows may
    still hold the NULLs the source has just replaced (a dropped one they follow: it refuses nothing)."""
    rows = live_definition(server, table)
    if rows is None or (known and schema_changes.digest(rows) == schema_changes.digest(known)):
        return None
    found = schema_changes.between(dialects.get(server.dialect), table, known, rows) if known else []
    return rows, [c for c in found if c.kind != schema_changes.SET_NOT_NULL]


def copy_ddl_for(copy: Server, table: str, found: Sequence[schema_changes.Change]) -> list[str]:
    """What brings `copy`'s table through `found` (what it has already, it keeps; nothing when it has no such
    table), or a ReplicationError naming a change it cannot take."""
    info = lookup_table(copy, table)
    if info is None or not found:
        return []
    try:
        d = dialects.get(copy.dialect)
        return [f"-- {line}" for line in schema_changes.left_out(d, found)] + schema_changes.copy_ddl(
            d, with_constraints(copy, info), found
        )
    except schema_changes.SchemaChangeError as exc:
        raise ReplicationError(f"{copy.name}.{table} cannot follow its source: {exc}") from None


def bring_copy(copy: Server, table: str, found: Sequence[schema_changes.Change]) -> list[str]:
    """Run on `copy` what brings its table through `found`; returns the DDL."""
    statements = copy_ddl_for(copy, table, found)
    run_each(copy, [s for s in statements if not s.startswith("-- ")])
    return statements


def record_followed(
    kind: str, source: Server, table: str, item: str, before: list[list[Any]], after: list[list[Any]],
    found: Sequence[schema_changes.Change], ddl: dict[str, list[str]],
) -> SchemaChange:  # fmt: skip
    """The change as applied (copies follow at once), with its audit entry, in one transaction."""
    with transaction.atomic():
        change = SchemaChange.objects.create(
            kind=kind, server=source.name, table=table, snapshot=item, state=SchemaChange.State.APPLIED,
            before=before, after=after, changes=[c.as_json() for c in found], detected_at=timezone.now(),
            decided_at=timezone.now(), decided_by="scheduler",
        )  # fmt: skip
        record(
            Actor.scheduler(), f"{kind}.schema_change", item,
            detail={"id": change.pk, "changes": [str(c) for c in found], "ddl": ddl},
        )  # fmt: skip
    return change

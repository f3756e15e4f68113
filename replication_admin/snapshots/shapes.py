"""A snapshot's source and name as statements write them."""

from __future__ import annotations

from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import require_table
from replication_admin.core.shapes import SourceShape, inc_shape, noninc_shape
from replication_admin.models import Server, Snapshot


class SnapshotError(ReplicationError):
    """A snapshot that cannot be created or refreshed as defined; the message says why."""


def drift_label(name: str) -> str:
    """What a validation of the snapshot `name` names it by (its alert's target begins with it)."""
    return f"snapshot {name}"


def drift_target(name: str, source_table: str) -> str:
    """The target of the snapshot's validations and of their drift alert, matched whole (a name or a table may
    hold ": ")."""
    return f"{drift_label(name)}: {source_table}"


def shape_of(snapshot: Snapshot) -> SourceShape:
    """The source side of an existing snapshot, checked again against today's source schema."""
    source = snapshot.source_server
    if source is None:
        raise SnapshotError(f"snapshot {snapshot.name} has no source server")
    if snapshot.is_incremental is not None:
        table = require_table(source, snapshot.source_table or "")
        return inc_shape(source, table, snapshot.source_columns or None, snapshot.condition or None)
    return noninc_shape(source, snapshot.query, frozenset(Server.objects.values_list("name", flat=True)))

"""Read queries of the snapshot feature for other features' pages and jobs."""

from __future__ import annotations

from replication_admin.engine.schema import TableInfo
from replication_admin.models import Server, Snapshot
from replication_admin.snapshots.shapes import SnapshotError, shape_of


def snapshot_source(name: str) -> tuple[Server, TableInfo, str]:
    """A snapshot's source query as a compare's left side: (server, virtual table of its output, query)."""
    snapshot = Snapshot.objects.select_related("source_server").filter(name=name).first()
    if snapshot is None:
        raise SnapshotError(f"snapshot {name} does not exist")
    shape = shape_of(snapshot)
    return shape.server, shape.as_table(f"query of {snapshot.name}"), shape.sql

"""An incremental snapshot follows its source table's schema changes: before a refresh the live table is compared
with the definition the snapshot last followed, and the destination gets the same ADD, DROP, RENAME COLUMN and
type changes (docs/schema-changes.md). The snapshot log records keys only, so its triggers are unaffected; the
refresh then copies the changed rows with their new columns."""

from __future__ import annotations

from replication_admin.core.errors import ReplicationError
from replication_admin.core.schema_follow import bring_copy, changed_since, record_followed
from replication_admin.engine import dialects, schema_changes
from replication_admin.engine.queries import QueryError, check_column_list
from replication_admin.models import SchemaChange, Snapshot
from replication_admin.snapshots.shapes import SnapshotError


def follow_source(snapshot: Snapshot, log) -> list[str]:
    """Bring `snapshot`'s destination through its source table's schema changes since the last refresh; returns
    the changes in words (none: nothing changed). `log` takes a line for the job's log."""
    source, dest = snapshot.source_server, snapshot.dest_server
    if snapshot.is_incremental is None or not snapshot.source_table or source is None or dest is None:
        return []
    seen = changed_since(source, snapshot.source_table, snapshot.definition)
    if seen is None:
        return []
    rows, found = seen
    if not found:
        Snapshot.objects.filter(pk=snapshot.pk).update(definition=rows)
        return []
    columns = snapshot.source_columns
    if columns:  # a chosen list: what it names follows, columns added to the table stay out
        before = schema_changes.table_from_rows(
            dialects.get(source.dialect), snapshot.source_table, snapshot.definition
        )
        try:
            names = [c.name for c in check_column_list(columns, before)]
        except QueryError:
            names = []
        chosen = {n.lower() for n in names}
        found = [c for c in found if c.kind != schema_changes.ADD and c.column.lower() in chosen]
        for change in found:
            at = next(i for i, n in enumerate(names) if n.lower() == change.column.lower())
            if change.kind == schema_changes.RENAME:
                names[at] = change.new_name
            elif change.kind == schema_changes.DROP:
                del names[at]
        columns = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
    try:
        statements = bring_copy(dest, snapshot.dest_table, found)
    except ReplicationError as exc:
        raise SnapshotError(str(exc)) from None
    if found:
        record_followed(
            SchemaChange.Kind.SNAPSHOT, source, snapshot.source_table, snapshot.name, snapshot.definition, rows,
            found, {dest.name: statements},
        )  # fmt: skip
    Snapshot.objects.filter(pk=snapshot.pk).update(definition=rows, source_columns=columns)
    snapshot.definition, snapshot.source_columns = rows, columns
    texts = [str(c) for c in found]
    for text in texts:
        log(f"the source table changed: {text}; the destination follows")
    return texts

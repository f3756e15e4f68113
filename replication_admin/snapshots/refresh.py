"""Refreshing a snapshot: a staging table on the destination is filled (a full copy as a native stream or on
Spark, core.native_copy.copy_table; a large log window on Spark), then one destination transaction applies it
(and records the replay log). Run by the `snapshot_refresh` job.

Full refresh: the destination's content is replaced atomically, by swapping in the filled staging
table (a rename, when nothing depends on the table) or by delete + insert in one transaction; a reader
sees the old or the new content, and an interrupted refresh leaves the old content.

An incremental snapshot's first refresh is a full one that also lists the log rows of the tolerance window
as replayed: the newest SNAPTIME is read by the control plane, the window's ids are copied like the rows, so
where the rows stream it starts no Spark at all.

Incremental refresh (Virtuoso's algorithm): log rows with SNAPTIME >= SN_LAST_TS - tolerance that
RPLOG does not list for this target are applied with the source rows as they are now, in batches that
never split a SNAPTIME, each batch in one transaction together with its RPLOG rows; SN_LAST_TS follows
each committed batch. Without a snapshot log, or before the first refresh, the refresh is a full one.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pyodbc
from django.conf import settings
from django.utils import timezone

from jobs import snapshot_refresh as spark_refresh
from jobs.repair import stage_repair
from replication_admin.core import connections, native_copy, spark_sizing
from replication_admin.core.alerts import resolve_alerts
from replication_admin.core.introspection import find_table, lookup_table, with_constraints
from replication_admin.core.locks import item_lock
from replication_admin.core.shapes import SourceShape, moved_columns
from replication_admin.core.spark import endpoint, spark_session
from replication_admin.core.times import aware, naive_utc
from replication_admin.core.transactions import run_each, run_in_transaction, scalar
from replication_admin.engine import dialects
from replication_admin.engine import refresh_sql as sql
from replication_admin.engine.compare import plan_compare, read_type
from replication_admin.engine.constraints import copy_table_ddl
from replication_admin.engine.refresh_sql import Moved
from replication_admin.engine.snapshot_log import rlog_name, rplog_ddl
from replication_admin.engine.values import bind_value
from replication_admin.models import JobRun, RegistryEntry, Server, Snapshot, SnapshotLog
from replication_admin.snapshots.shapes import SnapshotError, drift_target, shape_of
from replication_admin.snapshots.source_schema import follow_source


def _spark_safe(d, name: str) -> bool:
    # Spark quotes column names in its INSERT without escaping the quote character.
    return d.quote_char not in name


def snapshot_log_for(snapshot: Snapshot) -> SnapshotLog | None:
    if snapshot.source_server is None or not snapshot.source_table:
        return None
    return SnapshotLog.objects.filter(server=snapshot.source_server, table=snapshot.source_table).first()


def rlog_present(shape: SourceShape) -> bool:
    if shape.table is None:
        return False
    return find_table(shape.server, rlog_name(shape.table.name)) is not None


def ensure_rplog(dest: Server, log: SnapshotLog) -> None:
    run_each(
        dest, [rplog_ddl(dialects.get(dest.dialect), log.rplog, connections.table_schema(dest), if_not_exists=True)]
    )


def _snapshot_named(name: str) -> Snapshot:
    snapshot = Snapshot.objects.select_related("source_server", "dest_server").filter(name=name).first()
    if snapshot is None:
        raise SnapshotError(f"snapshot {name} does not exist")
    return snapshot


def _destination(snapshot: Snapshot, shape: SourceShape):
    """(server, dialect, schema, table's real name, its description, column moves) of a snapshot."""
    dest = snapshot.dest_server
    dest_info = lookup_table(dest, snapshot.dest_table)
    if dest_info is None:
        raise SnapshotError(f"destination {snapshot.dest_table!r} does not exist on {dest.name} (drop and recreate)")
    return (
        dest,
        dialects.get(dest.dialect),
        connections.table_schema(dest),
        dest_info.name,
        dest_info,
        moved_columns(shape, dest_info),
    )


# --- full refresh ----------------------------------------------------------------------------------------


def full_refresh(snapshot: Snapshot, shape: SourceShape, reporter) -> dict:
    dest, d, schema, real, dest_info, moved = _destination(snapshot, shape)
    src_d = dialects.get(shape.server.dialect)

    log = snapshot_log_for(snapshot) if snapshot.is_incremental is not None else None
    new_last_ts = None
    if log is not None and rlog_present(shape):
        # Read before copying: changes made during the copy are replayed by the next incremental run.
        assert shape.table is not None
        newest = scalar(shape.server, sql.max_snaptime_select(src_d, shape.table))
        new_last_ts = _parse_snaptime(newest) if newest is not None else naive_utc(timezone.now())
        ensure_rplog(dest, log)

    staging = sql.staging_name(d, real, "RSTG")
    old = sql.staging_name(d, real, "RSWP")
    guids = sql.staging_name(d, real, "RSRP")
    run_each(dest, [f"DROP TABLE IF EXISTS {d.qualify(t, schema)}" for t in (staging, old, guids)])
    if new_last_ts is not None:
        # Log rows of the tolerance window that this copy already reflects (it reads the source after
        # them) go into the replay log, so the next incremental refresh does not apply them again.
        assert shape.table is not None and log is not None
        since = new_last_ts - timedelta(minutes=RegistryEntry.get_int("snp_repl_tolerance_offset"))
        run_each(dest, [sql.guid_staging_ddl(d, guids, schema)])
        logged = tuple(Moved(n, n, n, t) for n, t in (("rowguid", sql.ROWGUID), ("snaptime", sql.TIMESTAMP)))
        with reporter.phase("log_guids"):
            native_copy.copy_table(
                native_copy.FullCopyPlan(
                    source=shape.server,
                    select_sql=sql.log_guids_select(src_d, shape.table, since),
                    moved=logged,
                    source_types={m.alias: m.logical for m in logged},
                    dest=dest,
                    staging_sql=d.qualify(guids, schema),
                    staging_columns=tuple(m.alias for m in logged),
                ),
                reporter,
            )
    dependents = int(scalar(dest, *sql.dependents_sql(d, real, schema)) or 0)
    swap = dependents == 0 and all(_spark_safe(d, c.name) for c in dest_info.columns)
    if swap:
        structural = sql.structural_copy_sql(d, real, schema, staging)
        # Without the server's own copy of a table's shape (SQLite), the staging table is made from the
        # destination's definition with its NOT NULLs, defaults and unique indexes: it takes the destination's place.
        copy = [structural] if structural else copy_table_ddl(d, staging, schema, with_constraints(dest, dest_info))
        staging_columns = tuple(m.dest for m in moved)
    else:
        copy = [sql.create_table_ddl(d, staging, schema, [(m.alias, m.logical) for m in moved], [])]
        staging_columns = tuple(m.alias for m in moved)
    run_each(dest, copy)
    # A swap's staging copy loads without its indexes and keys, which are built once the rows are in.
    deferred = d.deferred_indexes_sql() if swap else None
    rebuild: list[str] = []
    if deferred is not None:
        with connections.connect(dest, readonly=True) as conn:
            qualified = d.qualify(staging, schema)
            pairs = [tuple(r) for r in conn.cursor().execute(deferred, [qualified, qualified]).fetchall()]
        run_each(dest, [drop for drop, _ in pairs])
        rebuild = [build for _, build in pairs]
    reporter.progress(1, 4, f"copying into {staging} ({'swap' if swap else 'delete + insert'} afterwards)")

    plan = native_copy.FullCopyPlan.of_shape(shape, moved, dest, d.qualify(staging, schema), staging_columns)
    try:
        copied = native_copy.copy_table(plan, reporter, progress=reporter.spark_progress(1, 3, 4))
        rows, path = copied.rows, copied.path
        reporter.progress(3, 4, f"{rows} rows staged ({path}); replacing the content of {real}")
        if rebuild:
            with reporter.phase("index"):
                run_each(dest, rebuild)
        with reporter.phase("apply"):
            if swap:
                statements = sql.swap_sql(d, real, schema, staging, old)
                if d.atomic_rename_swap:
                    run_each(dest, statements[:1])  # RENAME TABLE swaps both names atomically
                    run_each(dest, statements[1:])
                    # The swapped-in table carries the statistics of the empty staging table; with them
                    # the optimizer scans the whole table for the next increment's key lookups.
                    run_each(dest, [f"ANALYZE TABLE {d.qualify(real)}"])
                else:
                    run_in_transaction(dest, statements)
            else:
                run_in_transaction(dest, sql.replace_content_sql(d, real, schema, staging, moved, staging_columns))
            if new_last_ts is not None and log is not None:
                run_in_transaction(dest, [sql.prefill_rplog_sql(d, log.rplog, schema, guids, real)])
    finally:
        drops = [f"DROP TABLE IF EXISTS {d.qualify(t, schema)}" for t in (staging, guids)]
        run_each(dest, drops, ignore_errors=True)
    updates: dict[str, datetime | None] = {"last_upd_bm": None}
    if new_last_ts is not None:
        updates["last_ts"] = aware(new_last_ts)
    Snapshot.objects.filter(pk=snapshot.pk).update(**updates)
    resolve_alerts(
        "validation_drift", drift_target(snapshot.name, snapshot.source_table or ""), f"refreshed whole: {rows} row(s)"
    )
    reporter.progress(4, 4, f"replaced {real} with {rows} rows")
    return {
        "mode": "full",
        "rows": rows,
        "swap": swap,
        "last_ts": new_last_ts.isoformat() if new_last_ts else None,
        "path": path,
    }


# --- incremental refresh ---------------------------------------------------------------------------------


def incremental_refresh(snapshot: Snapshot, shape: SourceShape, log: SnapshotLog, reporter) -> dict:
    dest, d, schema, real, _dest_info, moved = _destination(snapshot, shape)
    assert shape.table is not None
    src_d = dialects.get(shape.server.dialect)
    tolerance = RegistryEntry.get_int("snp_repl_tolerance_offset")
    assert snapshot.last_ts is not None
    since = naive_utc(snapshot.last_ts) - timedelta(minutes=tolerance)
    try:
        window_rows = int(scalar(shape.server, sql.window_count_sql(src_d, shape.table, since)) or 0)
    except pyodbc.Error:
        reporter.log("the snapshot log table is missing on the source: refreshing non-incrementally")
        return full_refresh(snapshot, shape, reporter)
    ensure_rplog(dest, log)
    if window_rows <= settings.REFRESH_SMALL_WINDOW:
        return small_increment(snapshot, shape, log, moved, real, since, window_rows, reporter)

    staging = sql.staging_name(d, real, "RSTG")
    run_each(
        dest,
        [
            f"DROP TABLE IF EXISTS {d.qualify(staging, schema)}",
            sql.increment_staging_ddl(d, staging, schema, moved),
        ],
    )
    read_types = {}
    for m in moved:
        column = shape.table.column(m.source)
        assert column is not None
        read_types[m.alias] = read_type(src_d, column.logical)
    plan = spark_refresh.IncrementLoad(
        source=endpoint(shape.server, readonly=True),
        window_sql=sql.log_window_select(src_d, shape.table, moved, shape.condition_sql, since),
        window_schema=sql.log_window_schema(src_d, moved, shape.table),
        moved=moved,
        read_types=read_types,
        dest=endpoint(dest),
        rplog_sql=sql.rplog_select(d, log.rplog, schema, real, since),
        staging_sql=d.qualify(staging, schema),
        window_rows=window_rows,
        split_alias=_integer_key(moved, read_types),
        parallelism=spark_sizing.parallelism(),
    )
    reporter.progress(0, 1, f"reading the log window ({window_rows} rows) from {since:%Y-%m-%d %H:%M:%S} UTC on Spark")
    try:
        with reporter.phase("spark_session"):
            spark = spark_session()
        with reporter.phase("spark_load"):
            batches = spark_refresh.load_increment(spark, plan, progress=None)
        total = sum(b.rows for b in batches)
        applied = 0
        with reporter.phase("apply"):
            for batch in batches:
                reporter.progress(applied, max(total, 1), f"applying batch {batch.number + 1} of {len(batches)}")
                run_in_transaction(
                    dest,
                    sql.apply_increment_sql(d, real, schema, staging, log.rplog, real, moved, batch.number),
                )
                applied += batch.rows
                newest = aware(batch.last_snaptime)
                current = Snapshot.objects.filter(pk=snapshot.pk).values_list("last_ts", flat=True).first()
                if current is None or newest > current:
                    Snapshot.objects.filter(pk=snapshot.pk).update(last_ts=newest)
        deletes = int(scalar(dest, f"SELECT COUNT(*) FROM {d.qualify(staging, schema)} WHERE op = 'D'") or 0)
    finally:
        run_each(dest, [f"DROP TABLE IF EXISTS {d.qualify(staging, schema)}"], ignore_errors=True)
    reporter.progress(1, 1, f"applied {applied} change(s) in {len(batches)} batch(es)")
    return {
        "mode": "incremental",
        "changes": applied,
        "deleted_or_filtered": deletes,
        "batches": len(batches),
        "since": since.isoformat(),
        "path": "spark",
    }


def refresh_snapshot(job: JobRun, reporter, name: str, nonincremental: bool = False) -> dict:
    snapshot = _snapshot_named(name)
    with item_lock(f"snapshot:{snapshot.name}", job), connections.reuse():
        snapshot.refresh_from_db()
        follow_source(snapshot, reporter.log)
        shape = shape_of(snapshot)
        if snapshot.is_incremental is not None and not nonincremental:
            log = snapshot_log_for(snapshot)
            if log is None:
                reporter.log("no snapshot log on the source table: refreshing non-incrementally")
            elif snapshot.last_ts is None:
                reporter.log("first refresh of an incremental snapshot: copying everything")
            else:
                return incremental_refresh(snapshot, shape, log, reporter)
        return full_refresh(snapshot, shape, reporter)


# --- repair ---------------------------------------------------------------------------------------------


def repair_snapshot(job: JobRun, reporter, name: str) -> dict:
    """Make the destination equal to the snapshot's source query by fixing only the rows that differ."""

    snapshot = _snapshot_named(name)
    with item_lock(f"snapshot:{snapshot.name}", job):
        shape = shape_of(snapshot)
        dest, d, schema, real, dest_info, _moved = _destination(snapshot, shape)
        left_info = shape.as_table(f"query of {snapshot.name}")
        if not shape.key:
            raise SnapshotError("the snapshot's rows have no key to repair by; refresh it instead")
        plan = plan_compare(dialects.get(shape.server.dialect), left_info, d, dest_info, left_query=shape.sql)
        moved = tuple(
            Moved(alias=lc.alias, dest=rc.column.name, source=lc.column.name, logical=rc.column.logical)
            for lc, rc in zip(plan.left.columns, plan.right.columns, strict=True)
        )
        staging = sql.staging_name(d, real, "RSTG")
        run_each(
            dest,
            [
                f"DROP TABLE IF EXISTS {d.qualify(staging, schema)}",
                sql.increment_staging_ddl(d, staging, schema, moved),
            ],
        )
        try:
            with reporter.phase("spark_session"):
                spark = spark_session()
            reporter.progress(1, 3, "finding the rows that differ")
            with reporter.phase("spark_diff"):
                counts = stage_repair(
                    spark,
                    plan,
                    moved,
                    endpoint(shape.server, readonly=True),
                    endpoint(dest),
                    d.qualify(staging, schema),
                    progress=reporter.spark_progress(1, 1, 3),
                    parallelism=spark_sizing.parallelism(),
                )
            reporter.progress(2, 3, f"fixing {counts['upserts']} row(s), deleting {counts['deletes']}")
            with reporter.phase("apply"):
                if counts["upserts"] or counts["deletes"]:
                    run_in_transaction(dest, sql.apply_increment_sql(d, real, schema, staging, None, real, moved, 0))
        finally:
            run_each(dest, [f"DROP TABLE IF EXISTS {d.qualify(staging, schema)}"], ignore_errors=True)
        resolve_alerts(
            "validation_drift", drift_target(snapshot.name, snapshot.source_table or ""), "repaired from its source"
        )
        reporter.progress(3, 3, "repaired")
        return {"mode": "repair", **counts}


def small_increment(
    snapshot: Snapshot, shape: SourceShape, log: SnapshotLog, moved, real: str, since, window_rows: int, reporter
) -> dict:
    """A log window small enough to apply without Spark: the same reads, the same one-transaction apply."""

    assert shape.table is not None
    dest = snapshot.dest_server
    d, src_d = dialects.get(dest.dialect), dialects.get(shape.server.dialect)
    schema = connections.table_schema(dest)
    keys = [m for m in moved if m.is_key]
    nkeys, nvalues = len(keys), len(moved) - len(keys)
    with reporter.phase("read"):
        with connections.connect(dest, readonly=True) as conn:
            applied = {
                row[0] for row in conn.cursor().execute(sql.rplog_select(d, log.rplog, schema, real, since)).fetchall()
            }
        # Log rows first, then the current source rows of the ones not yet applied: the source is
        # only read for new changes, however many older ones the tolerance window holds.
        with connections.connect(shape.server, readonly=True) as conn:
            cursor = conn.cursor()
            fresh = [
                r
                for r in cursor.execute(sql.log_rows_select(src_d, shape.table, keys, since)).fetchall()
                if r[nkeys + 2] not in applied
            ]
            current: dict[tuple, tuple] = {}
            step = sql.rows_per_statement(nkeys)
            for start in range(0, len(fresh), step):
                chunk = fresh[start : start + step]
                query = sql.source_rows_select(src_d, shape.table, moved, shape.condition_sql, len(chunk))
                for row in cursor.execute(query, [v for r in chunk for v in r[:nkeys]]).fetchall():
                    current[tuple(row[:nkeys])] = tuple(row)
    width = len(moved)
    pending = []
    for r in fresh:
        found = current.get(tuple(r[:nkeys]))
        values = found[nkeys:width] if found is not None else (None,) * nvalues
        present = found[width] if found is not None else 0
        pending.append((*r[:nkeys], *values, r[nkeys], r[nkeys + 1], r[nkeys + 2], present))
    pending.sort(key=lambda r: bind_value(r[width], sql.TIMESTAMP, dest.dialect))
    if not pending:
        reporter.progress(1, 1, f"nothing to apply ({window_rows} log row(s) in the window were applied before)")
        return {
            "mode": "incremental",
            "changes": 0,
            "deleted_or_filtered": 0,
            "batches": 0,
            "since": since.isoformat(),
            "path": "control plane",
        }
    key_values = [[bind_value(r[i], m.logical, d.name) for i, m in enumerate(moved) if m.is_key] for r in pending]
    kept = [r for r in pending if r[width + 3] == 1]
    row_values = [[bind_value(r[i], m.logical, d.name) for i, m in enumerate(moved)] for r in kept]
    replayed = [[real, r[width + 2], bind_value(r[width], sql.TIMESTAMP, d.name)] for r in pending]
    key_names, column_names = [k.dest for k in keys], [m.dest for m in moved]
    statements = [
        *_chunked(key_values, lambda n: sql.delete_keys_sql(d, real, schema, key_names, n)),
        *_chunked(row_values, lambda n: sql.insert_rows_sql(d, real, schema, column_names, n)),
        *_chunked(replayed, lambda n: sql.insert_rplog_sql(d, log.rplog, schema, n)),
    ]
    with reporter.phase("apply"):
        run_in_transaction(dest, statements)
    newest = max(_parse_snaptime(r[width]) for r in pending)
    last_ts = Snapshot.objects.filter(pk=snapshot.pk).values_list("last_ts", flat=True).first()
    if last_ts is None or aware(newest) > last_ts:
        Snapshot.objects.filter(pk=snapshot.pk).update(last_ts=aware(newest))
    reporter.progress(1, 1, f"applied {len(pending)} change(s) in one transaction")
    return {
        "mode": "incremental",
        "changes": len(pending),
        "deleted_or_filtered": len(pending) - len(kept),
        "batches": 1,
        "since": since.isoformat(),
        "path": "control plane",
    }


def _chunked(rows: list[list], make_sql) -> list[tuple[str, list]]:
    """Multi-row statements (`make_sql(n)` for n rows) with their flattened parameters, each within the
    drivers' parameter limits."""
    if not rows:
        return []
    step = sql.rows_per_statement(len(rows[0]))
    return [
        (make_sql(len(chunk)), [v for row in chunk for v in row])
        for chunk in (rows[start : start + step] for start in range(0, len(rows), step))
    ]


def _parse_snaptime(value) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return datetime.fromisoformat(str(value).strip())


def _integer_key(moved, read_types: dict[str, str]) -> str | None:
    """The alias of the only key column when it is read as an integer (a log window is split on it)."""
    keys = [m for m in moved if m.is_key]
    return keys[0].alias if len(keys) == 1 and read_types.get(keys[0].alias) == "BIGINT" else None

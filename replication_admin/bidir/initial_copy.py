"""REPL_INIT_SNAPSHOT: the publisher's rows staged on the subscriber (a native stream or Spark:
core.native_copy.copy_table) and committed in chunks of the given rows per commit, with a bookmark, so a
killed copy resumes where it stopped. Before the first chunk the subscriber's copy and its log are emptied at
once (a re-copy discards the rows and the pending changes it replaces, and its capture triggers log none of the
deleted rows)."""

from __future__ import annotations

import contextlib

import pyodbc
from django.utils import timezone

from replication_admin.bidir.apply import Side, _fetch
from replication_admin.bidir.objects import (
    lock_name,
    publisher_table,
    server_now,
    subscriber_table,
    subscription_label,
)
from replication_admin.core import connections, native_copy
from replication_admin.core.alerts import resolve_alerts_of
from replication_admin.core.introspection import find_table
from replication_admin.core.locks import item_lock
from replication_admin.core.times import aware
from replication_admin.core.transactions import (
    is_retryable,
    run_each,
    run_in_transaction,
    scalar,
    with_retries,
)
from replication_admin.engine import bidir_sql as sql
from replication_admin.models import (
    JobRun,
    Server,
    SnapshotPublication,
    SnapshotSubscription,
)


def init_subscription(job: JobRun, reporter, subscription_id: int, rows_per_commit: int | None = None) -> dict:
    subscription = SnapshotSubscription.objects.get(pk=subscription_id)
    publication = SnapshotPublication.objects.select_related("server").get(
        item=subscription.item, type=subscription.type
    )
    with item_lock(lock_name(publication), job), connections.reuse():
        subscription.refresh_from_db()
        per_commit = int(rows_per_commit or subscription.init_rows_per_commit or 100)
        assert publication.server is not None
        pub_server = publication.server
        sub_server = Server.objects.get(name=subscription.server)
        pub_table = publisher_table(publication)
        layout = sql.Layout.of(pub_table)
        pub = Side.of(pub_server, pub_table, layout)
        sub = Side.of(sub_server, subscriber_table(publication, sub_server), layout)
        staging = sub.work("BSIC")
        resume = subscription.init_state == "copying" and find_table(sub_server, staging) is not None
        path = ""
        if not resume:
            rows, path = _stage_init_copy(subscription, pub, sub, staging, per_commit, reporter)
        else:
            rows = int(subscription.init_rows_total or 0)
            reporter.log(f"resuming the initial copy after row number {subscription.init_bookmark}")
        copied = _copy_chunks(subscription, sub, staging, per_commit, rows, reporter)
        if _fetch(sub_server, sql.log_count_sql(sub.d, sub.table))[0][0]:
            run_each(
                sub_server,
                [
                    sql.init_staging_key_index_sql(sub.d, sub.table, sub.layout, staging),
                    sql.init_cleanup_sql(sub.d, sub.table, sub.layout, staging),
                ],
            )
        sub.drop(staging)
        SnapshotSubscription.objects.filter(pk=subscription.pk).update(
            init_state="done",
            init_rows_done=rows,
            last_push_ts=subscription.init_started_at
            if not resume
            else SnapshotSubscription.objects.get(pk=subscription.pk).init_started_at,
            last_pull_ts=timezone.now(),
            last_error="",
        )
        SnapshotPublication.objects.filter(pk=publication.pk).update(last_ts=timezone.now())
        resolve_alerts_of("validation_drift", f"{subscription_label(subscription)}: ", f"copied again: {rows} row(s)")
        reporter.progress(rows, max(rows, 1), f"copied {rows} row(s) to {sub_server.name}")
        return {
            "mode": "init",
            "rows": rows,
            "inserted": copied,
            "rows_per_commit": per_commit,
            "resumed": resume,
            "path": path,
        }


def _stage_init_copy(subscription, pub: Side, sub: Side, staging: str, per_commit: int, reporter) -> tuple[int, str]:
    started = server_now(pub.server)
    SnapshotSubscription.objects.filter(pk=subscription.pk).update(
        init_state="staging",
        init_rows_done=0,
        init_rows_total=None,
        init_bookmark=-1,
        init_started_at=aware(started),
        init_rows_per_commit=per_commit,
    )
    subscription.init_started_at = aware(started)
    sub.recreate(staging, sql.init_staging_ddl(sub.d, staging, sub.table.schema, sub.layout))
    d = pub.d
    items = ", ".join(f"t.{d.quote(m.dest)} AS {m.alias}" for m in pub.layout.moved)
    select_sql = f"SELECT {items} FROM {pub.qualify(pub.table.name)} t"
    plan = native_copy.FullCopyPlan(
        source=pub.server,
        select_sql=select_sql,
        moved=sub.layout.moved,
        source_types={m.alias: m.logical for m in pub.layout.moved},
        dest=sub.server,
        staging_sql=sub.qualify(staging),
        staging_columns=tuple(m.alias for m in sub.layout.moved),
        row_number="rn",
    )
    reporter.progress(0, 1, f"reading {pub.server.name}.{pub.table.name} into {staging} on {sub.server.name}")
    copied = native_copy.copy_table(plan, reporter, progress=reporter.spark_progress(0, 1, 2))
    rows, path = copied.rows, copied.path
    reporter.log(f"staged {rows} row(s) ({path})")
    # The subscriber's copy starts from the publisher's rows: its own pending changes are discarded.
    _empty_copy(sub, reporter)
    SnapshotSubscription.objects.filter(pk=subscription.pk).update(init_state="copying", init_rows_total=rows)
    subscription.init_bookmark = -1
    return rows, path


def _empty_copy(sub: Side, reporter) -> None:
    """Empty the subscriber's copy and its log together, without a log row per deleted row (TRUNCATE, or
    a DELETE with the capture triggers set aside in the same transaction); by DELETE when other tables'
    foreign keys reference the copy, or when the server refuses the first way (a missing privilege)."""
    incoming = sub.d.incoming_keys_sql(sub.table.name, sub.table.schema)
    if incoming is None or not int(scalar(sub.server, *incoming) or 0):
        try:
            _truncate_copy(sub)
            return
        except pyodbc.Error as exc:
            if is_retryable(exc):
                raise
            reporter.log(f"emptying {sub.table.name} at once was refused ({connections.driver_message(exc)}): deleting")
    run_in_transaction(sub.server, list(sql.init_delete_sql(sub.d, sub.table)))


def _truncate_copy(sub: Side) -> None:
    plan = sql.init_empty_sql(sub.d, sub.table, sub.server.name)

    def work(cursor) -> None:
        try:
            for statement in plan.statements:
                cursor.execute(statement)
        except pyodbc.Error:
            with contextlib.suppress(pyodbc.Error):
                for statement in plan.finally_:
                    cursor.execute(statement)
            raise
        for statement in plan.finally_:
            cursor.execute(statement)

    with_retries(sub.server, work)


def _copy_chunks(subscription, sub: Side, staging: str, per_commit: int, total: int, reporter) -> int:
    last_sql, insert_sql = sql.init_chunk_sql(sub.d, sub.table, sub.layout, staging, per_commit)
    bookmark = int(SnapshotSubscription.objects.get(pk=subscription.pk).init_bookmark)
    done = int(SnapshotSubscription.objects.get(pk=subscription.pk).init_rows_done)
    inserted = 0
    reported = timezone.now()
    with connections.connect(sub.server, autocommit=False) as conn:
        cursor = conn.cursor()
        while True:
            row = cursor.execute(last_sql, [bookmark]).fetchone()
            last = row[0] if row else None
            if last is None:
                conn.commit()
                break
            count = cursor.execute(insert_sql, [bookmark, int(last)]).rowcount
            conn.commit()
            inserted += max(count, 0)
            done = min(total, done + per_commit)
            bookmark = int(last)
            now = timezone.now()
            if (now - reported).total_seconds() >= 0.5:
                reported = now
                SnapshotSubscription.objects.filter(pk=subscription.pk).update(
                    init_bookmark=bookmark, init_rows_done=done
                )
                reporter.progress(done, max(total, 1), f"copied {done} of {total} row(s), {per_commit} per commit")
    SnapshotSubscription.objects.filter(pk=subscription.pk).update(init_bookmark=bookmark, init_rows_done=total)
    return inserted

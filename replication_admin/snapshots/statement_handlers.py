"""The snapshot statements (snapshot logs, CREATE / UPDATE / DROP SNAPSHOT, repl_purge_rplogs), each carried
out by its action in `snapshots.actions`."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from replication_admin.core.jobs import result_of
from replication_admin.core.statement_handlers import Caller, Outcome, handles
from replication_admin.engine import statements as st
from replication_admin.models import JobRun, Snapshot
from replication_admin.snapshots import actions as snap
from replication_admin.snapshots.runs import FullRefresh, IncrementalRefresh, RefreshResult


def query_server(query: str) -> str | None:
    """The server a snapshot query names in its table references (`select * from demo.Orders`)."""
    try:
        tree = sqlglot.parse_one(query)
    except Exception:  # the query is checked properly, in its server's dialect, when the snapshot is made
        return None
    servers = {t.db for t in tree.find_all(exp.Table) if t.db}
    return next(iter(servers)) if len(servers) == 1 else None


def _refresh_outcome(job: JobRun) -> Outcome:
    if job.state == JobRun.State.SUCCEEDED:
        result = result_of(job, RefreshResult)
        if isinstance(result, IncrementalRefresh):
            message = f"applied {result.changes} change(s) incrementally"
        else:
            message = f"copied {result.rows if isinstance(result, FullRefresh) else 0} row(s)"
        return Outcome(True, message, job.pk, job.result or {})
    if job.state == JobRun.State.SKIPPED:  # a scheduled run while another job applied the item
        return Outcome(True, f"refresh {job.message}", job.pk)
    if job.state in JobRun.FINISHED:
        return Outcome(False, f"refresh {job.state}: {job.error}", job.pk)
    return Outcome(True, f"refresh queued as job #{job.pk}", job.pk)


def _refresh(caller: Caller, snapshot: Snapshot, nonincremental: bool) -> Outcome:
    job = snap.do_refresh_snapshot(caller.actor, snapshot, nonincremental=nonincremental, sync=caller.sync)
    return _refresh_outcome(JobRun.objects.get(pk=job.pk))


@handles(st.CreateSnapshotLog)
def create_snapshot_log(statement: st.CreateSnapshotLog, caller: Caller) -> Outcome:
    server = caller.server(statement.source.server, "the source table")
    log = snap.do_create_snapshot_log(caller.actor, server, statement.source.table)
    return Outcome(True, f"created snapshot log {log.rlog} with its I/U/D triggers")


@handles(st.DropSnapshotLog)
def drop_snapshot_log(statement: st.DropSnapshotLog, caller: Caller) -> Outcome:
    server = caller.server(statement.source.server, "the source table")
    return Outcome(True, snap.do_drop_snapshot_log(caller.actor, server, statement.source.table))


@handles(st.PurgeSnapshotLog)
def purge_snapshot_log(statement: st.PurgeSnapshotLog, caller: Caller) -> Outcome:
    server = caller.server(statement.source.server, "the source table")
    deleted = snap.do_purge_snapshot_log(caller.actor, server, statement.source.table)
    return Outcome(True, f"purged {deleted} replayed log row(s)", details={"deleted": deleted})


@handles(st.CreateNonincrementalSnapshot)
def create_nonincremental_snapshot(statement: st.CreateNonincrementalSnapshot, caller: Caller) -> Outcome:
    dest = caller.server(statement.dest.server, "the destination")
    source = caller.server(query_server(statement.query), "the query")
    snapshot = snap.do_create_noninc_snapshot(caller.actor, source, statement.query, dest, statement.dest.table)
    outcome = _refresh(caller, snapshot, True)
    outcome.message = f"created snapshot {snapshot.name}; {outcome.message}"
    return outcome


@handles(st.CreateIncrementalSnapshot)
def create_incremental_snapshot(statement: st.CreateIncrementalSnapshot, caller: Caller) -> Outcome:
    dest = caller.server(statement.dest.server, "the destination")
    source = caller.server(statement.source.server, "the source table")
    snapshot = snap.do_create_inc_snapshot(
        caller.actor, source, statement.source.table, statement.columns, statement.condition, dest,
        statement.dest.table,
    )  # fmt: skip
    outcome = _refresh(caller, snapshot, False)
    outcome.message = f"created incremental snapshot {snapshot.name}; {outcome.message}"
    return outcome


@handles(st.UpdateSnapshot)
def update_snapshot(statement: st.UpdateSnapshot, caller: Caller) -> Outcome:
    server = caller.server(statement.name.server, "the snapshot")
    return _refresh(caller, snap.find_snapshot(server, statement.name.table), statement.nonincremental)


@handles(st.DropSnapshot)
def drop_snapshot(statement: st.DropSnapshot, caller: Caller) -> Outcome:
    snapshot = snap.find_snapshot(caller.server(statement.name.server, "the snapshot"), statement.name.table)
    return Outcome(True, snap.do_drop_snapshot(caller.actor, snapshot, statement.with_delete))


@handles(st.PurgeReplayLogs)
def purge_replay_logs(statement: st.PurgeReplayLogs, caller: Caller) -> Outcome:
    deleted = snap.do_purge_rplogs(caller.actor)
    return Outcome(True, f"purged {deleted} replay log row(s)", details={"deleted": deleted})

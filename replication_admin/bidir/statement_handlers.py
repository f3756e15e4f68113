"""The bi-directional snapshot statements (REPL_CREATE_SNAPSHOT_PUB, REPL_CREATE_SNAPSHOT_SUB,
REPL_INIT_SNAPSHOT, REPL_UPDATE_SNAPSHOT …), each carried out by its action in `bidir.actions`."""

from __future__ import annotations

from replication_admin.bidir import actions as bidir
from replication_admin.core.statement_handlers import Caller, Outcome, handles, job_outcome, server_arg
from replication_admin.engine import statements as st
from replication_admin.models import SnapshotPublication, SnapshotSubscription


def _publication(item: st.Name, caller: Caller) -> SnapshotPublication:
    return bidir.publication_for(caller.server(item.server, "the item"), item.table)


def _subscription(statement: st.DropSnapshotSub | st.InitSnapshot, caller: Caller) -> SnapshotSubscription:
    return bidir.find_subscription(_publication(statement.item, caller), server_arg(statement.server))


@handles(st.CreateSnapshotPub)
def create_publication(statement: st.CreateSnapshotPub, caller: Caller) -> Outcome:
    server = caller.server(statement.item.server, "the published table")
    publication = bidir.do_create_publication(caller.actor, server, statement.item.table)
    return Outcome(True, f"published {publication.item} for bi-directional snapshot replication")


@handles(st.DropSnapshotPub)
def drop_publication(statement: st.DropSnapshotPub, caller: Caller) -> Outcome:
    server = caller.server(statement.item.server, "the published table")
    publication = bidir.publication_for(server, statement.item.table)
    return Outcome(True, bidir.do_drop_publication(caller.actor, publication))


@handles(st.CreateSnapshotSub)
def create_subscription(statement: st.CreateSnapshotSub, caller: Caller) -> Outcome:
    publication = _publication(statement.item, caller)
    subscriber = server_arg(statement.server)
    bidir.do_create_subscription(caller.actor, publication, subscriber)
    return Outcome(True, f"{subscriber.name} subscribes to {publication.item}")


@handles(st.DropSnapshotSub)
def drop_subscription(statement: st.DropSnapshotSub, caller: Caller) -> Outcome:
    return Outcome(True, bidir.do_drop_subscription(caller.actor, _subscription(statement, caller)))


@handles(st.InitSnapshot)
def init_subscription(statement: st.InitSnapshot, caller: Caller) -> Outcome:
    subscription = _subscription(statement, caller)
    job = bidir.do_init_subscription(caller.actor, subscription, statement.rows_per_commit, sync=caller.sync)
    return job_outcome(job, "initial copy")


@handles(st.UpdateSnapshotPub)
def sync_publication(statement: st.UpdateSnapshotPub, caller: Caller) -> Outcome:
    publication = _publication(statement.item, caller)
    return job_outcome(bidir.do_sync_publication(caller.actor, publication, sync=caller.sync), "sync")


@handles(st.PurgeUpdateableReplayLogs)
def purge_replay_logs(statement: st.PurgeUpdateableReplayLogs, caller: Caller) -> Outcome:
    deleted = bidir.do_purge_urplogs(caller.actor)
    return Outcome(True, f"purged {deleted} replay log row(s)", details={"deleted": deleted})

"""The transactional replication statements (Virtuoso's REPL_* functions: publications, subscriptions, syncs,
acknowledgements, tracers), each carried out by its action in `transactional.actions` (tracers and REPL_WAIT
by `tracers` and `durability`). Most run on the context server: the publisher or the subscriber."""

from __future__ import annotations

from django.db.models import QuerySet

from replication_admin.core import heartbeats
from replication_admin.core.statement_handlers import (
    Caller,
    Outcome,
    StatementFailed,
    handles,
    job_outcome,
    resolve_server,
)
from replication_admin.engine import statements as st
from replication_admin.models import JobRun, RegistryEntry, ReplAccount, ReplSubscriber, Server
from replication_admin.transactional import actions as trx
from replication_admin.transactional import durability, tracers


def _publication(caller: Caller, account: str, what: str) -> ReplAccount:
    """The publication `account` of the context server, which the statement `what` runs on."""
    return trx.publication(caller.context_server(what), account)


def _subscription(caller: Caller, publisher: str, account: str, what: str) -> ReplSubscriber:
    """The context server's subscription to `publisher`'s `account`."""
    return trx.find_subscription(caller.context_server(what), publisher, account)


def _subscriptions(context: Server | None) -> QuerySet[ReplSubscriber]:
    rows = ReplSubscriber.objects.filter(subscribed=True)
    return rows.filter(subscriber=context.name) if context is not None else rows


# --- publications (on the publisher) ------------------------------------------------------------------------


@handles(st.Publish)
def publish(statement: st.Publish, caller: Caller) -> Outcome:
    server = caller.context_server("repl_publish")
    row = trx.do_publish(
        caller.actor, server, statement.account, statement.log_file, statement.updateable, statement.sync_user
    )
    return Outcome(True, f"published {statement.account} on {server.name} (log {row.log_file})")


@handles(st.Unpublish)
def unpublish(statement: st.Unpublish, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_unpublish")
    return Outcome(True, trx.do_unpublish(caller.actor, publication))


@handles(st.PubAdd)
def pub_add(statement: st.PubAdd, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_pub_add")
    trx.do_pub_add(caller.actor, publication, statement.item, statement.item_type, statement.is_copy, statement.options)
    return Outcome(True, f"added {statement.item} to {statement.account}")


@handles(st.PubRemove)
def pub_remove(statement: st.PubRemove, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_pub_remove")
    item = trx.find_item(publication, statement.item, statement.item_type)
    return Outcome(True, trx.do_pub_remove(caller.actor, publication, item, statement.drop))


@handles(st.ColumnConflicts)
def column_conflicts(statement: st.ColumnConflicts, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_column_conflicts")
    return Outcome(True, trx.do_set_column_conflicts(caller.actor, publication, statement.table, statement.on))


@handles(st.SetPubRowFilter)
def set_pub_row_filter(statement: st.SetPubRowFilter, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_pub_row_filter")
    message, jobs = trx.do_set_pub_row_filter(
        caller.actor, publication, statement.table, statement.condition, statement.columns, sync=caller.sync
    )
    reloads = [job_outcome(job, f"the reload of {job.target}") for job in jobs]
    if not reloads:
        return Outcome(True, message)
    return Outcome(all(r.ok for r in reloads), "; ".join([message, *(r.message for r in reloads)]), jobs[0].pk)


@handles(st.Grant)
def grant(statement: st.Grant, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_grant")
    return Outcome(True, trx.do_grant(caller.actor, publication, statement.grantee))


@handles(st.Revoke)
def revoke(statement: st.Revoke, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_revoke")
    return Outcome(True, trx.do_revoke(caller.actor, publication, statement.grantee))


@handles(st.ReplText)
def repl_text(statement: st.ReplText, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_text")
    level = trx.do_repl_text(caller.actor, publication, statement.sql_text, statement.args)
    return Outcome(True, f"logged at level {level}", details={"level": level})


@handles(st.PubAck)
def pub_ack(statement: st.PubAck, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_pub_ack")
    return Outcome(True, trx.do_set_ack_policy(caller.actor, publication, statement.policy, statement.timeout))


@handles(st.PubSchemaChanges)
def pub_schema_changes(statement: st.PubSchemaChanges, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_pub_schema_changes")
    return Outcome(True, trx.do_set_schema_policy(caller.actor, publication, statement.policy))


@handles(st.PubOnConflict)
def pub_on_conflict(statement: st.PubOnConflict, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_pub_on_conflict")
    return Outcome(True, trx.do_set_on_conflict(caller.actor, publication, statement.answer))


@handles(st.PostTracer)
def post_tracer(statement: st.PostTracer, caller: Caller) -> Outcome:
    tracer = tracers.do_post_tracer(caller.actor, _publication(caller, statement.account, "repl_tracer"))
    return Outcome(True, f"tracer #{tracer.pk} written", details={"tracer": tracer.pk})


@handles(st.ScheduleTracer)
def schedule_tracer(statement: st.ScheduleTracer, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_tracer_schedule")
    return Outcome(True, tracers.do_schedule_tracer(caller.actor, publication, statement.minutes))


@handles(st.Wait)
def wait(statement: st.Wait, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_wait")
    acked = durability.wait_for_ack(publication, statement.level, statement.timeout)
    return Outcome(acked.acked, acked.message(), details=acked.as_dict())


@handles(st.NewLog)
def new_log(statement: st.NewLog, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_new_log")
    return Outcome(True, trx.do_new_log(caller.actor, publication, statement.log_file))


@handles(st.PubInitImage)
def pub_init_image(statement: st.PubInitImage, caller: Caller) -> Outcome:
    publication = _publication(caller, statement.account, "repl_pub_init_image")
    written = trx.do_write_image(caller.actor, publication, statement.file, statement.bytes_per_file)
    message = f"wrote {written['rows']} row(s) at level {written['level']} to {', '.join(written['files'])}"
    return Outcome(True, message, details=written)


@handles(st.Purge)
def purge(statement: st.Purge, caller: Caller) -> Outcome:
    publication = trx.publication(resolve_server(statement.server, None, "the publisher"), statement.account)
    deleted = trx.do_purge(caller.actor, publication)
    return Outcome(True, f"purged {deleted} transaction(s)", details={"deleted": deleted})


@handles(st.SchedInit)
def sched_init(statement: st.SchedInit, caller: Caller) -> Outcome:
    made = trx.do_sched_init(caller.actor)
    message = f"created {', '.join(made)}" if made else "every replication event was in place"
    return Outcome(True, message, details={"created": made})


# --- subscriptions (on the subscriber) ----------------------------------------------------------------------


@handles(st.ReplServer)
def declare_publisher(statement: st.ReplServer, caller: Caller) -> Outcome:
    here = caller.context_server("repl_server")
    trx.do_declare_server(caller.actor, here, statement.server, statement.dsn, statement.repl_address)
    return Outcome(True, f"{here.name} knows the publisher {statement.server}")


@handles(st.Subscribe)
def subscribe(statement: st.Subscribe, caller: Caller) -> Outcome:
    here = caller.context_server("repl_subscribe")
    trx.do_subscribe(
        caller.actor, here, statement.server, statement.account, statement.dav_user, statement.dav_group,
        statement.replay_user, user=statement.user,
    )  # fmt: skip
    return Outcome(True, f"{here.name} subscribes to {statement.server}/{statement.account}")


@handles(st.Unsubscribe)
def unsubscribe(statement: st.Unsubscribe, caller: Caller) -> Outcome:
    sub = _subscription(caller, statement.server, statement.account, "repl_unsubscribe")
    return Outcome(True, trx.do_unsubscribe(caller.actor, sub, statement.item))


@handles(st.InitCopy)
def init_copy(statement: st.InitCopy, caller: Caller) -> Outcome:
    sub = _subscription(caller, statement.server, statement.account, "repl_init_copy")
    return job_outcome(trx.do_init_copy(caller.actor, sub, sync=caller.sync, image=statement.image), "initial copy")


@handles(st.ReloadTable)
def reload_table(statement: st.ReloadTable, caller: Caller) -> Outcome:
    sub = _subscription(caller, statement.server, statement.account, "repl_reload_table")
    job = trx.do_reload_table(caller.actor, sub, statement.table, sync=caller.sync)
    return job_outcome(job, f"reload of {statement.table}")


@handles(st.SetRowFilter)
def set_row_filter(statement: st.SetRowFilter, caller: Caller) -> Outcome:
    sub = _subscription(caller, statement.server, statement.account, "repl_row_filter")
    message, job = trx.do_set_row_filter(
        caller.actor, sub, statement.table, statement.condition, statement.columns, sync=caller.sync
    )
    if job is None:
        return Outcome(True, message)
    reloaded = job_outcome(job, "its copy's reload")
    return Outcome(reloaded.ok, f"{message}; {reloaded.message}", job.pk, reloaded.details)


def _followed_by(sub: ReplSubscriber) -> str | None:
    """The live follower that applies this in-sync subscription as its publisher commits ("host pid"), or None."""
    if not (sub.subscribed and sub.follow and sub.valid == 1 and sub.state == ReplSubscriber.IN_SYNC):
        return None
    holder = heartbeats.live_followers().holder(sub.pk)
    return f"{holder.host} pid {holder.pid}" if holder is not None else None


@handles(st.Sync)
def sync(statement: st.Sync, caller: Caller) -> Outcome:
    sub = _subscription(caller, statement.server, statement.account, "repl_sync")
    if statement.user:  # the replication user's grant, as REPL_SUBSCRIBE checks it
        trx.check_grant(trx.account_of(sub), statement.user)
    if caller.actor.via == "scheduler":
        # A schedule beside in-sync mode is the fallback for a follower that is gone: while one serves the
        # subscription, its sync would only queue behind the follower's step (and be skipped).
        follower = _followed_by(sub)
        if follower is not None:
            return Outcome(True, f"in sync: the follower on {follower} applies each transaction as it commits; "
                                 "the scheduled sync is not needed")  # fmt: skip
    return job_outcome(trx.do_sync(caller.actor, sub, sync=caller.sync), "sync")


def _halted_subscription(statement: st.SkipTransaction | st.RepairKeys, caller: Caller) -> ReplSubscriber:
    """The subscription of the subscriber the statement names, or of the context server."""
    named = statement.subscriber
    here = resolve_server(named, None, "the subscriber") if named else caller.context_server(statement.verb.lower())
    return trx.find_subscription(here, statement.server, statement.account)


@handles(st.SkipTransaction)
def skip_transaction(statement: st.SkipTransaction, caller: Caller) -> Outcome:
    sub = _halted_subscription(statement, caller)
    return Outcome(True, trx.do_skip_halted_transaction(sub, actor=caller.actor))


@handles(st.RepairKeys)
def repair_keys(statement: st.RepairKeys, caller: Caller) -> Outcome:
    return Outcome(True, trx.do_repair_gaps(_halted_subscription(statement, caller), actor=caller.actor))


def _sync_every_subscription(caller: Caller, follow: bool) -> Outcome:
    """Sync each subscription of the context server (of every server without one); `follow`: keep them in
    step from now on too."""
    jobs = []
    for sub in list(_subscriptions(caller.context)):
        if follow:
            trx.do_follow(caller.actor, sub, True)
        jobs.append(trx.do_sync(caller.actor, sub, sync=caller.sync))
    failed = [j for j in (JobRun.objects.get(pk=j.pk) for j in jobs) if j.state == JobRun.State.FAILED]
    message = f"synced {len(jobs) - len(failed)} of {len(jobs)} subscription(s)"
    if failed:
        message += "; " + "; ".join(f"{j.target}: {j.error}" for j in failed)
    return Outcome(True, message, details={"jobs": [j.pk for j in jobs]})


@handles(st.SyncAll)
def sync_all(statement: st.SyncAll, caller: Caller) -> Outcome:
    return _sync_every_subscription(caller, follow=False)


@handles(st.SyncRepl)
def sync_repl(statement: st.SyncRepl, caller: Caller) -> Outcome:
    return _sync_every_subscription(caller, follow=True)


@handles(st.Disconnect)
def disconnect(statement: st.Disconnect, caller: Caller) -> Outcome:
    here = caller.context_server("repl_disconnect")
    subs = [s for s in _subscriptions(here) if s.server == statement.server]
    if not subs:
        raise StatementFailed(f"{here.name} has no subscription from {statement.server}")
    for sub in subs:
        trx.do_follow(caller.actor, sub, False)
    return Outcome(True, f"disconnected {len(subs)} subscription(s) from {statement.server}")


@handles(st.ThisServer)
def this_server(statement: st.ThisServer, caller: Caller) -> Outcome:
    context = caller.context
    name = context.name if context is not None else RegistryEntry.get_value("repl_server_name")
    return Outcome(True, name, details={"server": name})


@handles(st.Status)
def status(statement: st.Status, caller: Caller) -> Outcome:
    sub = _subscription(caller, statement.server, statement.account, "repl_status")
    level, state = trx.status(sub)
    label = dict(sub.STATES)[state]
    return Outcome(True, f"level {level}, {label}", details={"level": level, "stat": state})


@handles(st.Stat)
def stat(statement: st.Stat, caller: Caller) -> Outcome:
    rows = [
        {"server": s.server, "account": s.account, "level": s.level, "stat": s.state, "valid": s.valid}
        for s in _subscriptions(caller.context)
    ]
    message = "; ".join(f"{r['server']}/{r['account']}: level {r['level']}" for r in rows) or "none"
    return Outcome(True, message, details={"subscriptions": rows})


@handles(st.SubSchedule)
def sub_schedule(statement: st.SubSchedule, caller: Caller) -> Outcome:
    sub = _subscription(caller, statement.server, statement.account, "sub_schedule")
    return Outcome(True, trx.do_sub_schedule(caller.actor, sub, statement.interval))

"""Running statements of the statement language (replsql, the statement console, scheduled events).

Each statement is parsed by engine.statements and carried out by the do_* action it names; no text of
a statement ever reaches a database as SQL. Statements run in order and the first failure stops the
rest, so a script is never half-applied past an error it did not see.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from replication_admin.bidir import actions as bidir_actions
from replication_admin.conflicts import actions as resolvers
from replication_admin.conflicts import chains
from replication_admin.core.audit import Actor, PermissionDenied, record
from replication_admin.core.errors import ReplicationError
from replication_admin.engine import statements as st
from replication_admin.models import (
    AuditEntry,
    JobRun,
    RegistryEntry,
    ReplSubscriber,
    Server,
    TransactionalConflictResolver,
)
from replication_admin.servers.actions import ServerData, do_check_server, do_update_server
from replication_admin.snapshots import actions as snap
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import durability, tracers


@dataclass
class Outcome:
    statement: str
    ok: bool
    message: str
    job_id: int | None = None
    details: dict = field(default_factory=dict)


class StatementFailed(Exception):
    pass


def resolve_server(name: str | None, context: Server | None, what: str) -> Server:
    if name is None:
        if context is None:
            raise StatementFailed(
                f"{what} names no server and no context server is set (write server.table or choose a server)"
            )
        return context
    server = Server.objects.filter(name=name).first() or Server.objects.filter(name__iexact=name).first()
    if server is None:
        raise StatementFailed(f"server {name!r} is not registered")
    return server


def query_server(query: str) -> str | None:
    """The server a snapshot query names in its table references (`select * from demo.Orders`)."""
    try:
        tree = sqlglot.parse_one(query)
    except Exception:  # the query is checked properly, in its server's dialect, when the snapshot is made
        return None
    servers = {t.db for t in tree.find_all(exp.Table) if t.db}
    return next(iter(servers)) if len(servers) == 1 else None


def server_by_dsn(dsn: str) -> Server:
    """REPL_SERVER_NAME: a registered server found by its name, REPL_ADDRESS, ODBC DSN or DB_ADDRESS."""
    for lookup in ("name", "repl_address", "odbc_dsn", "db_address"):
        server = Server.objects.filter(**{lookup: dsn}).first()
        if server is not None:
            return server
    server = Server.objects.filter(name__iexact=dsn).first()
    if server is None:
        raise StatementFailed(f"no registered server has the name, address or DSN {dsn!r} (register it first)")
    return server


def _server_arg(value: st.ServerArg) -> Server:
    return server_by_dsn(value.dsn) if isinstance(value, st.ServerNameOf) else resolve_server(value, None, "server")


def _declare_server(actor: Actor, statement: st.SnpServer) -> str:
    server = server_by_dsn(statement.dsn)
    if statement.user is not None and (statement.user != server.user or statement.password is not None):
        data = ServerData(
            name=server.name, dialect=server.dialect, host=server.host, port=server.port, database=server.database,
            schema=server.schema, user=statement.user, password=statement.password, odbc_dsn=server.odbc_dsn,
            description=server.description,
        )  # fmt: skip
        server = do_update_server(actor, server, data)
    result = do_check_server(actor, server)
    if not result.ok:
        raise StatementFailed(f"server {server.name} cannot be reached: {result.message}")
    return server.name


def _bidir_job(text: str, job: JobRun, what: str) -> Outcome:
    job = JobRun.objects.get(pk=job.pk)
    if job.state == JobRun.State.SUCCEEDED:
        return Outcome(text, True, f"{what}: {job.result}", job.pk, job.result or {})
    if job.state == JobRun.State.SKIPPED:  # a scheduled run while another job applied the item
        return Outcome(text, True, f"{what} {job.message}", job.pk)
    if job.state in JobRun.FINISHED:
        return Outcome(text, False, f"{what} {job.state}: {job.error}", job.pk)
    return Outcome(text, True, f"{what} queued as job #{job.pk}", job.pk)


def _run_bidir(actor: Actor, statement: st.Statement, context: Server | None, wait: bool) -> Outcome | None:
    text = statement.text or statement.verb
    sync = True if wait else None
    match statement:
        case st.CreateSnapshotPub(item=item):
            server = resolve_server(item.server, context, "the published table")
            publication = bidir_actions.do_create_publication(actor, server, item.table)
            return Outcome(text, True, f"published {publication.item} for bi-directional snapshot replication")
        case st.DropSnapshotPub(item=item):
            server = resolve_server(item.server, context, "the published table")
            publication = bidir_actions.publication_for(server, item.table)
            return Outcome(text, True, bidir_actions.do_drop_publication(actor, publication))
        case st.SnpServer():
            name = _declare_server(actor, statement)
            return Outcome(text, True, name, details={"server": name})
        case st.ServerNameStatement(dsn=dsn):
            name = server_by_dsn(dsn).name
            return Outcome(text, True, name, details={"server": name})
        case st.CreateSnapshotSub(server=target, item=item):
            publication = bidir_actions.publication_for(resolve_server(item.server, context, "the item"), item.table)
            subscriber = _server_arg(target)
            bidir_actions.do_create_subscription(actor, publication, subscriber)
            return Outcome(text, True, f"{subscriber.name} subscribes to {publication.item}")
        case st.DropSnapshotSub(server=target, item=item):
            publication = bidir_actions.publication_for(resolve_server(item.server, context, "the item"), item.table)
            subscription = bidir_actions.find_subscription(publication, _server_arg(target))
            return Outcome(text, True, bidir_actions.do_drop_subscription(actor, subscription))
        case st.InitSnapshot(server=target, item=item, rows_per_commit=rows):
            publication = bidir_actions.publication_for(resolve_server(item.server, context, "the item"), item.table)
            subscription = bidir_actions.find_subscription(publication, _server_arg(target))
            job = bidir_actions.do_init_subscription(actor, subscription, rows, sync=sync)
            return _bidir_job(text, job, "initial copy")
        case st.UpdateSnapshotPub(item=item):
            publication = bidir_actions.publication_for(resolve_server(item.server, context, "the item"), item.table)
            return _bidir_job(text, bidir_actions.do_sync_publication(actor, publication, sync=sync), "sync")
        case st.PurgeUpdateableReplayLogs():
            deleted = bidir_actions.do_purge_urplogs(actor)
            return Outcome(text, True, f"purged {deleted} replay log row(s)", details={"deleted": deleted})
        case st.AddSnapshotCr(table=table, cr_type=cr_type, suffix=suffix, order=order, cls=cls):
            publication = bidir_actions.publication_for(resolve_server(table.server, context, "the table"), table.table)
            assert publication.server is not None
            columns = chains.table_columns(publication.server, publication.table)
            resolver = resolvers.do_add_resolver(
                actor, publication.item, columns, cr_type, cls, order=order, column=statement.column,
                expression=statement.expression, suffix=suffix,
            )  # fmt: skip
            return Outcome(text, True, f"added the {cr_type} conflict resolver {resolver.proc} ({cls})")
    return None


def _job_outcome(text: str, job: JobRun) -> Outcome:
    if job.state == JobRun.State.SUCCEEDED:
        result = job.result or {}
        if result.get("mode") == "incremental":
            message = f"applied {result['changes']} change(s) incrementally"
        else:
            message = f"copied {result.get('rows', 0)} row(s)"
        return Outcome(text, True, message, job.pk, result)
    if job.state == JobRun.State.SKIPPED:  # a scheduled run while another job applied the item
        return Outcome(text, True, f"refresh {job.message}", job.pk)
    if job.state in JobRun.FINISHED:
        return Outcome(text, False, f"refresh {job.state}: {job.error}", job.pk)
    return Outcome(text, True, f"refresh queued as job #{job.pk}", job.pk)


def _refresh(actor: Actor, text: str, snapshot, nonincremental: bool, wait: bool) -> Outcome:
    job = snap.do_refresh_snapshot(actor, snapshot, nonincremental=nonincremental, sync=True if wait else None)
    return _job_outcome(text, JobRun.objects.get(pk=job.pk))


def run_statement(actor: Actor, statement: st.Statement, context: Server | None, wait: bool) -> Outcome:
    text = statement.text or statement.verb
    match statement:
        case st.CreateSnapshotLog(source=name):
            server = resolve_server(name.server, context, "the source table")
            log = snap.do_create_snapshot_log(actor, server, name.table)
            return Outcome(text, True, f"created snapshot log {log.rlog} with its I/U/D triggers")
        case st.DropSnapshotLog(source=name):
            server = resolve_server(name.server, context, "the source table")
            return Outcome(text, True, snap.do_drop_snapshot_log(actor, server, name.table))
        case st.PurgeSnapshotLog(source=name):
            server = resolve_server(name.server, context, "the source table")
            deleted = snap.do_purge_snapshot_log(actor, server, name.table)
            return Outcome(text, True, f"purged {deleted} replayed log row(s)", details={"deleted": deleted})
        case st.CreateNonincrementalSnapshot(dest=dest, query=query):
            dest_server = resolve_server(dest.server, context, "the destination")
            source = resolve_server(query_server(query), context, "the query")
            snapshot = snap.do_create_noninc_snapshot(actor, source, query, dest_server, dest.table)
            outcome = _refresh(actor, text, snapshot, True, wait)
            outcome.message = f"created snapshot {snapshot.name}; {outcome.message}"
            return outcome
        case st.CreateIncrementalSnapshot(dest=dest, source=source, columns=columns, condition=condition):
            dest_server = resolve_server(dest.server, context, "the destination")
            source_server = resolve_server(source.server, context, "the source table")
            snapshot = snap.do_create_inc_snapshot(
                actor, source_server, source.table, columns, condition, dest_server, dest.table
            )
            outcome = _refresh(actor, text, snapshot, False, wait)
            outcome.message = f"created incremental snapshot {snapshot.name}; {outcome.message}"
            return outcome
        case st.UpdateSnapshot(name=name, nonincremental=nonincremental):
            server = resolve_server(name.server, context, "the snapshot")
            return _refresh(actor, text, snap.find_snapshot(server, name.table), nonincremental, wait)
        case st.DropSnapshot(name=name, with_delete=with_delete):
            server = resolve_server(name.server, context, "the snapshot")
            return Outcome(
                text, True, snap.do_drop_snapshot(actor, snap.find_snapshot(server, name.table), with_delete)
            )
        case st.PurgeReplayLogs():
            deleted = snap.do_purge_rplogs(actor)
            return Outcome(text, True, f"purged {deleted} replay log row(s)", details={"deleted": deleted})
    mode_outcome = _run_bidir(actor, statement, context, wait)
    if mode_outcome is None:
        mode_outcome = _run_trx(actor, statement, context, wait)
    if mode_outcome is not None:
        return mode_outcome
    raise StatementFailed(f"{statement.verb} cannot be run here")


def shown_text(statement: st.Statement) -> str:
    """The statement as shown and recorded: a password given to REPL_SNP_SERVER, REPL_SUBSCRIBE or
    REPL_SYNC never is."""
    return st.masked_text(statement)


def _context(context: Server | None, what: str) -> Server:
    if context is None:
        raise StatementFailed(f"{what} runs on a server: choose the context server (replsql --server NAME)")
    return context


def _subscriptions(context: Server | None):
    rows = ReplSubscriber.objects.filter(subscribed=True)
    return rows.filter(subscriber=context.name) if context is not None else rows


def _run_trx(actor: Actor, statement: st.Statement, context: Server | None, wait: bool) -> Outcome | None:
    text = statement.text or statement.verb
    sync = True if wait else None
    match statement:
        case st.Publish(account=account, log_file=log_file, updateable=updateable, sync_user=sync_user):
            server = _context(context, "repl_publish")
            row = trx_actions.do_publish(actor, server, account, log_file, updateable, sync_user)
            return Outcome(text, True, f"published {account} on {server.name} (log {row.log_file})")
        case st.Unpublish(account=account):
            server = _context(context, "repl_unpublish")
            return Outcome(text, True, trx_actions.do_unpublish(actor, trx_actions.publication(server, account)))
        case st.PubAdd(account=account, item=item, item_type=item_type, is_copy=is_copy, options=options):
            server = _context(context, "repl_pub_add")
            publication = trx_actions.publication(server, account)
            trx_actions.do_pub_add(actor, publication, item, item_type, is_copy, options)
            return Outcome(text, True, f"added {item} to {account}")
        case st.PubRemove(account=account, item=item, item_type=item_type, drop=drop):
            publication = trx_actions.publication(_context(context, "repl_pub_remove"), account)
            found = trx_actions.find_item(publication, item, item_type)
            return Outcome(text, True, trx_actions.do_pub_remove(actor, publication, found, drop))
        case st.Grant(account=account, grantee=grantee):
            publication = trx_actions.publication(_context(context, "repl_grant"), account)
            return Outcome(text, True, trx_actions.do_grant(actor, publication, grantee))
        case st.Revoke(account=account, grantee=grantee):
            publication = trx_actions.publication(_context(context, "repl_revoke"), account)
            return Outcome(text, True, trx_actions.do_revoke(actor, publication, grantee))
        case st.ReplText(account=account, sql_text=sql_text, args=args):
            publication = trx_actions.publication(_context(context, "repl_text"), account)
            level = trx_actions.do_repl_text(actor, publication, sql_text, args)
            return Outcome(text, True, f"logged at level {level}", details={"level": level})
        case st.PubAck(account=account, policy=policy, timeout=timeout):
            publication = trx_actions.publication(_context(context, "repl_pub_ack"), account)
            return Outcome(text, True, trx_actions.do_set_ack_policy(actor, publication, policy, timeout))
        case st.SchedInit():
            made = trx_actions.do_sched_init(actor)
            message = f"created {', '.join(made)}" if made else "every replication event was in place"
            return Outcome(text, True, message, details={"created": made})
        case st.PubSchemaChanges(account=account, policy=policy):
            publication = trx_actions.publication(_context(context, "repl_pub_schema_changes"), account)
            return Outcome(text, True, trx_actions.do_set_schema_policy(actor, publication, policy))
        case st.PubOnConflict(account=account, answer=answer):
            publication = trx_actions.publication(_context(context, "repl_pub_on_conflict"), account)
            return Outcome(text, True, trx_actions.do_set_on_conflict(actor, publication, answer))
        case st.PostTracer(account=account):
            publication = trx_actions.publication(_context(context, "repl_tracer"), account)
            tracer = tracers.do_post_tracer(actor, publication)
            return Outcome(text, True, f"tracer #{tracer.pk} written", details={"tracer": tracer.pk})
        case st.ScheduleTracer(account=account, minutes=minutes):
            publication = trx_actions.publication(_context(context, "repl_tracer_schedule"), account)
            return Outcome(text, True, tracers.do_schedule_tracer(actor, publication, minutes))
        case st.Wait(account=account, level=level, timeout=timeout):
            publication = trx_actions.publication(_context(context, "repl_wait"), account)
            acked = durability.wait_for_ack(publication, level, timeout)
            return Outcome(text, acked.acked, acked.message(), details=acked.as_dict())
        case st.NewLog(account=account, log_file=log_file):
            publication = trx_actions.publication(_context(context, "repl_new_log"), account)
            return Outcome(text, True, trx_actions.do_new_log(actor, publication, log_file))
        case st.ReplServer(server=name, dsn=dsn, repl_address=address):
            here = _context(context, "repl_server")
            trx_actions.do_declare_server(actor, here, name, dsn, address)
            return Outcome(text, True, f"{here.name} knows the publisher {name}")
        case st.Subscribe(server=publisher, account=account):
            here = _context(context, "repl_subscribe")
            trx_actions.do_subscribe(
                actor, here, publisher, account, statement.dav_user, statement.dav_group, statement.replay_user
            )
            return Outcome(text, True, f"{here.name} subscribes to {publisher}/{account}")
        case st.Unsubscribe(server=publisher, account=account, item=item):
            sub = trx_actions.find_subscription(_context(context, "repl_unsubscribe"), publisher, account)
            return Outcome(text, True, trx_actions.do_unsubscribe(actor, sub, item))
        case st.InitCopy(server=publisher, account=account, image=image):
            sub = trx_actions.find_subscription(_context(context, "repl_init_copy"), publisher, account)
            return _bidir_job(text, trx_actions.do_init_copy(actor, sub, sync=sync, image=image), "initial copy")
        case st.PubInitImage(account=account, file=file, bytes_per_file=bytes_per_file):
            publication = trx_actions.publication(_context(context, "repl_pub_init_image"), account)
            written = trx_actions.do_write_image(actor, publication, file, bytes_per_file)
            message = f"wrote {written['rows']} row(s) at level {written['level']} to {', '.join(written['files'])}"
            return Outcome(text, True, message, details=written)
        case st.Sync(server=publisher, account=account):
            sub = trx_actions.find_subscription(_context(context, "repl_sync"), publisher, account)
            return _bidir_job(text, trx_actions.do_sync(actor, sub, sync=sync), "sync")
        case st.SkipTransaction(server=publisher, account=account) | st.RepairKeys(server=publisher, account=account):
            named = statement.subscriber
            here = resolve_server(named, None, "the subscriber") if named else _context(context, statement.verb.lower())
            sub = trx_actions.find_subscription(here, publisher, account)
            if isinstance(statement, st.SkipTransaction):
                return Outcome(text, True, trx_actions.do_skip_halted_transaction(sub, actor=actor))
            return Outcome(text, True, trx_actions.do_repair_gaps(sub, actor=actor))
        case st.SyncAll() | st.SyncRepl():
            subs = list(_subscriptions(context))
            jobs = []
            for sub in subs:
                if isinstance(statement, st.SyncRepl):
                    trx_actions.do_follow(actor, sub, True)
                jobs.append(trx_actions.do_sync(actor, sub, sync=sync))
            failed = [j for j in (JobRun.objects.get(pk=j.pk) for j in jobs) if j.state == JobRun.State.FAILED]
            message = f"synced {len(jobs) - len(failed)} of {len(jobs)} subscription(s)"
            if failed:
                message += "; " + "; ".join(f"{j.target}: {j.error}" for j in failed)
            return Outcome(text, True, message, details={"jobs": [j.pk for j in jobs]})
        case st.Disconnect(server=publisher):
            subs = [s for s in _subscriptions(_context(context, "repl_disconnect")) if s.server == publisher]
            if not subs:
                raise StatementFailed(f"{context.name if context else ''} has no subscription from {publisher}")
            for sub in subs:
                trx_actions.do_follow(actor, sub, False)
            return Outcome(text, True, f"disconnected {len(subs)} subscription(s) from {publisher}")
        case st.ThisServer():
            name = context.name if context is not None else RegistryEntry.get_value("repl_server_name")
            return Outcome(text, True, name, details={"server": name})
        case st.Status(server=publisher, account=account):
            sub = trx_actions.find_subscription(_context(context, "repl_status"), publisher, account)
            level, state = trx_actions.status(sub)
            label = dict(sub.STATES)[state]
            return Outcome(text, True, f"level {level}, {label}", details={"level": level, "stat": state})
        case st.Stat():
            rows = [
                {"server": s.server, "account": s.account, "level": s.level, "stat": s.state, "valid": s.valid}
                for s in _subscriptions(context)
            ]
            message = "; ".join(f"{r['server']}/{r['account']}: level {r['level']}" for r in rows) or "none"
            return Outcome(text, True, message, details={"subscriptions": rows})
        case st.Purge(server=publisher, account=account):
            publication = trx_actions.publication(resolve_server(publisher, None, "the publisher"), account)
            deleted = trx_actions.do_purge(actor, publication)
            return Outcome(text, True, f"purged {deleted} transaction(s)", details={"deleted": deleted})
        case st.AddCr(table=table, cr_type=cr_type, suffix=suffix, order=order, cls=cls):
            server = resolve_server(table.server, context, "the table")
            info = trx_actions.published_table(server, table.table)
            resolver = resolvers.do_add_resolver(
                actor, f"{server.name}.{info.name}", chains.table_columns(server, info.name), cr_type, cls,
                order=order, column=statement.column, expression=statement.expression, suffix=suffix,
                model=TransactionalConflictResolver,
            )  # fmt: skip
            return Outcome(text, True, f"added the {cr_type} conflict resolver {resolver.proc} ({cls})")
        case st.SubSchedule(server=publisher, account=account, interval=interval):
            sub = trx_actions.find_subscription(_context(context, "sub_schedule"), publisher, account)
            return Outcome(text, True, trx_actions.do_sub_schedule(actor, sub, interval))
    return None


def execute(actor: Actor, text: str, context: Server | None = None, wait: bool = True) -> list[Outcome]:
    """Parse and run a script; returns one outcome per statement run (the last one failed, if any did).

    Raises StatementError when the script does not parse (nothing is run then)."""
    statements = st.parse(text)
    outcomes: list[Outcome] = []
    for statement in statements:
        shown = shown_text(statement)
        try:
            outcome = run_statement(actor, statement, context, wait)
        except (ReplicationError, StatementFailed, PermissionDenied, ValueError) as exc:
            if isinstance(exc, StatementFailed):
                record(actor, "statement", shown, AuditEntry.Outcome.ERROR, {"error": str(exc)})
            outcomes.append(Outcome(shown, False, str(exc)))
            break
        outcome.statement = shown
        outcomes.append(outcome)
        if not outcome.ok:
            break
    return outcomes

"""REPL_INIT_COPY: every published table copied to the subscriber at a consistent level (each table as a native
stream or on Spark: core.native_copy.copy_table), or loaded from a publication image."""

from __future__ import annotations

from django.utils import timezone

from replication_admin.core import connections, native_copy
from replication_admin.core.alerts import resolve_alerts_of
from replication_admin.core.introspection import lookup_table, with_constraints
from replication_admin.core.locks import item_lock
from replication_admin.core.shapes import ensure_copy, inc_shape, moved_columns
from replication_admin.core.transactions import (
    run_each,
    run_in_transaction,
    with_retries,
)
from replication_admin.engine import levels, refresh_sql, schema_changes
from replication_admin.engine import transactional_sql as sql
from replication_admin.engine.refresh_sql import create_table_ddl
from replication_admin.engine.row_filter import FilterSpec, restricted
from replication_admin.engine.schema import TableInfo
from replication_admin.engine.statements import quote_name
from replication_admin.models import (
    ReplSubscriber,
    Server,
)
from replication_admin.transactional import image
from replication_admin.transactional.apply import Target, replay_rows
from replication_admin.transactional.capture import (
    publisher_count,
)
from replication_admin.transactional.lookups import (
    TrxError,
    _d,
    describe,
    item_table,
    lock_name,
    publication,
    schema_of,
    server_named,
    table_items,
)
from replication_admin.transactional.positions import (
    clear_halt,
    ensure_level_table,
    record_position,
    set_subscriber_position,
    subscriber_position,
)
from replication_admin.transactional.procedures import procedure_definitions
from replication_admin.transactional.push import setup_push

NO_FILTER = FilterSpec()


def create_subscriber_table(
    pub_server: Server, sub_server: Server, name: str, log=None, spec: FilterSpec = NO_FILTER, widen: bool = False
) -> TableInfo:
    """The subscriber's copy of a published table: created from the publisher's description (constraints and
    indexes included; with a column list, the key and the listed columns only) when missing, checked (columns and
    primary key) when present. With `widen` (a reload), a present copy first gets the columns it lacks (a column
    list widened or cleared since it was made)."""
    source = restricted(with_constraints(pub_server, describe(pub_server, name)), spec)
    existing = lookup_table(sub_server, name) if widen else None
    if existing is not None:
        d = _d(sub_server)
        missing = [c for c in source.columns if existing.column(c.name) is None and not c.pk_position]
        table = d.qualify(existing.name, schema_of(sub_server))
        run_each(sub_server, [d.add_column_sql(table, schema_changes.column_ddl(d, c)) for c in missing])
        if missing and log is not None:
            log(f"{sub_server.name}.{existing.name}: added column(s) {', '.join(c.name for c in missing)}")
    return ensure_copy(sub_server, name, source, optional=[sql.ROWGUID_COLUMN], log=log)


def filter_of(sub: ReplSubscriber, table: str) -> FilterSpec:
    """The subscription's row filter and column list of `table` (none: every row and column)."""
    return FilterSpec.for_table(sub.row_filters, table)


def _column_list(spec: FilterSpec) -> str | None:
    return ", ".join(quote_name(c) for c in spec.columns) if spec.columns else None


def _copied(sub: ReplSubscriber, acct, count: int) -> None:
    """After a copy committed at `count`: the subscriber's own changes are logged from now on (updateable),
    and the catalog says it is done."""
    if acct.is_updateable:
        setup_push(sub, acct)
    ReplSubscriber.objects.filter(pk=sub.pk).update(
        init_state="done", count=count, level=levels.level_of(count), last_error="",
        # An in-sync subscription (re-initialised after a conflict, say) is followed again at once.
        state=ReplSubscriber.IN_SYNC if sub.follow else ReplSubscriber.OFF,
    )  # fmt: skip
    record_position(sub, count, count, force=True)
    # Every table copied whole: what a validation found different is the publisher's now.
    resolve_alerts_of("validation_drift", f"{sub.label}: ", f"{sub.subscriber} copied again at count {count}")
    if sub.halt_count is not None:  # the copy carries the halted transaction's changes: the halt is over
        clear_halt(sub, f"{sub.subscriber} copied again at level {levels.level_of(count)}")


def _stage_table(
    pub_server: Server,
    sub_server: Server,
    name: str,
    reporter,
    staged: list[tuple[TableInfo, str, tuple]],
    spec: FilterSpec = NO_FILTER,
    widen: bool = False,
) -> tuple[TableInfo, str, tuple, native_copy.Copied]:
    """Copy the publisher's rows of `name` (those of the subscription's row filter, its listed columns) into a staging
    table beside the subscriber's copy (created or checked first), added to `staged` before it is filled (the caller
    drops what it staged, also on failure)."""
    d, schema = _d(sub_server), schema_of(sub_server)
    source = describe(pub_server, name)
    dest = create_subscriber_table(pub_server, sub_server, name, log=reporter.log, spec=spec, widen=widen)
    shape = inc_shape(pub_server, source, _column_list(spec), spec.condition or None)
    if spec.active:
        reporter.log(f"{name}: {spec.describe()}")
    moved = moved_columns(shape, dest)
    staging = refresh_sql.staging_name(d, dest.name, "RTIC")
    run_each(
        sub_server,
        [
            f"DROP TABLE IF EXISTS {d.qualify(staging, schema)}",
            create_table_ddl(d, staging, schema, [(m.alias, m.logical) for m in moved], []),
        ],
    )
    staged.append((dest, staging, moved))
    plan = native_copy.FullCopyPlan.of_shape(
        shape, moved, sub_server, d.qualify(staging, schema), tuple(m.alias for m in moved)
    )
    return dest, staging, moved, native_copy.copy_table(plan, reporter)


def _replace_from_staging(sub_server: Server, dest: TableInfo, staging: str, moved: tuple) -> list[tuple[str, list]]:
    d, schema = _d(sub_server), schema_of(sub_server)
    return [(s, []) for s in refresh_sql.replace_content_sql(d, dest.name, schema, staging, moved,
                                                               [m.alias for m in moved])]  # fmt: skip


def init_copy(job, reporter, subscription_id: int) -> dict:
    """Copy every published table to the subscriber and set its level to the publisher's level read
    before the copy: the sync replays what changed during the copy (replays are idempotent)."""
    sub = ReplSubscriber.objects.get(pk=subscription_id)
    acct = publication(sub.server, sub.account)
    pub_server, sub_server = server_named(sub.server), server_named(sub.subscriber)
    with item_lock(lock_name(sub), job), connections.reuse():
        ReplSubscriber.objects.filter(pk=sub.pk).update(init_state="copying", init_at=timezone.now())
        ensure_level_table(sub_server)
        count = publisher_count(pub_server, sub.account)
        d = _d(sub_server)
        schema = schema_of(sub_server)
        items = table_items(acct)
        staged: list[tuple[TableInfo, str, tuple]] = []
        copied = {}
        paths: set[str] = set()
        try:
            for done, item in enumerate(items):
                name = item_table(item.item)
                dest, staging, moved, table_copy = _stage_table(pub_server, sub_server, name, reporter, staged,
                                                                 filter_of(sub, name))  # fmt: skip
                copied[dest.name] = table_copy.rows
                paths.add(table_copy.path)
                reporter.progress(done + 1, len(items) + 1, f"staged {copied[dest.name]} row(s) of {dest.name}")
            definitions = procedure_definitions(pub_server, sub.account)
            if definitions and not d.has_ddl_triggers:
                names = ", ".join(n for n, _ in definitions)
                raise TrxError(
                    f"{sub.account} replicates PostgreSQL procedure definitions ({names}); "
                    f"{sub_server.name} is not PostgreSQL"
                )
            statements: list = [(s, []) for s in sql.replay_context_sql(d, True, None, schema)]
            statements += [(definition, []) for _, definition in definitions]
            for dest, staging, moved in staged:
                statements += _replace_from_staging(sub_server, dest, staging, moved)
            statements += set_subscriber_position(sub_server, sub.server, sub.account, count)
            statements += [(s, []) for s in sql.reset_context_sql(d, schema)]
            with reporter.phase("apply"):
                run_in_transaction(sub_server, statements)
        finally:
            run_each(
                sub_server, [f"DROP TABLE IF EXISTS {d.qualify(s, schema)}" for _, s, _ in staged], ignore_errors=True
            )
        _copied(sub, acct, count)
        reporter.progress(
            len(items) + 1, len(items) + 1, f"copied {sum(copied.values())} row(s) at level {levels.level_of(count)}"
        )
        return {
            "mode": "init",
            "rows": copied,
            "level": levels.level_of(count),
            "count": count,
            "path": " + ".join(sorted(paths)),
        }


def init_from_image(job, reporter, subscription_id: int, image_name: str) -> dict:
    """REPL_INIT_COPY from a publication image (REPL_PUB_INIT_IMAGE): the tables created or checked as for a
    copy, their rows replaced by the image's and the level set to the image's, in one subscriber transaction;
    the sync then replays what the publisher did after it."""
    sub = ReplSubscriber.objects.get(pk=subscription_id)
    acct = publication(sub.server, sub.account)
    sub_server = server_named(sub.subscriber)
    header = image.check_image(image_name, sub.server, sub.account)
    count = int(header["count"])
    with item_lock(lock_name(sub), job), connections.reuse():
        ReplSubscriber.objects.filter(pk=sub.pk).update(init_state="copying", init_at=timezone.now())
        ensure_level_table(sub_server)
        d, schema = _d(sub_server), schema_of(sub_server)
        sources = {t.name: t for t in (sql.definition_table(dfn) for dfn in header["tables"])}
        dests = [
            ensure_copy(sub_server, name, source, optional=[sql.ROWGUID_COLUMN], log=reporter.log)
            for name, source in sources.items()
        ]
        target = Target(sub_server, sub.server, sub.account, source_dialect=server_named(sub.server).dialect)
        target.use_filters(sub.row_filters)

        def work(cursor) -> int:
            for statement in sql.replay_context_sql(d, True, None, schema):
                cursor.execute(statement)
            for dest in dests:
                cursor.execute(f"DELETE FROM {d.qualify(dest.name, schema)}")
            rows = ((table, image.row_image(text)) for table, text in image.rows_of(image_name))
            loaded = replay_rows(cursor, target, rows)
            set_subscriber_position(sub_server, sub.server, sub.account, count, cursor=cursor)
            for statement in sql.reset_context_sql(d, schema):
                cursor.execute(statement)
            return loaded

        with reporter.phase("apply"):
            loaded = with_retries(sub_server, work)
    _copied(sub, acct, count)
    reporter.progress(1, 1, f"loaded {loaded} row(s) of image {image_name} at level {levels.level_of(count)}")
    return {"mode": "image", "image": image_name, "rows": loaded, "level": levels.level_of(count), "count": count}


def published_table(acct, table: str) -> str:
    """The published table `table` names (its item as stored, `DB.DBA.TEST`, or the table's own name), or a
    one-line refusal naming the publication's tables."""
    items = {item.item: item_table(item.item) for item in table_items(acct)}
    for item, name in items.items():
        if table in (item, name):
            return name
    names = items.values()
    raise TrxError(
        f"{table!r} is not a published table of {acct.server}/{acct.account} "
        f"(its tables: {', '.join(repr(n) for n in names) or 'none'})"
    )


def reload_table(job, reporter, subscription_id: int, table: str) -> dict:
    """REPL_RELOAD_TABLE: one published table of a subscription copied from the publisher again and swapped in whole,
    in one subscriber transaction, the subscriber's level kept and its other tables untouched.

    The subscription's item lock is held from before the copy to the swap: its syncs and its follower wait (the
    publication's other subscribers stream on), so the level cannot move. Every transaction up to that level
    committed on the publisher before the copy read its rows, so the copy holds at least the level; the stream then
    resumes after the level and replays what changed since, which converges as after REPL_INIT_COPY (each apply
    writes whole images by key, and a second write of one changes nothing)."""
    sub = ReplSubscriber.objects.get(pk=subscription_id)
    acct = publication(sub.server, sub.account)
    name = published_table(acct, table)
    if acct.is_updateable:
        raise TrxError(
            f"{sub.subscriber}'s copy of {name} is updateable: its own changes not yet pushed would be lost; "
            "re-initialise the subscription instead (REPL_INIT_COPY)"
        )
    pub_server, sub_server = server_named(sub.server), server_named(sub.subscriber)
    d, schema = _d(sub_server), schema_of(sub_server)
    with item_lock(lock_name(sub), job), connections.reuse():
        position = subscriber_position(sub_server, sub.server, sub.account)
        if position is None or sub.init_state != "done":
            raise TrxError(
                f"{sub.subscriber} has no level for {sub.server}/{sub.account} yet; run REPL_INIT_COPY first"
            )
        level, count = position
        staged: list[tuple[TableInfo, str, tuple]] = []
        try:
            dest, staging, moved, table_copy = _stage_table(
                pub_server, sub_server, name, reporter, staged, filter_of(sub, name), widen=True
            )
            reporter.progress(1, 2, f"staged {table_copy.rows} row(s) of {dest.name}")
            statements: list = [(s, []) for s in sql.replay_context_sql(d, True, None, schema)]
            statements += _replace_from_staging(sub_server, dest, staging, moved)
            statements += [(s, []) for s in sql.reset_context_sql(d, schema)]
            with reporter.phase("apply"):
                run_in_transaction(sub_server, statements)
        finally:
            run_each(sub_server, [f"DROP TABLE IF EXISTS {d.qualify(s, schema)}" for _, s, _ in staged],
                     ignore_errors=True)  # fmt: skip
    reporter.progress(2, 2, f"reloaded {table_copy.rows} row(s) of {dest.name} at level {level}")
    return {"table": dest.name, "rows": table_copy.rows, "level": level, "count": count, "path": table_copy.path}

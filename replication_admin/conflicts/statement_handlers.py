"""The conflict resolver statements: REPL_ADD_SNAPSHOT_CR (a bi-directional publication's table) and REPL_ADD_CR
(an updateable transactional publication's table), each carried out by `conflicts.actions.do_add_resolver`."""

from __future__ import annotations

from replication_admin.bidir import actions as bidir_actions
from replication_admin.conflicts import actions, chains
from replication_admin.core.statement_handlers import Caller, Outcome, handles
from replication_admin.engine import statements as st
from replication_admin.models import TransactionalConflictResolver
from replication_admin.transactional import actions as trx_actions


@handles(st.AddSnapshotCr)
def add_snapshot_resolver(statement: st.AddSnapshotCr, caller: Caller) -> Outcome:
    table = statement.table
    publication = bidir_actions.publication_for(caller.server(table.server, "the table"), table.table)
    assert publication.server is not None
    columns = chains.table_columns(publication.server, publication.table)
    resolver = actions.do_add_resolver(
        caller.actor, publication.item, columns, statement.cr_type, statement.cls, order=statement.order,
        column=statement.column, expression=statement.expression, suffix=statement.suffix,
    )  # fmt: skip
    return Outcome(True, f"added the {statement.cr_type} conflict resolver {resolver.proc} ({statement.cls})")


@handles(st.AddCr)
def add_transactional_resolver(statement: st.AddCr, caller: Caller) -> Outcome:
    server = caller.server(statement.table.server, "the table")
    info = trx_actions.published_table(server, statement.table.table)
    resolver = actions.do_add_resolver(
        caller.actor, f"{server.name}.{info.name}", chains.table_columns(server, info.name), statement.cr_type,
        statement.cls, order=statement.order, column=statement.column, expression=statement.expression,
        suffix=statement.suffix, model=TransactionalConflictResolver,
    )  # fmt: skip
    return Outcome(True, f"added the {statement.cr_type} conflict resolver {resolver.proc} ({statement.cls})")

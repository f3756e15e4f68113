"""Running statements of the statement language (replsql, the statement console, scheduled events).

Each statement is parsed by engine.statements and carried out by its handler: the function its feature's
`statement_handlers` module registered for the statement's class (`core.statement_handlers`), which calls the
feature's do_* actions. No text of a statement ever reaches a database as SQL. Statements run in order and the
first failure stops the rest, so a script is never half-applied past an error it did not see.

This module knows no statement by name: parse, look up the handler, call it, record what failed.
"""

from __future__ import annotations

from replication_admin.bidir import statement_handlers as bidir_handlers
from replication_admin.compare import statement_handlers as compare_handlers
from replication_admin.conflicts import statement_handlers as conflict_handlers
from replication_admin.core.audit import Actor, PermissionDenied, record
from replication_admin.core.errors import ReplicationError
from replication_admin.core.statement_handlers import Caller, Outcome, StatementFailed, handler_for
from replication_admin.engine import statements as st
from replication_admin.models import AuditEntry, Server
from replication_admin.servers import statement_handlers as server_handlers
from replication_admin.snapshots import statement_handlers as snapshot_handlers
from replication_admin.transactional import statement_handlers as trx_handlers

# Every statement's handler, registered by importing its feature's statement_handlers module.
HANDLER_MODULES = (
    bidir_handlers, compare_handlers, conflict_handlers, server_handlers, snapshot_handlers, trx_handlers,
)  # fmt: skip

__all__ = ["HANDLER_MODULES", "Outcome", "StatementFailed", "execute", "run_statement", "shown_text"]


def run_statement(actor: Actor, statement: st.Statement, context: Server | None, wait: bool) -> Outcome:
    """Carry out one parsed statement as `actor`, on the context server, waiting for its jobs or not."""
    outcome = handler_for(statement)(statement, Caller(actor, context, wait))
    outcome.statement = statement.text or statement.verb
    return outcome


def shown_text(statement: st.Statement) -> str:
    """The statement as shown and recorded: a password given to REPL_SNP_SERVER, REPL_SUBSCRIBE or
    REPL_SYNC never is."""
    return st.masked_text(statement)


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
            outcomes.append(Outcome(False, str(exc), statement=shown))
            break
        outcome.statement = shown
        outcomes.append(outcome)
        if not outcome.ok:
            break
    return outcomes

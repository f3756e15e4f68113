"""The statement language's handlers, by statement class: what a handler is given (`Caller`), what it returns
(`Outcome`) or raises (`StatementFailed`), and the server look-ups the features' handlers share.

Each feature's `statement_handlers.py` registers one function per statement it carries out with `@handles`
and calls its own actions; `replication_admin.statements` parses a script, finds each statement's handler
here and calls it. A statement class without a handler is an error naming it, never a silent no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from replication_admin.core.audit import Actor
from replication_admin.core.words import plain
from replication_admin.engine import statements as st
from replication_admin.models import JobRun, Server


@dataclass
class Outcome:
    ok: bool
    message: str
    job_id: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    statement: str = ""  # the statement as shown and recorded (filled in when it has run)


class StatementFailed(Exception):
    pass


@dataclass(frozen=True)
class Caller:
    """Who runs a statement, on which context server (`replsql --server`, the console's choice; None: none
    chosen) and whether it waits for the jobs it starts."""

    actor: Actor
    context: Server | None
    wait: bool

    @property
    def sync(self) -> bool | None:
        """A started job's `sync`: run here when the caller waits, else as the settings say."""
        return True if self.wait else None

    def server(self, name: str | None, what: str) -> Server:
        """The server `name` names, or the context server when it names none (`what`: the named thing)."""
        return resolve_server(name, self.context, what)

    def context_server(self, what: str) -> Server:
        """The context server, which the statement `what` runs on."""
        if self.context is None:
            raise StatementFailed(f"{what} runs on a server: choose the context server (replsql --server NAME)")
        return self.context


S = TypeVar("S", bound=st.Statement)
Handler = Callable[[Any, Caller], Outcome]

HANDLERS: dict[type[st.Statement], Handler] = {}


def handles(kind: type[S]) -> Callable[[Callable[[S, Caller], Outcome]], Callable[[S, Caller], Outcome]]:
    """Register the decorated function as the one handler of the statement class `kind`."""

    def register(handler: Callable[[S, Caller], Outcome]) -> Callable[[S, Caller], Outcome]:
        if kind in HANDLERS and HANDLERS[kind] is not handler:
            raise ValueError(f"{kind.__name__} has two handlers: {HANDLERS[kind].__qualname__}, {handler.__qualname__}")
        HANDLERS[kind] = handler
        return handler

    return register


def handler_for(statement: st.Statement) -> Handler:
    handler = HANDLERS.get(type(statement))
    if handler is None:
        raise StatementFailed(f"{statement.verb} cannot be run here: no handler carries it out")
    return handler


# --- what the features' handlers share ---------------------------------------------------------------------


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


def server_arg(value: st.ServerArg) -> Server:
    """A server argument: a name, or REPL_SERVER_NAME('dsn')."""
    return server_by_dsn(value.dsn) if isinstance(value, st.ServerNameOf) else resolve_server(value, None, "server")


def job_outcome(job: JobRun, what: str) -> Outcome:
    """The outcome of a statement that started the job `what` (read again: it may have run meanwhile)."""
    job = JobRun.objects.get(pk=job.pk)
    if job.state == JobRun.State.SUCCEEDED:
        return Outcome(True, f"{what}: {plain(job.result) or 'done'}", job.pk, job.result or {})
    if job.state == JobRun.State.SKIPPED:  # a scheduled run while another job applied the item
        return Outcome(True, f"{what} {job.message}", job.pk)
    if job.state in JobRun.FINISHED:
        return Outcome(False, f"{what} {job.state}: {job.error}", job.pk)
    return Outcome(True, f"{what} queued as job #{job.pk}", job.pk)

"""Published procedures (PostgreSQL publishers): calls logged with their argument types, definitions tracked."""

from __future__ import annotations

import pyodbc

from replication_admin.core import connections
from replication_admin.core.introspection import lookup_table
from replication_admin.core.transactions import (
    run_each,
    run_in_transaction,
)
from replication_admin.engine import transactional_sql as sql
from replication_admin.models import (
    Server,
)
from replication_admin.transactional.lookups import (
    TrxError,
    _d,
    schema_of,
)


def describe_procedure(server: Server, name: str) -> tuple[sql.Procedure, str]:
    """A procedure of the publisher's schema and the identity PostgreSQL reports for it."""
    if not _d(server).has_ddl_triggers:
        raise TrxError(
            f"publishing procedures needs a PostgreSQL publisher; {server.name} is {server.get_dialect_display()}, "
            "which has no DDL triggers to keep a redefined procedure's calls logged (use REPL_TEXT there)"
        )
    d = _d(server)
    schema = schema_of(server) or d.default_schema
    with connections.connect(server, readonly=True) as conn:
        rows = conn.cursor().execute(d.procedure_sql(), [schema, name]).fetchall()
        if not rows:
            raise TrxError(f"procedure {name!r} does not exist on {server.name}")
        if len(rows) > 1:
            raise TrxError(f"{name!r} is overloaded on {server.name}; a published procedure must have one signature")
        oid, kind, arguments, argnames, types, modes, definition = rows[0]
        identity = conn.cursor().execute(d.procedure_identity_sql(), [int(oid)]).fetchone()[0]
    if kind != "p":
        raise TrxError(f"{name!r} is a function; only procedures are published (calls return nothing to replay)")
    if modes and any(m != "i" for m in str(modes).split(",")):
        raise TrxError(f"{name!r} has output parameters; only procedures with input parameters can be replicated")
    names = tuple(n for n in str(argnames or "").strip("{}").split(",") if n)
    type_list = tuple(t for t in str(types or "").split(",") if t)
    if len(names) != len(type_list):
        raise TrxError(f"every parameter of {name!r} needs a name to be published")
    proc = sql.Procedure(name, schema, str(arguments or ""), names, type_list, str(definition))
    return proc, str(identity)


def publish_procedure(server: Server, account: str, name: str, options: int) -> None:
    """Wrap the procedure so its calls are logged (options 1, 3) and track its definition (2, 3)."""
    d = _d(server)
    schema = schema_of(server)
    proc, identity = describe_procedure(server, name)
    events, _ = sql.event_trigger_ddl(d, schema)
    try:
        run_each(server, [*sql.proc_table_ddl(d, schema), *events])
    except pyodbc.Error as exc:
        raise TrxError(
            f"{server.name} refused the DDL trigger that tracks published procedures "
            f"({connections.driver_message(exc)}); it needs a superuser connection"
        ) from None
    q = d.quote
    body = proc.body_name(d)
    wrapper = sql.wrapper_ddl(d, proc, account, schema) if options & sql.CALLS else None
    statements: list = [(f"SELECT set_config('{sql.WRAPPING_SETTING}', 'on', true)", [])]
    if wrapper:
        statements += [(f"ALTER PROCEDURE {identity} RENAME TO {q(body)}", []), (wrapper, [])]
    columns = ", ".join(
        q(c) for c in ("NAME", "ACCOUNT", "OPTIONS", "IDENT", "BODY", "BODY_IDENT", "WRAPPER", "APPEND", "DEF")
    )
    body_identity = f"{d.qualify(body, proc.schema)}({', '.join(proc.types)})"
    statements.append(
        (
            f"INSERT INTO {d.qualify(sql.PROC_TABLE, schema)} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                proc.name,
                account,
                options,
                identity,
                body if wrapper else None,
                body_identity if wrapper else None,
                wrapper,
                sql.append_function(d, account, schema),
                proc.definition,
            ],
        )
    )
    run_in_transaction(server, statements)


def unpublish_procedure(server: Server, name: str) -> None:
    d = _d(server)
    schema = schema_of(server)
    q = d.quote
    table = d.qualify(sql.PROC_TABLE, schema)
    with connections.connect(server, readonly=True) as conn:
        row = (
            conn.cursor()
            .execute(f"SELECT {q('IDENT')}, {q('BODY')}, {q('WRAPPER')} FROM {table} WHERE {q('NAME')} = ?", [name])
            .fetchone()
        )
    if row is None:
        return
    identity, body, wrapper = row
    statements: list = [(f"SELECT set_config('{sql.WRAPPING_SETTING}', 'on', true)", [])]
    if wrapper:
        statements += [
            (f"DROP PROCEDURE IF EXISTS {identity}", []),
            (f"ALTER PROCEDURE {d.qualify(body, schema or 'public')} RENAME TO {q(name)}", []),
        ]
    statements.append((f"DELETE FROM {table} WHERE {q('NAME')} = ?", [name]))
    run_in_transaction(server, statements)


def procedure_definitions(server: Server, account: str) -> list[tuple[str, str]]:
    """(name, definition) of the account's procedures whose definitions are replicated."""
    if not _d(server).has_ddl_triggers:
        return []
    d = _d(server)
    q = d.quote
    table = d.qualify(sql.PROC_TABLE, schema_of(server))
    if lookup_table(server, sql.PROC_TABLE) is None:
        return []
    with connections.connect(server, readonly=True) as conn:
        rows = (
            conn.cursor()
            .execute(
                f"SELECT {q('NAME')}, {q('DEF')} FROM {table} WHERE {q('ACCOUNT')} = ? AND {q('OPTIONS')} IN (2, 3) "
                f"ORDER BY {q('NAME')}",
                [account],
            )
            .fetchall()
        )
    return [(str(r[0]), str(r[1])) for r in rows]

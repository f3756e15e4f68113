"""The statements that name servers: REPL_SNP_SERVER (declare a subscriber server: its login, a check) and
REPL_SERVER_NAME (a registered server's replication name)."""

from __future__ import annotations

from replication_admin.core.statement_handlers import Caller, Outcome, StatementFailed, handles, server_by_dsn
from replication_admin.engine import statements as st
from replication_admin.servers.actions import ServerData, do_check_server, do_update_server


@handles(st.SnpServer)
def declare_server(statement: st.SnpServer, caller: Caller) -> Outcome:
    server = server_by_dsn(statement.dsn)
    if statement.user is not None and (statement.user != server.user or statement.password is not None):
        data = ServerData(
            name=server.name, dialect=server.dialect, host=server.host, port=server.port, database=server.database,
            schema=server.schema, user=statement.user, password=statement.password, odbc_dsn=server.odbc_dsn,
            description=server.description,
        )  # fmt: skip
        server = do_update_server(caller.actor, server, data)
    result = do_check_server(caller.actor, server)
    if not result.ok:
        raise StatementFailed(f"server {server.name} cannot be reached: {result.message}")
    return Outcome(True, server.name, details={"server": server.name})


@handles(st.ServerNameStatement)
def server_name(statement: st.ServerNameStatement, caller: Caller) -> Outcome:
    name = server_by_dsn(statement.dsn).name
    return Outcome(True, name, details={"server": name})

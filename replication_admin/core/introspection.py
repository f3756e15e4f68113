"""Tables as they are on a registered server, found the way a DBA names them."""

from __future__ import annotations

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.engine import dialects
from replication_admin.engine.schema import TableInfo
from replication_admin.models import Server


def lookup_table(server: Server, name: str) -> TableInfo | None:
    """The table as it is on the server: the exact name first (one catalog query), then a unique
    case-insensitive match among all tables. A name the server's dialect cannot hold names no table (and is
    never sent: MariaDB's catalog would fail comparing it)."""
    if dialects.get(server.dialect).name_problem(name):
        return None
    with connections.connect(server, readonly=True) as conn:
        try:
            return connections.describe_table(server, name, conn=conn)
        except connections.TableNotFound:
            pass
        sql, params = dialects.get(server.dialect).tables_sql(server.schema)
        tables = [row[0] for row in conn.cursor().execute(sql, params).fetchall()]
        folded = [t for t in tables if t.lower() == name.lower()]
        return connections.describe_table(server, folded[0], conn=conn) if len(folded) == 1 else None


def find_table(server: Server, name: str) -> str | None:
    """The table's real name on the server, or None."""
    info = lookup_table(server, name)
    return info.name if info is not None else None


def require_table(server: Server, name: str) -> TableInfo:
    info = lookup_table(server, name)
    if info is None:
        problem = dialects.get(server.dialect).name_problem(name)
        reason = f" ({problem.split(': ')[0]})" if problem else ""
        raise ReplicationError(f"table {name!r} does not exist on server {server.name!r}{reason}")
    return info

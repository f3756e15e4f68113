"""Per-dialect knowledge. `get(name)` returns the singleton for a dialect name.

DIALECTS is the one list of dialects: the catalog's choices, the server form, the query checks, Spark's JDBC
jars and the connections read it. Adding a dialect is its module here and its line below."""

from __future__ import annotations

from replication_admin.engine.dialects.base import (
    KEEPALIVE_COUNT,
    KEEPALIVE_IDLE,
    KEEPALIVE_INTERVAL,
    Address,
    AddressError,
    Dialect,
    EmptyTable,
    IdentifierError,
    ImageColumn,
    JdbcEndpoint,
    StreamWire,
    keepalive_ms,
)
from replication_admin.engine.dialects.mysql import MySQL
from replication_admin.engine.dialects.postgresql import PostgreSQL
from replication_admin.engine.dialects.sqlite import SQLite
from replication_admin.engine.dialects.textonly import DB2, Informix, Oracle, SQLServer

DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        SQLite(),
        PostgreSQL(),
        MySQL(),
        SQLServer(),
        Oracle(),
        DB2(),
        Informix(),
    )
}


def get(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; known: {', '.join(DIALECTS)}") from None


def live_names() -> tuple[str, ...]:
    """The dialects servers may be registered with (the console connects to them), in registry order."""
    return tuple(name for name, d in DIALECTS.items() if d.live)


def register(dialect: Dialect) -> Dialect:
    """Add a dialect to the registry at run time (a name already registered is refused)."""
    if not dialect.name or dialect.name in DIALECTS:
        raise ValueError(f"a dialect needs a name of its own; {dialect.name!r} is taken or empty")
    DIALECTS[dialect.name] = dialect
    return dialect


def unregister(name: str) -> None:
    """Take a dialect added with register() out of the registry again."""
    DIALECTS.pop(name, None)


__all__ = [
    "DIALECTS",
    "KEEPALIVE_COUNT",
    "KEEPALIVE_IDLE",
    "KEEPALIVE_INTERVAL",
    "Address",
    "AddressError",
    "Dialect",
    "EmptyTable",
    "IdentifierError",
    "ImageColumn",
    "JdbcEndpoint",
    "StreamWire",
    "get",
    "keepalive_ms",
    "live_names",
    "register",
    "unregister",
]

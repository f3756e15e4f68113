"""Per-dialect knowledge. `get(name)` returns the singleton for a dialect name."""

from __future__ import annotations

from replication_admin.engine.dialects.base import (
    Address,
    AddressError,
    Dialect,
    IdentifierError,
    JdbcEndpoint,
)
from replication_admin.engine.dialects.mysql import MySQL
from replication_admin.engine.dialects.postgresql import PostgreSQL
from replication_admin.engine.dialects.sqlite import SQLite
from replication_admin.engine.dialects.textonly import DB2, Informix, Oracle, SQLServer

DIALECTS: dict[str, Dialect] = {
    d.name: d for d in (SQLite(), PostgreSQL(), MySQL(), SQLServer(), Oracle(), DB2(), Informix())
}
LIVE_DIALECTS = tuple(name for name, d in DIALECTS.items() if d.live)


def get(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; known: {', '.join(DIALECTS)}") from None


__all__ = [
    "DIALECTS",
    "LIVE_DIALECTS",
    "Address",
    "AddressError",
    "Dialect",
    "IdentifierError",
    "JdbcEndpoint",
    "get",
]

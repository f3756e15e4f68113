"""What every dialect knows: quoting, type mapping, introspection SQL, ODBC and JDBC addresses."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

from replication_admin.engine.types import LogicalType

HOSTNAME = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
IPV4 = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
IPV6 = re.compile(r"^\[?[0-9A-Fa-f:.]+\]?$")


class IdentifierError(ValueError):
    """An identifier that no database can hold (empty, NUL, too long)."""


class AddressError(ValueError):
    """A host, port, database or path that cannot be turned into a connection address."""


def check_identifier(name: str, max_length: int = 128) -> str:
    if not isinstance(name, str) or name == "":
        raise IdentifierError("an identifier must not be empty")
    if "\x00" in name:
        raise IdentifierError(f"identifier {name!r} contains a NUL character")
    if len(name) > max_length:
        raise IdentifierError(f"identifier {name[:40]!r}... is longer than {max_length} characters")
    return name


def check_host(host: str) -> str:
    host = (host or "").strip()
    if IPV4.match(host) and all(0 <= int(part) <= 255 for part in host.split(".")):
        return host
    if HOSTNAME.match(host) or (":" in host and IPV6.match(host)):
        return host
    raise AddressError(f"host {host!r} is not a valid host name or IP address")


def check_port(port: int | str | None) -> int:
    try:
        value = int(port)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AddressError(f"port {port!r} is not a number") from None
    if not 1 <= value <= 65535:
        raise AddressError(f"port {value} is outside 1-65535")
    return value


_ODBC_SPECIAL = set(";{}=\x00")


def odbc_value(value: str, braces: bool = True) -> str:
    """An ODBC connection-string value that cannot start a new attribute.

    Plain values go as they are (psqlODBC takes braces literally for most attributes); a value with
    `;`, `{`, `}` or `=`, or with edge spaces, is brace-quoted where the driver understands that and
    refused where it does not.
    """
    text = str(value)
    if "\x00" in text:
        raise AddressError("a connection value must not contain a NUL character")
    if not (_ODBC_SPECIAL & set(text)) and text == text.strip():
        return text
    if not braces:
        raise AddressError(f"{text!r} contains ; {{ }} = or edge spaces, which this ODBC driver cannot take")
    return "{" + text.replace("}", "}}") + "}"


@dataclass(frozen=True)
class Address:
    """The fields of a registered server that locate it; built by the console from validated input."""

    dialect: str
    host: str = ""
    port: int | None = None
    database: str = ""  # database name (PostgreSQL, MariaDB) or file path (SQLite)
    schema: str = ""  # PostgreSQL schema the server's tables live in
    user: str = ""
    password: str = ""
    odbc_dsn: str = ""  # a named DSN replaces the DSN-less driver string when set


@dataclass(frozen=True)
class JdbcEndpoint:
    url: str
    properties: dict[str, str] = field(default_factory=dict)


class Dialect:
    name: str = ""
    label: str = ""
    live: bool = False  # True when the console can connect to it (ODBC + JDBC)
    default_port: int | None = None
    odbc_driver: str = ""
    jdbc_driver: str = ""
    max_identifier: int = 128
    quote_char: str = '"'

    # --- quoting -----------------------------------------------------------------------------------
    def quote(self, name: str) -> str:
        check_identifier(name, self.max_identifier)
        q = self.quote_char
        return q + name.replace(q, q + q) + q

    def qualify(self, table: str, schema: str = "") -> str:
        return f"{self.quote(schema)}.{self.quote(table)}" if schema else self.quote(table)

    def literal(self, value: str) -> str:
        return "'" + str(value).replace("'", "''") + "'"

    # --- types -------------------------------------------------------------------------------------
    def parse_type(self, declared: str) -> LogicalType:
        raise NotImplementedError

    def render_type(self, logical: LogicalType) -> str:
        raise NotImplementedError

    # --- introspection (control plane; parameters are bound with '?') -------------------------------
    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        raise NotImplementedError

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        """Rows of (column name, declared type, nullable 0/1, primary key position or 0)."""
        raise NotImplementedError

    # --- addresses ---------------------------------------------------------------------------------
    def odbc_connection_string(self, address: Address) -> str:
        raise NotImplementedError

    def jdbc_endpoint(self, address: Address) -> JdbcEndpoint:
        raise NotImplementedError

    # Connection properties that make a JDBC session refuse writes (source reads run read-only).
    read_only_properties: dict[str, str] = {}

    def read_only_endpoint(self, address: Address) -> JdbcEndpoint:
        endpoint = self.jdbc_endpoint(address)
        return JdbcEndpoint(url=endpoint.url, properties={**endpoint.properties, **self.read_only_properties})

    def url_database(self, database: str) -> str:
        if not database:
            raise AddressError("a database name is required")
        return urllib.parse.quote(database, safe="")

from __future__ import annotations

from replication_admin.engine.dialects.base import (
    Address,
    AddressError,
    Dialect,
    JdbcEndpoint,
    check_host,
    check_port,
    odbc_value,
)
from replication_admin.engine.types import LogicalType, split_declared

_PARSE = {
    "smallint": "smallint",
    "int2": "smallint",
    "integer": "integer",
    "int": "integer",
    "int4": "integer",
    "bigint": "bigint",
    "int8": "bigint",
    "real": "real",
    "float4": "real",
    "double precision": "double",
    "float8": "double",
    "boolean": "boolean",
    "bool": "boolean",
    "date": "date",
    "text": "long_varchar",
    "bytea": "long_varbinary",
}


class PostgreSQL(Dialect):
    name = "postgresql"
    label = "PostgreSQL"
    live = True
    default_port = 5432
    odbc_driver = "PostgreSQL Unicode"
    jdbc_driver = "org.postgresql.Driver"
    max_identifier = 63
    read_only_properties = {"readOnly": "true", "readOnlyMode": "always"}

    def parse_type(self, declared: str) -> LogicalType:
        base, first, second, _rest = split_declared(declared)
        if base in _PARSE:
            return LogicalType(_PARSE[base])
        if base in {"numeric", "decimal"}:
            return LogicalType("numeric", precision=first, scale=second if first is not None else None)
        if base in {"character varying", "varchar"}:
            return LogicalType("varchar", length=first)
        if base in {"character", "char", "bpchar"}:
            return LogicalType("varchar", length=first or 1)
        if base.startswith("timestamp"):
            return LogicalType("timestamp")
        if base.startswith("time"):
            return LogicalType("time")
        return LogicalType("other")

    def render_type(self, logical: LogicalType) -> str:
        kind = logical.kind
        if kind in {"varchar", "nvarchar"}:
            return f"varchar({logical.length})" if logical.length else "text"
        if kind == "numeric":
            if logical.precision is None:
                return "numeric"
            return f"numeric({logical.precision}, {logical.scale or 0})"
        return {
            "long_varchar": "text",
            "long_nvarchar": "text",
            "smallint": "smallint",
            "integer": "integer",
            "bigint": "bigint",
            "real": "real",
            "double": "double precision",
            "boolean": "boolean",
            "date": "date",
            "time": "time(6)",
            "timestamp": "timestamp(6)",
            "varbinary": "bytea",
            "long_varbinary": "bytea",
            "other": "text",
        }[kind]

    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT c.relname FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind IN ('r', 'p') ORDER BY c.relname",
            [schema or "public"],
        )

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
            "CASE WHEN a.attnotnull THEN 0 ELSE 1 END, "
            "COALESCE((SELECT k.ord FROM pg_catalog.pg_index i, "
            "  unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
            "  WHERE i.indrelid = c.oid AND i.indisprimary AND k.attnum = a.attnum), 0) "
            "FROM pg_catalog.pg_attribute a "
            "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            [schema or "public", table],
        )

    def odbc_connection_string(self, address: Address) -> str:
        if address.odbc_dsn:
            base = f"DSN={odbc_value(address.odbc_dsn, braces=False)};"
        else:
            base = (
                f"DRIVER={{{self.odbc_driver}}};SERVER={check_host(address.host)};"
                f"PORT={check_port(address.port or self.default_port)};"
                f"DATABASE={odbc_value(address.database, braces=False)};"
                "pqopt={connect_timeout=10};"
            )
        return base + f"UID={odbc_value(address.user, braces=False)};PWD={odbc_value(address.password)};"

    def jdbc_endpoint(self, address: Address) -> JdbcEndpoint:
        if not address.host:
            raise AddressError("a host is required for a JDBC connection")
        host = check_host(address.host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        url = (
            f"jdbc:postgresql://{host}:{check_port(address.port or self.default_port)}/"
            f"{self.url_database(address.database)}"
        )
        properties = {
            "driver": self.jdbc_driver,
            "user": address.user,
            "password": address.password,
            "reWriteBatchedInserts": "true",
            "stringtype": "unspecified",
            "ApplicationName": "replication_admin",
        }
        if address.schema:
            properties["currentSchema"] = address.schema
        return JdbcEndpoint(url=url, properties=properties)

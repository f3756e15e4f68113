"""SQLite.

Storage formats chosen for values SQLite has no type for (see docs/sqlite-storage.md):
- timestamp: TEXT 'YYYY-MM-DD HH:MM:SS.ffffff' in UTC, always six fraction digits, so text order is time
  order and no precision is lost (Spark's JDBC writer would otherwise store epoch milliseconds);
- date: TEXT 'YYYY-MM-DD'; time: TEXT 'HH:MM:SS.ffffff';
- numeric(p, s): declared DECIMAL_TEXT(p, s), which has TEXT affinity, so 38-digit values are kept exactly
  (a DECIMAL column has NUMERIC affinity and would round them to a double);
- boolean: INTEGER 0/1; binary: BLOB.
"""

from __future__ import annotations

import os

from replication_admin.engine.dialects.base import Address, AddressError, Dialect, JdbcEndpoint, odbc_value
from replication_admin.engine.types import LogicalType, split_declared

TIMESTAMP_FORMAT_SPARK = "yyyy-MM-dd HH:mm:ss.SSSSSS"
TIMESTAMP_FORMAT_PY = "%Y-%m-%d %H:%M:%S.%f"


def check_sqlite_path(path: str) -> str:
    if not path:
        raise AddressError("a database file path is required for SQLite")
    if not os.path.isabs(path):
        raise AddressError(f"SQLite path {path!r} must be absolute")
    if any(ch in path for ch in "?#;{}\x00\n\r"):
        raise AddressError(f"SQLite path {path!r} contains a character that is not allowed (? # ; {{ }})")
    return os.path.normpath(path)


class SQLite(Dialect):
    name = "sqlite"
    label = "SQLite"
    live = True
    odbc_driver = "SQLite3"
    jdbc_driver = "org.sqlite.JDBC"
    max_identifier = 1024
    read_only_properties = {"open_mode": "1"}  # SQLITE_OPEN_READONLY

    def parse_type(self, declared: str) -> LogicalType:
        base, first, second, _rest = split_declared(declared)
        if base in {"bigint", "int8", "unsigned big int"}:
            return LogicalType("bigint")
        if base in {"smallint", "tinyint", "int2"}:
            return LogicalType("smallint")
        if base in {"boolean", "bool"}:
            return LogicalType("boolean")
        if "int" in base:
            return LogicalType("integer")
        if base in {"decimal_text", "numeric_text", "decimal", "numeric"}:
            return LogicalType("numeric", precision=first, scale=second if first is not None else None)
        if base in {"nvarchar", "nchar", "national varchar", "national character"}:
            return LogicalType("nvarchar", length=first)
        if "char" in base:
            return LogicalType("varchar", length=first) if first else LogicalType("long_varchar")
        if "clob" in base or "text" in base:
            return LogicalType("long_varchar")
        if base == "varbinary":
            return LogicalType("varbinary", length=first)
        if base == "blob":
            return LogicalType("long_varbinary")
        if base == "real" or "floa" in base or "doub" in base:
            return LogicalType("double")
        if base in {"datetime", "timestamp"}:
            return LogicalType("timestamp")
        if base == "date":
            return LogicalType("date")
        if base == "time":
            return LogicalType("time")
        return LogicalType("other")

    def render_type(self, logical: LogicalType) -> str:
        kind = logical.kind
        if kind in {"varchar", "nvarchar"}:
            prefix = "VARCHAR" if kind == "varchar" else "NVARCHAR"
            return f"{prefix}({logical.length})" if logical.length else "TEXT"
        if kind == "numeric":
            if logical.precision is None:
                return "DECIMAL_TEXT"
            return f"DECIMAL_TEXT({logical.precision}, {logical.scale or 0})"
        if kind == "varbinary":
            return f"VARBINARY({logical.length})" if logical.length else "BLOB"
        return {
            "long_varchar": "TEXT",
            "long_nvarchar": "TEXT",
            "smallint": "SMALLINT",
            "integer": "INTEGER",
            "bigint": "BIGINT",
            "real": "REAL",
            "double": "DOUBLE",
            "boolean": "BOOLEAN",
            "date": "DATE",
            "time": "TIME",
            "timestamp": "TIMESTAMP",
            "long_varbinary": "BLOB",
            "other": "TEXT",
        }[kind]

    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name",
            [],
        )

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            'SELECT name, type, CASE WHEN "notnull" = 1 OR pk > 0 THEN 0 ELSE 1 END, pk '
            "FROM pragma_table_info(?) ORDER BY cid",
            [table],
        )

    def odbc_connection_string(self, address: Address) -> str:
        if address.odbc_dsn:
            return f"DSN={odbc_value(address.odbc_dsn)};"
        path = check_sqlite_path(address.database)
        return f"DRIVER={{{self.odbc_driver}}};Database={odbc_value(path)};Timeout=30000;"

    def jdbc_endpoint(self, address: Address) -> JdbcEndpoint:
        path = check_sqlite_path(address.database)
        return JdbcEndpoint(
            url=f"jdbc:sqlite:{path}",
            properties={"driver": self.jdbc_driver, "busy_timeout": "30000"},
        )

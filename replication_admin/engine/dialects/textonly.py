"""Dialects the console generates DDL for but does not connect to (SQL Server, Oracle, DB2, Informix).

Their type mapping is the reference's data type mapping table, row for row.
"""

from __future__ import annotations

from replication_admin.engine.dialects.base import (
    Address,
    AddressError,
    Dialect,
    JdbcEndpoint,
    check_identifier,
)
from replication_admin.engine.types import LogicalType, split_declared


class TextOnlyDialect(Dialect):
    live = False
    # Rows of the reference table: logical kind -> (rendering without length, rendering with length).
    mapping: dict[str, tuple[str, str | None]] = {}
    numeric_default = ""
    numeric_sized = ""

    def render_type(self, logical: LogicalType) -> str:
        if logical.kind == "numeric":
            if logical.precision is None:
                return self.numeric_default
            return self.numeric_sized.format(p=logical.precision, s=logical.scale or 0)
        plain, sized = self.mapping[logical.kind]
        if sized and logical.length:
            return sized.format(n=logical.length)
        return plain

    def parse_type(self, declared: str) -> LogicalType:
        base, first, second, _rest = split_declared(declared)
        for kind, (plain, sized) in self.mapping.items():
            if base == plain.lower() or (sized and base == sized.split("(")[0].lower()):
                if kind in {"varchar", "nvarchar", "varbinary"}:
                    return LogicalType(kind, length=first)
                return LogicalType(kind)
        if base == self.numeric_sized.split("(")[0].lower():
            return LogicalType("numeric", precision=first, scale=second)
        return LogicalType("other")

    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        raise AddressError(f"{self.label} servers are not reachable from this console (DDL generation only)")

    columns_sql = tables_sql  # type: ignore[assignment]

    def odbc_connection_string(self, address: Address) -> str:
        raise AddressError(f"{self.label} servers are not reachable from this console (DDL generation only)")

    def jdbc_endpoint(self, address: Address) -> JdbcEndpoint:
        raise AddressError(f"{self.label} servers are not reachable from this console (DDL generation only)")


class SQLServer(TextOnlyDialect):
    name = "mssql"
    label = "SQL Server"
    max_identifier = 128

    def quote(self, name: str) -> str:
        check_identifier(name, self.max_identifier)
        return "[" + name.replace("]", "]]") + "]"

    numeric_default = "numeric(38, 15)"
    numeric_sized = "numeric({p}, {s})"
    mapping = {
        "varchar": ("varchar(8000)", "varchar({n})"),
        "nvarchar": ("nvarchar(4000)", "nvarchar({n})"),
        "long_varchar": ("text", None),
        "long_nvarchar": ("ntext", None),
        "integer": ("int", None),
        "smallint": ("smallint", None),
        "bigint": ("bigint", None),
        "real": ("real", None),
        "double": ("float", None),
        "boolean": ("bit", None),
        "date": ("datetime", None),
        "time": ("datetime", None),
        "timestamp": ("datetime", None),
        "varbinary": ("varbinary(8000)", "varbinary({n})"),
        "long_varbinary": ("image", None),
        "other": ("ntext", None),
    }


class Oracle(TextOnlyDialect):
    name = "oracle"
    label = "Oracle"
    max_identifier = 30
    numeric_default = "NUMERIC(38, 15)"
    numeric_sized = "NUMERIC({p}, {s})"
    mapping = {
        "varchar": ("VARCHAR2(4000)", "VARCHAR2({n})"),
        "nvarchar": ("NVARCHAR2(4000)", "NVARCHAR2({n})"),
        "long_varchar": ("CLOB", None),
        "long_nvarchar": ("NCLOB", None),
        "integer": ("INTEGER", None),
        "smallint": ("SMALLINT", None),
        "bigint": ("NUMBER(19)", None),
        "real": ("FLOAT", None),
        "double": ("DOUBLE PRECISION", None),
        "boolean": ("NUMBER(1)", None),
        "date": ("DATE", None),
        "time": ("DATE", None),
        "timestamp": ("DATE", None),
        "varbinary": ("RAW(2000)", "RAW({n})"),
        "long_varbinary": ("BLOB", None),
        "other": ("NCLOB", None),
    }


class DB2(TextOnlyDialect):
    name = "db2"
    label = "IBM DB2"
    max_identifier = 128
    numeric_default = "NUMERIC(32, 15)"
    numeric_sized = "NUMERIC({p}, {s})"
    mapping = {
        "varchar": ("VARCHAR(32000)", "VARCHAR({n})"),
        "nvarchar": ("VARCHAR(32000) FOR MIXED DATA", "VARCHAR({n}) FOR MIXED DATA"),
        "long_varchar": ("CLOB", None),
        "long_nvarchar": ("DBCLOB", None),
        "integer": ("INTEGER", None),
        "smallint": ("SMALLINT", None),
        "bigint": ("BIGINT", None),
        "real": ("REAL", None),
        "double": ("DOUBLE", None),
        "boolean": ("SMALLINT", None),
        "date": ("DATE", None),
        "time": ("TIME", None),
        "timestamp": ("TIMESTAMP", None),
        "varbinary": ("VARCHAR(32000) FOR BIT DATA", "VARCHAR({n}) FOR BIT DATA"),
        "long_varbinary": ("BLOB", None),
        "other": ("DBCLOB", None),
    }


class Informix(TextOnlyDialect):
    name = "informix"
    label = "Informix"
    max_identifier = 128
    numeric_default = "DECIMAL(31, 15)"
    numeric_sized = "DECIMAL({p}, {s})"
    mapping = {
        "varchar": ("VARCHAR(254)", "VARCHAR({n})"),
        "nvarchar": ("NVARCHAR(254)", "NVARCHAR({n})"),
        "long_varchar": ("TEXT", None),
        "long_nvarchar": ("TEXT", None),
        "integer": ("INTEGER", None),
        "smallint": ("SMALLINT", None),
        "bigint": ("INT8", None),
        "real": ("SMALLFLOAT", None),
        "double": ("FLOAT", None),
        "boolean": ("BOOLEAN", None),
        "date": ("DATE", None),
        "time": ("DATETIME HOUR TO SECOND", None),
        "timestamp": ("DATETIME YEAR TO FRACTION(5)", None),
        "varbinary": ("BYTE", None),
        "long_varbinary": ("BYTE", None),
        "other": ("TEXT", None),
    }

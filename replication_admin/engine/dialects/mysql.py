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


class MySQL(Dialect):
    """MariaDB and MySQL. JDBC goes through `jdbc:mysql://` with the MariaDB driver so Spark quotes
    identifiers with backticks (a `jdbc:mariadb:` URL makes Spark quote with double quotes)."""

    name = "mysql"
    label = "MariaDB / MySQL"
    live = True
    default_port = 3306
    odbc_driver = "MariaDB Unicode"
    jdbc_driver = "org.mariadb.jdbc.Driver"
    max_identifier = 64
    quote_char = "`"
    read_only_properties = {"sessionVariables": "tx_read_only=1"}

    def literal(self, value: str) -> str:
        # Backslash is an escape character in MariaDB string literals unless NO_BACKSLASH_ESCAPES.
        return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"

    def parse_type(self, declared: str) -> LogicalType:
        base, first, second, rest = split_declared(declared)
        unsigned = "unsigned" in rest or base.endswith(" unsigned")
        base = base.replace(" unsigned", "").strip()
        if base == "tinyint":
            return LogicalType("boolean") if first == 1 else LogicalType("smallint")
        if base == "smallint":
            return LogicalType("integer" if unsigned else "smallint")
        if base in {"mediumint", "int", "integer"}:
            return LogicalType("bigint" if unsigned else "integer")
        if base == "bigint":
            return LogicalType("numeric", precision=20, scale=0) if unsigned else LogicalType("bigint")
        if base in {"decimal", "numeric", "dec", "fixed"}:
            return LogicalType("numeric", precision=first or 10, scale=second or 0)
        if base == "float":
            return LogicalType("real")
        if base in {"double", "double precision", "real"}:
            return LogicalType("double")
        if base in {"bool", "boolean", "bit"} and (first in (None, 1)):
            return LogicalType("boolean")
        if base in {"varchar", "char"}:
            return LogicalType("varchar", length=first or 1)
        if base in {"nvarchar", "nchar", "national varchar"}:
            return LogicalType("nvarchar", length=first or 1)
        if base in {"text", "tinytext", "mediumtext", "longtext"}:
            return LogicalType("long_varchar")
        if base in {"varbinary", "binary"}:
            return LogicalType("varbinary", length=first or 1)
        if base in {"blob", "tinyblob", "mediumblob", "longblob"}:
            return LogicalType("long_varbinary")
        if base == "date":
            return LogicalType("date")
        if base == "time":
            return LogicalType("time")
        if base in {"datetime", "timestamp"}:
            return LogicalType("timestamp")
        return LogicalType("other")

    def render_type(self, logical: LogicalType) -> str:
        kind = logical.kind
        if kind in {"varchar", "nvarchar"}:
            # Long varchars exceed the 64 KB row limit; longtext keeps them whole.
            if logical.length and logical.length <= 16000:
                return f"varchar({logical.length})"
            return "longtext"
        if kind == "varbinary":
            return f"varbinary({logical.length})" if logical.length and logical.length <= 16000 else "longblob"
        if kind == "numeric":
            if logical.precision is None:
                return "decimal(38, 15)"
            return f"decimal({min(logical.precision, 65)}, {min(logical.scale or 0, 30)})"
        return {
            "long_varchar": "longtext",
            "long_nvarchar": "longtext",
            "smallint": "smallint",
            "integer": "int",
            "bigint": "bigint",
            "real": "float",
            "double": "double",
            "boolean": "tinyint(1)",
            "date": "date",
            "time": "time(6)",
            "timestamp": "datetime(6)",
            "long_varbinary": "longblob",
            "other": "longtext",
        }[kind]

    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT TABLE_NAME FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            [],
        )

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT c.COLUMN_NAME, c.COLUMN_TYPE, CASE WHEN c.IS_NULLABLE = 'YES' THEN 1 ELSE 0 END, "
            "COALESCE(s.SEQ_IN_INDEX, 0), c.TABLE_NAME "
            "FROM information_schema.COLUMNS c "
            "LEFT JOIN information_schema.STATISTICS s ON s.TABLE_SCHEMA = c.TABLE_SCHEMA "
            "  AND s.TABLE_NAME = c.TABLE_NAME AND s.COLUMN_NAME = c.COLUMN_NAME "
            "  AND s.INDEX_NAME = 'PRIMARY' "
            "WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME = ? ORDER BY c.ORDINAL_POSITION",
            [table],
        )

    def odbc_connection_string(self, address: Address) -> str:
        if address.odbc_dsn:
            base = f"DSN={odbc_value(address.odbc_dsn)};"
        else:
            base = (
                f"DRIVER={{{self.odbc_driver}}};SERVER={check_host(address.host)};"
                f"PORT={check_port(address.port or self.default_port)};"
                f"DATABASE={odbc_value(address.database)};CONN_TIMEOUT=10;CHARSET=utf8mb4;"
            )
        return base + f"UID={odbc_value(address.user)};PWD={odbc_value(address.password)};"

    def jdbc_endpoint(self, address: Address) -> JdbcEndpoint:
        if not address.host:
            raise AddressError("a host is required for a JDBC connection")
        host = check_host(address.host)
        url = (
            f"jdbc:mysql://{host}:{check_port(address.port or self.default_port)}/{self.url_database(address.database)}"
        )
        return JdbcEndpoint(
            url=url,
            properties={
                "driver": self.jdbc_driver,
                "user": address.user,
                "password": address.password,
                "useBulkStmts": "true",
            },
        )

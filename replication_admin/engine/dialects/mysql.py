from __future__ import annotations

from collections.abc import Sequence

from replication_admin.engine.dialects.base import (
    IDLE_TRANSACTION_SECONDS,
    Address,
    AddressError,
    CaptureTables,
    ColumnText,
    Dialect,
    EmptyTable,
    EntryStatements,
    ImageColumn,
    JdbcEndpoint,
    LogTableNames,
    RowLog,
    StreamWire,
    TriggerObjects,
    check_host,
    check_port,
    odbc_value,
)
from replication_admin.engine.objects import (
    ROWGUID_COLUMN,
    SnapshotLogObjects,
    bidir_key_error,
    bounded_name,
    key_columns,
    log_values,
    rlog_name,
)
from replication_admin.engine.schema import Column, Default, TableInfo
from replication_admin.engine.types import BINARY_KINDS, TEXT_KINDS, LogicalType, split_declared

KEY_BYTES = 3072
# A Decimal's text (a JSON number with a fraction or an exponent, sent as a string): digits with '.' or 'E'.
DECIMAL_TEXT = "'^-{0,1}[0-9]+([.][0-9]+){0,1}(E[-+]{0,1}[0-9]+){0,1}$'"
# A zone at the end of a time ("Z", "+02", "+0530", "+05:30") and the time before it.
ZONE = "(Z|[+-][0-9]{2}(:{0,1}[0-9]{2}){0,1})[[:space:]]*$"
ZONED = "'[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+){0,1}){0,1}[[:space:]]*" + ZONE + "'"
# A key InnoDB cannot index whole (over KEY_BYTES, or unbounded text or bytes) is kept whole under a unique
# constraint MariaDB checks by a hash of the values (its "long unique", 10.4+), beside an index of the values'
# first bytes that lookups and joins use; a primary key can be neither a hash nor a prefix. Introspection
# reads the unique hash of a table without a primary key, under this name, as its primary key.
HASH_KEY = "PRIMARY_HASH"
PREFIX_KEY = "PRIMARY_PREFIX"
_TEXTUAL = TEXT_KINDS | {"json", "other"}  # rendered as text: indexed by characters


def _key_bytes(k: LogicalType) -> int | None:
    """Bytes a key column takes in an index (None: unbounded or too long to index whole)."""
    if k.kind in TEXT_KINDS:
        size = 4 * k.length if k.length else None
    elif k.kind in BINARY_KINDS:
        size = k.length
    elif k.kind in {"json", "other"}:
        return None
    elif k.kind == "uuid":
        return 4 * 36
    elif k.kind == "numeric":
        return 32
    else:
        return 8
    return size if size is not None and size <= KEY_BYTES else None


def _prefix_parts(d: Dialect, columns: Sequence[tuple[str, LogicalType]], quoted: bool) -> list[str]:
    """Index parts over `columns` within KEY_BYTES: the text and bytes columns that fit an equal share of what
    the others leave go whole, the rest share what remains as their first characters (bytes)."""
    sizes = {n: _key_bytes(t) for n, t in columns}
    left = KEY_BYTES - sum(sizes[n] or 0 for n, t in columns if t.kind not in _TEXTUAL | BINARY_KINDS)
    rest = [n for n, t in columns if t.kind in _TEXTUAL | BINARY_KINDS]
    while rest:
        share = left // len(rest)
        fits = [n for n in rest if (sizes[n] or KEY_BYTES + 1) <= share]
        if not fits:
            break
        left -= sum(sizes[n] or 0 for n in fits)
        rest = [n for n in rest if n not in fits]
    share = left // max(len(rest), 1)
    if left < 0 or (rest and share < 4):
        names = ", ".join(n for n, _ in columns)
        raise ValueError(f"the key ({names}) takes more than the {KEY_BYTES:,} bytes MariaDB can index")
    parts = []
    for n, t in columns:
        name = n if quoted else d.quote(n)
        parts.append(f"{name}({share // 4 if t.kind in _TEXTUAL else share})" if n in rest else name)
    return parts


class MySQL(Dialect):
    """MariaDB and MySQL. JDBC goes through `jdbc:mysql://` with the MariaDB driver so Spark quotes
    identifiers with backticks (a `jdbc:mariadb:` URL makes Spark quote with double quotes)."""

    name = "mysql"
    label = "MariaDB / MySQL"
    live = True
    version_sql = "SELECT VERSION()"
    numbers_when_read = True
    versioned_log = True
    transactional_ddl = False
    atomic_rename_swap = True

    def create_database_sql(self, name: str) -> str:
        return f"CREATE DATABASE IF NOT EXISTS {self.quote(name)} CHARACTER SET utf8mb4"

    default_port = 3306
    jdbc_jars = ("/usr/share/java/mariadb-java-client.jar",)
    sqlglot_dialect = "mysql"
    # Sent as UTF-16, parameters longer than the driver's buffer come back mangled; UTF-8 does not.
    odbc_send_encoding = "utf-8"

    def session_setup_sql(self, readonly: bool) -> list[str]:
        return ["SET time_zone = '+00:00'", *(["SET SESSION TRANSACTION READ ONLY"] if readonly else [])]

    odbc_driver = "MariaDB Unicode"
    jdbc_driver = "org.mariadb.jdbc.Driver"
    max_identifier = 64
    bulk_loader = "load_data"
    bulk_export = "select"
    stream_wire = StreamWire(null="NULL", hex_prefix="", quote_all=True)
    quote_char = "`"
    bmp_only_names = True
    # Tables the console creates hold any Unicode text (4-byte UTF-8 too) and compare it as the sources do.
    create_table_options = " DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    text_cast_type = "char"
    # A Spark task killed mid-write (its job lost) can leave its connection idle inside a transaction, holding
    # the work table's metadata lock: the server ends such a session after IDLE_TRANSACTION_SECONDS, so the
    # job's next attempt waits for it at DROP TABLE instead of waiting for ever.
    read_only_properties = {"sessionVariables": f"idle_transaction_timeout={IDLE_TRANSACTION_SECONDS},tx_read_only=1"}
    supports_updateable_publications = True
    supports_bidir = True
    text_compare_ignores_case = True
    like_ignores_case = True
    bidir_guid_triggers = ("GI", "GU")
    uuid_sql = "UUID()"
    clock_now_sql = "UTC_TIMESTAMP(6)"
    log_now_sql = "UTC_TIMESTAMP(6)"
    now_select_sql = "SELECT UTC_TIMESTAMP(6)"
    json_object_function = "JSON_OBJECT"
    json_merge_function = "JSON_MERGE_PATCH"
    hex_function = "HEX"

    # --- full copies as native streams ------------------------------------------------------------------
    # The server formats each row as one CSV line (the exporting session runs with time_zone '+00:00').
    def stream_value_sql(self, expr: str, source: LogicalType, family: str, wire: StreamWire) -> str:
        if family == "float":
            return f"CAST({expr} AS DOUBLE)"  # a FLOAT's text has 6 digits; its double value is exact
        if family == "boolean":
            return f"({expr} <> 0)"  # tinyint(1): any non-zero value is true, as Spark reads it
        if family in {"text", "json"}:
            return f"CONVERT({expr} USING utf8mb4)"
        if family == "binary":
            return f"CONCAT({self.literal(wire.hex_prefix)}, HEX({expr}))" if wire.hex_prefix else f"HEX({expr})"
        return expr

    def stream_export_sql(self, select_sql: str, values: Sequence[str], where: str, wire: StreamWire) -> str:
        # Every value quoted, quotes doubled; a line longer than max_allowed_packet comes back NULL (refused).
        fields = [f"IFNULL(CONCAT('\"', REPLACE({v}, '\"', '\"\"'), '\"'), {self.literal(wire.null)})" for v in values]
        condition = f" WHERE {where}" if where else ""
        return f"SELECT CONCAT_WS(',', {', '.join(fields)}) FROM ({select_sql}) q{condition}"

    def row_number_sql(self) -> str | None:
        return None  # numbered by the client as the lines arrive (a window function makes MariaDB read it all first)

    def stream_load_sql(self, table_sql: str, columns: Sequence[str], binary: Sequence[bool], path: str) -> str:
        """LOAD DATA of the file (or pipe) at `path`; bytes arrive as hex into a variable and are UNHEXed."""
        pairs = list(enumerate(zip(columns, binary, strict=True)))
        targets = [f"@v{i}" if is_bytes else self.quote(c) for i, (c, is_bytes) in pairs]
        sets = [f"{self.quote(c)} = UNHEX(@v{i})" for i, (c, is_bytes) in pairs if is_bytes]
        return (
            f"LOAD DATA LOCAL INFILE {self.literal(path)} INTO TABLE {table_sql} CHARACTER SET utf8mb4 "
            "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' LINES TERMINATED BY '\\n' "
            f"({', '.join(targets)})" + (f" SET {', '.join(sets)}" if sets else "")
        )

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
        if base == "json":  # reported by columns_sql for a longtext with its json_valid check
            return LogicalType("json")
        if base == "uuid":
            return LogicalType("uuid")
        return LogicalType("other")

    def key_constraints_sql(self, keys: Sequence[tuple[str, LogicalType]]) -> list[str]:
        """A primary key where InnoDB can index the key whole; otherwise the key kept whole under a unique
        hash (every value of any length is held, duplicates are refused) and looked up by a prefix index."""
        sizes = [_key_bytes(t) for _, t in keys]
        if all(s is not None for s in sizes) and sum(s or 0 for s in sizes) <= KEY_BYTES:
            return super().key_constraints_sql(keys)
        names = ", ".join(n for n, _ in keys)
        return [
            f"UNIQUE KEY {self.quote(HASH_KEY)} ({names}) USING HASH",
            f"KEY {self.quote(PREFIX_KEY)} ({', '.join(_prefix_parts(self, keys, quoted=True))})",
        ]

    def retype_column_sql(self, table: str, column: str, after: Column) -> list[str]:
        # MODIFY restates the whole column: its NULLability and default go with the new type.
        text = f"ALTER TABLE {table} MODIFY COLUMN {self.quote(column)} {self.render_type(after.logical)}"
        if after.default is not None:
            text += f" DEFAULT {self.render_default(after.default, after.logical)}"
        return [text + ("" if after.nullable else " NOT NULL")]

    def nullability_sql(self, table: str, column: Column, text: ColumnText | None = None) -> list[str]:
        return self.retype_column_sql(table, column.name, column)  # MODIFY restates the column, type kept

    def replace_objects_sql(self, drop: Sequence[str], create: Sequence[str]) -> list[str]:
        # DDL commits at once here: each trigger is replaced in place instead (no moment without one).
        return [s.replace("CREATE TRIGGER", "CREATE OR REPLACE TRIGGER", 1) for s in create]

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
                return "decimal(65, 30)"  # the widest MariaDB has, for an unconstrained numeric
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
            "timestamptz": "datetime(6)",  # the instant in UTC (sessions run with time_zone +00:00)
            "long_varbinary": "longblob",
            "json": "json",
            "uuid": "char(36)",
            "other": "longtext",
        }[kind]

    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT TABLE_NAME FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
            [],
        )

    def table_sizes_sql(self, schema: str) -> tuple[str, list[str]]:
        # InnoDB's TABLE_ROWS is an estimate from sampled pages; the lengths are its allocated bytes.
        return (
            "SELECT TABLE_NAME, TABLE_ROWS, DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'",
            [],
        )

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            # A JSON column is a longtext with a json_valid check: report it as json.
            "SELECT c.COLUMN_NAME, CASE WHEN c.DATA_TYPE = 'longtext' AND EXISTS (SELECT 1 FROM "
            "information_schema.CHECK_CONSTRAINTS k WHERE k.CONSTRAINT_SCHEMA = c.TABLE_SCHEMA "
            "AND k.TABLE_NAME = c.TABLE_NAME AND k.CHECK_CLAUSE = "
            "CONCAT('json_valid(`', REPLACE(c.COLUMN_NAME, '`', '``'), '`)')) THEN 'json' ELSE c.COLUMN_TYPE END, "
            "CASE WHEN c.IS_NULLABLE = 'YES' THEN 1 ELSE 0 END, "
            "COALESCE(s.SEQ_IN_INDEX, 0), c.TABLE_NAME "
            "FROM information_schema.COLUMNS c "
            "LEFT JOIN information_schema.STATISTICS s ON s.TABLE_SCHEMA = c.TABLE_SCHEMA "
            "  AND s.TABLE_NAME = c.TABLE_NAME AND s.COLUMN_NAME = c.COLUMN_NAME "
            f"  AND (s.INDEX_NAME = 'PRIMARY' OR (s.INDEX_NAME = '{HASH_KEY}' AND s.NON_UNIQUE = 0 AND NOT EXISTS ("
            "  SELECT 1 FROM information_schema.STATISTICS p WHERE p.TABLE_SCHEMA = c.TABLE_SCHEMA "
            "  AND p.TABLE_NAME = c.TABLE_NAME AND p.INDEX_NAME = 'PRIMARY'))) "
            "WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME = ? ORDER BY c.ORDINAL_POSITION",
            [table],
        )

    # MariaDB switches users only by logging in (a role adds privileges, it takes none away).
    replay_user_problem = (
        "MariaDB cannot act as another user without its password; register the server with that user's login"
    )

    def defaults_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT COLUMN_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
            [table],
        )

    def indexes_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT INDEX_NAME, 1 - NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME, 0 FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? "
            f"AND INDEX_NAME NOT IN ('PRIMARY', '{HASH_KEY}', '{PREFIX_KEY}') "
            "ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            [table],
        )

    def foreign_keys_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT k.CONSTRAINT_NAME, k.ORDINAL_POSITION, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, "
            "k.REFERENCED_COLUMN_NAME, r.DELETE_RULE FROM information_schema.KEY_COLUMN_USAGE k "
            "JOIN information_schema.REFERENTIAL_CONSTRAINTS r ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA "
            "AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME "
            "WHERE k.TABLE_SCHEMA = DATABASE() AND k.TABLE_NAME = ? AND k.REFERENCED_TABLE_NAME IS NOT NULL "
            "ORDER BY k.CONSTRAINT_NAME, k.ORDINAL_POSITION",
            [table],
        )

    def drop_unique_sql(self, table: str, schema: str, name: str) -> list[str]:
        return [f"ALTER TABLE {table} DROP INDEX IF EXISTS {self.quote(name)}"]

    def drop_foreign_key_sql(self, table: str, name: str) -> str:
        return f"ALTER TABLE {table} DROP FOREIGN KEY IF EXISTS {self.quote(name)}"

    def render_default(self, default: Default, logical: LogicalType) -> str:
        if default.kind == "today":
            return "(curdate())"
        if default.kind == "now":
            return "(curdate())" if logical.kind == "date" else "CURRENT_TIMESTAMP(6)"
        return super().render_default(default, logical)

    def index_columns_sql(self, columns: Sequence[tuple[str, LogicalType]], unique: bool) -> list[str]:
        """A unique constraint on unbounded text stays whole (MariaDB checks it by hash); a plain index
        takes a prefix of it, sharing the 3,072 bytes an index key may have."""
        sizes = [_key_bytes(t) for _, t in columns]
        if unique or (all(s is not None for s in sizes) and sum(s or 0 for s in sizes) <= KEY_BYTES):
            return [self.quote(n) for n, _ in columns]
        return _prefix_parts(self, columns, quoted=False)

    def odbc_connection_string(self, address: Address) -> str:
        if address.odbc_dsn:
            base = f"DSN={odbc_value(address.odbc_dsn)};"
        else:
            base = (
                f"DRIVER={{{self.odbc_driver}}};SERVER={check_host(address.host)};"
                f"PORT={check_port(address.port or self.default_port)};"
                f"DATABASE={odbc_value(address.database)};CHARSET=utf8mb4;"
            )
        # Connector/ODBC's own bounds: a read (or write) that waits longer fails with "Lost connection to server
        # during query" (08S01), a lost connection the step or job retries.
        bounds = f"CONN_TIMEOUT={address.connect_timeout};"
        if address.read_timeout:
            bounds += f"READ_TIMEOUT={address.read_timeout};WRITE_TIMEOUT={address.read_timeout};"
        return base + bounds + f"UID={odbc_value(address.user)};PWD={odbc_value(address.password)};"

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
                "sessionVariables": f"idle_transaction_timeout={IDLE_TRANSACTION_SECONDS}",
                # Connector/J's bounds in milliseconds (0: no read bound); past them a lost connection.
                "connectTimeout": str(address.connect_timeout * 1000),
                "socketTimeout": str(address.read_timeout * 1000),
                "tcpKeepAlive": "true",
            },
        )

    # --- expressions -------------------------------------------------------------------------------
    def concat(self, left: str, right: str) -> str:
        return f"CONCAT({left}, {right})"

    def has_prefix_sql(self, expr: str, prefix: str) -> str:
        return f"LEFT({expr}, {len(prefix)}) = {self.literal(prefix)}"

    def substring_from_sql(self, expr: str, start: int) -> str:
        return f"SUBSTRING({expr}, {start})"

    def null_safe_equal(self, a: str, b: str) -> str:
        return f"{a} <=> {b}"

    # --- statement shapes --------------------------------------------------------------------------
    def qualify_plain(self, table: str, schema: str = "") -> str:
        return self.qualify(table)

    def serial_key_ddl(self, name: str) -> str:
        return f"{self.quote(name)} bigint NOT NULL AUTO_INCREMENT PRIMARY KEY"

    def insert_ignore_sql(self, table: str, rest: str) -> str:
        return f"INSERT IGNORE INTO {table} {rest}"

    def excluded_sql(self, column: str) -> str:
        return f"VALUES({column})"

    def conflict_current_sql(self, table: str, column: str) -> str:
        return column

    def on_conflict_update_sql(self, conflict: str, sets: list[str]) -> str:
        return "ON DUPLICATE KEY UPDATE " + ", ".join(sets)

    def upsert_sql(self, insert: str, keys: list[str], others: list[str]) -> str:
        sets = ", ".join(f"{n} = VALUES({n})" for n in (others or keys[:1]))
        return f"{insert} ON DUPLICATE KEY UPDATE {sets}"

    def update_join_sql(self, target: str, staging: str, on: str, sets: list[tuple[str, str]], where: str) -> str:
        assignments = ", ".join(f"t.{self.quote(c)} = {e}" for c, e in sets)
        return f"UPDATE {target} t JOIN {staging} s ON {on} SET {assignments} WHERE {where}"

    def delete_joined_sql(
        self,
        target: str,
        staging: str,
        on: str,
        condition: str,
        keys: str,
        aliases: str,
        plain_condition: str,
        *,
        condition_first: bool = False,
        as_alias: bool = False,
    ) -> str:
        return f"DELETE t FROM {target} t JOIN {staging} s ON {on} WHERE {condition}"

    def delete_via_alias_sql(self, table: str, alias: str, aliased_tail: str, plain_where: str) -> str:
        # MariaDB runs `IN (SELECT ...)` of a DELETE once per row; the join form uses the key.
        return f"DELETE {alias} FROM {table} {alias} {aliased_tail}"

    def lock_joined_sql(self, target: str, staging: str, on: str) -> str | None:
        return f"SELECT 1 FROM {target} t JOIN {staging} s ON {on} FOR UPDATE"

    def swap_tables_sql(self, dest: str, schema: str, staging: str, old: str) -> list[str]:
        return [
            f"RENAME TABLE {self.qualify(dest)} TO {self.qualify(old)}, "
            f"{self.qualify(staging)} TO {self.qualify(dest)}",
            f"DROP TABLE {self.qualify(old)}",
        ]

    def copy_structure_sql(self, dest: str, schema: str, staging: str) -> str | None:
        return f"CREATE TABLE {self.qualify(staging)} LIKE {self.qualify(dest)}"

    def dependents_sql(self, table: str, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT (SELECT count(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = DATABASE()"
            "  AND EVENT_OBJECT_TABLE = ?)"
            " + (SELECT count(*) FROM information_schema.REFERENTIAL_CONSTRAINTS"
            "  WHERE CONSTRAINT_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME = ?)",
            [table, table],
        )

    def empty_logged_table(self, table: str, log: str, triggers: tuple[Sequence[str], Sequence[str]]) -> EmptyTable:
        # TRUNCATE runs no delete triggers but commits on its own: the table locks keep other sessions from
        # writing either table until the log is emptied too (a TRUNCATE under LOCK TABLES keeps its lock).
        return EmptyTable(
            (f"LOCK TABLES {table} WRITE, {log} WRITE", f"TRUNCATE TABLE {table}", f"DELETE FROM {log}"),
            finally_=("UNLOCK TABLES",),
        )

    def incoming_keys_sql(self, table: str, schema: str) -> tuple[str, list[str]] | None:
        return (
            "SELECT count(*) FROM information_schema.REFERENTIAL_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME = ?",
            [table],
        )

    # --- snapshot logs -----------------------------------------------------------------------------
    def snaptime_index_sql(self, rlog: str, qualified: str) -> str:
        return f"CREATE INDEX {self.quote(bounded_name(rlog + '_SNAPTIME', 64))} ON {qualified} (`SNAPTIME`)"

    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        d = self
        keys = key_columns(table)
        rlog = d.qualify(rlog_name(table.name))
        src = d.qualify(table.name)
        now = "UTC_TIMESTAMP(6)"
        guid = "UUID()"
        i_name, u_name, d_name = d.snapshot_trigger_names(table.name)
        update = ", ".join(f"`{c}` = VALUES(`{c}`)" for c in ("SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"))

        def upsert(ref: str, op: str) -> str:
            cols, vals = log_values(d, keys, ref, now, guid, op)
            return f"INSERT INTO {rlog} ({cols}) VALUES ({vals}) ON DUPLICATE KEY UPDATE {update}"

        same_key = " AND ".join(f"OLD.{d.quote(k.name)} <=> NEW.{d.quote(k.name)}" for k in keys)
        create = [
            *d.snapshot_log_table_ddl(table),
            f"CREATE TRIGGER {d.quote(i_name)} AFTER INSERT ON {src} FOR EACH ROW {upsert('NEW', 'I')}",
            f"CREATE TRIGGER {d.quote(u_name)} AFTER UPDATE ON {src} FOR EACH ROW BEGIN "
            f"IF NOT ({same_key}) THEN {upsert('OLD', 'D')}; {upsert('NEW', 'I')}; "
            f"ELSE {upsert('NEW', 'U')}; END IF; END",
            f"CREATE TRIGGER {d.quote(d_name)} AFTER DELETE ON {src} FOR EACH ROW {upsert('OLD', 'D')}",
        ]
        drop = [f"DROP TRIGGER IF EXISTS {d.quote(n)}" for n in (i_name, u_name, d_name)]
        drop.append(f"DROP TABLE IF EXISTS {rlog}")
        return SnapshotLogObjects(
            rlog_name(table.name), (i_name, u_name, d_name), create=tuple(create), drop=tuple(drop)
        )

    # --- bi-directional replication ----------------------------------------------------------------
    def bidir_triggers(
        self, table: TableInfo, names: dict[str, str], log: RowLog, local: str, publisher: bool
    ) -> tuple[list[str], list[str]]:
        d = self
        src = d.qualify(table.name)
        g = d.quote(ROWGUID_COLUMN)
        keys = key_columns(table)
        same_key = " AND ".join(f"OLD.{d.quote(k.name)} <=> NEW.{d.quote(k.name)}" for k in keys)
        fresh = d.concat(d.literal(local + "@"), d.uuid_sql)
        logs = "TRUE" if publisher else d.has_prefix_sql(f"NEW.{g}", local + "@")
        message = d.literal(bidir_key_error(table.name)[:120])
        replay_delete = log.upsert("OLD", "D", log.unmark(f"OLD.{g}"), "NULL") if publisher else "DO 0;"
        create = [
            f"CREATE TRIGGER {d.quote(names['GI'])} BEFORE INSERT ON {src} FOR EACH ROW "
            f"BEGIN IF NEW.{g} IS NULL THEN SET NEW.{g} = {fresh}; END IF; END",
            f"CREATE TRIGGER {d.quote(names['GU'])} BEFORE UPDATE ON {src} FOR EACH ROW BEGIN "
            f"IF NOT ({same_key}) THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = {message}; END IF; "
            f"IF NEW.{g} <=> OLD.{g} THEN SET NEW.{g} = {fresh}; END IF; END",
            f"CREATE TRIGGER {d.quote(names['I'])} AFTER INSERT ON {src} FOR EACH ROW "
            f"BEGIN IF {logs} THEN {log.upsert('NEW', 'I', f'NEW.{g}', 'NULL')} END IF; END",
            f"CREATE TRIGGER {d.quote(names['U'])} AFTER UPDATE ON {src} FOR EACH ROW "
            f"BEGIN IF NOT ({log.is_mark(f'NEW.{g}')}) AND {logs} THEN "
            f"{log.upsert('NEW', 'U', f'NEW.{g}', f'OLD.{g}')} END IF; END",
            f"CREATE TRIGGER {d.quote(names['D'])} AFTER DELETE ON {src} FOR EACH ROW "
            f"BEGIN IF {log.is_mark(f'OLD.{g}')} THEN {replay_delete} "
            f"ELSE {log.upsert('OLD', 'D', fresh, f'OLD.{g}')} END IF; END",
        ]
        drop = [f"DROP TRIGGER IF EXISTS {d.quote(n)}" for n in names.values()]
        return create, drop

    # --- transactional replication -----------------------------------------------------------------
    # RTLOG is versioned with transaction precision: the server stores the writing transaction's id in TXID (its
    # ROW START). The first entry of a transaction adds its RTTX row (N NULL); readers number committed
    # transactions in the order of their last entry, as on PostgreSQL (engine.transactional_sql explains why).
    # Logs made before (EarlierLog below) keep their writers' numbering.
    def log_txid_ddl(self) -> tuple[str, str, str]:
        q = self.quote
        return (
            f"{q('TXID')} bigint unsigned GENERATED ALWAYS AS ROW START",
            f", {q('TXEND')} bigint unsigned GENERATED ALWAYS AS ROW END INVISIBLE, "
            f"PERIOD FOR SYSTEM_TIME ({q('TXID')}, {q('TXEND')})",
            " WITH SYSTEM VERSIONING",
        )

    def number_steps_sql(self, names: LogTableNames, schema: str) -> list[str]:
        q = self.quote
        seq, tx, log = self.qualify(names.seq, schema), self.qualify(names.tx, schema), self.qualify(names.log, schema)
        n, txid = q("N"), q("TXID")
        last = f"(SELECT MAX(l.{q('SEQ')}) FROM {log} l WHERE l.{txid} = u.{txid})"
        return [
            # Read committed: the reader sees what is committed now and locks only the rows it numbers (by their
            # key), so it neither waits for writers under way nor makes them wait.
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            f"SELECT {n} FROM {seq} WHERE {q('ID')} = 1 FOR UPDATE",
            # In the order of their last entry, as on PostgreSQL. Not the server's registry of commits
            # (mysql.transaction_registry): it misses a transaction that met a duplicate key after it logged.
            f"SELECT u.{txid} FROM {tx} u WHERE u.{n} IS NULL ORDER BY {last}, u.{txid}",
            f"UPDATE {seq} SET {n} = ? WHERE {q('ID')} = 1",
        ]

    def number_assign_sql(self, tx: str, count: int, txids: Sequence[int]) -> str:
        q = self.quote
        listed = ", ".join(str(int(t)) for t in txids)
        # By key only: the rows of transactions under way are neither read nor waited for.
        return f"UPDATE {tx} SET {q('N')} = {int(count)} + FIELD({q('TXID')}, {listed}) WHERE {q('TXID')} IN ({listed})"

    def purge_history_sql(self, log: str) -> list[str]:
        # A deleted entry of a versioned table stays as history until deleted from there too. (The server's
        # registry of versioning transactions, mysql.transaction_registry, is a log table no statement may
        # delete from: its rows stay.)
        return [f"DELETE HISTORY FROM {log}"]

    def registry_purge_sql(self, log_prefix: str) -> tuple[str, str] | None:
        # A table versioned by transaction has a bigint ROW START column (information_schema shows it as a stored
        # generated column of a system-versioned table); one that is not a log may need the registry's rows.
        like = log_prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
        others = (
            "SELECT COUNT(*) FROM information_schema.TABLES t WHERE t.TABLE_TYPE = 'SYSTEM VERSIONED' "
            f"AND t.TABLE_NAME NOT LIKE {self.literal(like)} AND EXISTS (SELECT 1 FROM information_schema.COLUMNS c "
            "WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME AND c.DATA_TYPE = 'bigint' "
            "AND c.EXTRA LIKE '%STORED GENERATED%')"
        )
        return others, "TRUNCATE TABLE mysql.transaction_registry"

    def replay_context_sql(self, nolog: bool, origin: str | None, context_table: str) -> list[str]:
        # @repladmin_tx / @repladmin_n: the apply transaction's log row once a trigger logs (retag_origin_sql).
        return [
            f"SET @repladmin_nolog = {1 if nolog else 'NULL'}, @repladmin_origin = {self.optional_literal(origin)}, "
            "@repladmin_tx = NULL, @repladmin_n = NULL"
        ]

    def reset_context_sql(self, context_table: str) -> list[str]:
        # Session variables outlive transactions.
        return ["SET @repladmin_nolog = NULL, @repladmin_origin = NULL"]

    def apply_timeout_sql(self, seconds: int) -> tuple[list[str], list[str]]:
        # MariaDB's bound covers every statement (MySQL's max_execution_time only SELECTs), a row lock wait included.
        return [f"SET SESSION max_statement_time = {int(seconds)}"], ["SET SESSION max_statement_time = DEFAULT"]

    apply_timeout_errors = ("max_statement_time exceeded", "(1969)")

    def json_value_sql(self, expr: str, family: str) -> str:
        if family == "boolean":
            return f"({expr} <> 0)"
        if family == "json":  # JSON_OBJECT would embed the document; it travels as its text
            return f"CAST({expr} AS CHAR CHARACTER SET utf8mb4)"
        return super().json_value_sql(expr, family)

    def text_image_sql(self, stmt: str, args: str) -> str:
        return f"JSON_OBJECT('stmt', {stmt}, 'args', JSON_EXTRACT(COALESCE({args}, '[]'), '$'))"

    # --- set-based apply (JSON_TABLE: each column's scalar as text, and as its JSON where the type tells) --------
    def _image_value(self, c: ImageColumn, v: str, j: str) -> str | None:
        """The column's value from `v` (its scalar as text, NULL for null) and `j` (its JSON) as RowCodec decodes it
        and binding it would store (no '?' in the expressions: the statement's one parameter is the images')."""
        if c.family == "text":
            if c.kind == "other":
                return None  # a type of its own: the image may embed a document for it
            return (
                f"CASE WHEN {j} IN ('true', 'false') THEN CONCAT(UPPER(LEFT({v}, 1)), SUBSTRING({v}, 2)) ELSE {v} END"
            )
        if c.family == "integer":
            return (
                f"CASE WHEN {j} = 'true' THEN 1 WHEN {j} = 'false' THEN 0 "
                f"ELSE TRUNCATE(CAST({v} AS DECIMAL(65, 30)), 0) END"
            )
        if c.family == "float":
            return f"CAST({v} AS DOUBLE)"
        if c.family in ("decimal", "json"):
            return v  # the exact text, converted as a bound text is
        if c.family == "boolean":
            return (
                f"CASE WHEN {j} = 'true' THEN 1 WHEN {j} = 'false' THEN 0 WHEN LEFT({j}, 1) = '\"' THEN "
                f"CASE WHEN {v} REGEXP {DECIMAL_TEXT} AND {v} REGEXP '[.E]' THEN CAST({v} AS DECIMAL(65, 30)) <> 0 "
                f"ELSE LOWER(TRIM({v})) IN ('1', 't', 'true', 'y', 'yes') END "
                f"ELSE CAST({v} AS DECIMAL(65, 30)) <> 0 END"
            )
        if c.family == "date":
            return f"LEFT(TRIM({v}), 10)"
        if c.family == "time":
            dot = f"LOCATE('.', {v})"
            return (
                f"CASE WHEN {dot} > 0 THEN CONCAT(LEFT({v}, {dot} - 1), '.', "
                f"RPAD(SUBSTRING({v}, {dot} + 1, 6), 6, '0')) ELSE CONCAT({v}, '.000000') END"
            )
        if c.family == "timestamp":
            # An instant with a zone becomes its UTC time (_timestamp_text); MariaDB reads no zone in a time.
            zone = f"TRIM(REGEXP_SUBSTR({v}, '{ZONE}'))"
            digits = f"REPLACE({zone}, ':', '')"
            offset = (
                f"CASE WHEN UPPER({zone}) = 'Z' THEN '+00:00' ELSE CONCAT(LEFT({digits}, 3), ':', "
                f"IF(LENGTH({digits}) >= 5, SUBSTRING({digits}, 4, 2), '00')) END"
            )
            local = f"CAST(REPLACE(REGEXP_REPLACE({v}, '[[:space:]]*{ZONE}', ''), 'T', ' ') AS DATETIME(6))"
            return (
                f"CASE WHEN {v} REGEXP {ZONED} THEN CONVERT_TZ({local}, {offset}, '+00:00') "
                f"ELSE REPLACE({v}, 'T', ' ') END"
            )
        if c.family == "binary":
            return f"UNHEX(CASE WHEN LEFT({v}, 2) = {self.literal(chr(92) + 'x')} THEN SUBSTRING({v}, 3) ELSE {v} END)"
        return None

    def _images_table(self, columns: Sequence[ImageColumn]) -> tuple[str, list[str]] | None:
        """JSON_TABLE over the bound array (alias j: o its ordinality, v<i> and j<i> each column's text and JSON),
        and each column's value; None when a column has no exact reading."""
        items = ["o FOR ORDINALITY"]
        values = []
        for i, c in enumerate(columns):
            key = c.key.replace("\\", "\\\\").replace('"', '\\"')
            path = self.literal(f'$."{key}"')
            items.append(f"v{i} LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH {path}")
            items.append(f"j{i} JSON PATH {path}")
            value = self._image_value(c, f"j.v{i}", f"j.j{i}")
            if value is None:
                return None
            values.append(value)
        return f"JSON_TABLE(?, '$[*]' COLUMNS ({', '.join(items)})) AS j", values

    def images_upsert_sql(self, target: str, columns: Sequence[ImageColumn], keys: Sequence[ImageColumn]) -> str | None:
        found = self._images_table(columns)
        if found is None or not keys:
            return None
        source, values = found
        q = self.quote
        picked = ", ".join(f"{v} AS c{i}" for i, v in enumerate(values))
        names = ", ".join(q(c.column) for c in columns)
        key_names = {k.column for k in keys}
        others = [q(c.column) for c in columns if c.column not in key_names]
        # In the images' order: of the images of one key, the last one's update is the one that stays.
        insert = (
            f"INSERT INTO {target} ({names}) SELECT {', '.join(f's.c{i}' for i in range(len(columns)))} "
            f"FROM (SELECT {picked}, j.o FROM {source}) AS s ORDER BY s.o"
        )
        return self.upsert_sql(insert, [q(k.column) for k in keys], others)

    def images_delete_sql(self, target: str, keys: Sequence[ImageColumn]) -> str | None:
        found = self._images_table(keys)
        if found is None or not keys:
            return None
        source, values = found
        q = self.quote
        picked = ", ".join(f"{v} AS k{i}" for i, v in enumerate(values))
        match = " AND ".join(f"t.{q(k.column)} = k.k{i}" for i, k in enumerate(keys))
        return f"DELETE t FROM {target} AS t JOIN (SELECT {picked} FROM {source}) AS k ON {match}"

    # A run's images are joined by GROUP_CONCAT, which cuts its result at this many bytes (the reader checks every
    # run's length and reads a window entry by entry where one is cut, e.g. by max_allowed_packet).
    LOG_RUN_BYTES = 64 * 1024 * 1024

    def log_runs_sql(self, window: str) -> tuple[str, list[str]] | None:
        q = self.quote
        n, seq, tbl, op, new, old = (q(c) for c in ("N", "SEQ", "TBL", "OP", "NEW", "OLD"))
        sizes = (
            f"SELECT t.{n}, COUNT(*), SUM(COALESCE(CHAR_LENGTH(l.{new}), 0) + COALESCE(CHAR_LENGTH(l.{old}), 0)) "
            f"{window} GROUP BY t.{n} ORDER BY t.{n}"
        )
        # Gaps and islands: the entry's place in the window less its place among its transaction's entries of the
        # same table and kind is the same along a run of consecutive ones, and differs from run to run. (The images
        # of one table in one transaction have one shape: the triggers that log them change only by DDL, which
        # commits the transaction.)
        entries = (
            f"SELECT t.{n} AS n, t.{q('ORIGIN')} AS origin, t.{q('AT')} AS at, l.{seq} AS seq, l.{tbl} AS tbl, "
            f"l.{op} AS op, COALESCE(l.{new}, 'null') AS new, COALESCE(l.{old}, 'null') AS old, "
            f"ROW_NUMBER() OVER (ORDER BY t.{n}, l.{seq}) - ROW_NUMBER() OVER "
            f"(PARTITION BY t.{n}, l.{tbl}, l.{op} ORDER BY l.{seq}) AS island {window}"
        )
        runs = (
            "SELECT r.n, MIN(r.origin), MIN(r.at), r.tbl, r.op, COUNT(*), GROUP_CONCAT(r.seq ORDER BY r.seq), "
            "GROUP_CONCAT(r.new ORDER BY r.seq SEPARATOR ','), GROUP_CONCAT(r.old ORDER BY r.seq SEPARATOR ','), "
            "SUM(CHAR_LENGTH(r.new)), SUM(CHAR_LENGTH(r.old)) "
            f"FROM ({entries}) r GROUP BY r.n, r.island, r.tbl, r.op ORDER BY r.n, MIN(r.seq)"
        )
        # (SET STATEMENT … FOR SELECT would save a round trip, but the ODBC driver then finds no result set.)
        return sizes, [f"SET SESSION group_concat_max_len = {self.LOG_RUN_BYTES}", runs]

    def capture_entry_sql(self, logs: CaptureTables, table: str, op: str, new: str, old: str, local: str) -> str:
        q = self.quote
        entry_cols = f"{q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}"
        origin = f"COALESCE(@repladmin_origin, {self.literal(local)})"
        # The entry's TXID is its transaction's id; every entry makes sure of the transaction's RTTX row (a
        # session variable could not tell: a failed statement takes back the row it added, not the variable).
        # Not a probe first: a SELECT in a trigger of an INSERT is a locking read, whose gap lock on RTTX's key
        # would make the next writer's first entry wait.
        return (
            "IF @repladmin_nolog IS NULL THEN "
            f"INSERT INTO {logs.log} ({entry_cols}) VALUES ({self.literal(table)}, '{op}', {new}, {old}); "
            f"SELECT {q('TXID')} INTO @repladmin_tx FROM {logs.log} WHERE {q('SEQ')} = LAST_INSERT_ID(); "
            f"INSERT INTO {logs.tx} ({q('TXID')}, {q('ORIGIN')}, {q('AT')}) "
            f"VALUES (@repladmin_tx, {origin}, {self.clock_now_sql}) "
            f"ON DUPLICATE KEY UPDATE {q('TXID')} = {q('TXID')}; END IF;"
        )

    def text_trigger_ddl(
        self, name: str, table: str, schema: str, account: str, body: str
    ) -> tuple[list[str], list[str]]:
        q = self.quote
        create = [
            f"CREATE TRIGGER {q(name)} AFTER INSERT ON {table} FOR EACH ROW BEGIN "
            f"IF NEW.{q('ACCOUNT')} = {account} THEN {body} END IF; END"
        ]
        return create, [f"DROP TRIGGER IF EXISTS {q(name)}"]

    def append_entry_sql(self, logs: CaptureTables, op: str, table: str, new: str, local: str) -> EntryStatements:
        q = self.quote
        return [
            (
                f"INSERT INTO {logs.log} ({q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}) VALUES (?, ?, ?, NULL)",
                [table, op, new],
            ),
            (
                f"INSERT INTO {logs.tx} ({q('TXID')}, {q('ORIGIN')}, {q('AT')}) "
                f"SELECT {q('TXID')}, ?, {self.clock_now_sql} FROM {logs.log} WHERE {q('SEQ')} = LAST_INSERT_ID()",
                [local],
            ),
        ]

    def replaying_sql(self) -> str:
        return "(@repladmin_nolog IS NOT NULL OR @repladmin_origin IS NOT NULL)"

    def rowguid_triggers(self, table: TableInfo, fresh: str, rowguid: str) -> TriggerObjects:
        g = self.quote(rowguid)
        src = self.qualify(table.name, table.schema)
        insert_name = bounded_name(f"{table.name}_GI", self.max_identifier)
        update_name = bounded_name(f"{table.name}_GU", self.max_identifier)
        return (
            (insert_name, update_name),
            (
                f"CREATE TRIGGER {self.quote(insert_name)} BEFORE INSERT ON {src} FOR EACH ROW BEGIN "
                f"IF NOT {self.replaying_sql()} AND NEW.{g} IS NULL THEN SET NEW.{g} = {fresh}; END IF; END",
                f"CREATE TRIGGER {self.quote(update_name)} BEFORE UPDATE ON {src} FOR EACH ROW BEGIN "
                f"IF NOT {self.replaying_sql()} AND NEW.{g} <=> OLD.{g} THEN SET NEW.{g} = {fresh}; END IF; END",
            ),
            (f"DROP TRIGGER IF EXISTS {self.quote(insert_name)}", f"DROP TRIGGER IF EXISTS {self.quote(update_name)}"),
        )

    def retag_origin_sql(self, tx: str, seq: str, origin: str) -> list[str]:
        q = self.quote
        # The triggers of a log made before set @repladmin_n (and hold the counter), the others @repladmin_tx.
        return [
            f"UPDATE {tx} SET {q('ORIGIN')} = {origin} WHERE {q('TXID')} = @repladmin_tx OR {q('N')} = @repladmin_n",
            f"UPDATE {seq} SET {q('CONN')} = NULL WHERE {q('ID')} = 1 AND @repladmin_n IS NOT NULL",
        ]

    @property
    def earlier_log(self) -> Dialect:
        return _EARLIER_LOG


class EarlierLog(MySQL):
    """Capture into a log made before RTLOG was versioned (its TXID is a plain column): no transaction id a
    trigger can read, so the first entry of a transaction locks the RTSEQ row and takes the next number,
    recording its connection (and origin) there; later entries of the same connection join that number while it
    is still open. Writers of the publication therefore commit one at a time; a reader closes the current number
    (engine.transactional_sql.close_sql) before it reads."""

    numbers_when_read = False
    numbers_at_first_change = True
    versioned_log = False

    def log_txid_ddl(self) -> tuple[str, str, str]:
        return Dialect.log_txid_ddl(self)

    def number_steps_sql(self, names: LogTableNames, schema: str) -> list[str]:
        return []

    def purge_history_sql(self, log: str) -> list[str]:
        return []

    def capture_entry_sql(self, logs: CaptureTables, table: str, op: str, new: str, old: str, local: str) -> str:
        q = self.quote
        entry_cols = f"{q('TXID')}, {q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}"
        origin = f"COALESCE(@repladmin_origin, {self.literal(local)})"
        return (
            "IF @repladmin_nolog IS NULL THEN "
            f"SELECT {q('N')}, {q('CONN')}, {q('ORIGIN')} INTO @repladmin_n, @repladmin_conn, @repladmin_from "
            f"FROM {logs.seq} WHERE {q('ID')} = 1 FOR UPDATE; "
            f"IF NOT (@repladmin_conn <=> CONNECTION_ID()) OR NOT (@repladmin_from <=> {origin}) THEN "
            "SET @repladmin_n = @repladmin_n + 1; "
            f"UPDATE {logs.seq} SET {q('N')} = @repladmin_n, {q('CONN')} = CONNECTION_ID(), {q('ORIGIN')} = {origin} "
            f"WHERE {q('ID')} = 1; "
            f"INSERT INTO {logs.tx} ({q('TXID')}, {q('N')}, {q('ORIGIN')}, {q('AT')}) "
            f"VALUES (@repladmin_n, @repladmin_n, {origin}, {self.clock_now_sql}); END IF; "
            f"INSERT INTO {logs.log} ({entry_cols}) "
            f"VALUES (@repladmin_n, {self.literal(table)}, '{op}', {new}, {old}); END IF;"
        )

    def append_entry_sql(self, logs: CaptureTables, op: str, table: str, new: str, local: str) -> EntryStatements:
        q = self.quote
        columns = f"{q('TXID')}, {q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}"
        # A console entry is always a transaction of its own: it takes the next number and closes it.
        return [
            (f"UPDATE {logs.seq} SET {q('N')} = {q('N')} + 1, {q('CONN')} = NULL WHERE {q('ID')} = 1", []),
            (f"SET @repladmin_n = (SELECT {q('N')} FROM {logs.seq} WHERE {q('ID')} = 1)", []),
            (
                f"INSERT INTO {logs.tx} ({q('TXID')}, {q('N')}, {q('ORIGIN')}, {q('AT')}) "
                f"VALUES (@repladmin_n, @repladmin_n, ?, {self.clock_now_sql})",
                [local],
            ),
            (f"INSERT INTO {logs.log} ({columns}) VALUES (@repladmin_n, ?, ?, ?, NULL)", [table, op, new]),
        ]


_EARLIER_LOG = EarlierLog()

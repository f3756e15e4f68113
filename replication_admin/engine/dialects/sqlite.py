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
from collections.abc import Sequence

from sqlglot.dialects.sqlite import SQLite as SQLiteGlot
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from replication_admin.engine.dialects.base import (
    Address,
    AddressError,
    CaptureTables,
    ColumnText,
    Dialect,
    EntryStatements,
    ImageColumn,
    JdbcEndpoint,
    RowLog,
    odbc_value,
)
from replication_admin.engine.objects import (
    ROWGUID_COLUMN,
    SnapshotLogObjects,
    bidir_key_error,
    key_columns,
    log_values,
    rlog_name,
)
from replication_admin.engine.schema import Column, Default, TableInfo
from replication_admin.engine.types import LogicalType, split_declared

# The first words of a table constraint in a CREATE TABLE's list (what is not a column's definition there).
# (SQLite's keywords: a column so named is quoted, and a quoted name reads as an identifier.)
TABLE_CONSTRAINTS = {"CONSTRAINT", "PRIMARY KEY", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN KEY", "FOREIGN"}


def _tokens(text: str) -> list[Token] | None:
    try:
        return SQLiteGlot().tokenize(text)
    except TokenError:
        return None


def column_texts(table: str, definition: str) -> dict[str, ColumnText]:
    """Each column's definition in `table`'s CREATE TABLE statement as SQLite keeps it (the text ALTER TABLE ADD
    COLUMN and RENAME COLUMN edit in place), by its name in lower case; {} when the text does not read as one."""
    tokens = _tokens(definition)
    if not tokens or tokens[0].token_type != TokenType.CREATE:
        return {}
    out: dict[str, ColumnText] = {}

    def close(segment: list[Token], lead_at: int) -> None:
        if segment and (
            segment[0].token_type == TokenType.IDENTIFIER or segment[0].text.upper() not in TABLE_CONSTRAINTS
        ):
            first, last = segment[0], segment[-1]
            out[first.text.lower()] = ColumnText(
                table, definition[lead_at : first.start], definition[first.start : first.end + 1],
                definition[first.end + 1 : last.end + 1],
            )  # fmt: skip

    depth, lead_at = 0, -1
    segment: list[Token] = []
    for token in tokens:
        kind = token.token_type
        if lead_at < 0:  # before the list of columns
            if kind == TokenType.L_PAREN:
                depth, lead_at = 1, token.start
            continue
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                close(segment, lead_at)
                return out
        elif kind == TokenType.COMMA and depth == 1:
            close(segment, lead_at)
            lead_at, segment = token.start, []
            continue
        segment.append(token)
    return {}  # the list never closed


def without_not_null(rest: str) -> str | None:
    """A column's definition after its name (ColumnText.rest) without its NOT NULL (with the constraint's name and
    conflict clause, when it has them); None: it has none."""
    tokens = _tokens(rest)
    if tokens is None:
        return None
    depth = 0
    for i, token in enumerate(tokens):
        depth += (token.token_type == TokenType.L_PAREN) - (token.token_type == TokenType.R_PAREN)
        if depth or token.token_type != TokenType.NOT or i + 1 == len(tokens):
            continue
        if tokens[i + 1].token_type != TokenType.NULL:
            continue
        start, end = i, i + 1
        if start >= 2 and tokens[start - 2].token_type == TokenType.CONSTRAINT:
            start -= 2
        clause = tokens[end + 1 : end + 4]
        if len(clause) == 3 and clause[0].token_type == TokenType.ON and clause[1].text.upper() == "CONFLICT":
            end += 3
        return rest[: tokens[start].start].rstrip() + rest[tokens[end].end + 1 :]
    return None


TIMESTAMP_FORMAT_SPARK = "yyyy-MM-dd HH:mm:ss.SSSSSS"
TIMESTAMP_FORMAT_PY = "%Y-%m-%d %H:%M:%S.%f"
NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'"  # UTC, six fraction digits like the stored text


def check_sqlite_path(path: str) -> str:
    if not path:
        raise AddressError("a database file path is required for SQLite")
    if not os.path.isabs(path):
        raise AddressError(f"SQLite path {path!r} must be absolute")
    if any(ch in path for ch in "?#;{}\x00\n\r"):
        raise AddressError(f"SQLite path {path!r} contains a character that is not allowed (? # ; {{ }})")
    return os.path.normpath(path)


BUSY_TIMEOUT_MS = 30_000  # how long a session waits for another's lock on the file (the ODBC DSN says the same)


class SQLite(Dialect):
    name = "sqlite"
    label = "SQLite"
    live = True
    version_sql = "SELECT sqlite_version()"
    odbc_driver = "SQLite3"
    jdbc_driver = "org.sqlite.JDBC"
    max_identifier = 1024
    read_only_properties = {"open_mode": "1"}  # SQLITE_OPEN_READONLY
    text_timestamps = True
    single_writer = True
    local_file = True
    file_based = True
    dynamic_types = True
    supports_bidir = True
    like_ignores_case = True
    jdbc_jars = ("/usr/share/java/sqlite-jdbc.jar",)
    sqlglot_dialect = "sqlite"
    # SQLite ODBC hands back text as UTF-8; pyodbc is told so that non-ASCII survives.
    odbc_send_encoding = "utf-8"
    odbc_read_encoding = "utf-8"
    uuid_sql = "lower(hex(randomblob(16)))"
    clock_now_sql = NOW
    log_now_sql = NOW
    now_select_sql = f"SELECT {NOW}"

    def parse_type(self, declared: str) -> LogicalType:
        base, first, second, _rest = split_declared(declared)
        if base in {"timestamptz", "timestamp with time zone"}:
            return LogicalType("timestamptz")
        if base in {"json", "json_text", "jsonb"}:
            return LogicalType("json")
        if base in {"uuid", "uuid_text"}:
            return LogicalType("uuid")
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

    def _double_text(self, expr: str) -> str:
        # SQLite's JSON and its ODBC driver write doubles with 15 digits; '%!.17g' gives the 17 a double needs
        # (exact but for rare values with exponents near the ends of the range: SQLite 3.40's conversion).
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE printf('%!.17g', {expr}) END"

    def json_value_sql(self, expr: str, family: str) -> str:
        if family == "float":
            return self._double_text(expr)
        return super().json_value_sql(expr, family)

    def read_value_sql(self, expr: str, family: str) -> str:
        if family == "float":
            return self._double_text(expr)
        return super().read_value_sql(expr, family)

    def retype_column_sql(self, table: str, column: str, after: Column) -> list[str]:
        return []  # a column holds any type's values; the declared type is only a name here

    def drop_index_for_column_sql(self, table: str, schema: str, index: str) -> list[str]:
        return [f"DROP INDEX IF EXISTS {self.qualify(index, schema)}"]

    foreign_key_refused = "SQLite cannot add a foreign key to an existing table (ALTER TABLE has no ADD CONSTRAINT)"
    set_not_null_refused = "SQLite cannot add a NOT NULL to an existing column (ALTER TABLE has no ALTER COLUMN)"

    def definition_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table]

    def column_texts(self, table: str, definition: str) -> dict[str, ColumnText]:
        return column_texts(table, definition)

    def nullability_sql(self, table: str, column: Column, text: ColumnText | None = None) -> list[str]:
        """A NOT NULL dropped (a set one is left out: set_not_null_refused). ALTER TABLE cannot change a column, so
        the column's definition in the table's CREATE text is edited under writable_schema: SQLite's documented
        way of removing a NOT NULL, whose rows on disk are the same either way. A table made and dropped then
        changes the schema's version, so every other connection reads the new text before its next statement.
        None of it is run where the definition was not found (the caller refuses the change in one line)."""
        rest = without_not_null(text.rest) if column.nullable and text is not None else None
        if text is None or rest is None:
            return []
        old, new = self.literal(text.text), self.literal(text.lead + text.name + rest)
        return [
            "PRAGMA writable_schema = ON",
            f"UPDATE sqlite_master SET sql = replace(sql, {old}, {new}) "
            f"WHERE type = 'table' AND name = {self.literal(text.table)} AND instr(sql, {old}) > 0",
            "PRAGMA writable_schema = RESET",
            "CREATE TABLE IF NOT EXISTS repladmin_schema_version (x)",
            "DROP TABLE repladmin_schema_version",
        ]

    def foreign_keys_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        # SQLite does not keep a foreign key's name: the key's number in the table names it.
        return (
            'SELECT f.id, f.seq + 1, f."from", f."table", f."to", f.on_delete '
            "FROM pragma_foreign_key_list(?) f ORDER BY f.id, f.seq",
            [table],
        )

    def add_unique_sql(self, table: str, schema: str, name: str, columns: Sequence[str]) -> str:
        return f"CREATE UNIQUE INDEX IF NOT EXISTS {self.qualify(name, schema)} ON {table} ({', '.join(columns)})"

    def drop_unique_sql(self, table: str, schema: str, name: str) -> list[str]:
        return [f"DROP INDEX IF EXISTS {self.qualify(name, schema)}"]

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
            "timestamptz": "TIMESTAMPTZ",  # UTC text, as TIMESTAMP
            "long_varbinary": "BLOB",
            # TEXT in the name gives text affinity: a document or id that looks like a number stays text.
            "json": "JSON_TEXT",
            "uuid": "UUID_TEXT",
            "other": "TEXT",
        }[kind]

    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name",
            [],
        )

    # SQLite keeps no row estimate: each table is counted, up to a bound.
    row_counts_are_estimates = False

    def table_sizes_sql(self, schema: str) -> tuple[str, list[str]]:
        # The pages of each table and of its indexes (the dbstat virtual table); rows: counted.
        return (
            "SELECT m.tbl_name, NULL, sum(s.pgsize) FROM sqlite_master m JOIN dbstat s ON s.name = m.name "
            "WHERE m.type IN ('table', 'index') GROUP BY m.tbl_name",
            [],
        )

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            'SELECT name, type, CASE WHEN "notnull" = 1 OR pk > 0 THEN 0 ELSE 1 END, pk '
            "FROM pragma_table_info(?) ORDER BY cid",
            [table],
        )

    replay_user_problem = "SQLite has no users: every writer of the file has the same rights"

    def defaults_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return "SELECT name, dflt_value FROM pragma_table_info(?)", [table]

    def indexes_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            'SELECT il.name, il."unique", ii.seqno + 1, ii.name, il.partial '
            "FROM pragma_index_list(?) il, pragma_index_info(il.name) ii WHERE il.origin <> 'pk' "
            "ORDER BY il.name, ii.seqno",
            [table],
        )

    def render_default(self, default: Default, logical: LogicalType) -> str:
        if default.kind == "now" and logical.kind != "date":
            return f"({NOW})"  # the stored text form, six fraction digits
        return super().render_default(default, logical)

    def session_setup_sql(self, readonly: bool) -> list[str]:
        return [f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}", *(["PRAGMA query_only = 1"] if readonly else [])]

    # No apply timeout: a statement of SQLite cannot be cancelled from outside, and the ODBC driver waits for the file's
    # lock as its connection's Timeout says whatever PRAGMA busy_timeout or a query timeout set (measured: 30 s, 60 s).
    apply_timeout_refused = (
        "SQLite cannot cancel an apply's statement: it waits for the file's lock as its connection says (30 s)"
    )

    def check_file_path(self, path: str) -> str:
        return check_sqlite_path(path)

    def odbc_connection_string(self, address: Address) -> str:
        if address.odbc_dsn:
            return f"DSN={odbc_value(address.odbc_dsn)};"
        path = check_sqlite_path(address.database)
        return f"DRIVER={{{self.odbc_driver}}};Database={odbc_value(path)};Timeout={BUSY_TIMEOUT_MS};"

    def jdbc_endpoint(self, address: Address) -> JdbcEndpoint:
        path = check_sqlite_path(address.database)
        return JdbcEndpoint(
            url=f"jdbc:sqlite:{path}",
            properties={"driver": self.jdbc_driver, "busy_timeout": str(BUSY_TIMEOUT_MS)},
        )

    # --- expressions and statement shapes ----------------------------------------------------------
    def timestamp_literal(self, text: str) -> str:
        return f"'{text}'"

    def null_safe_equal(self, a: str, b: str) -> str:
        return f"{a} IS {b}"

    def serial_key_ddl(self, name: str) -> str:
        return f"{self.quote(name)} INTEGER PRIMARY KEY AUTOINCREMENT"

    def insert_ignore_sql(self, table: str, rest: str) -> str:
        return f"INSERT OR IGNORE INTO {table} {rest}"

    def upsert_row_source(self, values: str) -> str:
        # `SELECT ... WHERE true` keeps SQLite's parser from reading ON CONFLICT as a join clause.
        return f"SELECT {values} WHERE true"

    def dependents_sql(self, table: str, schema: str) -> tuple[str, list[str]]:
        # SQLite's staging copy is rebuilt from introspection (columns and key only), so a table with
        # indexes of its own is refreshed in place rather than swapped.
        return (
            "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?)"
            " + (SELECT count(*) FROM sqlite_master WHERE type = 'view')"
            " + (SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL)"
            " + (SELECT count(*) FROM sqlite_master m, pragma_foreign_key_list(m.name) f"
            "    WHERE m.type = 'table' AND f.\"table\" = ?)",
            [table, table, table],
        )

    # --- snapshot logs -----------------------------------------------------------------------------
    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        d = self
        keys = key_columns(table)
        rlog = d.qualify(rlog_name(table.name))
        now = NOW
        guid = "lower(hex(randomblob(16)))"
        i_name, u_name, d_name = d.snapshot_trigger_names(table.name)
        src = d.qualify(table.name)
        same_key = " AND ".join(f"OLD.{d.quote(k.name)} IS NEW.{d.quote(k.name)}" for k in keys)

        def upsert(ref: str, op: str, where: str = "") -> str:
            cols, vals = log_values(d, keys, ref, now, guid, op)
            return f"INSERT OR REPLACE INTO {rlog} ({cols}) SELECT {vals}{where};"

        create = [
            *d.snapshot_log_table_ddl(table),
            f"CREATE TRIGGER {d.quote(i_name)} AFTER INSERT ON {src} BEGIN {upsert('NEW', 'I')} END",
            f"CREATE TRIGGER {d.quote(u_name)} AFTER UPDATE ON {src} BEGIN "
            f"{upsert('OLD', 'D', f' WHERE NOT ({same_key})')} "
            f"{upsert('NEW', 'I', f' WHERE NOT ({same_key})')} "
            f"{upsert('NEW', 'U', f' WHERE ({same_key})')} END",
            f"CREATE TRIGGER {d.quote(d_name)} AFTER DELETE ON {src} BEGIN {upsert('OLD', 'D')} END",
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
        fresh = d.concat(d.literal(local + "@"), d.uuid_sql)
        same_key = " AND ".join(f"OLD.{d.quote(k.name)} IS NEW.{d.quote(k.name)}" for k in keys)
        where_new = " AND ".join(f"{d.quote(k.name)} = NEW.{d.quote(k.name)}" for k in keys)

        def logs(expr: str) -> str:
            return "1" if publisher else d.has_prefix_sql(expr, local + "@")

        # SQLite cannot change NEW in a trigger: the row is updated after the fact. That nested UPDATE
        # fires the update trigger (not this one: recursive triggers are off), which logs the insert.
        insert_log = (
            log.upsert("NEW", "I", f"NEW.{g}", "NULL")
            .rstrip(";")
            .replace(" WHERE true ", f" WHERE NEW.{g} IS NOT NULL AND {logs(f'NEW.{g}')} ")
        )
        row = f"(SELECT {g} FROM {src} WHERE {where_new})"
        op = f"CASE WHEN OLD.{g} IS NULL THEN 'I' ELSE 'U' END"
        update_log = (
            f"INSERT INTO {log.rlog} ({log.columns()}) SELECT {log.values('NEW', op, row, f'OLD.{g}')} "
            f"WHERE NOT ({log.is_mark(row)}) AND {logs(row)} {log.on_conflict()}"
        )
        delete_replayed = (
            log.upsert("OLD", "D", log.unmark(f"OLD.{g}"), "NULL")
            .rstrip(";")
            .replace(" WHERE true ", f" WHERE {log.is_mark(f'OLD.{g}')} ")
        )
        delete_local = (
            log.upsert("OLD", "D", fresh, f"OLD.{g}")
            .rstrip(";")
            .replace(" WHERE true ", f" WHERE NOT ({log.is_mark(f'OLD.{g}')}) ")
        )
        create = [
            f"CREATE TRIGGER {d.quote(names['I'])} AFTER INSERT ON {src} BEGIN "
            f"UPDATE {src} SET {g} = {fresh} WHERE NEW.{g} IS NULL AND {where_new}; {insert_log}; END",
            f"CREATE TRIGGER {d.quote(names['U'])} AFTER UPDATE ON {src} BEGIN "
            f"SELECT RAISE(ABORT, {d.literal(bidir_key_error(table.name))}) WHERE NOT ({same_key}); "
            f"UPDATE {src} SET {g} = {fresh} WHERE NEW.{g} IS OLD.{g} AND {where_new}; {update_log}; END",
            f"CREATE TRIGGER {d.quote(names['D'])} AFTER DELETE ON {src} BEGIN "
            + (f"{delete_replayed}; " if publisher else "")
            + f"{delete_local}; END",
        ]
        drop = [f"DROP TRIGGER IF EXISTS {d.quote(n)}" for n in names.values()]
        return create, drop

    # --- transactional replication -----------------------------------------------------------------
    # One writer at a time: entries are written without a number; the sequencer numbers them later.
    # The replay context lives in the one-row table RTCTX.
    def replay_context_ddl(self, table: str) -> list[str]:
        q = self.quote
        return [
            f"CREATE TABLE IF NOT EXISTS {table} ({q('ID')} integer NOT NULL PRIMARY KEY, "
            f"{q('NOLOG')} integer NOT NULL DEFAULT 0, {q('ORIGIN')} varchar(128))",
            f"INSERT OR IGNORE INTO {table} ({q('ID')}, {q('NOLOG')}) VALUES (1, 0)",
        ]

    def replay_context_sql(self, nolog: bool, origin: str | None, context_table: str) -> list[str]:
        q = self.quote
        return [
            f"UPDATE {context_table} SET {q('NOLOG')} = {1 if nolog else 0}, "
            f"{q('ORIGIN')} = {self.optional_literal(origin)}"
        ]

    def reset_context_sql(self, context_table: str) -> list[str]:
        q = self.quote
        return [f"UPDATE {context_table} SET {q('NOLOG')} = 0, {q('ORIGIN')} = NULL"]

    # --- set-based apply (json_each over the bound array; each column by its path in the image) --------------
    json_text_holds_nul = False  # json_extract ends a text at its NUL

    def _image_value(self, c: ImageColumn) -> str | None:
        """The column's value of the image `e.value` as RowCodec decodes it and binding it would store (no '?' in the
        expressions: the statement's one parameter is the images'). SQLite keeps what it is given, so the text forms
        (times) are rebuilt to the character."""
        if '"' in c.key:
            return None  # a name no JSON path of SQLite's (3.40) can spell
        path = self.literal(f'$."{c.key}"')
        x = f"json_extract(e.value, {path})"
        kind = f"json_type(e.value, {path})"
        text = f"CAST({x} AS TEXT)"
        # An image value no decoding takes is refused, as decoding it refuses it (json() of no JSON fails).
        refuse = "json('refused')"
        decimal = f"({x} GLOB '*[.E]*' AND NOT {x} GLOB '*[^0-9.E+-]*')"
        if c.family == "text":
            if c.kind == "other":
                return None  # a type of its own: the image may embed a document for it
            return f"CASE {kind} WHEN 'true' THEN 'True' WHEN 'false' THEN 'False' WHEN 'text' THEN {x} ELSE {text} END"
        if c.family == "integer":
            return (
                f"CASE {kind} WHEN 'integer' THEN {x} WHEN 'real' THEN CAST({x} AS INTEGER) WHEN 'true' THEN 1 "
                f"WHEN 'false' THEN 0 WHEN 'text' THEN CASE WHEN {decimal} THEN CAST(CAST({x} AS REAL) AS INTEGER) "
                f"WHEN trim({x}) <> '' AND NOT trim({x}) GLOB '*[^0-9+-]*' THEN CAST(trim({x}) AS INTEGER) "
                f"ELSE {refuse} END END"
            )
        if c.family == "float":
            special = f"lower(trim({x}))"
            return (
                f"CASE WHEN {kind} <> 'text' THEN CAST({x} AS REAL) "
                f"WHEN {special} IN ('nan', '+nan', '-nan') THEN NULL "
                f"WHEN {special} IN ('inf', '+inf', 'infinity', '+infinity') THEN 9e999 "
                f"WHEN {special} IN ('-inf', '-infinity') THEN -9e999 ELSE CAST({x} AS REAL) END"
            )
        if c.family == "decimal":
            # The number's text as the image has it (a Decimal arrives as its text).
            return f"CASE {kind} WHEN 'text' THEN {x} ELSE e.value -> {path} END"
        if c.family == "boolean":
            return (
                f"CASE {kind} WHEN 'true' THEN 1 WHEN 'false' THEN 0 WHEN 'text' THEN CASE WHEN {decimal} "
                f"THEN CAST({x} AS REAL) <> 0 ELSE lower(trim({x})) IN ('1', 't', 'true', 'y', 'yes') END "
                f"ELSE {x} <> 0 END"
            )
        if c.family == "date":
            return f"substr(trim({text}), 1, 10)"
        if c.family == "time":
            dot = f"instr({text}, '.')"
            return (
                f"CASE WHEN {dot} > 0 THEN substr({text}, 1, {dot} - 1) || '.' || "
                f"substr(substr({text}, {dot} + 1, 6) || '000000', 1, 6) ELSE {text} || '.000000' END"
            )
        if c.family == "timestamp":
            return self._timestamp_value(x)
        if c.family == "json":
            return f"CASE {kind} WHEN 'text' THEN {x} ELSE e.value -> {path} END"
        return None  # bytes: SQLite 3.40 has no unhex()

    def _timestamp_value(self, x: str) -> str:
        """_timestamp_text: an ISO time as 'YYYY-MM-DD HH:MM:SS.ffffff' in UTC (its zone applied), anything else as
        it is with T as a space. SQLite's time functions read a zone written +HH:MM: +HH and +HHMM are made so."""
        t = f"replace(trim({x}), 'T', ' ')"
        zoned = (
            f"CASE WHEN {t} GLOB '*[0-9]:[0-9][0-9]*[+-][0-9][0-9]' THEN {t} || ':00' "
            f"WHEN {t} GLOB '*[0-9]:[0-9][0-9]*[+-][0-9][0-9][0-9][0-9]' "
            f"THEN substr({t}, 1, length({t}) - 2) || ':' || substr({t}, -2) ELSE {t} END"
        )
        fraction = f"substr({t}, 21, 6)"
        cut = ", ".join(f"coalesce(nullif(instr({fraction}, '{ch}'), 0), 7)" for ch in ("+", "-", "Z", " "))
        micro = (
            f"CASE WHEN substr({t}, 20, 1) = '.' THEN substr(substr({fraction}, 1, min({cut}) - 1) || '000000', 1, 6) "
            "ELSE '000000' END"
        )
        iso = f"{t} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'"
        return (
            f"CASE WHEN {iso} AND strftime('%Y-%m-%d %H:%M:%S', {zoned}) IS NOT NULL "
            f"THEN strftime('%Y-%m-%d %H:%M:%S', {zoned}) || '.' || {micro} ELSE {t} END"
        )

    def images_upsert_sql(self, target: str, columns: Sequence[ImageColumn], keys: Sequence[ImageColumn]) -> str | None:
        values = [self._image_value(c) for c in columns]
        if any(v is None for v in values) or not keys:
            return None
        q = self.quote
        picked = ", ".join(f"{v} AS c{i}" for i, v in enumerate(values))
        names = ", ".join(q(c.column) for c in columns)
        key_names = {k.column for k in keys}
        others = [q(c.column) for c in columns if c.column not in key_names]
        # Row by row in the images' order: of the images of one key, the last one's update stays. WHERE true: an
        # upsert's SELECT needs a WHERE (SQLite's grammar).
        insert = (
            f"INSERT INTO {target} ({names}) SELECT {', '.join(f's.c{i}' for i in range(len(columns)))} "
            f"FROM (SELECT {picked}, e.key AS o FROM json_each(?) AS e) AS s WHERE true ORDER BY s.o"
        )
        return self.upsert_sql(insert, [q(k.column) for k in keys], others)

    def images_delete_sql(self, target: str, keys: Sequence[ImageColumn]) -> str | None:
        values = [self._image_value(k) for k in keys]
        if any(v is None for v in values) or not keys:
            return None
        q = self.quote
        columns = ", ".join(q(k.column) for k in keys)
        picked = ", ".join(values)  # type: ignore[arg-type]
        left = columns if len(keys) == 1 else f"({columns})"
        return f"DELETE FROM {target} WHERE {left} IN (SELECT {picked} FROM json_each(?) AS e)"

    def text_image_sql(self, stmt: str, args: str) -> str:
        return f"json_object('stmt', {stmt}, 'args', json(coalesce({args}, '[]')))"

    def capture_entry_sql(self, logs: CaptureTables, table: str, op: str, new: str, old: str, local: str) -> str:
        q = self.quote
        entry_cols = f"{q('TXID')}, {q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}"
        return (
            f"INSERT INTO {logs.log} ({entry_cols}, {q('ORIGIN')}) "
            f"SELECT NULL, {self.literal(table)}, '{op}', {new}, {old}, "
            f"coalesce((SELECT {q('ORIGIN')} FROM {logs.ctx}), {self.literal(local)}) "
            f"WHERE coalesce((SELECT {q('NOLOG')} FROM {logs.ctx}), 0) = 0;"
        )

    def text_trigger_ddl(
        self, name: str, table: str, schema: str, account: str, body: str
    ) -> tuple[list[str], list[str]]:
        q = self.quote
        create = [
            f"CREATE TRIGGER {q(name)} AFTER INSERT ON {table} FOR EACH ROW "
            f"WHEN NEW.{q('ACCOUNT')} = {account} BEGIN {body} END"
        ]
        return create, [f"DROP TRIGGER IF EXISTS {q(name)}"]

    def append_entry_sql(self, logs: CaptureTables, op: str, table: str, new: str, local: str) -> EntryStatements:
        q = self.quote
        columns = f"{q('TXID')}, {q('TBL')}, {q('OP')}, {q('NEW')}, {q('OLD')}"
        return [
            (
                f"INSERT INTO {logs.log} ({columns}, {q('ORIGIN')}) VALUES (NULL, ?, ?, ?, NULL, ?)",
                [table, op, new, local],
            )
        ]

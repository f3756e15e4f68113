"""What every dialect knows: quoting, type mapping, introspection SQL, ODBC and JDBC addresses, and the
SQL the replication modes need from it (capabilities, statement shapes, log and trigger DDL).

The mode modules (engine.refresh_sql, engine.bidir_sql, engine.transactional_sql, engine.snapshot_log)
never test a dialect's name: they ask the dialect. Defaults here are ANSI where there is an ANSI form;
what only some servers can do raises NotImplementedError until a dialect provides it."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from replication_admin.engine.objects import (
    DMLTYPE,
    ROWGUID,
    TIMESTAMP,
    SnapshotLogError,
    SnapshotLogObjects,
    key_columns,
    rlog_key,
    rlog_name,
)
from replication_admin.engine.schema import Column, Default, TableInfo
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
    if port is None:
        raise AddressError(f"port {port!r} is not a number")
    try:
        value = int(port)
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
    # Seconds a connect may take, and a read may wait for the server's next bytes before the connection is
    # treated as lost (0: no read bound). A link that stops forwarding without closing must not hold a job.
    connect_timeout: int = 10
    read_timeout: int = 0


# Seconds a Spark JDBC session may sit idle inside a transaction before its server ends it (a task killed with
# its job can leave one open, holding locks on a work table the job's next attempt drops).
IDLE_TRANSACTION_SECONDS = 60

# TCP keepalives on every connection the drivers open: a peer that vanished (a host gone, a black-holed link)
# is found within about KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT seconds of silence, even while no
# statement waits on it.
KEEPALIVE_IDLE = 30
KEEPALIVE_INTERVAL = 10
KEEPALIVE_COUNT = 3


def keepalive_ms() -> int:
    """How long sent data may stay unacknowledged before the connection is dropped (TCP_USER_TIMEOUT), in
    milliseconds: as long as the keepalives take to give up on a silent peer."""
    return (KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT) * 1000


@dataclass(frozen=True)
class JdbcEndpoint:
    url: str
    properties: dict[str, str] = field(default_factory=dict)


class LogTableNames(Protocol):
    """The log tables of a transactional publication (engine.transactional_sql.LogNames)."""

    @property
    def seq(self) -> str: ...
    @property
    def tx(self) -> str: ...
    @property
    def log(self) -> str: ...


class CaptureTables(LogTableNames, Protocol):
    """The quoted tables a capture trigger writes (engine.transactional_sql._Tables)."""

    @property
    def ctx(self) -> str: ...


class RowLog(Protocol):
    """How a trigger writes a row into the updateable log (engine.bidir_sql.UpdateableLog)."""

    @property
    def rlog(self) -> str: ...
    def columns(self) -> str: ...
    def values(self, ref: str, op: str, guid: str, old: str) -> str: ...
    def is_mark(self, expr: str) -> str: ...
    def unmark(self, expr: str) -> str: ...
    def on_conflict(self) -> str: ...
    def upsert(self, ref: str, op: str, guid: str, old: str) -> str: ...
    def merge(self, values: Sequence[str], source: str) -> str: ...


@dataclass(frozen=True)
class EmptyTable:
    """How a table with row triggers and its log are emptied without running the triggers row by row:
    `statements` in one transaction (where one of them commits on its own, the ones before it lock both
    tables), then `finally_`, whatever happened (it releases those locks)."""

    statements: tuple[str, ...]
    finally_: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamWire:
    """The CSV a full copy streams from a source's native export into a destination's native load
    (core.native_copy): ',' between fields, '"' around them (doubled inside), one row per line; a NULL is the
    unquoted `null` token, bytes are hex after `hex_prefix`, booleans 1 / 0, timestamps UTC wall time."""

    null: str
    hex_prefix: str
    quote_all: bool  # every non-NULL value quoted (the NULL token could be a value otherwise)


@dataclass(frozen=True)
class ImageColumn:
    """A subscriber's column as a set-based apply reads it from a JSON array of row images."""

    column: str  # the subscriber's column
    key: str  # its name in the images (the publisher's spelling; MariaDB and SQLite fold case)
    family: str  # the value family (engine.compare.family_of), which says how the image holds the value
    kind: str  # the logical kind
    declared: str  # the subscriber's declared type (what the value is cast to)


# (statement, parameters) pairs, and (trigger names, create, drop) of BEFORE triggers.
EntryStatements = list[tuple[str, list[str]]]
TriggerObjects = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


@dataclass(frozen=True)
class ColumnText:
    """A column's definition as its table's CREATE statement holds it: the name as written, then the rest (type and
    constraints), and the table it is in. A dialect that changes a column by editing that text (SQLite) reads it."""

    table: str
    lead: str  # what separates it from what comes before ('(' or ', '): the text matches a whole definition only
    name: str  # the name's token as written ('"qty"')
    rest: str  # what follows the name up to the next column (' INTEGER NOT NULL')

    @property
    def text(self) -> str:
        return self.lead + self.name + self.rest

    def renamed(self, quoted: str) -> ColumnText:
        """As the server writes it after RENAME COLUMN to `quoted` (the new name's token)."""
        return ColumnText(self.table, self.lead, quoted, self.rest)


class Dialect:
    name: str = ""
    label: str = ""
    live: bool = False  # True when the console can connect to it (ODBC + JDBC)
    default_port: int | None = None
    odbc_driver: str = ""
    jdbc_driver: str = ""
    max_identifier: int = 128
    quote_char: str = '"'
    # MariaDB and MySQL keep names in utf8mb3: nothing outside the Basic Multilingual Plane (emoji, rare CJK).
    bmp_only_names: bool = False
    # Appended to the CREATE TABLE of copies and destinations the console creates.
    create_table_options: str = ""

    # --- what the server says of itself --------------------------------------------------------------
    # The server's own answer to "which version are you" (a connection test runs it): truer than the driver's
    # SQL_DBMS_VER, which the SQLite driver fills with the library it was built against, not the one it runs.
    version_sql: str = ""

    def reported_version(self, answer: str) -> str:
        """The version number in the server's answer to version_sql ("15.20 (Debian 15.20-0+deb12u1)" is 15.20,
        "10.11.19-MariaDB-0+deb12u1" is 10.11.19)."""
        return answer.strip().split(" ")[0].split("-")[0]

    # --- quoting -----------------------------------------------------------------------------------
    def name_problem(self, name: str) -> str | None:
        """Why this database cannot hold the name, or None."""
        if self.bmp_only_names and any(ord(ch) > 0xFFFF for ch in name):
            return (
                f"{self.label} names cannot hold characters outside the Basic Multilingual Plane "
                f"(4-byte UTF-8 such as emoji): {name!r}"
            )
        return None

    def quote(self, name: str) -> str:
        check_identifier(name, self.max_identifier)
        problem = self.name_problem(name)
        if problem:
            raise IdentifierError(problem)
        q = self.quote_char
        return q + name.replace(q, q + q) + q

    def qualify(self, table: str, schema: str = "") -> str:
        return f"{self.quote(schema)}.{self.quote(table)}" if schema else self.quote(table)

    def literal(self, value: str) -> str:
        return "'" + str(value).replace("'", "''") + "'"

    # --- types -------------------------------------------------------------------------------------
    def parse_type(self, declared: str) -> LogicalType:
        raise NotImplementedError

    def render_default(self, default: Default, logical: LogicalType) -> str:
        """A portable default (engine.constraints) as this dialect writes it in a column definition."""
        if default.kind == "number":
            return default.value
        if default.kind == "text":
            return self.literal(default.value)
        if default.kind == "boolean":
            if self.has_boolean:
                return "TRUE" if default.value == "true" else "FALSE"
            return "1" if default.value == "true" else "0"
        if default.kind == "today":
            return "CURRENT_DATE"
        return "CURRENT_TIMESTAMP"

    def index_columns_sql(self, columns: Sequence[tuple[str, LogicalType]], unique: bool) -> list[str]:
        """An index's column list (MariaDB indexes only a prefix of unbounded text)."""
        return [self.quote(name) for name, _ in columns]

    # Why a transactional subscription on this dialect cannot replay as another user (None: it can, by role).
    replay_user_problem: str | None = "it has no users to replay as"

    def replay_role_sql(self, role: str) -> tuple[list[str], list[str]]:
        """Statements that make the rest of an apply transaction run with `role`'s privileges, and those that
        end that (before the level moves: the level table is the login's)."""
        raise NotImplementedError

    def grant_log_sql(self, tables: Sequence[str], role: str) -> list[str]:
        """What `role` needs on a publication's log tables to write the log entries its changes make (the capture
        triggers run with the privileges of the user whose statement fired them)."""
        raise NotImplementedError

    def role_check_sql(self) -> str:
        """One row (1: the login may act as the role bound as the parameter, 0: it may not) when the role
        exists, none when it does not."""
        raise NotImplementedError

    def defaults_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        """Rows of (column name, default expression as the catalog writes it, or NULL)."""
        raise NotImplementedError

    def indexes_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        """Rows of (index name, unique 0/1, position, column name or NULL for an expression, partial 0/1) for
        every index but the primary key's, ordered by index and position."""
        raise NotImplementedError

    def foreign_keys_sql(self, schema: str, table: str) -> tuple[str, list[str]] | None:
        """Rows of (name, position, column, referenced table, referenced column or NULL for its key, ON DELETE
        action) for every foreign key of the table, ordered by name and position (None: not read here)."""
        return None

    def definition_sql(self, schema: str, table: str) -> tuple[str, list[str]] | None:
        """One row holding the table's CREATE statement as the server keeps it, where a change of the table is
        made by editing that text (SQLite); None: not read here."""
        return None

    def column_texts(self, table: str, definition: str) -> dict[str, ColumnText]:
        """Each column's definition in `table`'s CREATE statement (definition_sql), by its name in lower case."""
        return {}

    def render_key_types(self, keys: Sequence[LogicalType]) -> list[str]:
        """The types of a primary key's columns (as render_type: key_constraints_sql makes any of them a key)."""
        return [self.render_type(k) for k in keys]

    def key_constraints_sql(self, keys: Sequence[tuple[str, LogicalType]]) -> list[str]:
        """The table elements that make `keys` (quoted column names, logical types) a created table's key,
        whatever length their values have (MariaDB: a unique hash where a primary key cannot hold them).
        A ValueError names a key no form can hold."""
        return [f"PRIMARY KEY ({', '.join(n for n, _ in keys)})"]

    def render_type(self, logical: LogicalType) -> str:
        raise NotImplementedError

    # --- schema changes of a copy (engine.schema_changes) ---------------------------------------------
    def rename_column_sql(self, table: str, old: str, new: str) -> str:
        return f"ALTER TABLE {table} RENAME COLUMN {self.quote(old)} TO {self.quote(new)}"

    def drop_index_for_column_sql(self, table: str, schema: str, index: str) -> list[str]:
        """What must go before a column an index covers can be dropped (nothing: the index follows)."""
        return []

    def retype_column_sql(self, table: str, column: str, after: Column) -> list[str]:
        """A column given the type `after` has (its values converted)."""
        raise NotImplementedError

    # Why a copy here cannot take a foreign key after it was created ("": it can).
    foreign_key_refused = ""
    # Why a copy here cannot set a column's NOT NULL after it was created ("": it can). Every dialect drops one.
    set_not_null_refused = ""

    def nullability_sql(self, table: str, column: Column, text: ColumnText | None = None) -> list[str]:
        """`column`'s NOT NULL set or dropped, as `column.nullable` says (`text`: its definition, column_texts)."""
        verb = "DROP" if column.nullable else "SET"
        return [f"ALTER TABLE {table} ALTER COLUMN {self.quote(column.name)} {verb} NOT NULL"]

    def add_unique_sql(self, table: str, schema: str, name: str, columns: Sequence[str]) -> str:
        return f"ALTER TABLE {table} ADD CONSTRAINT {self.quote(name)} UNIQUE ({', '.join(columns)})"

    def drop_unique_sql(self, table: str, schema: str, name: str) -> list[str]:
        """A unique constraint or unique index dropped (whichever it is)."""
        raise NotImplementedError

    def add_foreign_key_sql(self, table: str, name: str, columns: Sequence[str], ref_table: str,
                            ref_columns: Sequence[str], on_delete: str) -> str:  # fmt: skip
        action = "" if on_delete in ("", "NO ACTION") else f" ON DELETE {on_delete}"
        return (
            f"ALTER TABLE {table} ADD CONSTRAINT {self.quote(name)} FOREIGN KEY ({', '.join(columns)}) "
            f"REFERENCES {ref_table} ({', '.join(ref_columns)}){action}"
        )

    def drop_foreign_key_sql(self, table: str, name: str) -> str:
        return f"ALTER TABLE {table} DROP CONSTRAINT {self.quote(name)}"

    def replace_objects_sql(self, drop: Sequence[str], create: Sequence[str]) -> list[str]:
        """Triggers made anew over ones that exist, run as one transaction: no write goes uncaptured between."""
        return [*drop, *create]

    # --- introspection (control plane; parameters are bound with '?') -------------------------------
    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        raise NotImplementedError

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        """Rows of (column name, declared type, nullable 0/1, primary key position or 0)."""
        raise NotImplementedError

    # The server page's row counts: the catalog's cheap estimates (True), or counted up to a bound (False).
    row_counts_are_estimates = True

    def table_sizes_sql(self, schema: str) -> tuple[str, list[str]]:
        """Rows of (table, rows, bytes of the table and its indexes), cheap to read, without scanning a table; a
        NULL rows is counted with count_rows_sql, a NULL bytes is not known."""
        raise NotImplementedError

    def count_rows_sql(self, schema: str, table: str, bound: int) -> str:
        """The rows of `table`, counted up to `bound` (reading no more than that many)."""
        return f"SELECT count(*) FROM (SELECT 1 FROM {self.qualify(table, schema)} LIMIT {int(bound)}) AS bounded"

    # --- addresses and sessions (core.connections asks these; nothing outside the dialects names a driver) --
    # The JDBC driver jars Spark loads for this dialect (settings.JDBC_JARS is every dialect's).
    jdbc_jars: tuple[str, ...] = ()
    # The dialect sqlglot reads and writes this dialect's SQL as (admins' snapshot queries and conditions);
    # "" is sqlglot's generic SQL.
    sqlglot_dialect: str = ""
    # The schema tables are qualified with when a registration names none (where has_schemas).
    default_schema: str = ""
    # pyodbc's text encodings for this dialect's ODBC driver: what parameters are sent as and what character
    # data comes back as (None: pyodbc's default, UTF-16 for wide text).
    odbc_send_encoding: str | None = None
    odbc_read_encoding: str | None = None

    def table_schema(self, schema: str) -> str:
        """The schema a registered server's tables are qualified with (its own, else the default; "" where the
        dialect has no schemas)."""
        return (schema or self.default_schema) if self.has_schemas else ""

    def session_setup_sql(self, readonly: bool) -> list[str]:
        """Statements every new ODBC session runs first: times in UTC, waits for locks, and, when `readonly`,
        a session that refuses writes."""
        return []

    def check_file_path(self, path: str) -> str:
        """Where file_based: the normalised path of a database file (an AddressError names what is wrong)."""
        raise AddressError(f"{self.label} databases are not files")

    # Does the ODBC driver bound a read by Address.read_timeout itself? Where not, the control plane watches
    # the connection's socket (core/connections.py).
    odbc_read_timeout: bool = True

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

    # --- capabilities ------------------------------------------------------------------------------
    # Timestamps and dates are stored as ISO text (read through JDBC as STRING, parsed in Spark).
    text_timestamps: bool = False
    # A real boolean type (values bound as True / False rather than 0 / 1).
    has_boolean: bool = False
    # BEFORE triggers can set ROWGUID before a row is logged (updateable transactional publications).
    supports_updateable_publications: bool = False
    # One writer at a time: bulk writes go through a single connection in one transaction.
    single_writer: bool = False
    # The database is a file opened by whoever reads it: Spark's executors must see it at the same path.
    local_file: bool = False
    # Bi-directional snapshot replication (ROWGUID triggers and the updateable snapshot log).
    supports_bidir: bool = False
    # Row triggers run a function created alongside (the functions are objects of their own).
    trigger_functions: bool = False
    # Procedures are resolved by argument type (a logged call carries its arguments' types as casts).
    resolves_procedures_by_type: bool = False
    # Committed transactions are numbered by whoever reads the log (number_sql), not by their writers: a writer
    # touches no row another writer touches, so writers of a publication never wait for each other.
    numbers_when_read: bool = False
    # Statement triggers see the rows a statement changed as a table (a bulk statement is logged in one INSERT).
    has_transition_tables: bool = False
    # Logical decoding of the write-ahead log (a publication may capture from it: engine.wal_capture).
    decodes_wal: bool = False
    # A statement that lets the current transaction commit without waiting for its flush to disk (None: the server
    # has no per-transaction way). An apply runs it when settings.APPLY_ASYNC_COMMIT allows (docs/durability.md).
    async_commit_sql: str | None = None
    # Capture triggers wake a waiting follower (LISTEN/NOTIFY, gated by wake_lock_sql): wake_channel says where.
    wakes_followers: bool = False
    # The bulk loader staging writes may use (jobs.native_load): "copy" (COPY FROM STDIN) or "load_data".
    bulk_loader: str | None = None
    # Full copies stream this dialect's rows out natively (core.native_copy): "copy" (COPY … TO STDOUT) or
    # "select" (an unbuffered SELECT of lines the server formats); None: Spark reads it.
    bulk_export: str | None = None
    # The CSV its bulk loader reads when a full copy streams into it (None: it takes no stream).
    stream_wire: StreamWire | None = None
    # Transactions are numbered when they first change a published table, holding the publication's counter
    # row until they commit (a reader counts only what is before the holder).
    numbers_at_first_change: bool = False
    # RTLOG's TXID is kept by the server: the writing transaction's id (MariaDB's transaction-precise system
    # versioning); log_txid_ddl says how, number_steps_sql how readers number, purge_history_sql what purging adds.
    versioned_log: bool = False
    # DDL triggers: a redefined published procedure's definition is logged and replicated.
    has_ddl_triggers: bool = False
    # DDL is transactional (rolls back); otherwise each statement commits and a failure is undone by hand.
    transactional_ddl: bool = True
    # RENAME TABLE swaps two tables atomically (a full refresh swaps the staging table in with one statement).
    atomic_rename_swap: bool = False
    # A database is a file (no host, port, user); its address is the path.
    file_based: bool = False
    # Tables live in named schemas of the database (a server registration may name one).
    has_schemas: bool = False
    # Column types are declared loosely (a query's output types are inferred from the query instead).
    dynamic_types: bool = False
    # How the server compares text by default (a row filter evaluated on images compares as the publisher does):
    # without regard to case (MariaDB's default collations), and LIKE without regard to case (MariaDB, SQLite).
    text_compare_ignores_case: bool = False
    like_ignores_case: bool = False
    # Suffixes of the snapshot-log triggers (I, U, D).
    snapshot_trigger_suffixes: tuple[str, str, str] = ("_I_log", "_U_log", "_D_log")
    # Extra BEFORE triggers of bi-directional replication that give rows their ROWGUID (name suffixes).
    bidir_guid_triggers: tuple[str, ...] = ()
    # What ends a bi-directional trigger's name after `<table>_<op>` (the reference's names: DB2's have none).
    bidir_trigger_suffix: str = "_log"
    # Bi-directional triggers generated as text for a server the console does not reach (engine.bidir_sql.bidir_script),
    # with the functions they call (`bidir_functions`, created first by `bidir_setup_sql`).
    bidir_text: bool = False
    bidir_functions: tuple[str, ...] = ()
    bidir_setup_sql: tuple[str, ...] = ()

    def database_exists_sql(self, name: str) -> tuple[str, list[str]] | None:
        """A query that finds the database `name` (None: create_database_sql is idempotent)."""
        return None

    def create_database_sql(self, name: str) -> str:
        raise NotImplementedError(f"{self.label} databases are not created by replication_admin")

    @property
    def snaptime_read_type(self) -> str:
        """The Spark type a SNAPTIME column is read as."""
        return "STRING" if self.text_timestamps else "TIMESTAMP"

    # --- expressions -------------------------------------------------------------------------------
    def timestamp_literal(self, text: str) -> str:
        return f"TIMESTAMP '{text}'"

    def concat(self, left: str, right: str) -> str:
        return f"({left} || {right})"

    def has_prefix_sql(self, expr: str, prefix: str) -> str:
        """True when the text `expr` starts with `prefix`."""
        return f"substr({expr}, 1, {len(prefix)}) = {self.literal(prefix)}"

    def substring_from_sql(self, expr: str, start: int) -> str:
        return f"substr({expr}, {start})"

    def null_safe_equal(self, a: str, b: str) -> str:
        return f"{a} IS NOT DISTINCT FROM {b}"

    @property
    def uuid_sql(self) -> str:
        """A fresh uuid as text."""
        raise NotImplementedError(f"{self.label} has no uuid expression here")

    @property
    def clock_now_sql(self) -> str:
        """The wall clock in UTC, now (not the transaction's start)."""
        raise NotImplementedError(f"{self.label} has no clock expression here")

    @property
    def log_now_sql(self) -> str:
        """The UTC time log triggers stamp SNAPTIME with."""
        raise NotImplementedError(f"{self.label} has no log time expression here")

    @property
    def now_select_sql(self) -> str:
        """A query of the server's clock in UTC, the way its log triggers stamp SNAPTIME."""
        raise NotImplementedError(f"{self.label} has no clock query here")

    # --- statement shapes --------------------------------------------------------------------------
    script_hint = ""  # how the server's command-line tool runs a script (script)

    def script(self, statements: Sequence[str]) -> str:
        """`statements` as one script the server's own command-line tool runs, each ended as that tool expects."""
        return "".join(f"{s.rstrip().removesuffix(';')};\n" for s in statements)

    def add_column_sql(self, table: str, column: str) -> str:
        """ALTER TABLE `table` (qualified) adding `column` (its definition)."""
        return f"ALTER TABLE {table} ADD COLUMN {column}"

    def qualify_plain(self, table: str, schema: str = "") -> str:
        """A table named in statements that only reach the connection's own database."""
        return self.qualify(table, schema)

    def serial_key_ddl(self, name: str) -> str:
        """A bigint primary-key column numbered by the server."""
        raise NotImplementedError(f"{self.label} has no serial key here")

    def serial_column_ddl(self, name: str) -> str:
        """A bigint column numbered by the server, a key only where the dialect needs one for numbering."""
        return self.serial_key_ddl(name)

    def insert_ignore_sql(self, table: str, rest: str) -> str:
        """INSERT INTO `table` `rest` (columns and VALUES / SELECT), skipping rows whose key exists."""
        raise NotImplementedError(f"{self.label} has no INSERT that skips existing keys here")

    def excluded_sql(self, column: str) -> str:
        """In an upsert's update part: the value the insert proposed for `column` (quoted)."""
        return f"excluded.{column}"

    def conflict_current_sql(self, table: str, column: str) -> str:
        """In an upsert's update part: the existing row's `column` (quoted) of `table` (qualified)."""
        return f"{table}.{column}"

    def on_conflict_update_sql(self, conflict: str, sets: list[str]) -> str:
        """The clause that turns an insert of an existing key (`conflict`: its quoted columns) into an update."""
        return f"ON CONFLICT ({conflict}) DO UPDATE SET " + ", ".join(sets)

    def upsert_row_source(self, values: str) -> str:
        """The row of an INSERT ... ON CONFLICT in a trigger."""
        return f"VALUES ({values})"

    def upsert_sql(self, insert: str, keys: list[str], others: list[str]) -> str:
        """`insert` (INSERT ... VALUES ...) overwriting the rows whose key exists (names quoted)."""
        action = "DO UPDATE SET " + ", ".join(f"{n} = excluded.{n}" for n in others) if others else "DO NOTHING"
        return f"{insert} ON CONFLICT ({', '.join(keys)}) {action}"

    def update_join_sql(self, target: str, staging: str, on: str, sets: list[tuple[str, str]], where: str) -> str:
        """UPDATE the table `t` from the staging rows `s` matched by `on` (`sets`: column, expression)."""
        assignments = ", ".join(f"{self.quote(c)} = {e}" for c, e in sets)
        return f"UPDATE {target} AS t SET {assignments} FROM {staging} s WHERE {on} AND {where}"

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
        """DELETE the rows of `target` (t) whose key is among the staging rows (s) that meet `condition`.

        `keys` / `aliases` / `plain_condition`: the same without table aliases, for the row-value form."""
        return f"DELETE FROM {target} WHERE ({keys}) IN (SELECT {aliases} FROM {staging} WHERE {plain_condition})"

    def delete_via_alias_sql(self, table: str, alias: str, aliased_tail: str, plain_where: str) -> str:
        """DELETE from `table` the rows `plain_where` selects (`aliased_tail`: the same, as joins and a
        WHERE on `table` aliased `alias`, for servers that run those better)."""
        return f"DELETE FROM {table} WHERE {plain_where}"

    def lock_joined_sql(self, target: str, staging: str, on: str) -> str | None:
        """Lock the rows of `target` (t) the staging rows (s) match; None where the writer lock suffices."""
        return None

    def swap_tables_sql(self, dest: str, schema: str, staging: str, old: str) -> list[str]:
        """Put a filled staging table in the destination's place (readers see old or new, never a mix)."""
        return [
            f"ALTER TABLE {self.qualify(dest, schema)} RENAME TO {self.quote(old)}",
            f"ALTER TABLE {self.qualify(staging, schema)} RENAME TO {self.quote(dest)}",
            f"DROP TABLE {self.qualify(old, schema)}",
        ]

    def copy_structure_sql(self, dest: str, schema: str, staging: str) -> str | None:
        """A staging table shaped exactly like the destination (None: build it from introspection)."""
        return None

    def deferred_indexes_sql(self) -> str | None:
        """Where a staging copy loads faster without its indexes and keys: a query (parameter: the qualified
        staging table) giving (statement that drops one, statement that builds it again) per index or key.
        None: load with them (InnoDB stores rows in key order: loading in it beats building the key after)."""
        return None

    # --- full copies as native streams (core.native_copy) ----------------------------------------------
    def stream_value_sql(self, expr: str, source: LogicalType, family: str, wire: StreamWire) -> str:
        """One value of a streamed copy as the text `wire` carries it (see StreamWire), as Spark's read would
        deliver it: doubles as doubles (a real widened exactly), booleans as 1 / 0, instants in UTC."""
        raise NotImplementedError(f"{self.label} has no native export")

    def stream_export_sql(self, select_sql: str, values: Sequence[str], where: str, wire: StreamWire) -> str:
        """The statement that streams `values` (stream_value_sql of the aliases of `select_sql`, read as q) of
        the rows matching `where` (empty: every row) in `wire`'s CSV; for "select" exports, one line per row."""
        raise NotImplementedError(f"{self.label} has no native export")

    def stream_load_sql(self, table_sql: str, columns: Sequence[str], binary: Sequence[bool], path: str) -> str:
        """The bulk load of CSV in its stream_wire form into `columns` of a staging table (`path`: the pipe or
        file a client-side file load reads; a load from the session's own input ignores it). The one statement
        both bulk paths run: native streams (core.native_copy) and Spark's bulk writes (jobs.native_load)."""
        raise NotImplementedError(f"{self.label} takes no stream")

    def stream_session_sql(self) -> list[str]:
        """What a streaming session (export or load) runs first: the session setup, and the text forms
        stream_value_sql relies on."""
        return self.session_setup_sql(False)

    def row_number_sql(self) -> str | None:
        """A row's number within a streamed read (increasing from 1); None: the client numbers the rows."""
        return "ROW_NUMBER() OVER ()"

    def dependents_sql(self, table: str, schema: str) -> tuple[str, list[str]]:
        """Count of objects a rename swap would break: triggers, incoming foreign keys, views."""
        raise NotImplementedError(f"{self.label} has no dependents query here")

    # --- snapshot logs -----------------------------------------------------------------------------
    def check_name_length(self, name: str, what: str) -> None:
        if len(name) > self.max_identifier:
            raise SnapshotLogError(
                f"{what} {name!r} would be longer than {self.label}'s {self.max_identifier}-character limit"
            )

    def snaptime_index_sql(self, rlog: str, qualified: str) -> str:
        """The index readers of SNAPTIME windows use (`rlog`: the log table's name)."""
        return f"CREATE INDEX {self.quote(rlog + '_SNAPTIME')} ON {qualified} ({self.quote('SNAPTIME')})"

    def snapshot_log_table_ddl(self, table: TableInfo) -> list[str]:
        keys = key_columns(table)
        name = rlog_name(table.name)
        self.check_name_length(name, "snapshot log table")
        types = self.render_key_types([k.logical for k in keys])
        cols = [f"{self.quote(rlog_key(k.name))} {t} NOT NULL" for k, t in zip(keys, types, strict=True)]
        cols += [
            f"{self.quote('SNAPTIME')} {self.render_type(TIMESTAMP)} NOT NULL",
            f"{self.quote('DMLTYPE')} {self.render_type(DMLTYPE)} NOT NULL",
            f"{self.quote('RLOG_ROWGUID')} {self.render_type(ROWGUID)} NOT NULL",
            *self.key_constraints_sql([(self.quote(rlog_key(k.name)), k.logical) for k in keys]),
        ]
        qualified = self.qualify(name, table.schema)
        # Readers select a SNAPTIME window: the index keeps that proportional to the changes.
        return [f"CREATE TABLE {qualified} ({', '.join(cols)})", self.snaptime_index_sql(name, qualified)]

    def snapshot_trigger_names(self, table: str) -> tuple[str, str, str]:
        insert, update, delete = self.snapshot_trigger_suffixes
        names = (table + insert, table + update, table + delete)
        for name in names:
            self.check_name_length(name, "trigger")
        return names

    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        """The snapshot log of `table`: RLOG_<table> and the I/U/D triggers that fill it."""
        raise NotImplementedError(f"{self.label} has no snapshot log generator")

    # --- bi-directional replication ----------------------------------------------------------------
    def bidir_triggers(
        self, table: TableInfo, names: dict[str, str], log: RowLog, local: str, publisher: bool
    ) -> tuple[list[str], list[str]]:
        """(create, drop) of the ROWGUID and updateable-log triggers of `table` on server `local`.

        `log` writes a row into the updateable log (engine.bidir_sql.UpdateableLog)."""
        raise NotImplementedError(f"{self.label} has no bi-directional triggers")

    def empty_logged_table(self, table: str, log: str, triggers: tuple[Sequence[str], Sequence[str]]) -> EmptyTable:
        """Remove every row of `table` and of its log `log` (both qualified) at once, without the table's
        row triggers logging each deleted row (`triggers`: (create, drop) of them). Here: the triggers
        are dropped, the rows deleted (a DELETE without a WHERE on a table without delete triggers
        empties it without visiting the rows where the server can) and the triggers made again, in one
        transaction (the DDL of servers whose DDL is transactional)."""
        create, drop = triggers
        return EmptyTable((*drop, f"DELETE FROM {table}", f"DELETE FROM {log}", *create))

    def incoming_keys_sql(self, table: str, schema: str) -> tuple[str, list[str]] | None:
        """Count of other tables' foreign keys that reference `table`: with any, `empty_logged_table`'s
        TRUNCATE would be refused and the rows are deleted instead. None: emptying does not mind them."""
        return None

    # --- transactional replication -----------------------------------------------------------------
    def numbering_ddl(self, names: LogTableNames, schema: str) -> list[str]:
        """Objects that number committed transactions (`names`: the publication's log tables)."""
        return []

    def drop_numbering_ddl(self, names: LogTableNames, schema: str) -> list[str]:
        return []

    def number_sql(self, names: LogTableNames, schema: str) -> str:
        """Where numbers_when_read: one statement (run in a transaction of its own) that numbers the committed
        transactions not numbered yet and returns the publication's count."""
        raise NotImplementedError(f"{self.label} numbers transactions as they are written")

    def number_steps_sql(self, names: LogTableNames, schema: str) -> list[str]:
        """Where numbers_when_read without a numbering function: [open, lock, order, count] run by the reader in
        one transaction: `open` before it begins, `lock` returns the count (and holds the counter), `order` lists
        the committed transactions not numbered yet (TXID) in their order; number_assign_sql numbers them, and
        `count` (parameter: the new count) stores it. Empty: number_sql is the one statement."""
        return []

    def number_assign_sql(self, tx: str, count: int, txids: Sequence[int]) -> str:
        """Give the transactions `txids` (of RTTX `tx`) the numbers after `count`, in that order."""
        raise NotImplementedError(f"{self.label} numbers in one statement")

    @property
    def earlier_log(self) -> Dialect:
        """The dialect as it captures into a log an earlier version made (where versioned_log: not versioned)."""
        return self

    def log_txid_ddl(self) -> tuple[str, str, str]:
        """RTLOG's TXID column, the columns that follow the log's own (", …"), and the table's options."""
        return f"{self.quote('TXID')} {self.render_type(LogicalType('bigint'))}", "", ""

    def purge_history_sql(self, log: str) -> list[str]:
        """Where versioned_log: statements run after a purge that drop what the server keeps of the purged entries."""
        return []

    def registry_purge_sql(self, log_prefix: str) -> tuple[str, str] | None:
        """Where versioned_log: (how many tables of the server other than the logs named `log_prefix`… are versioned
        by transaction, the statement that empties the server's registry of versioning transactions)."""
        return None

    def capture_rows_sql(
        self, logs: CaptureTables, table: str, op: str, rows: str, local: str, columns: list[tuple[str, str]]
    ) -> str:
        """Where has_transition_tables: statement-trigger statements that log every row of the transition table
        `rows` for the current transaction (`columns`: name and value family, as for row_image_sql)."""
        raise NotImplementedError(f"{self.label} has no transition tables")

    def statement_trigger_ddl(
        self, name: str, when: str, table: str, rows: str, body: str, schema: str
    ) -> tuple[list[str], list[str]]:
        """(create, drop) of a FOR EACH STATEMENT trigger whose changed rows are the transition table `rows`."""
        raise NotImplementedError(f"{self.label} has no transition tables")

    def replay_context_ddl(self, table: str) -> list[str]:
        """The table that holds the replay context, where settings or session variables cannot."""
        return []

    def replay_context_sql(self, nolog: bool, origin: str | None, context_table: str) -> list[str]:
        """Statements that open an apply transaction: what the capture triggers should do with its changes."""
        raise NotImplementedError(f"{self.label} has no replay context")

    def reset_context_sql(self, context_table: str) -> list[str]:
        """Run before committing an apply transaction."""
        return []

    def optional_literal(self, value: str | None) -> str:
        return "NULL" if value is None else self.literal(value)

    json_object_function = "json_object"
    json_merge_function = "json_patch"
    hex_function = "hex"

    # CAST(x AS <this>) gives a value's text.
    text_cast_type: str = "text"

    def read_value_sql(self, expr: str, family: str) -> str:
        """A column as the control plane reads it through ODBC: times as text (the drivers read them
        without their fraction)."""
        if family == "time":
            return f"CAST({expr} AS {self.text_cast_type})"
        return expr

    def json_value_sql(self, expr: str, family: str) -> str:
        """A column as a JSON value in a row image (binary as hex: JSON has no bytes)."""
        if family == "binary":
            return f"{self.hex_function}({expr})"
        return expr

    def row_image_sql(self, ref: str, columns: list[tuple[str, str]]) -> str:
        """The trigger row `ref` as a JSON object (`columns`: name and value family)."""
        pairs = []
        for name, family in columns:
            pairs += [self.literal(name), self.json_value_sql(f"{ref}.{self.quote(name)}", family)]
        # Servers take at most a few hundred arguments; wide tables are merged in parts.
        parts = [pairs[i : i + 200] for i in range(0, len(pairs), 200)]
        objects = [self.json_object_function + f"({', '.join(p)})" for p in parts]
        if len(objects) == 1:
            return objects[0]
        return self.json_merge_function + f"({', '.join(objects)})"

    # --- set-based apply: a run of row images sent as one JSON array parameter -----------------------------
    # A text read from JSON keeps a NUL (\u0000) whole; where not, a run holding one goes value by value.
    json_text_holds_nul: bool = True

    def images_upsert_sql(self, target: str, columns: Sequence[ImageColumn], keys: Sequence[ImageColumn]) -> str | None:
        """One statement that writes every image of the JSON array bound as its parameter into `target` (qualified):
        inserted, or overwriting the row of its key; of images with the same key, the last one counts. Each value
        must become exactly what engine.transactional_sql.RowCodec makes of it. None: not expressible here (the
        apply binds the values one by one)."""
        return None

    def images_delete_sql(self, target: str, keys: Sequence[ImageColumn]) -> str | None:
        """One statement that deletes from `target` the rows whose key an image of the bound JSON array holds."""
        return None

    # --- a log window read in runs: the server joins a run's images, Python handles one value per run ---------
    def log_runs_sql(self, window: str) -> tuple[str, list[str]] | None:
        """Where the server can join a window's images: (the query of its transactions' sizes, the statements that
        read it in runs). `window`: the FROM … WHERE of the window's entries (transactions t, entries l).

        Sizes: (N, entries, image characters) per transaction in order. Runs: consecutive entries of one transaction
        of one table and kind, in replay order: (N, ORIGIN, AT, table, op, entries, their SEQs joined by commas,
        their new images and their old images each joined by commas ('null' for none), the characters of the joined
        new and old images before joining); a run's images must have one shape (the same column names). None: the
        window is read entry by entry (entries_sql)."""
        return None

    def text_image_sql(self, stmt: str, args: str) -> str:
        """A REPL_TEXT row (statement, JSON array of arguments) as the JSON of a 'T' entry."""
        raise NotImplementedError(f"{self.label} has no REPL_TEXT capture")

    def capture_entry_sql(self, logs: CaptureTables, table: str, op: str, new: str, old: str, local: str) -> str:
        """Trigger statements that log one entry for the current transaction.

        `logs`: the quoted RTSEQ, RTTX, RTLOG and RTCTX tables (attributes seq, tx, log, ctx)."""
        raise NotImplementedError(f"{self.label} has no transactional capture")

    def row_trigger_ddl(self, name: str, when: str, table: str, body: str, schema: str) -> tuple[list[str], list[str]]:
        """(create, drop) of a FOR EACH ROW trigger `name` running the statements `body`."""
        create = [f"CREATE TRIGGER {self.quote(name)} {when} ON {table} FOR EACH ROW BEGIN {body} END"]
        return create, [f"DROP TRIGGER IF EXISTS {self.quote(name)}"]

    def text_trigger_ddl(
        self, name: str, table: str, schema: str, account: str, body: str
    ) -> tuple[list[str], list[str]]:
        """(create, drop) of the REPL_TEXT trigger that logs the calls of one account (a literal)."""
        raise NotImplementedError(f"{self.label} has no REPL_TEXT capture")

    def append_entry_sql(self, logs: CaptureTables, op: str, table: str, new: str, local: str) -> EntryStatements:
        """(statement, parameters) that log one entry as a transaction of its own."""
        raise NotImplementedError(f"{self.label} has no transactional capture")

    def replaying_sql(self) -> str:
        """True inside an apply transaction."""
        raise NotImplementedError(f"{self.label} has no replay context")

    def rowguid_triggers(self, table: TableInfo, fresh: str, rowguid: str) -> TriggerObjects:
        """(names, create, drop) of BEFORE triggers that give local inserts and updates a new ROWGUID."""
        raise NotImplementedError(f"{self.label} cannot set ROWGUID before a row is logged")

    # --- waking a follower (wakes_followers) --------------------------------------------------------------
    def wake_channel(self, tx_table: str) -> str:
        """The notification channel of the publication whose RTTX is `tx_table` (quoted and qualified)."""
        raise NotImplementedError(f"{self.label} does not wake followers")

    def wake_lock_sql(self, tx_tables: Sequence[str]) -> str:
        """One row: for each publication, 1 when its wake lock was free and the follower now holds it (every
        transaction that logs into it from now on notifies), 0 when a writer is under way (no promise)."""
        raise NotImplementedError(f"{self.label} does not wake followers")

    def wake_unlock_sql(self) -> str:
        """Give back every wake lock the follower's listening session holds."""
        raise NotImplementedError(f"{self.label} does not wake followers")

    def listen_sql(self, channel: str) -> str:
        raise NotImplementedError(f"{self.label} does not wake followers")

    def notifying_sql(self, channel: str, log_table: str) -> tuple[str, list[str]]:
        """One row, true when every capture trigger writing `log_table` (quoted, qualified) notifies `channel`
        (a log made before the triggers notified: false). Parameters in the listener's style (%s)."""
        raise NotImplementedError(f"{self.label} does not wake followers")

    # --- session locks and time limits (readers of a publication's WAL slot take turns) ------------------
    def try_lock_sql(self) -> str:
        """One row, 1 when the session-level lock bound as the parameter (a number) was free and is now held."""
        raise NotImplementedError(f"{self.label} has no session-level locks here")

    def lock_sql(self) -> str:
        """Wait for the session-level lock bound as the parameter (up to lock_timeout_sql's bound)."""
        raise NotImplementedError(f"{self.label} has no session-level locks here")

    def unlock_sql(self) -> str:
        """Free the session-level lock bound as the parameter."""
        raise NotImplementedError(f"{self.label} has no session-level locks here")

    def unlock_all_sql(self) -> str:
        """Free every session-level lock this session holds."""
        raise NotImplementedError(f"{self.label} has no session-level locks here")

    # The SQLSTATE a lock wait reports when lock_timeout_sql's bound ran out.
    lock_not_available_state: str = ""

    def lock_timeout_sql(self, timeout: str) -> str:
        """Bound the current transaction's lock waits (`timeout`: "1200ms", "10s")."""
        raise NotImplementedError(f"{self.label} has no lock wait bound here")

    def statement_timeout_sql(self, timeout: str) -> str:
        """Bound the current transaction's statements (`timeout`: "1200ms", "10s")."""
        raise NotImplementedError(f"{self.label} has no statement time bound here")

    def apply_timeout_sql(self, seconds: int) -> tuple[list[str], list[str]]:
        """Statements that bound each statement of the apply transaction they open to `seconds`, a wait for another
        session's lock included, and those that end the bound before the commit (where it outlives the transaction:
        a connection whose apply failed is closed, never handed out with the bound still on)."""
        raise NotImplementedError(f"{self.label} has no statement time bound here")

    # Texts of the error a statement fails with once apply_timeout_sql's bound ran out.
    apply_timeout_errors: tuple[str, ...] = ()
    # Why a subscription on this dialect cannot have an apply timeout ("": it can).
    apply_timeout_refused: str = ""

    def drop_slot_sql(self) -> str:
        """Drop the replication slot named by the parameter (where decodes_wal)."""
        raise NotImplementedError(f"{self.label} has no replication slots")

    # --- published procedures (where has_ddl_triggers) -------------------------------------------------
    def procedure_sql(self) -> str:
        """One row per procedure of the name (parameters: schema, name): (id, kind 'p' for a procedure,
        argument list, argument names, argument types comma-separated, argument modes, definition)."""
        raise NotImplementedError(f"{self.label} procedures are not published")

    def procedure_identity_sql(self) -> str:
        """The identity the server's DDL events report for the procedure whose id is the parameter."""
        raise NotImplementedError(f"{self.label} procedures are not published")

    def retag_origin_sql(self, tx: str, seq: str, origin: str) -> list[str]:
        """Give the current transaction's log (RTTX `tx`, RTSEQ `seq`) another origin (a literal)."""
        raise NotImplementedError(f"{self.label} cannot retag a transaction")

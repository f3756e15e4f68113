from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from replication_admin.engine.dialects.base import (
    IDLE_TRANSACTION_SECONDS,
    KEEPALIVE_COUNT,
    KEEPALIVE_IDLE,
    KEEPALIVE_INTERVAL,
    Address,
    AddressError,
    CaptureTables,
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
    keepalive_ms,
    odbc_value,
)
from replication_admin.engine.objects import (
    CONTEXT_MESSAGE_PREFIX,
    NOLOG_SETTING,
    ORIGIN_SETTING,
    ROWGUID_COLUMN,
    SnapshotLogObjects,
    bidir_key_error,
    bounded_name,
    key_columns,
    log_values,
    rlog_key,
    rlog_name,
)
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType, split_declared

XACT_ID = "pg_current_xact_id()::text::bigint"
# The class (first key) of the wake locks: two-int advisory keys never meet the one-bigint keys used elsewhere.
WAKE_LOCK_CLASS = 0x52414457
# A Decimal's text (a JSON number with a fraction or an exponent, sent as a string): digits with '.' or 'E'.
DECIMAL_TEXT = "'^-{0,1}[0-9]+([.][0-9]+){0,1}(E[-+]{0,1}[0-9]+){0,1}$'"

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
    "json": "json",
    "jsonb": "json",
    "uuid": "uuid",
    "timestamptz": "timestamptz",
}


class PostgreSQL(Dialect):
    name = "postgresql"
    label = "PostgreSQL"
    live = True
    version_sql = "SHOW server_version"
    default_port = 5432
    odbc_driver = "PostgreSQL Unicode"
    jdbc_driver = "org.postgresql.Driver"
    max_identifier = 63
    read_only_properties = {"readOnly": "true", "readOnlyMode": "always"}
    has_boolean = True
    supports_updateable_publications = True
    supports_bidir = True
    trigger_functions = True
    resolves_procedures_by_type = True
    numbers_when_read = True
    has_transition_tables = True
    decodes_wal = True
    # PostgreSQL's own apply workers commit this way: a crash loses the last commits and the level with them.
    async_commit_sql = "SET LOCAL synchronous_commit = off"
    wakes_followers = True
    bulk_loader = "copy"
    bulk_export = "copy"
    stream_wire = StreamWire(null="", hex_prefix="\\x", quote_all=False)
    has_ddl_triggers = True
    has_schemas = True
    default_schema = "public"
    jdbc_jars = ("/usr/share/java/postgresql.jar",)
    sqlglot_dialect = "postgres"
    lock_not_available_state = "55P03"

    def session_setup_sql(self, readonly: bool) -> list[str]:
        read_only = ["SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"] if readonly else []
        return ["SET TIME ZONE 'UTC'", *read_only]

    # --- session locks and time limits (advisory locks) -------------------------------------------------
    def try_lock_sql(self) -> str:
        return "SELECT pg_try_advisory_lock(?)::int"  # psqlODBC reads booleans as '0' / '1'

    def lock_sql(self) -> str:
        return "SELECT pg_advisory_lock(?)"

    def unlock_sql(self) -> str:
        return "SELECT pg_advisory_unlock(?)"

    def unlock_all_sql(self) -> str:
        return "SELECT pg_advisory_unlock_all()"

    def lock_timeout_sql(self, timeout: str) -> str:
        return f"SET LOCAL lock_timeout = {self.literal(timeout)}"

    def statement_timeout_sql(self, timeout: str) -> str:
        return f"SET LOCAL statement_timeout = {self.literal(timeout)}"

    def apply_timeout_sql(self, seconds: int) -> tuple[list[str], list[str]]:
        return [self.statement_timeout_sql(f"{int(seconds)}s")], []  # SET LOCAL: gone with the transaction

    apply_timeout_errors = ("57014",)  # query_canceled: "canceling statement due to statement timeout"

    def drop_slot_sql(self) -> str:
        return "SELECT pg_drop_replication_slot(?)"

    # --- published procedures ------------------------------------------------------------------------------
    def procedure_sql(self) -> str:
        return (
            "SELECT p.oid, p.prokind, pg_get_function_arguments(p.oid), p.proargnames, "
            "array_to_string(ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t), ','), "
            "coalesce(array_to_string(p.proargmodes, ','), ''), pg_get_functiondef(p.oid) "
            "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = ? AND p.proname = ?"
        )

    def procedure_identity_sql(self) -> str:
        return "SELECT (pg_identify_object('pg_proc'::regclass, ?::oid, 0)).identity"

    def database_exists_sql(self, name: str) -> tuple[str, list[str]] | None:
        return "SELECT 1 FROM pg_database WHERE datname = ?", [name]

    def create_database_sql(self, name: str) -> str:
        return f"CREATE DATABASE {self.quote(name)}"

    bidir_guid_triggers = ("G",)
    uuid_sql = "gen_random_uuid()::text"
    clock_now_sql = "(clock_timestamp() AT TIME ZONE 'UTC')"
    log_now_sql = "(now() AT TIME ZONE 'UTC')"
    now_select_sql = "SELECT CAST(now() AT TIME ZONE 'UTC' AS timestamp)"

    def parse_type(self, declared: str) -> LogicalType:
        base, first, second, rest = split_declared(declared)
        if base in _PARSE:
            return LogicalType(_PARSE[base])
        if base in {"numeric", "decimal"}:
            return LogicalType("numeric", precision=first, scale=second if first is not None else None)
        if base in {"character varying", "varchar"}:
            return LogicalType("varchar", length=first)
        if base in {"character", "char", "bpchar"}:
            return LogicalType("varchar", length=first or 1)
        if base.startswith("timestamp"):
            return LogicalType("timestamptz" if "with time zone" in f"{base} {rest}" else "timestamp")
        if base.startswith("time"):
            return LogicalType("time")
        return LogicalType("other")

    def retype_column_sql(self, table: str, column: str, after: Column) -> list[str]:
        kind = self.render_type(after.logical)
        return [f"ALTER TABLE {table} ALTER COLUMN {self.quote(column)} TYPE {kind} USING {self.quote(column)}::{kind}"]

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
            "timestamptz": "timestamp(6) with time zone",
            "varbinary": "bytea",
            "long_varbinary": "bytea",
            "json": "jsonb",  # jsonb: json has no equality, which upserts and compares need
            "uuid": "uuid",
            "other": "text",
        }[kind]

    def tables_sql(self, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT c.relname FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind IN ('r', 'p') ORDER BY c.relname",
            [schema or "public"],
        )

    def table_sizes_sql(self, schema: str) -> tuple[str, list[str]]:
        # reltuples is what the last ANALYZE (or autovacuum) counted; -1 when it never ran: unknown, counted.
        return (
            "SELECT c.relname, CASE WHEN c.reltuples < 0 THEN NULL ELSE c.reltuples::bigint END, "
            "pg_catalog.pg_total_relation_size(c.oid) FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind IN ('r', 'p')",
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

    replay_user_problem = None

    def replay_role_sql(self, role: str) -> tuple[list[str], list[str]]:
        # SET LOCAL: the role ends with the transaction even if the reset is never reached.
        return [f"SET LOCAL ROLE {self.quote(role)}"], ["RESET ROLE"]

    def grant_log_sql(self, tables: Sequence[str], role: str) -> list[str]:
        return [f"GRANT SELECT, INSERT, UPDATE ON {table} TO {self.quote(role)}" for table in tables]

    def role_check_sql(self) -> str:
        member = "CASE WHEN pg_has_role(current_user, oid, 'MEMBER') THEN 1 ELSE 0 END"
        return f"SELECT {member} FROM pg_roles WHERE rolname = ?"

    def defaults_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT a.attname, pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attribute a "
            "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
            "WHERE n.nspname = ? AND c.relname = ? AND a.attnum > 0 AND NOT a.attisdropped",
            [schema or "public", table],
        )

    def indexes_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT ic.relname, i.indisunique::int, k.ord, a.attname, "
            "(i.indpred IS NOT NULL OR i.indexprs IS NOT NULL)::int "
            "FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid "
            "CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
            "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum AND k.attnum > 0 "
            "WHERE n.nspname = ? AND c.relname = ? AND NOT i.indisprimary AND k.ord <= i.indnkeyatts "
            "ORDER BY ic.relname, k.ord",
            [schema or "public", table],
        )

    def foreign_keys_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        return (
            "SELECT k.conname, o.ord, a.attname, fr.relname, fa.attname, k.confdeltype::text "
            "FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_catalog.pg_class fr ON fr.oid = k.confrelid "
            "CROSS JOIN unnest(k.conkey, k.confkey) WITH ORDINALITY AS o(attnum, refnum, ord) "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = o.attnum "
            "JOIN pg_catalog.pg_attribute fa ON fa.attrelid = fr.oid AND fa.attnum = o.refnum "
            "WHERE n.nspname = ? AND c.relname = ? AND k.contype = 'f' ORDER BY k.conname, o.ord",
            [schema or "public", table],
        )

    def drop_unique_sql(self, table: str, schema: str, name: str) -> list[str]:
        # A constraint takes its index with it; a unique index alone is dropped as an index.
        return [
            f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {self.quote(name)}",
            f"DROP INDEX IF EXISTS {self.qualify(name, schema)}",
        ]

    # psqlODBC has no read timeout (and refuses pyodbc's query timeout): the keepalives find a vanished peer,
    # tcp_user_timeout a peer that stopped acknowledging what was sent; a link that still acknowledges but
    # forwards nothing is left to the control plane's read watchdog (core/connections.py).
    # The connect bound is pyodbc's login timeout, which psqlODBC passes on as libpq's connect_timeout.
    odbc_read_timeout = False

    def odbc_connection_string(self, address: Address) -> str:
        pqopt = (
            f"pqopt={{keepalives=1 keepalives_idle={KEEPALIVE_IDLE} keepalives_interval={KEEPALIVE_INTERVAL} "
            f"keepalives_count={KEEPALIVE_COUNT} tcp_user_timeout={keepalive_ms()}}};"
        )
        if address.odbc_dsn:
            base = f"DSN={odbc_value(address.odbc_dsn, braces=False)};{pqopt}"
        else:
            base = (
                f"DRIVER={{{self.odbc_driver}}};SERVER={check_host(address.host)};"
                f"PORT={check_port(address.port or self.default_port)};"
                f"DATABASE={odbc_value(address.database, braces=False)};{pqopt}"
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
            # See IDLE_TRANSACTION_SECONDS: a killed Spark task's connection must not hold locks for ever.
            "options": f"-c idle_in_transaction_session_timeout={IDLE_TRANSACTION_SECONDS * 1000}",
            # A connect, the login that follows it, and a read waiting for the server's next bytes end with an
            # error (a lost connection the job retries) past their bounds, in seconds (0: no read bound).
            "connectTimeout": str(address.connect_timeout),
            "loginTimeout": str(address.connect_timeout),
            "socketTimeout": str(address.read_timeout),
            "tcpKeepAlive": "true",
        }
        if address.schema:
            properties["currentSchema"] = address.schema
        return JdbcEndpoint(url=url, properties=properties)

    # --- statement shapes --------------------------------------------------------------------------
    def serial_key_ddl(self, name: str) -> str:
        return f"{self.quote(name)} bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

    def serial_column_ddl(self, name: str) -> str:
        return f"{self.quote(name)} bigint GENERATED ALWAYS AS IDENTITY"

    def insert_ignore_sql(self, table: str, rest: str) -> str:
        return f"INSERT INTO {table} {rest} ON CONFLICT DO NOTHING"

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
        where = f"{condition} AND {on}" if condition_first else f"{on} AND {condition}"
        return f"DELETE FROM {target}{' AS' if as_alias else ''} t USING {staging} s WHERE {where}"

    def lock_joined_sql(self, target: str, staging: str, on: str) -> str | None:
        return f"SELECT 1 FROM {target} t JOIN {staging} s ON {on} FOR UPDATE OF t"

    def copy_structure_sql(self, dest: str, schema: str, staging: str) -> str | None:
        return f"CREATE TABLE {self.qualify(staging, schema)} (LIKE {self.qualify(dest, schema)} INCLUDING ALL)"

    # --- full copies as native streams ------------------------------------------------------------------
    # The exporting session runs with TimeZone UTC, DateStyle ISO, bytea_output hex and extra_float_digits 1
    # (stream_session_sql), so the text forms below are the ones the destinations parse back exactly.
    def stream_value_sql(self, expr: str, source: LogicalType, family: str, wire: StreamWire) -> str:
        if family == "float":
            return f"{expr}::double precision"  # a real widened exactly, as Spark reads it
        if family == "boolean":
            return f"{expr}::int"
        if family == "timestamp" and source.kind == "timestamptz":
            return f"({expr} AT TIME ZONE 'UTC')"
        if family == "binary" and wire.hex_prefix != "\\x":
            return f"({self.literal(wire.hex_prefix)} || encode({expr}, 'hex'))"
        return expr

    def stream_session_sql(self) -> list[str]:
        return [
            *self.session_setup_sql(False),
            "SET DateStyle = ISO",
            "SET bytea_output = hex",
            "SET extra_float_digits = 1",
        ]

    def stream_export_sql(self, select_sql: str, values: Sequence[str], where: str, wire: StreamWire) -> str:
        options = ["FORMAT csv", f"NULL {self.literal(wire.null)}", *(["FORCE_QUOTE *"] if wire.quote_all else [])]
        condition = f" WHERE {where}" if where else ""
        return f"COPY (SELECT {', '.join(values)} FROM ({select_sql}) q{condition}) TO STDOUT ({', '.join(options)})"

    def stream_load_sql(self, table_sql: str, columns: Sequence[str], binary: Sequence[bool], path: str) -> str:
        return f"COPY {table_sql} ({', '.join(self.quote(c) for c in columns)}) FROM STDIN (FORMAT csv)"

    def deferred_indexes_sql(self) -> str | None:
        # The staging copy's own definitions, exactly as PostgreSQL prints them: keys and unique / exclusion
        # constraints by their constraint definitions, every other index by its CREATE INDEX.
        return (
            "SELECT format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname), "
            "format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::regclass, c.conname, "
            "pg_get_constraintdef(c.oid)) "
            "FROM pg_constraint c WHERE c.conrelid = ?::regclass AND c.contype IN ('p', 'u', 'x') "
            "UNION ALL "
            "SELECT format('DROP INDEX %s', i.indexrelid::regclass), pg_get_indexdef(i.indexrelid) "
            "FROM pg_index i WHERE i.indrelid = ?::regclass "
            "AND NOT EXISTS (SELECT FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid)"
        )

    def dependents_sql(self, table: str, schema: str) -> tuple[str, list[str]]:
        return (
            "SELECT (SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal)"
            " + (SELECT count(*) FROM pg_constraint f WHERE f.confrelid = c.oid)"
            " + (SELECT count(*) FROM pg_depend dp JOIN pg_rewrite rw ON rw.oid = dp.objid"
            "    WHERE dp.refobjid = c.oid AND rw.ev_class <> c.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? AND c.relname = ?",
            [schema or "public", table],
        )

    # --- snapshot logs -----------------------------------------------------------------------------
    def snaptime_index_sql(self, rlog: str, qualified: str) -> str:
        return f'CREATE INDEX ON {qualified} ("SNAPTIME")'

    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        d = self
        keys = key_columns(table)
        schema = table.schema or "public"
        rlog = d.qualify(rlog_name(table.name), schema)
        src = d.qualify(table.name, schema)
        now = "(now() AT TIME ZONE 'UTC')"
        guid = "gen_random_uuid()::text"
        i_name, u_name, d_name = d.snapshot_trigger_names(table.name)
        conflict = ", ".join(d.quote(rlog_key(k.name)) for k in keys)
        update = ", ".join(f"{d.quote(c)} = EXCLUDED.{d.quote(c)}" for c in ("SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"))

        def upsert(ref: str, op: str) -> str:
            cols, vals = log_values(d, keys, ref, now, guid, op)
            return f"INSERT INTO {rlog} ({cols}) VALUES ({vals}) ON CONFLICT ({conflict}) DO UPDATE SET {update};"

        old_key = ", ".join(f"OLD.{d.quote(k.name)}" for k in keys)
        new_key = ", ".join(f"NEW.{d.quote(k.name)}" for k in keys)
        bodies = {
            i_name: upsert("NEW", "I"),
            u_name: (
                f"IF ROW({old_key}) IS DISTINCT FROM ROW({new_key}) THEN "
                f"{upsert('OLD', 'D')} {upsert('NEW', 'I')} ELSE {upsert('NEW', 'U')} END IF;"
            ),
            d_name: upsert("OLD", "D"),
        }
        events = {i_name: "INSERT", u_name: "UPDATE", d_name: "DELETE"}
        create = list(d.snapshot_log_table_ddl(table))
        for name, body in bodies.items():
            function = d.qualify(name, schema)
            text = f"BEGIN {body} RETURN NULL; END"
            tag = _dollar_tag(text)
            create.append(f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS {tag} {text} {tag}")
            create.append(
                f"CREATE TRIGGER {d.quote(name)} AFTER {events[name]} ON {src} FOR EACH ROW "
                f"EXECUTE FUNCTION {function}()"
            )
        drop = [f"DROP TRIGGER IF EXISTS {d.quote(n)} ON {src}" for n in bodies]
        drop += [f"DROP FUNCTION IF EXISTS {d.qualify(n, schema)}()" for n in bodies]
        drop.append(f"DROP TABLE IF EXISTS {rlog}")
        names = (i_name, u_name, d_name)
        return SnapshotLogObjects(rlog_name(table.name), names, functions=names, create=tuple(create), drop=tuple(drop))

    # --- bi-directional replication ----------------------------------------------------------------
    def bidir_triggers(
        self, table: TableInfo, names: dict[str, str], log: RowLog, local: str, publisher: bool
    ) -> tuple[list[str], list[str]]:
        d = self
        src = d.qualify(table.name, table.schema)
        schema = table.schema or "public"
        g = d.quote(ROWGUID_COLUMN)
        keys = key_columns(table)
        old_key = ", ".join(f"OLD.{d.quote(k.name)}" for k in keys)
        new_key = ", ".join(f"NEW.{d.quote(k.name)}" for k in keys)
        fresh = d.concat(d.literal(local + "@"), d.uuid_sql)
        logs = "TRUE" if publisher else d.has_prefix_sql(f"NEW.{g}", local + "@")
        deleted_by_replay = (
            f"{log.upsert('OLD', 'D', log.unmark(f'OLD.{g}'), 'NULL')}" if publisher else "NULL;"
        )  # a subscriber does not log what replication deletes
        bodies = {
            names["G"]: (
                "BEFORE INSERT OR UPDATE",
                f"IF TG_OP = 'UPDATE' AND ROW({old_key}) IS DISTINCT FROM ROW({new_key}) THEN "
                f"RAISE EXCEPTION {d.literal(bidir_key_error(table.name))}; END IF; "
                f"IF TG_OP = 'INSERT' THEN IF NEW.{g} IS NULL THEN NEW.{g} := {fresh}; END IF; "
                f"ELSIF NEW.{g} IS NOT DISTINCT FROM OLD.{g} THEN NEW.{g} := {fresh}; END IF; RETURN NEW;",
            ),
            names["I"]: (
                "AFTER INSERT",
                f"IF {logs} THEN {log.upsert('NEW', 'I', f'NEW.{g}', 'NULL')} END IF; RETURN NULL;",
            ),
            names["U"]: (
                "AFTER UPDATE",
                f"IF NOT ({log.is_mark(f'NEW.{g}')}) AND {logs} THEN "
                f"{log.upsert('NEW', 'U', f'NEW.{g}', f'OLD.{g}')} END IF; RETURN NULL;",
            ),
            names["D"]: (
                "AFTER DELETE",
                f"IF {log.is_mark(f'OLD.{g}')} THEN {deleted_by_replay} "
                f"ELSE {log.upsert('OLD', 'D', fresh, f'OLD.{g}')} END IF; RETURN NULL;",
            ),
        }
        create, drop = [], []
        for name, (when, body) in bodies.items():
            function = d.qualify(name, schema)
            text = f"BEGIN {body} END"
            tag = "$bidir$"
            while tag in text:
                tag = tag[:-1] + "x$"
            create.append(f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS {tag} {text} {tag}")
            create.append(f"CREATE TRIGGER {d.quote(name)} {when} ON {src} FOR EACH ROW EXECUTE FUNCTION {function}()")
            drop.append(f"DROP TRIGGER IF EXISTS {d.quote(name)} ON {src}")
            drop.append(f"DROP FUNCTION IF EXISTS {function}()")
        return create, drop

    def empty_logged_table(self, table: str, log: str, triggers: tuple[Sequence[str], Sequence[str]]) -> EmptyTable:
        # TRUNCATE runs no row triggers and is transactional: the table and its log are emptied together.
        return EmptyTable((f"TRUNCATE TABLE {table}, {log}",))

    def incoming_keys_sql(self, table: str, schema: str) -> tuple[str, list[str]] | None:
        return (
            "SELECT count(*) FROM pg_constraint f JOIN pg_class c ON c.oid = f.confrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE f.contype = 'f' AND n.nspname = ? AND c.relname = ?",
            [schema or "public", table],
        )

    # --- transactional replication -----------------------------------------------------------------
    # The first entry of a transaction inserts its RTTX row (TXID = pg_current_xact_id()); readers number
    # committed transactions through the sequencer function (engine.transactional_sql explains the order).
    def _sequencer_function(self, names: LogTableNames, schema: str) -> str:
        return self.qualify(bounded_name(f"{names.tx}_sequence", self.max_identifier), schema or "public")

    def numbering_ddl(self, names: LogTableNames, schema: str) -> list[str]:
        # Committed transactions not numbered yet get the next numbers in the order of their last entry. When a
        # transaction changed a row after another one did, it waited for that one's commit before it logged the
        # change, so its last entry comes after all of the other's: the order replays every row's changes in
        # the order they were made. One reader at a time (the counter row's lock); each statement of the
        # function sees what committed before it started, so the second sees everything the last reader did.
        q = self.quote
        seq, tx, log = self.qualify(names.seq, schema), self.qualify(names.tx, schema), self.qualify(names.log, schema)
        n, txid = q("N"), q("TXID")
        body = (
            "DECLARE base bigint; added bigint; BEGIN "
            f"SELECT {n} INTO base FROM {seq} WHERE {q('ID')} = 1 FOR UPDATE; "
            f"WITH todo AS (SELECT t.{txid}, (SELECT max(l.{q('SEQ')}) FROM {log} l WHERE l.{txid} = t.{txid}) AS last "
            f"FROM {tx} t WHERE t.{n} IS NULL), "
            f"numbered AS (SELECT {txid}, base + row_number() OVER (ORDER BY last, {txid}) AS n FROM todo) "
            f"UPDATE {tx} t SET {n} = numbered.n FROM numbered WHERE t.{txid} = numbered.{txid}; "
            "GET DIAGNOSTICS added = ROW_COUNT; "
            f"IF added > 0 THEN UPDATE {seq} SET {n} = base + added WHERE {q('ID')} = 1; END IF; "
            "RETURN base + added; END"
        )
        function = self._sequencer_function(names, schema)
        return [f"CREATE FUNCTION {function}() RETURNS bigint LANGUAGE plpgsql AS $rt$ {body} $rt$"]

    def drop_numbering_ddl(self, names: LogTableNames, schema: str) -> list[str]:
        # Logs made before numbering moved to readers also have a commit-time numbering function.
        before = self.qualify(bounded_name(f"{names.tx}_number", self.max_identifier), schema or "public")
        return [
            f"DROP FUNCTION IF EXISTS {self._sequencer_function(names, schema)}()",
            f"DROP FUNCTION IF EXISTS {before}()",
        ]

    def number_sql(self, names: LogTableNames, schema: str) -> str:
        return f"SELECT {self._sequencer_function(names, schema)}()"

    def replay_context_sql(self, nolog: bool, origin: str | None, context_table: str) -> list[str]:
        # The settings for capture triggers, and in the same round trip the message for a publication that
        # decodes the WAL.
        return [
            f"SELECT set_config('{NOLOG_SETTING}', {self.literal('on' if nolog else '')}, true), "
            f"set_config('{ORIGIN_SETTING}', {self.literal(origin or '')}, true), "
            f"({self._context_message_sql(self.literal(json.dumps({'nolog': nolog, 'origin': origin or None})))})"
        ]

    def _context_message_sql(self, content: str) -> str:
        """The replay context (`content`: an SQL expression giving its JSON) as a transactional logical message,
        where the WAL is decoded and the role may write one (engine.wal_capture reads it)."""
        return (
            "SELECT CASE WHEN current_setting('wal_level') = 'logical' AND "
            "has_function_privilege('pg_logical_emit_message(boolean, text, text)', 'execute') "
            f"THEN pg_logical_emit_message(true, '{CONTEXT_MESSAGE_PREFIX}', {content}) END"
        )

    def _image_json(self, ref: str, columns: list[tuple[str, str]]) -> str:
        # json, not jsonb: no parsing or key sorting per row ...
        documents = [name for name, family in columns if family == "json"]
        if not documents:
            return f"row_to_json({ref})"
        # ... but JSON documents travel as their text, as every other capture sends them (row_to_json would
        # embed them, and a document that is a JSON string could not be told from text).
        pairs = ", ".join(f"{self.literal(n)}, ({ref}.{self.quote(n)})::text" for n in documents)
        return f"(row_to_json({ref})::jsonb || jsonb_build_object({pairs}))"

    def row_image_sql(self, ref: str, columns: list[tuple[str, str]]) -> str:
        return f"{self._image_json(ref, columns)}::text"

    def text_image_sql(self, stmt: str, args: str) -> str:
        return f"jsonb_build_object('stmt', {stmt}, 'args', coalesce({args}, '[]')::jsonb)::text"

    # --- set-based apply ----------------------------------------------------------------------------------
    def _image_value(self, c: ImageColumn) -> str | None:
        """The column's value of the image `e.v` (jsonb) as RowCodec decodes it and binding it would store (no '?'
        in the expressions: the statement's one parameter marker is the images')."""
        j = f"(e.v -> {self.literal(c.key)})"
        t = f"(e.v ->> {self.literal(c.key)})"
        declared = c.declared.strip()
        if not declared or c.kind == "other":
            return None  # a type of its own (array, range, enum ...): the image may embed a document for it
        if c.family == "text":
            # A JSON true/false reaches a text column as Python's str(): True / False.
            expr = f"CASE WHEN jsonb_typeof({j}) = 'boolean' THEN initcap({t}) ELSE {t} END"
        elif c.family == "integer":
            # int(): a fractional number (a Decimal, sent as its text) is truncated; true/false are 1/0.
            expr = (
                f"CASE WHEN jsonb_typeof({j}) = 'boolean' THEN CAST(CAST({j} AS boolean) AS integer) "
                f"ELSE trunc(CAST({t} AS numeric)) END"
            )
        elif c.family == "float":
            expr = f"CAST({t} AS double precision)"  # float(), then the column's precision (real: rounded once more)
        elif c.family == "decimal":
            expr = t  # the exact text: the column's input rounds it to its scale, as a bound text is
        elif c.family == "boolean":
            # _truthy for text; a number's truth (a fractional one arrives as its text: digits with '.' or 'E').
            expr = (
                f"CASE jsonb_typeof({j}) WHEN 'boolean' THEN CAST({j} AS boolean) "
                f"WHEN 'number' THEN CAST({t} AS numeric) <> 0 "
                f"WHEN 'string' THEN CASE WHEN {t} ~ {DECIMAL_TEXT} AND {t} ~ '[.E]' "
                f"THEN CAST({t} AS numeric) <> 0 "
                rf"ELSE lower(btrim({t}, E' \t\n\r\f\x0b\x1c\x1d\x1e\x1f')) IN ('1', 't', 'true', 'y', 'yes') END END"
            )
        elif c.family == "date":
            expr = rf"left(btrim({t}, E' \t\n\r\f\x0b\x1c\x1d\x1e\x1f'), 10)"
        elif c.family == "time":
            # Six fraction digits, the extra ones cut (not rounded), as _time_text.
            expr = (
                f"CASE WHEN strpos({t}, '.') > 0 THEN left({t}, strpos({t}, '.') - 1) || '.' || "
                f"rpad(substr({t}, strpos({t}, '.') + 1, 6), 6, '0') ELSE {t} || '.000000' END"
            )
        elif c.family == "timestamp":
            if "with time zone" in declared.lower():
                expr = f"CAST({t} AS timestamptz)"  # the session's zone is UTC, as for the UTC text bound
            else:
                # An instant with a zone is its UTC time (_timestamp_text); a time without one stays as it is.
                zoned = (
                    r"'[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+){0,1}){0,1}\s*(Z|[+-][0-9]{2}(:{0,1}[0-9]{2}){0,2})\s*$'"
                )
                expr = (
                    f"CASE WHEN {t} ~ {zoned} THEN CAST({t} AS timestamptz) AT TIME ZONE 'UTC' "
                    f"ELSE CAST({t} AS timestamp) END"
                )
        elif c.family == "binary":
            expr = rf"decode(CASE WHEN left({t}, 2) = '\x' THEN substr({t}, 3) ELSE {t} END, 'hex')"
        elif c.family == "json":
            expr = t
        else:
            return None
        lowered = declared.lower()
        if "char" in lowered or lowered.startswith("bit"):
            return expr  # assigned as a bound text is: too long is an error (an explicit cast would cut it)
        return f"CAST({expr} AS {declared})"

    def images_upsert_sql(self, target: str, columns: Sequence[ImageColumn], keys: Sequence[ImageColumn]) -> str | None:
        values = [self._image_value(c) for c in columns]
        if any(v is None for v in values) or not keys:
            return None
        q = self.quote
        alias = {c.column: f"c{i}" for i, c in enumerate(columns)}
        firsts = ", ".join(alias[k.column] for k in keys)
        # An upsert may touch a row once: of the images of one key, the last (highest ordinality) is written.
        picked = ", ".join(f"{v} AS {alias[c.column]}" for v, c in zip(values, columns, strict=True))
        rows = (
            f"SELECT DISTINCT ON ({firsts}) {picked} "
            f"FROM jsonb_array_elements(CAST(? AS jsonb)) WITH ORDINALITY AS e(v, o) ORDER BY {firsts}, e.o DESC"
        )
        names = ", ".join(q(c.column) for c in columns)
        key_names = {k.column for k in keys}
        others = [q(c.column) for c in columns if c.column not in key_names]
        insert = f"INSERT INTO {target} ({names}) SELECT {', '.join(alias.values())} FROM ({rows}) s"
        return self.upsert_sql(insert, [q(k.column) for k in keys], others)

    def images_delete_sql(self, target: str, keys: Sequence[ImageColumn]) -> str | None:
        values = [self._image_value(k) for k in keys]
        if any(v is None for v in values) or not keys:
            return None
        q = self.quote
        picked = ", ".join(f"{v} AS k{i}" for i, v in enumerate(values))
        match = " AND ".join(f"t.{q(k.column)} = k.k{i}" for i, k in enumerate(keys))
        return (
            f"DELETE FROM {target} AS t USING (SELECT {picked} FROM jsonb_array_elements(CAST(? AS jsonb)) AS e(v)) k "
            f"WHERE {match}"
        )

    def _open_transaction_sql(self, logs: CaptureTables, local: str) -> str:
        """The transaction's one RTTX row, written by its first entry: a transaction-local setting (named after
        the publication) remembers that it is there, so later entries do not look for it."""
        q = self.quote
        flag = self.literal("repladmin.tx_" + hashlib.sha256(logs.tx.encode()).hexdigest()[:16])
        origin = f"coalesce(nullif(current_setting('{ORIGIN_SETTING}', true), ''), {self.literal(local)})"
        return (
            f"IF coalesce(current_setting({flag}, true), '') <> 'y' THEN "
            f"INSERT INTO {logs.tx} ({q('TXID')}, {q('ORIGIN')}, {q('AT')}) VALUES ({XACT_ID}, {origin}, "
            f"{self.clock_now_sql}) ON CONFLICT ({q('TXID')}) DO NOTHING; "
            f"PERFORM set_config({flag}, 'y', true); {self._wake_sql(logs)}END IF; "
        )

    # A follower about to wait takes the publication's wake lock (exclusive, session-level) and looks for news
    # once more. A transaction's first entry tries the same lock shared until it commits: free, no follower waits
    # (or one is about to look, and will see this commit), and nothing is sent; held, it notifies at commit.
    # NOTIFY serialises the commits of notifying transactions (a database-wide lock at commit), so transactions
    # notify only while a follower waits idle, never while one is busy applying.
    @staticmethod
    def _wake_hash(tx_table: str) -> str:
        return hashlib.sha256(tx_table.encode()).hexdigest()[:16]

    def wake_channel(self, tx_table: str) -> str:
        return f"repladmin_wake_{self._wake_hash(tx_table)}"

    def _wake_key(self, tx_table: str) -> str:
        return f"{WAKE_LOCK_CLASS}, {int(self._wake_hash(tx_table)[:8], 16) - 2**31}"

    def wake_lock_sql(self, tx_tables: Sequence[str]) -> str:
        return "SELECT " + ", ".join(f"pg_try_advisory_lock({self._wake_key(t)})::int" for t in tx_tables)

    def wake_unlock_sql(self) -> str:
        return "SELECT pg_advisory_unlock_all()"

    def listen_sql(self, channel: str) -> str:
        return f"LISTEN {self.quote(channel)}"

    def notifying_sql(self, channel: str, log_table: str) -> tuple[str, list[str]]:
        return (
            "SELECT coalesce(bool_and(prosrc LIKE %s), false) FROM pg_proc "
            "WHERE prorettype = 'trigger'::regtype AND prosrc LIKE %s",
            [f"%{channel}%", "%INSERT INTO " + log_table.replace("\\", "\\\\").replace("%", "\\%") + " %"],
        )

    def _wake_sql(self, logs: CaptureTables) -> str:
        return (
            f"IF NOT pg_try_advisory_xact_lock_shared({self._wake_key(logs.tx)}) THEN "
            f"PERFORM pg_notify({self.literal(self.wake_channel(logs.tx))}, ''); END IF; "
        )

    def _entry_columns(self) -> str:
        """The RTLOG columns an entry is written with."""
        return ", ".join(self.quote(c) for c in ("TXID", "TBL", "OP", "NEW", "OLD"))

    def capture_entry_sql(self, logs: CaptureTables, table: str, op: str, new: str, old: str, local: str) -> str:
        entry_cols = self._entry_columns()
        return (
            f"IF coalesce(current_setting('{NOLOG_SETTING}', true), '') <> 'on' THEN "
            f"{self._open_transaction_sql(logs, local)}"
            f"INSERT INTO {logs.log} ({entry_cols}) VALUES ({XACT_ID}, {self.literal(table)}, '{op}', {new}, {old}); "
            "END IF;"
        )

    def capture_rows_sql(
        self, logs: CaptureTables, table: str, op: str, rows: str, local: str, columns: list[tuple[str, str]]
    ) -> str:
        entry_cols = self._entry_columns()
        # One entry for the statement: its rows' images as one JSON array (one heap row and one index entry
        # instead of one per row; the reader splits it).
        images = "json_agg(r ORDER BY n)::text"
        new, old = (images, "NULL") if op == "I" else ("NULL", images)
        return (
            f"IF coalesce(current_setting('{NOLOG_SETTING}', true), '') <> 'on' AND EXISTS (SELECT FROM {rows}) THEN "
            f"{self._open_transaction_sql(logs, local)}"
            f"INSERT INTO {logs.log} ({entry_cols}) SELECT {XACT_ID}, {self.literal(table)}, '{op}', {new}, {old} "
            f"FROM (SELECT {self._image_json('t', columns)} AS r, row_number() OVER () AS n FROM {rows} t) s; END IF;"
        )

    def statement_trigger_ddl(
        self, name: str, when: str, table: str, rows: str, body: str, schema: str
    ) -> tuple[list[str], list[str]]:
        function = self.qualify(name, schema or "public")
        side = "OLD" if "DELETE" in when else "NEW"
        create = [
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $rt$ BEGIN {body} RETURN NULL; END $rt$",
            f"CREATE TRIGGER {self.quote(name)} {when} ON {table} REFERENCING {side} TABLE AS {rows} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        ]
        drop = [f"DROP TRIGGER IF EXISTS {self.quote(name)} ON {table}", f"DROP FUNCTION IF EXISTS {function}()"]
        return create, drop

    def row_trigger_ddl(self, name: str, when: str, table: str, body: str, schema: str) -> tuple[list[str], list[str]]:
        function = self.qualify(name, schema or "public")
        create = [
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $rt$ BEGIN {body} RETURN NULL; END $rt$",
            f"CREATE TRIGGER {self.quote(name)} {when} ON {table} FOR EACH ROW EXECUTE FUNCTION {function}()",
        ]
        drop = [f"DROP TRIGGER IF EXISTS {self.quote(name)} ON {table}", f"DROP FUNCTION IF EXISTS {function}()"]
        return create, drop

    def text_trigger_ddl(
        self, name: str, table: str, schema: str, account: str, body: str
    ) -> tuple[list[str], list[str]]:
        q = self.quote
        function = self.qualify(name, schema or "public")
        create = [
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $rt$ BEGIN {body} RETURN NULL; END $rt$",
            f"CREATE TRIGGER {q(name)} AFTER INSERT ON {table} FOR EACH ROW "
            f"WHEN (NEW.{q('ACCOUNT')} = {account}) EXECUTE FUNCTION {function}()",
        ]
        return create, [f"DROP TRIGGER IF EXISTS {q(name)} ON {table}", f"DROP FUNCTION IF EXISTS {function}()"]

    def append_entry_sql(self, logs: CaptureTables, op: str, table: str, new: str, local: str) -> EntryStatements:
        q = self.quote
        columns = self._entry_columns()
        tx_cols = f"{q('TXID')}, {q('ORIGIN')}, {q('AT')}"
        return [
            (f"INSERT INTO {logs.tx} ({tx_cols}) VALUES ({XACT_ID}, ?, {self.clock_now_sql})", [local]),
            (f"INSERT INTO {logs.log} ({columns}) VALUES ({XACT_ID}, ?, ?, ?, NULL)", [table, op, new]),
        ]

    def replaying_sql(self) -> str:
        return (
            f"(coalesce(current_setting('{NOLOG_SETTING}', true), '') = 'on' "
            f"OR coalesce(current_setting('{ORIGIN_SETTING}', true), '') <> '')"
        )

    def rowguid_triggers(self, table: TableInfo, fresh: str, rowguid: str) -> TriggerObjects:
        g = self.quote(rowguid)
        src = self.qualify(table.name, table.schema)
        name = bounded_name(f"{table.name}_G", self.max_identifier)
        function = self.qualify(name, table.schema or "public")
        body = (
            f"IF NOT {self.replaying_sql()} AND (TG_OP = 'INSERT' AND NEW.{g} IS NULL OR "
            f"TG_OP = 'UPDATE' AND NEW.{g} IS NOT DISTINCT FROM OLD.{g}) THEN NEW.{g} := {fresh}; END IF; "
            "RETURN NEW;"
        )
        return (
            (name,),
            (
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $rt$ BEGIN {body} END $rt$",
                f"CREATE TRIGGER {self.quote(name)} BEFORE INSERT OR UPDATE ON {src} FOR EACH ROW "
                f"EXECUTE FUNCTION {function}()",
            ),
            (f"DROP TRIGGER IF EXISTS {self.quote(name)} ON {src}", f"DROP FUNCTION IF EXISTS {function}()"),
        )

    def retag_origin_sql(self, tx: str, seq: str, origin: str) -> list[str]:
        q = self.quote
        return [
            f"UPDATE {tx} SET {q('ORIGIN')} = {origin} WHERE {q('TXID')} = {XACT_ID}",
            self._context_message_sql(f"json_build_object('origin', {origin})::text"),
        ]


def _dollar_tag(body: str) -> str:
    tag, n = "$rlog$", 0
    while tag in body:
        n += 1
        tag = f"$rlog{n}$"
    return tag

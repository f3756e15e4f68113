"""Dialects the console generates DDL for but does not connect to (SQL Server, Oracle, DB2, Informix).

Their type mapping is the reference's data type mapping table, row for row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from replication_admin.engine.dialects.base import (
    Address,
    AddressError,
    Dialect,
    JdbcEndpoint,
    RowLog,
    check_identifier,
)
from replication_admin.engine.objects import (
    ROWGUID,
    ROWGUID_COLUMN,
    SnapshotLogObjects,
    bidir_key_error,
    key_columns,
    log_columns,
    rlog_key,
    rlog_name,
)
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType, split_declared


class TextOnlyDialect(Dialect):
    """Bi-directional triggers here (SQL Server, Oracle, DB2) keep the rules of the live dialects' (engine.bidir_sql):
    every insert without a ROWGUID and every update that leaves it unchanged gets a fresh `<server>@<id>`; the
    publisher logs every change, a subscriber only its own; a replay's delete (ROWGUID marked `del:<change>`) is
    logged by the publisher under the change's id and not at all by a subscriber; a primary key change is
    refused. These servers have no upsert, so a log row is written with MERGE; each trigger's one MERGE is
    guarded by the trigger's WHEN (Oracle, DB2) or a WHERE over the statement's rows (SQL Server)."""

    live = False
    bidir_text = True
    # Rows of the reference table: logical kind -> (rendering without length, rendering with length).
    mapping: dict[str, tuple[str, str | None]] = {}
    numeric_default = ""
    numeric_sized = ""

    def retype_column_sql(self, table: str, column: str, after: Column) -> list[str]:
        return [f"ALTER TABLE {table} ALTER COLUMN {self.quote(column)} {self.render_type(after.logical)}"]

    def render_type(self, logical: LogicalType) -> str:
        if logical.kind == "numeric":
            if logical.precision is None:
                return self.numeric_default
            return self.numeric_sized.format(p=logical.precision, s=logical.scale or 0)
        # The reference's table predates zones, JSON and UUIDs: an instant as its timestamp, the rest as text.
        kind = {"timestamptz": "timestamp", "json": "other", "uuid": "other"}.get(logical.kind, logical.kind)
        plain, sized = self.mapping[kind]
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

    def columns_sql(self, schema: str, table: str) -> tuple[str, list[str]]:
        raise AddressError(f"{self.label} servers are not reachable from this console (DDL generation only)")

    def odbc_connection_string(self, address: Address) -> str:
        raise AddressError(f"{self.label} servers are not reachable from this console (DDL generation only)")

    def jdbc_endpoint(self, address: Address) -> JdbcEndpoint:
        raise AddressError(f"{self.label} servers are not reachable from this console (DDL generation only)")


def _guid_null(d: Dialect, a: str, b: str) -> str:
    """`a` and `b` (two ROWGUIDs) are the same version, NULL included."""
    return f"({a} = {b} OR ({a} IS NULL AND {b} IS NULL))"


def _null_guid(d: Dialect) -> str:
    return f"CAST(NULL AS {d.render_type(ROWGUID)})"


def _not_marked(d: Dialect, log: RowLog, expr: str) -> str:
    return f"({expr} IS NULL OR NOT ({log.is_mark(expr)}))"


def _row_bidir_triggers(
    d: Dialect, table: TableInfo, names: dict[str, str], log: RowLog, local: str, publisher: bool, style: RowStyle
) -> tuple[list[str], list[str]]:
    """Row-level bi-directional triggers (Oracle, DB2): two BEFORE triggers give the row its ROWGUID, three AFTER
    triggers log it."""
    src = d.qualify(table.name, table.schema)
    g = d.quote(ROWGUID_COLUMN)
    keys = key_columns(table)
    new, old = style.new, style.old
    fresh = d.concat(d.literal(local + "@"), d.uuid_sql)
    bn, bo = style.bind(new), style.bind(old)
    key_changed = " OR ".join(f"{bo}.{d.quote(k.name)} <> {bn}.{d.quote(k.name)}" for k in keys)

    def when(*conditions: str) -> str:
        kept = [c for c in conditions if c]
        return f" WHEN ({' AND '.join(kept)})" if kept else ""

    def own(ref: str) -> str:
        return "" if publisher else d.has_prefix_sql(f"{ref}.{g}", local + "@")

    def logged(ref: str, op: str, guid: str, old_guid: str) -> str:
        values = [*(f"{style.bind(ref)}.{d.quote(k.name)}" for k in keys), d.log_now_sql, f"'{op}'", guid, old_guid]
        return log.merge(values, style.one_row)

    mark = log.is_mark(f"{bo}.{g}")
    deleted_id = f"CASE WHEN {mark} THEN {log.unmark(f'{bo}.{g}')} ELSE {fresh} END"
    deleted_old = f"CASE WHEN {mark} THEN {_null_guid(d)} ELSE {bo}.{g} END"
    create = [
        style.trigger(
            names["IR"], "BEFORE", "INSERT", src, f" WHEN ({new}.{g} IS NULL)", style.assign(f"{bn}.{g}", fresh)
        ),
        style.trigger(
            names["UR"], "BEFORE", "UPDATE", src, "",
            f"IF {key_changed} THEN {style.fail(bidir_key_error(table.name))} END IF; "
            f"IF {_guid_null(d, f'{bn}.{g}', f'{bo}.{g}')} THEN {style.assign(f'{bn}.{g}', fresh)} END IF;",
        ),
        style.trigger(names["I"], "AFTER", "INSERT", src, when(own(new)), logged(new, "I", f"{bn}.{g}", _null_guid(d))),
        style.trigger(
            names["U"], "AFTER", "UPDATE", src, when(_not_marked(d, log, f"{new}.{g}"), own(new)),
            logged(new, "U", f"{bn}.{g}", f"{bo}.{g}"),
        ),
        style.trigger(
            names["D"], "AFTER", "DELETE", src, "" if publisher else when(_not_marked(d, log, f"{old}.{g}")),
            logged(old, "D", deleted_id, deleted_old) if publisher else logged(old, "D", fresh, f"{bo}.{g}"),
        ),
    ]  # fmt: skip
    drop = [f"DROP TRIGGER {d.quote(n)}" for n in names.values()]
    return create, drop


class RowStyle:
    """How a dialect writes row-level triggers (Oracle, DB2)."""

    new = "NEW"
    old = "OLD"
    one_row = ""  # the FROM of a one-row SELECT

    def __init__(self, d: Dialect) -> None:
        self.d = d

    def bind(self, ref: str) -> str:
        """`ref` (NEW / OLD) as the trigger's body names it."""
        return ref

    def assign(self, target: str, value: str) -> str:
        raise NotImplementedError

    def fail(self, message: str) -> str:
        raise NotImplementedError

    def trigger(self, name: str, timing: str, event: str, table: str, when: str, body: str) -> str:
        """A row trigger `timing` (BEFORE, AFTER) `event` on `table`, run when `when` (its WHEN clause) holds."""
        raise NotImplementedError


class OracleRows(RowStyle):
    one_row = " FROM dual"

    def bind(self, ref: str) -> str:
        return ":" + ref

    def assign(self, target: str, value: str) -> str:
        return f"{target} := {value};"

    def fail(self, message: str) -> str:
        return f"RAISE_APPLICATION_ERROR(-20001, {self.d.literal(message)});"

    def trigger(self, name: str, timing: str, event: str, table: str, when: str, body: str) -> str:
        return (
            f"CREATE OR REPLACE TRIGGER {self.d.quote(name)} {timing} {event} ON {table} FOR EACH ROW{when} "
            f"BEGIN {body} END;"
        )


class DB2Rows(RowStyle):
    new, old = "N", "O"
    one_row = " FROM SYSIBM.SYSDUMMY1"

    def assign(self, target: str, value: str) -> str:
        return f"SET {target} = {value};"

    def fail(self, message: str) -> str:
        # DB2's MESSAGE_TEXT holds 70 bytes.
        return f"SIGNAL SQLSTATE '75001' SET MESSAGE_TEXT = {self.d.literal(message[:70])};"

    @staticmethod
    def _referencing(event: str) -> str:
        return {"INSERT": "NEW AS N", "DELETE": "OLD AS O"}.get(event, "OLD AS O NEW AS N")

    def trigger(self, name: str, timing: str, event: str, table: str, when: str, body: str) -> str:
        timing = "NO CASCADE BEFORE" if timing == "BEFORE" else timing
        return (
            f"CREATE TRIGGER {self.d.quote(name)} {timing} {event} ON {table} "
            f"REFERENCING {self._referencing(event)} FOR EACH ROW{when} BEGIN ATOMIC {body} END"
        )


def _row_trigger_text(
    d: Dialect, table: TableInfo, names: tuple[str, str, str], now: str, guid: str, new: str, old: str
) -> list[str]:
    """Row-level snapshot-log triggers in the Oracle / DB2 / Informix style (delete the key's log row,
    insert anew)."""
    keys = key_columns(table)
    rlog, src = d.qualify(rlog_name(table.name)), d.qualify(table.name)
    rcols = log_columns(d, keys)

    def log(ref: str, op: str) -> str:
        where = " AND ".join(f"{d.quote(rlog_key(k.name))} = {ref}.{d.quote(k.name)}" for k in keys)
        vals = ", ".join([*(f"{ref}.{d.quote(k.name)}" for k in keys), now, f"'{op}'", guid])
        return f"DELETE FROM {rlog} WHERE {where}; INSERT INTO {rlog} ({rcols}) VALUES ({vals});"

    changed = " OR ".join(f"{old}.{d.quote(k.name)} <> {new}.{d.quote(k.name)}" for k in keys)
    i_name, u_name, d_name = names
    header = f"REFERENCING NEW AS {new} OLD AS {old} FOR EACH ROW"
    return [
        f"CREATE TRIGGER {d.quote(i_name)} AFTER INSERT ON {src} REFERENCING NEW AS {new} FOR EACH ROW "
        f"BEGIN {log(new, 'I')} END",
        f"CREATE TRIGGER {d.quote(u_name)} AFTER UPDATE ON {src} {header} BEGIN "
        f"IF {changed} THEN {log(old, 'D')} {log(new, 'I')} ELSE {log(new, 'U')} END IF; END",
        f"CREATE TRIGGER {d.quote(d_name)} AFTER DELETE ON {src} REFERENCING OLD AS {old} FOR EACH ROW "
        f"BEGIN {log(old, 'D')} END",
    ]


class SQLServer(TextOnlyDialect):
    name = "mssql"
    label = "SQL Server"
    sqlglot_dialect = "tsql"
    max_identifier = 128

    def quote(self, name: str) -> str:
        check_identifier(name, self.max_identifier)
        return "[" + name.replace("]", "]]") + "]"

    def literal(self, value: str) -> str:
        return "N'" + str(value).replace("'", "''") + "'"

    script_hint = "Run with sqlcmd -i script.sql (each statement is its own batch, ended by GO)."

    def script(self, statements: Sequence[str]) -> str:
        # sqlcmd: a CREATE TRIGGER must be alone in its batch.
        return "".join(f"{s.rstrip().removesuffix(';')};\nGO\n" for s in statements)

    def concat(self, left: str, right: str) -> str:
        return f"({left} + {right})"

    def has_prefix_sql(self, expr: str, prefix: str) -> str:
        return f"LEFT({expr}, {len(prefix)}) = {self.literal(prefix)}"

    def substring_from_sql(self, expr: str, start: int) -> str:
        return f"SUBSTRING({expr}, {start}, 255)"

    @property
    def uuid_sql(self) -> str:
        return "CONVERT(varchar(36), NEWID())"

    @property
    def log_now_sql(self) -> str:
        return "GETUTCDATE()"

    def add_column_sql(self, table: str, column: str) -> str:
        return f"ALTER TABLE {table} ADD {column}"

    def bidir_triggers(
        self, table: TableInfo, names: dict[str, str], log: RowLog, local: str, publisher: bool
    ) -> tuple[list[str], list[str]]:
        """Statement triggers over `inserted` / `deleted`, as the reference's (which need the "nested triggers"
        server option on, its default): the insert trigger's own UPDATE giving rows their ROWGUID fires the
        update trigger, which leaves that update alone."""
        d = self
        src = d.qualify(table.name, table.schema)
        g = d.quote(ROWGUID_COLUMN)
        keys = key_columns(table)

        def on(a: str, b: str) -> str:
            return " AND ".join(f"{a}.{d.quote(k.name)} = {b}.{d.quote(k.name)}" for k in keys)

        def keys_of(ref: str) -> list[str]:
            return [f"{ref}.{d.quote(k.name)}" for k in keys]

        fresh = d.concat(d.literal(local + "@"), d.uuid_sql)
        own = "" if publisher else f" AND {d.has_prefix_sql(f't.{g}', local + '@')}"
        null = _null_guid(d)
        now = d.log_now_sql
        insert_name = d.qualify(names["I"], table.schema)
        mark = log.is_mark(f"o.{g}")
        if publisher:
            deleted = log.merge(
                [*keys_of("o"), now, "'D'", f"CASE WHEN {mark} THEN {log.unmark(f'o.{g}')} ELSE {fresh} END",
                 f"CASE WHEN {mark} THEN {null} ELSE o.{g} END"],
                " FROM deleted o",
            )  # fmt: skip
        else:
            deleted = log.merge(
                [*keys_of("o"), now, "'D'", fresh, f"o.{g}"], f" FROM deleted o WHERE {_not_marked(d, log, f'o.{g}')}"
            )
        head = "AS BEGIN SET NOCOUNT ON;"
        create = [
            f"CREATE TRIGGER {d.quote(names['I'])} ON {src} AFTER INSERT {head} "
            f"UPDATE t SET {g} = {fresh} FROM {src} t JOIN inserted i ON {on('t', 'i')} WHERE t.{g} IS NULL; "
            + log.merge(
                [*keys_of("i"), now, "'I'", f"t.{g}", null],
                f" FROM inserted i JOIN {src} t ON {on('t', 'i')} WHERE 1 = 1{own}",
            )
            + " END",
            f"CREATE TRIGGER {d.quote(names['U'])} ON {src} AFTER UPDATE {head} "
            f"IF TRIGGER_NESTLEVEL(OBJECT_ID({d.literal(insert_name)}), 'AFTER', 'DML') > 0 "
            f"OR TRIGGER_NESTLEVEL(@@PROCID, 'AFTER', 'DML') > 1 RETURN; "
            f"IF EXISTS (SELECT 1 FROM deleted o WHERE NOT EXISTS (SELECT 1 FROM inserted i WHERE {on('o', 'i')})) "
            f"THROW 50000, {d.literal(bidir_key_error(table.name))}, 1; "
            f"UPDATE t SET {g} = {fresh} FROM {src} t JOIN inserted i ON {on('t', 'i')} "
            f"JOIN deleted o ON {on('o', 'i')} WHERE {_guid_null(d, f'i.{g}', f'o.{g}')}; "
            + log.merge(
                [*keys_of("i"), now, "'U'", f"t.{g}", f"o.{g}"],
                f" FROM inserted i JOIN deleted o ON {on('o', 'i')} JOIN {src} t ON {on('t', 'i')} "
                f"WHERE {_not_marked(d, log, f't.{g}')}{own}",
            )
            + " END",
            f"CREATE TRIGGER {d.quote(names['D'])} ON {src} AFTER DELETE {head} {deleted} END",
        ]
        drop = [f"DROP TRIGGER {d.quote(n)}" for n in names.values()]
        return create, drop

    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        d = self
        keys = key_columns(table)
        rlog, src = d.qualify(rlog_name(table.name)), d.qualify(table.name)
        i_name, u_name, d_name = d.snapshot_trigger_names(table.name)
        rcols = log_columns(d, keys)
        join = " AND ".join(f"r.{d.quote(rlog_key(k.name))} = x.{d.quote(k.name)}" for k in keys)

        def merge(source: str, op: str) -> str:
            picks = ", ".join(f"x.{d.quote(k.name)}" for k in keys)
            return (
                f"DELETE r FROM {rlog} r JOIN {source} x ON {join}; "
                f"INSERT INTO {rlog} ({rcols}) SELECT {picks}, GETUTCDATE(), '{op}', CONVERT(varchar(255), NEWID()) "
                f"FROM {source} x;"
            )

        changed = " OR ".join(f"UPDATE({d.quote(k.name)})" for k in keys)
        create = [
            *d.snapshot_log_table_ddl(table),
            f"CREATE TRIGGER {d.quote(i_name)} ON {src} AFTER INSERT AS BEGIN SET NOCOUNT ON; "
            f"{merge('inserted', 'I')} END",
            f"CREATE TRIGGER {d.quote(u_name)} ON {src} AFTER UPDATE AS BEGIN SET NOCOUNT ON; "
            f"IF {changed} BEGIN {merge('deleted', 'D')} {merge('inserted', 'I')} END "
            f"ELSE BEGIN {merge('inserted', 'U')} END END",
            f"CREATE TRIGGER {d.quote(d_name)} ON {src} AFTER DELETE AS BEGIN SET NOCOUNT ON; "
            f"{merge('deleted', 'D')} END",
        ]
        drop = [f"DROP TRIGGER {d.quote(n)}" for n in (i_name, u_name, d_name)] + [f"DROP TABLE {rlog}"]
        return SnapshotLogObjects(
            rlog_name(table.name), (i_name, u_name, d_name), create=tuple(create), drop=tuple(drop)
        )

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
    sqlglot_dialect = "oracle"
    max_identifier = 30
    bidir_guid_triggers = ("IR", "UR")
    bidir_functions = ("OPL_GETUTCDATE",)
    bidir_setup_sql = (
        "CREATE OR REPLACE FUNCTION OPL_GETUTCDATE RETURN DATE IS BEGIN "
        "RETURN CAST(SYS_EXTRACT_UTC(SYSTIMESTAMP) AS DATE); END;",
    )

    @property
    def uuid_sql(self) -> str:
        return "RAWTOHEX(SYS_GUID())"

    script_hint = "Run with SQL*Plus: @script.sql (PL/SQL blocks end with / on their own line)."

    def script(self, statements: Sequence[str]) -> str:
        # SQL*Plus: a PL/SQL block (a trigger, a function) ends with "/" on its own line, SQL with ";".
        plsql = re.compile(r"^CREATE (OR REPLACE )?(TRIGGER|FUNCTION|PROCEDURE)\b")
        return "".join(
            f"{s.rstrip()}\n/\n" if plsql.match(s) else f"{s.rstrip().removesuffix(';')};\n" for s in statements
        )

    @property
    def log_now_sql(self) -> str:
        return "OPL_GETUTCDATE()"

    def add_column_sql(self, table: str, column: str) -> str:
        return f"ALTER TABLE {table} ADD ({column})"

    def bidir_triggers(
        self, table: TableInfo, names: dict[str, str], log: RowLog, local: str, publisher: bool
    ) -> tuple[list[str], list[str]]:
        return _row_bidir_triggers(self, table, names, log, local, publisher, OracleRows(self))

    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        names = self.snapshot_trigger_names(table.name)
        function = (
            "CREATE OR REPLACE FUNCTION OPL_GETUTCDATE RETURN DATE IS BEGIN "
            "RETURN CAST(SYS_EXTRACT_UTC(SYSTIMESTAMP) AS DATE); END;"
        )
        create = [
            *self.snapshot_log_table_ddl(table),
            function,
            *_row_trigger_text(self, table, names, "OPL_GETUTCDATE()", "RAWTOHEX(SYS_GUID())", ":NEW", ":OLD"),
        ]
        drop = [f"DROP TRIGGER {self.quote(n)}" for n in names] + [f"DROP TABLE {self.qualify(rlog_name(table.name))}"]
        return SnapshotLogObjects(
            rlog_name(table.name), names, functions=("OPL_GETUTCDATE",), create=tuple(create), drop=tuple(drop)
        )

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
    snapshot_trigger_suffixes = ("_I", "_U", "_D")
    bidir_guid_triggers = ("IR", "UR")
    bidir_trigger_suffix = ""

    def has_prefix_sql(self, expr: str, prefix: str) -> str:
        # LEFT, not SUBSTR: DB2's SUBSTR fails on a string shorter than the length asked for.
        return f"LEFT({expr}, {len(prefix)}) = {self.literal(prefix)}"

    @property
    def uuid_sql(self) -> str:
        return "HEX(GENERATE_UNIQUE())"

    script_hint = "Run with db2 -td@ -f script.sql (statements end with @)."

    def script(self, statements: Sequence[str]) -> str:
        # The triggers' bodies hold ";": the script ends statements with "@" (db2 -td@ -f script.sql).
        return "".join(f"{s.rstrip().removesuffix(';')}@\n" for s in statements)

    @property
    def log_now_sql(self) -> str:
        return "CURRENT_TIMESTAMP - CURRENT_TIMEZONE"

    def bidir_triggers(
        self, table: TableInfo, names: dict[str, str], log: RowLog, local: str, publisher: bool
    ) -> tuple[list[str], list[str]]:
        return _row_bidir_triggers(self, table, names, log, local, publisher, DB2Rows(self))

    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        names = self.snapshot_trigger_names(table.name)
        create = [
            *self.snapshot_log_table_ddl(table),
            "CREATE SEQUENCE opl_seq_rowguid AS BIGINT START WITH 1 INCREMENT BY 1 NO CYCLE",
            *_row_trigger_text(
                self, table, names, "CURRENT TIMESTAMP - CURRENT TIMEZONE",
                "CHAR(NEXT VALUE FOR opl_seq_rowguid)", "N", "O",
            ),
        ]  # fmt: skip
        drop = [f"DROP TRIGGER {self.quote(n)}" for n in names] + [f"DROP TABLE {self.qualify(rlog_name(table.name))}"]
        return SnapshotLogObjects(
            rlog_name(table.name), names, sequences=("opl_seq_rowguid",), create=tuple(create), drop=tuple(drop)
        )

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
    bidir_text = False  # the reference lists Informix for incremental snapshots only

    def snapshot_log_objects(self, table: TableInfo) -> SnapshotLogObjects:
        d = self
        names = d.snapshot_trigger_names(table.name)
        keys = key_columns(table)
        rlog = d.qualify(rlog_name(table.name))
        r_proc, u_proc = f"{table.name}_R_proc", f"{table.name}_U_proc"
        params = ", ".join(f"p_{i} {d.render_type(k.logical)}" for i, k in enumerate(keys))
        where = " AND ".join(f"{d.quote(rlog_key(k.name))} = p_{i}" for i, k in enumerate(keys))
        rcols = log_columns(d, keys)
        pvals = ", ".join(f"p_{i}" for i in range(len(keys)))
        create = [
            *d.snapshot_log_table_ddl(table),
            "CREATE SEQUENCE opl_seq_rowguid INCREMENT BY 1 START WITH 1",
            f"CREATE PROCEDURE {d.quote(r_proc)}({params}, p_op CHAR(1)) "
            f"DELETE FROM {rlog} WHERE {where}; "
            f"INSERT INTO {rlog} ({rcols}) VALUES ({pvals}, DBINFO('utc_current'), p_op, "
            f"opl_seq_rowguid.NEXTVAL); END PROCEDURE",
            f"CREATE PROCEDURE {d.quote(u_proc)}({params.replace('p_', 'o_')}, {params.replace('p_', 'n_')}) "
            f"IF {' OR '.join(f'o_{i} <> n_{i}' for i in range(len(keys)))} THEN "
            f"CALL {d.quote(r_proc)}({pvals.replace('p_', 'o_')}, 'D'); "
            f"CALL {d.quote(r_proc)}({pvals.replace('p_', 'n_')}, 'I'); "
            f"ELSE CALL {d.quote(r_proc)}({pvals.replace('p_', 'n_')}, 'U'); END IF; END PROCEDURE",
        ]
        src = d.qualify(table.name)
        new_keys = ", ".join(f"n.{d.quote(k.name)}" for k in keys)
        old_keys = ", ".join(f"o.{d.quote(k.name)}" for k in keys)
        create += [
            f"CREATE TRIGGER {d.quote(names[0])} INSERT ON {src} REFERENCING NEW AS n "
            f"FOR EACH ROW (EXECUTE PROCEDURE {d.quote(r_proc)}({new_keys}, 'I'))",
            f"CREATE TRIGGER {d.quote(names[1])} UPDATE ON {src} REFERENCING OLD AS o NEW AS n "
            f"FOR EACH ROW (EXECUTE PROCEDURE {d.quote(u_proc)}({old_keys}, {new_keys}))",
            f"CREATE TRIGGER {d.quote(names[2])} DELETE ON {src} REFERENCING OLD AS o "
            f"FOR EACH ROW (EXECUTE PROCEDURE {d.quote(r_proc)}({old_keys}, 'D'))",
        ]
        drop = [f"DROP TRIGGER {d.quote(n)}" for n in names]
        drop += [f"DROP PROCEDURE {d.quote(p)}" for p in (u_proc, r_proc)] + [f"DROP TABLE {rlog}"]
        return SnapshotLogObjects(
            rlog_name(table.name), names, sequences=("opl_seq_rowguid",), procedures=(r_proc, u_proc),
            create=tuple(create), drop=tuple(drop),
        )  # fmt: skip

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

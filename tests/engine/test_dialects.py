"""Dialects: quoting, type mapping, connection addresses (pure, no database)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replication_admin.engine import dialects
from replication_admin.engine.compare import ComparePlanError, plan_compare
from replication_admin.engine.dialects import Address, AddressError, IdentifierError
from replication_admin.engine.dialects.base import odbc_value
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

LIVE = ("sqlite", "postgresql", "mysql")


@pytest.mark.parametrize(
    ("dialect", "name", "quoted"),
    [
        ("postgresql", 'ab "cd', '"ab ""cd"'),
        ("sqlite", 'ab "cd', '"ab ""cd"'),
        ("mysql", "ab `cd", "`ab ``cd`"),
        ("mysql", 'ab "cd', '`ab "cd`'),
        ("mssql", "a]b", "[a]]b]"),
        ("oracle", 'x"y', '"x""y"'),
    ],
)
def test_identifiers_are_quoted_with_the_quote_character_doubled(dialect, name, quoted):
    assert dialects.get(dialect).quote(name) == quoted


@pytest.mark.parametrize("bad", ["", "a\x00b"])
def test_empty_or_nul_identifiers_are_refused(bad):
    with pytest.raises(IdentifierError):
        dialects.get("postgresql").quote(bad)


def test_identifiers_longer_than_the_dialect_allows_are_refused():
    dialects.get("postgresql").quote("x" * 63)
    with pytest.raises(IdentifierError, match="longer than 63"):
        dialects.get("postgresql").quote("x" * 64)


def test_string_literals_double_quotes_and_mariadb_also_escapes_backslashes():
    assert dialects.get("postgresql").literal("it's") == "'it''s'"
    assert dialects.get("mysql").literal("a\\'b") == "'a\\\\''b'"


@pytest.mark.parametrize(
    ("dialect", "declared", "expected"),
    [
        ("postgresql", "integer", LogicalType("integer")),
        ("postgresql", "numeric(38,10)", LogicalType("numeric", precision=38, scale=10)),
        ("postgresql", "character varying(40)", LogicalType("varchar", length=40)),
        ("postgresql", "timestamp(6) without time zone", LogicalType("timestamp")),
        ("postgresql", "timestamp with time zone", LogicalType("timestamptz")),
        ("postgresql", "time without time zone", LogicalType("time")),
        ("postgresql", "bytea", LogicalType("long_varbinary")),
        ("postgresql", "uuid", LogicalType("uuid")),
        ("postgresql", "jsonb", LogicalType("json")),
        ("postgresql", "timestamp(6) with time zone", LogicalType("timestamptz")),
        ("postgresql", "timestamp without time zone", LogicalType("timestamp")),
        ("postgresql", "int4range", LogicalType("other")),
        ("mysql", "json", LogicalType("json")),
        ("mysql", "uuid", LogicalType("uuid")),
        ("sqlite", "JSON_TEXT", LogicalType("json")),
        ("sqlite", "TIMESTAMPTZ", LogicalType("timestamptz")),
        ("mysql", "int(11)", LogicalType("integer")),
        ("mysql", "int unsigned", LogicalType("bigint")),
        ("mysql", "bigint(20) unsigned", LogicalType("numeric", precision=20, scale=0)),
        ("mysql", "tinyint(1)", LogicalType("boolean")),
        ("mysql", "tinyint(4)", LogicalType("smallint")),
        ("mysql", "decimal(10,2)", LogicalType("numeric", precision=10, scale=2)),
        ("mysql", "datetime(6)", LogicalType("timestamp")),
        ("mysql", "longtext", LogicalType("long_varchar")),
        ("mysql", "varbinary(16)", LogicalType("varbinary", length=16)),
        ("sqlite", "INTEGER", LogicalType("integer")),
        ("sqlite", "DECIMAL_TEXT(10, 2)", LogicalType("numeric", precision=10, scale=2)),
        ("sqlite", "VARCHAR(15)", LogicalType("varchar", length=15)),
        ("sqlite", "TEXT", LogicalType("long_varchar")),
        ("sqlite", "TIMESTAMP", LogicalType("timestamp")),
        ("sqlite", "REAL", LogicalType("double")),
        ("sqlite", "", LogicalType("other")),
    ],
)
def test_declared_types_parse_into_logical_types(dialect, declared, expected):
    assert dialects.get(dialect).parse_type(declared) == expected


ROUND_TRIP = [
    LogicalType("smallint"),
    LogicalType("integer"),
    LogicalType("bigint"),
    LogicalType("double"),
    LogicalType("numeric", precision=38, scale=10),
    LogicalType("varchar", length=40),
    LogicalType("long_varchar"),
    LogicalType("boolean"),
    LogicalType("date"),
    LogicalType("timestamp"),
    LogicalType("long_varbinary"),
    LogicalType("json"),
]


@pytest.mark.parametrize("dialect", LIVE)
@pytest.mark.parametrize("logical", ROUND_TRIP, ids=str)
def test_rendered_types_parse_back_to_the_same_logical_type(dialect, logical):
    d = dialects.get(dialect)
    assert d.parse_type(d.render_type(logical)) == logical


@pytest.mark.parametrize(
    ("dialect", "logical", "ddl"),
    [
        ("mssql", LogicalType("varchar"), "varchar(8000)"),
        ("mssql", LogicalType("numeric"), "numeric(38, 15)"),
        ("mssql", LogicalType("long_varbinary"), "image"),
        ("oracle", LogicalType("varchar", length=20), "VARCHAR2(20)"),
        ("oracle", LogicalType("timestamp"), "DATE"),
        ("db2", LogicalType("numeric"), "NUMERIC(32, 15)"),
        ("db2", LogicalType("varbinary", length=10), "VARCHAR(10) FOR BIT DATA"),
        ("informix", LogicalType("timestamp"), "DATETIME YEAR TO FRACTION(5)"),
        ("informix", LogicalType("real"), "SMALLFLOAT"),
        ("mssql", LogicalType("timestamptz"), "datetime"),
        ("oracle", LogicalType("json"), "NCLOB"),
    ],
)
def test_text_only_dialects_follow_the_reference_type_mapping_table(dialect, logical, ddl):
    assert dialects.get(dialect).render_type(logical) == ddl


def test_odbc_values_with_separators_are_brace_quoted_or_refused():
    assert odbc_value("plain") == "plain"
    assert odbc_value("p;a}ss") == "{p;a}}ss}"
    with pytest.raises(AddressError):
        odbc_value("a;b", braces=False)


def test_postgresql_addresses_are_built_from_fields_with_bulk_options():
    address = Address(dialect="postgresql", host="127.0.0.1", port=5432, database="my db", user="u", password="p;w")
    endpoint = dialects.get("postgresql").jdbc_endpoint(address)
    assert endpoint.url == "jdbc:postgresql://127.0.0.1:5432/my%20db"
    assert endpoint.properties["reWriteBatchedInserts"] == "true"
    assert endpoint.properties["password"] == "p;w"
    conn = dialects.get("postgresql").odbc_connection_string(address)
    assert "DRIVER={PostgreSQL Unicode}" in conn and "PWD={p;w};" in conn


def test_mariadb_jdbc_url_uses_the_mysql_scheme_with_the_mariadb_driver():
    address = Address(dialect="mysql", host="db.example.com", port=3307, database="shop", user="u")
    endpoint = dialects.get("mysql").jdbc_endpoint(address)
    assert endpoint.url == "jdbc:mysql://db.example.com:3307/shop"
    assert endpoint.properties["driver"] == "org.mariadb.jdbc.Driver"
    assert endpoint.properties["useBulkStmts"] == "true"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("host", "evil/?x=1", "not a valid host"),
        ("host", "a b", "not a valid host"),
        ("port", 70000, "outside 1-65535"),
        ("port", "x", "not a number"),
    ],
)
def test_addresses_with_bad_host_or_port_are_refused(field, value, message):
    fields = {"dialect": "postgresql", "host": "localhost", "port": 5432, "database": "d", "user": "u"}
    fields[field] = value
    with pytest.raises(AddressError, match=message):
        dialects.get("postgresql").jdbc_endpoint(Address(**fields))


@pytest.mark.parametrize("path", ["relative.db", "/tmp/x.db?journal_mode=off", "/tmp/a;b.db", ""])
def test_sqlite_paths_must_be_absolute_and_free_of_url_characters(path):
    with pytest.raises(AddressError):
        dialects.get("sqlite").jdbc_endpoint(Address(dialect="sqlite", database=path))


def test_text_only_dialects_cannot_be_connected_to():
    with pytest.raises(AddressError, match="DDL generation only"):
        dialects.get("oracle").odbc_connection_string(Address(dialect="oracle"))


def _table(name, *cols):
    return TableInfo(name=name, columns=tuple(cols))


def _col(name, kind, pk=0, **kw):
    return Column(name=name, declared=kind, logical=LogicalType(kind, **kw), pk_position=pk)


def test_compare_plan_matches_columns_case_insensitively_and_lists_the_rest():
    left = _table("t", _col("ID", "integer", pk=1), _col("Name", "varchar", length=5), _col("extra", "date"))
    right = _table("t", _col("id", "bigint", pk=1), _col("name", "long_varchar"), _col("other", "integer"))
    plan = plan_compare(dialects.get("postgresql"), left, dialects.get("mysql"), right)
    assert plan.key_columns == ("ID",)
    assert plan.compared_columns == ("Name",)
    assert plan.only_left == ("extra",)
    assert plan.only_right == ("other",)
    assert plan.left.select_sql() == 'SELECT "ID" AS k0, "Name" AS v0 FROM "t"'
    assert plan.right.select_sql() == "SELECT `id` AS k0, `name` AS v0 FROM `t`"
    assert plan.left.partition_alias == "k0"


def test_compare_plan_reads_decimals_as_text_and_sqlite_timestamps_as_text():
    left = _table(
        "t",
        _col("id", "integer", pk=1),
        _col("p", "numeric", precision=38, scale=10),
        _col("at", "timestamp"),
    )
    plan = plan_compare(dialects.get("postgresql"), left, dialects.get("sqlite"), left)
    assert plan.left.custom_schema() == "k0 BIGINT, v0 STRING, v1 TIMESTAMP"
    assert plan.right.custom_schema() == "k0 BIGINT, v0 STRING, v1 STRING"


def test_compare_plan_falls_back_to_text_when_kinds_disagree():
    left = _table("t", _col("id", "integer", pk=1), _col("v", "timestamp"))
    right = _table("t", _col("id", "varchar", pk=1, length=10), _col("v", "integer"))
    plan = plan_compare(dialects.get("postgresql"), left, dialects.get("postgresql"), right)
    assert [c.family for c in plan.left.columns] == ["text", "text"]
    assert plan.left.partition_alias is None


def test_compare_plan_needs_a_primary_key_present_on_both_sides():
    no_key = _table("t", _col("a", "integer"))
    with pytest.raises(ComparePlanError, match="no primary key"):
        plan_compare(dialects.get("sqlite"), no_key, dialects.get("sqlite"), no_key)
    keyed = _table("t", _col("a", "integer", pk=1))
    with pytest.raises(ComparePlanError, match="key column 'a'"):
        plan_compare(dialects.get("sqlite"), keyed, dialects.get("sqlite"), _table("u", _col("b", "integer")))


# --- dialect knowledge lives in engine/dialects only ---------------------------------------------------------

_ROOT = Path(__file__).resolve().parents[2]
_NAMES = "sqlite|postgresql|mysql|mssql|oracle|db2|informix"
_NAME_TESTS = re.compile(
    rf"""(==|!=|\bin)\s*\(?\s*["']({_NAMES})["']"""  # x == "sqlite", x in ("postgresql", ...)
    rf"""|["']({_NAMES})["']\s*(==|!=|\bin\b)"""  # "sqlite" == x
    # d.name == ..., dialect == ..., endpoint.dialect in ("a", ...); a membership test in a registry
    # (`dialect in dialects.live_names()`) asks the dialects, so it is not one.
    r"""|\b(d|self\.d|dialect|source|dest|endpoint|plan\.\w+)\.name\s*(==|!=|(\bin\b|not\s+in\b)\s*[(\["'])"""
    r"""|\b(dialect|dest_dialect|source_dialect)\s*(==|!=|(\bin\b|not\s+in\b)\s*[(\["'])"""
    r"""|\.dialect\s*(==|!=|(\bin\b|not\s+in\b)\s*[(\["'])"""
    r"""|\.get\(\s*d\.name\b|\[\s*d\.name\s*\]"""  # {...}.get(d.name), TABLE[d.name]
)


def _mode_modules() -> list[Path]:
    """Every module but the dialects themselves (the ODBC connections too: drivers are the dialects' now)."""
    product = _ROOT / "replication_admin"
    allowed = (product / "engine" / "dialects", product / "migrations")
    modules = [p for p in product.rglob("*.py") if not any(p == a or a in p.parents for a in allowed)]
    return sorted(modules + list((_ROOT / "jobs").glob("*.py")))


# One server's SQL written out where the dialects should say it: PostgreSQL's functions and settings, MariaDB's
# locks and session variables, SQLite's catalog and pragmas, the ANSI catalog's dialect-specific views.
_RAW_DIALECT_SQL = re.compile(
    r"""\bpg_[a-z_]+\("""  # pg_advisory_lock(, pg_drop_replication_slot(, pg_identify_object( ...
    r"""|::(oid|regclass|int|bigint|text)\b"""  # PostgreSQL casts
    r"""|\bSET\s+(LOCAL|SESSION)\b|\bSET\s+(TIME\s+ZONE|time_zone|search_path)\b"""
    r"""|(?-i:\b(lock_timeout|statement_timeout|idle_in_transaction_session_timeout)\b)\s*="""
    r"""|\b(GET_LOCK|RELEASE_LOCK|IS_FREE_LOCK)\s*\(|@@\w+"""
    r"""|\bsqlite_master\b|\bPRAGMA\s+\w+"""
    r"""|\binformation_schema\.(tables|columns|routines|triggers|statistics|key_column_usage)\b""",
    re.IGNORECASE,
)


def _feature_and_core_modules() -> list[Path]:
    """The control plane that runs SQL on registered servers: the shared core and every feature package."""
    product = _ROOT / "replication_admin"
    packages = [p for p in product.iterdir() if (p / "__init__.py").is_file()]
    skipped = {"engine", "models", "migrations", "management", "templatetags"}
    return sorted(m for p in packages if p.name not in skipped for m in p.rglob("*.py"))


def test_the_name_test_pattern_finds_what_it_is_meant_to():
    for line in (
        'if d.name == "postgresql":',
        'x = "a" if dest_dialect == "sqlite" else "b"',
        'if endpoint.dialect == "sqlite":',
        'if d.name not in ("postgresql", "mysql"):',
        'return {"mysql": 1}.get(d.name, 2)',
        'suffixes = ("_I",) if d.name == "db2" else ()',
    ):
        assert _NAME_TESTS.search(line), line
    for line in (
        "if col.name == name:",
        "if column.name == name:",
        "dialect: str",
        "if data.dialect not in dialects.live_names():",
        "for dialect in dialects.DIALECTS.values():",
    ):
        assert not _NAME_TESTS.search(line), line


def test_the_raw_sql_pattern_finds_one_servers_sql_and_lets_the_rest_be():
    for line in (
        'cursor.execute("SELECT pg_advisory_unlock(?)", [key])',
        'cursor.execute("SELECT pg_try_advisory_lock(?)::int", [key])',
        "cursor.execute(f\"SET LOCAL lock_timeout = '{WAIT}'\")",
        'cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")',
        "cur.execute(\"SET time_zone = '+00:00'\")",
        'cur.execute("PRAGMA busy_timeout = 30000")',
        ".execute(\"SELECT (pg_identify_object('pg_proc'::regclass, ?::oid, 0)).identity\")",
        'cursor.execute("SELECT GET_LOCK(?, 10)")',
        "\"SELECT name FROM sqlite_master WHERE type = 'table'\"",
        '"SELECT table_name FROM information_schema.tables WHERE table_schema = ?"',
    ):
        assert _RAW_DIALECT_SQL.search(line), line
    for line in (
        "cursor.execute(d.unlock_sql(), [key])",
        '"""Bytes for people (binary units, as PostgreSQL\'s pg_size_pretty)."""',
        'name = forms.CharField(help_text="Used in statements, e.g. pg_main.Orders")',
        "cursor.execute(d.statement_timeout_sql(LIVE_TIMEOUT))",
        "settings.LOCK_TIMEOUT = 5",
        '"""How messages name a server ("pg_demo (127.0.0.1:5433)")."""',
    ):
        assert not _RAW_DIALECT_SQL.search(line), line


def test_no_feature_or_core_module_writes_one_servers_sql():
    """Advisory locks, slot drops, procedure identities, session settings, catalog queries: the dialects say
    them (engine/dialects/<name>.py), the control plane asks, so a new dialect brings its own."""
    modules = _feature_and_core_modules()
    assert {"connections.py", "capture.py", "procedures.py", "refresh.py"} <= {p.name for p in modules}
    found = []
    for path in modules:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _RAW_DIALECT_SQL.search(line):
                found.append(f"{path.relative_to(_ROOT)}:{number}: {line.strip()}")
    assert not found, "one server's SQL outside engine/dialects:\n" + "\n".join(found)


def test_no_mode_module_branches_on_a_dialect_name():
    """Capabilities and SQL text come from the Dialect classes (engine/dialects/<name>.py), so adding a
    dialect or a capability is one file: no module outside engine/dialects tests a dialect's name."""
    modules = _mode_modules()
    assert {"transactional_sql.py", "connections.py"} <= {p.name for p in modules}
    found = []
    for path in modules:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _NAME_TESTS.search(line):
                found.append(f"{path.relative_to(_ROOT)}:{number}: {line.strip()}")
    assert not found, "dialect names tested outside engine/dialects:\n" + "\n".join(found)


def test_capabilities_of_the_live_dialects():
    from_flags = {name: d for name, d in dialects.DIALECTS.items()}
    assert tuple(n for n, d in from_flags.items() if d.supports_updateable_publications) == ("postgresql", "mysql")
    assert tuple(n for n, d in from_flags.items() if d.supports_bidir) == LIVE
    assert [n for n, d in from_flags.items() if d.text_timestamps] == ["sqlite"]
    assert [n for n, d in from_flags.items() if d.has_boolean] == ["postgresql"]
    assert [n for n, d in from_flags.items() if d.decodes_wal] == ["postgresql"]
    assert {n: d.bulk_loader for n, d in from_flags.items() if d.bulk_loader} == {
        "postgresql": "copy",
        "mysql": "load_data",
    }


def test_connection_strings_and_jdbc_endpoints_carry_connect_and_read_bounds_and_keepalives():
    pg = Address(dialect="postgresql", host="h", port=5432, database="d", user="u", connect_timeout=7, read_timeout=9)
    conn = dialects.get("postgresql").odbc_connection_string(pg)
    assert "keepalives=1" in conn and "tcp_user_timeout=60000" in conn and "connect_timeout" not in conn
    props = dialects.get("postgresql").jdbc_endpoint(pg).properties
    assert (props["connectTimeout"], props["socketTimeout"], props["tcpKeepAlive"]) == ("7", "9", "true")
    assert props["loginTimeout"] == "7"
    my = Address(dialect="mysql", host="h", port=3306, database="d", user="u", connect_timeout=7, read_timeout=9)
    conn = dialects.get("mysql").odbc_connection_string(my)
    assert "CONN_TIMEOUT=7;READ_TIMEOUT=9;WRITE_TIMEOUT=9;" in conn
    props = dialects.get("mysql").jdbc_endpoint(my).properties  # Connector/J counts milliseconds
    assert (props["connectTimeout"], props["socketTimeout"], props["tcpKeepAlive"]) == ("7000", "9000", "true")
    unbounded = dialects.get("mysql").odbc_connection_string(Address(dialect="mysql", host="h", database="d"))
    assert "READ_TIMEOUT" not in unbounded


@pytest.mark.parametrize(
    ("dialect", "answer", "version"),
    [
        ("postgresql", "15.20 (Debian 15.20-0+deb12u1)", "15.20"),
        ("mysql", "10.11.19-MariaDB-0+deb12u1", "10.11.19"),
        ("sqlite", "3.40.1", "3.40.1"),
    ],
)
def test_the_version_a_server_reports_is_read_to_its_number(dialect, answer, version):
    assert dialects.get(dialect).version_sql
    assert dialects.get(dialect).reported_version(answer) == version

"""The objects of a bi-directional subscriber on SQL Server, Oracle and DB2, generated as text: every statement is
parsed with sqlglot in its dialect (DB2, which sqlglot does not know, in its ANSI dialect), each trigger's MERGE
must write the very log table the script creates, with its columns, and the triggers keep the rules of the live
dialects' (a subscriber logs only its own changes, a replay's delete is not logged, a key change is refused)."""

from __future__ import annotations

import re

import pytest
import sqlglot
from sqlglot import exp

from replication_admin.engine import dialects
from replication_admin.engine.bidir_sql import BidirError, bidir_script, table_with_rowguid
from replication_admin.engine.objects import SnapshotLogError
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

ORDER_DETAILS = TableInfo(
    name="Order Details",
    columns=(
        Column("OrderID", "integer", LogicalType("integer"), nullable=False, pk_position=1),
        Column("ProductID", "integer", LogicalType("integer"), nullable=False, pk_position=2),
        Column("Quantity", "smallint", LogicalType("smallint")),
    ),
)
HOSTILE = TableInfo(
    name='ab "cd',
    columns=(Column("表😀", "integer", LogicalType("integer"), nullable=False, pk_position=1),),
)
SQLGLOT = {"mssql": "tsql", "oracle": "oracle", "db2": None}
TRIGGERS = {
    "mssql": ("I_log", "U_log", "D_log"),
    "oracle": ("I_log", "U_log", "D_log", "IR_log", "UR_log"),
    "db2": ("I", "U", "D", "IR", "UR"),
}
BODY = re.compile(r" BEGIN (?:ATOMIC |SET NOCOUNT ON; )?(?P<body>.*) END;?$", re.S)
WHEN = re.compile(r" FOR EACH ROW WHEN \((?P<when>.*)\) BEGIN ")


def parse(dialect: str, statement: str) -> exp.Expression:
    tree = sqlglot.parse_one(statement, read=SQLGLOT[dialect], error_level=sqlglot.ErrorLevel.RAISE)
    assert not isinstance(tree, exp.Command), f"{dialect}: not parsed as a statement: {statement[:80]}"
    return tree


def triggers_of(script) -> list[str]:
    return [s for s in script.create if re.match(r"CREATE (OR REPLACE )?TRIGGER ", s)]


def dml_of(trigger: str) -> list[str]:
    """The MERGE and UPDATE statements of a trigger's body (the rest is control flow sqlglot does not read)."""
    body = BODY.search(trigger)
    assert body, trigger
    return [p.strip().rstrip(";") for p in body["body"].split("; ") if p.strip().startswith(("MERGE ", "UPDATE "))]


@pytest.mark.parametrize("dialect", SQLGLOT)
@pytest.mark.parametrize("publisher", [False, True])
def test_every_statement_of_the_script_parses_in_its_dialect(dialect, publisher):
    d = dialects.get(dialect)
    script = bidir_script(d, ORDER_DETAILS, "branch", "shop", is_publisher=publisher)
    assert script.triggers == tuple(f"Order Details_{t}" for t in TRIGGERS[dialect])
    kinds = []
    for statement in script.create:
        if statement in triggers_of(script):
            for dml in dml_of(statement):
                kinds.append(type(parse(dialect, dml)).__name__)
            when = WHEN.search(statement)
            if when:
                parse(dialect, f"SELECT 1 WHERE {when['when']}")
        elif statement.startswith("CREATE OR REPLACE FUNCTION"):
            assert statement.rstrip().endswith("END;")
        else:
            kinds.append(type(parse(dialect, statement)).__name__)
    for statement in script.drop:
        parse(dialect, statement) if not statement.startswith("DROP TRIGGER") else None
    # The ROWGUID column and its values, the log and its index, one MERGE per logging trigger, the replay log.
    assert kinds.count("Alter") == 1 and kinds.count("Merge") == 3
    assert kinds.count("Create") == 3  # RLOG, its SNAPTIME index, RPLOG


@pytest.mark.parametrize("dialect", SQLGLOT)
def test_each_merge_writes_the_log_table_the_script_creates_with_its_columns(dialect):
    d = dialects.get(dialect)
    script = bidir_script(d, ORDER_DETAILS, "branch", "shop")
    rlog = next(
        parse(dialect, s) for s in script.create if s.startswith(f"CREATE TABLE {d.quote('RLOG_Order Details')}")
    )
    log_columns = [c.name for c in rlog.find_all(exp.ColumnDef)]
    assert log_columns == ["RLOG_OrderID", "RLOG_ProductID", "SNAPTIME", "DMLTYPE", "RLOG_ROWGUID", "OLD_ROWGUID"]
    merges = [parse(dialect, m) for t in triggers_of(script) for m in dml_of(t) if m.startswith("MERGE")]
    assert len(merges) == 3
    for merge in merges:
        assert merge.this.name == "RLOG_Order Details"
        inserted = (
            merge.find(exp.Insert)
            or next(w for w in merge.args["whens"].expressions if not w.args.get("matched")).args["then"]
        )
        assert [c.name for c in inserted.this.expressions] == log_columns
        aliases = [a.alias for a in merge.args["using"].find(exp.Select).expressions]
        assert aliases == log_columns


@pytest.mark.parametrize("dialect", SQLGLOT)
def test_a_subscriber_logs_only_its_own_changes_and_not_a_replays_delete(dialect):
    d = dialects.get(dialect)
    sub = bidir_script(d, ORDER_DETAILS, "branch", "shop", is_publisher=False)
    pub = bidir_script(d, ORDER_DETAILS, "shop", "shop", is_publisher=True)
    ref = {"mssql": "t", "oracle": "NEW", "db2": "N"}[dialect] + "." + d.quote("ROWGUID")
    for event in ("INSERT", "UPDATE"):
        sub_trigger = next(t for t in triggers_of(sub) if f"AFTER {event} " in t)
        pub_trigger = next(t for t in triggers_of(pub) if f"AFTER {event} " in t)
        assert d.has_prefix_sql(ref, "branch@") in sub_trigger
        assert d.has_prefix_sql(ref, "shop@") not in pub_trigger
    sub_delete = next(t for t in triggers_of(sub) if "AFTER DELETE" in t)
    pub_delete = next(t for t in triggers_of(pub) if "AFTER DELETE" in t)
    # A subscriber leaves a replay's delete (ROWGUID marked del:<change>) out; the publisher logs it under the
    # change's id, so the change keeps its origin.
    assert "'del:'" in sub_delete.replace("N'del:'", "'del:'") and "CASE WHEN" not in sub_delete.split("UPDATE SET")[0]
    assert "CASE WHEN" in pub_delete.split("WHEN MATCHED")[0]
    merge = parse(dialect, dml_of(pub_delete)[0])
    guid = merge.args["using"].find(exp.Select).expressions[-2]
    assert isinstance(guid.this, exp.Case)


@pytest.mark.parametrize("dialect", SQLGLOT)
def test_a_primary_key_change_is_refused_and_an_unchanged_rowguid_renewed(dialect):
    d = dialects.get(dialect)
    script = bidir_script(d, ORDER_DETAILS, "branch", "shop")
    text = "\n".join(triggers_of(script))
    refusal = {"mssql": "THROW 50000", "oracle": "RAISE_APPLICATION_ERROR(-20001", "db2": "SIGNAL SQLSTATE '75001'"}
    assert refusal[dialect] in text and "the primary key of Order Details is replicated bi-directionally" in text
    fresh = {"mssql": "NEWID()", "oracle": "SYS_GUID()", "db2": "GENERATE_UNIQUE()"}[dialect]
    # Inserts without a ROWGUID and updates that leave it unchanged get a fresh one of this server.
    assert text.count(fresh) >= 2


def test_sql_server_leaves_the_insert_triggers_own_rowguid_update_alone():
    d = dialects.get("mssql")
    script = bidir_script(d, ORDER_DETAILS, "branch", "shop")
    update = next(t for t in triggers_of(script) if "AFTER UPDATE" in t)
    assert "TRIGGER_NESTLEVEL(OBJECT_ID(N'[Order Details_I_log]'), 'AFTER', 'DML') > 0" in update


@pytest.mark.parametrize("dialect", SQLGLOT)
def test_hostile_names_are_quoted_in_every_statement(dialect):
    d = dialects.get(dialect)
    script = bidir_script(d, HOSTILE, "bränch 'x", "shop")
    for statement in script.create:
        if statement in triggers_of(script):
            for dml in dml_of(statement):
                parse(dialect, dml)
        elif not statement.startswith("CREATE OR REPLACE FUNCTION"):
            tree = parse(dialect, statement)
            if isinstance(tree, exp.Create) and tree.kind == "TABLE" and "RLOG" in tree.this.name:
                assert tree.this.name == 'RLOG_ab "cd'
    assert any("'bränch ''x@'" in s for s in script.create)


def test_oracle_refuses_a_name_over_its_limit_in_one_line():
    long = TableInfo(name="x" * 26, columns=ORDER_DETAILS.columns)
    with pytest.raises((BidirError, SnapshotLogError), match="Oracle's 30-character limit"):
        bidir_script(dialects.get("oracle"), table_with_rowguid(long), "branch", "shop")


def test_informix_and_the_live_dialects_are_told_apart():
    with pytest.raises(BidirError, match="no bi-directional triggers for Informix"):
        bidir_script(dialects.get("informix"), ORDER_DETAILS, "branch", "shop")
    # The live dialects make the same objects the console creates on them.
    script = bidir_script(dialects.get("postgresql"), ORDER_DETAILS, "branch", "shop")
    assert script.rlog_table == "RLOG_Order Details" and script.create[0].startswith("ALTER TABLE")


@pytest.mark.parametrize(
    ("dialect", "split"),
    [
        ("mssql", lambda text: [s.removesuffix(";") for s in text.split(";\nGO\n") if s]),
        ("db2", lambda text: [s for s in text.split("@\n") if s]),
        ("oracle", lambda text: [line for line in text.splitlines() if line != "/"]),  # one line per statement
    ],
)
def test_the_script_ends_each_statement_as_the_servers_own_tool_expects(dialect, split):
    d = dialects.get(dialect)
    script = bidir_script(d, ORDER_DETAILS, "branch", "shop")
    text = d.script(script.create)
    assert [s.removesuffix(";") for s in split(text)] == [s.removesuffix(";") for s in script.create]
    if dialect == "oracle":  # the PL/SQL blocks, and only they, end with a line of their own holding "/"
        lines = text.splitlines()
        blocks = [lines[i - 1] for i, line in enumerate(lines) if line == "/"]
        assert blocks == [s for s in script.create if s.startswith("CREATE OR REPLACE ")]
        assert len(blocks) == len(triggers_of(script)) + 1  # and OPL_GETUTCDATE

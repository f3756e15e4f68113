"""The statement language: every statement of the command reference, verbatim, and clear errors."""

from __future__ import annotations

import pytest

from replication_admin.engine.statements import (
    CreateIncrementalSnapshot,
    CreateNonincrementalSnapshot,
    CreateSnapshotLog,
    DropSnapshot,
    DropSnapshotLog,
    Name,
    PurgeReplayLogs,
    PurgeSnapshotLog,
    StatementError,
    UpdateSnapshot,
    parse,
    parse_one,
    quote_name,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("create snapshot log for Orders", CreateSnapshotLog(source=Name("Orders"))),
        ("CREATE SNAPSHOT LOG FOR demo.Orders", CreateSnapshotLog(source=Name("Orders", "demo"))),
        ("drop snapshot log for Orders", DropSnapshotLog(source=Name("Orders"))),
        ("purge snapshot log for Orders", PurgeSnapshotLog(source=Name("Orders"))),
        (
            "create nonincremental snapshot sub_orders as\n        'select * from Orders where OrderID < 5'",
            CreateNonincrementalSnapshot(dest=Name("sub_orders"), query="select * from Orders where OrderID < 5"),
        ),
        (
            "CREATE SNAPSHOT sub_orders FROM Orders WHERE 'OrderID < 5'",
            CreateIncrementalSnapshot(dest=Name("sub_orders"), source=Name("Orders"), condition="OrderID < 5"),
        ),
        (
            "create incremental snapshot pg.sub FROM demo.Orders 'OrderID, CustomerID' where 'Freight > 10'",
            CreateIncrementalSnapshot(
                dest=Name("sub", "pg"), source=Name("Orders", "demo"), columns="OrderID, CustomerID",
                condition="Freight > 10",
            ),
        ),
        ("UPDATE SNAPSHOT sub_orders", UpdateSnapshot(name=Name("sub_orders"))),
        ("update snapshot sub_orders as nonincremental", UpdateSnapshot(name=Name("sub_orders"), nonincremental=True)),
        ("DROP SNAPSHOT sub_orders WITH DELETE", DropSnapshot(name=Name("sub_orders"), with_delete=True)),
        ("drop snapshot sub_orders", DropSnapshot(name=Name("sub_orders"))),
    ],
)  # fmt: skip
def test_every_statement_of_the_command_reference_parses_verbatim(text, expected):
    assert parse_one(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("repl_create_snapshot_log('Orders')", CreateSnapshotLog(source=Name("Orders"))),
        ("call REPL_DROP_SNAPSHOT_LOG('demo.Orders')", DropSnapshotLog(source=Name("Orders", "demo"))),
        ("select repl_purge_snapshot_log('Orders')", PurgeSnapshotLog(source=Name("Orders"))),
        (
            "repl_create_snapshot('select * from Orders', 'sub_orders')",
            CreateNonincrementalSnapshot(dest=Name("sub_orders"), query="select * from Orders"),
        ),
        (
            "repl_create_inc_snapshot(null, 'Orders', 'OrderID < 5', 'sub_orders')",
            CreateIncrementalSnapshot(dest=Name("sub_orders"), source=Name("Orders"), condition="OrderID < 5"),
        ),
        (
            "repl_create_inc_snapshot('OrderID, Freight', 'Orders', '', 'sub_orders')",
            CreateIncrementalSnapshot(dest=Name("sub_orders"), source=Name("Orders"), columns="OrderID, Freight"),
        ),
        ("repl_refresh_inc_snapshot('sub_orders')", UpdateSnapshot(name=Name("sub_orders"))),
        ("repl_refresh_noninc_snapshot('sub_orders')", UpdateSnapshot(name=Name("sub_orders"), nonincremental=True)),
        ("repl_drop_snapshot('sub_orders', 1)", DropSnapshot(name=Name("sub_orders"), with_delete=True)),
        ("repl_drop_snapshot('sub_orders', 0)", DropSnapshot(name=Name("sub_orders"))),
        ("repl_drop_snapshot('sub_orders')", DropSnapshot(name=Name("sub_orders"))),
        ("repl_purge_rplogs()", PurgeReplayLogs()),
    ],
)  # fmt: skip
def test_function_forms_build_the_same_statements(text, expected):
    assert parse_one(text) == expected


def test_sql_quoting_rules_apply_to_identifiers_and_strings():
    statement = parse_one(
        "create snapshot \"my \"\"dest\"\"\" from srv.\"ab \"\"cd\" '\"id key\", x' where 'name = ''it''''s'''"
    )
    assert statement == CreateIncrementalSnapshot(
        dest=Name('my "dest"'),
        source=Name('ab "cd', "srv"),
        columns='"id key", x',
        condition="name = 'it''s'",
    )
    assert parse_one("repl_create_snapshot_log('demo.\"Order Details\"')") == CreateSnapshotLog(
        source=Name("Order Details", "demo")
    )


def test_non_ascii_and_keyword_names_can_be_written_and_are_quoted_back():
    assert parse_one("create snapshot log for Größe").source == Name("Größe")
    assert parse_one('create snapshot log for "select"').source == Name("select")
    assert quote_name("select") == '"select"' and quote_name("Größe") == "Größe"
    assert str(Name('ab "cd', "demo")) == 'demo."ab ""cd"'


def test_several_statements_separated_by_semicolons_keep_their_own_text():
    script = """
        -- nightly set-up
        create snapshot log for Orders;
        /* then the copy */ CREATE SNAPSHOT sub_orders FROM Orders WHERE 'OrderID < 5';;
        update snapshot sub_orders;
    """
    statements = parse(script)
    assert [type(s).__name__ for s in statements] == [
        "CreateSnapshotLog",
        "CreateIncrementalSnapshot",
        "UpdateSnapshot",
    ]
    assert statements[1].text == "CREATE SNAPSHOT sub_orders FROM Orders WHERE 'OrderID < 5'"


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("create snapshot log Orders", 1, 21, "expected FOR"),
        ("create table x (a int)", 1, 1, "this is plain SQL, and only replication statements run here"),
        ("delete from Orders", 1, 1, "this is plain SQL"),
        ("select * from Orders", 1, 1, "this is plain SQL, and only replication statements run here"),
        ("select OrderID from Orders union select OrderID from Archive", 1, 1, "this is plain SQL"),
        ("select count(*) from Orders", 1, 1, "this is plain SQL"),
        ("select repl_stat() union select 1", 1, 1, "this is plain SQL"),
        ("update Orders set Freight = 0", 1, 1, "this is plain SQL"),
        ("with o as (select 1) select * from o", 1, 1, "this is plain SQL"),
        ("select repl_nonsense()", 1, 8, "unknown replication function 'repl_nonsense'"),
        ("update snapshoot x", 1, 8, "expected SNAPSHOT"),
        ("drop snapshoot x", 1, 6, "expected SNAPSHOT"),
        ("create snapshot log for Orders; drop table Orders", 1, 33, "this is plain SQL"),
        ("update snapshot s as incremental", 1, 22, "expected NONINCREMENTAL"),
        ("create nonincremental snapshot d as select 1", 1, 37, "the query as a quoted string"),
        ("create snapshot log for 'Orders'", 1, 25, "expected a source table name"),
        ("create snapshot log for a.b.c", 1, 28, "at most two parts"),
        ("create snapshot log for Orders extra", 1, 32, "expected ';' or the end"),
        ("create snapshot log for Orders'", 1, 31, "string is not closed"),
        ('create snapshot log for "Orders', 1, 25, "quoted identifier is not closed"),
        ('create snapshot log for ""', 1, 25, "must not be empty"),
        ("create snapshot log for Orders /* x", 1, 32, "comment is not closed"),
        ("create snapshot log for Ord#ers", 1, 28, "unexpected character '#'"),
        ("repl_nonsense('x')", 1, 1, "unknown replication function 'repl_nonsense'"),
        ("repl_create_snapshot_log()", 1, 26, "takes 1 argument(s) (source_table), got 0"),
        ("repl_drop_snapshot('a', 1, 2)", 1, 29, "takes 1 to 2 argument(s)"),
        ("repl_create_snapshot_log(Orders)", 1, 26, "expected a string, a number or NULL"),
        ("repl_create_snapshot_log('a b')", 1, 1, "unexpected 'b' after the table name"),
        ("repl_create_snapshot_log(1)", 1, 1, "must be a non-empty string"),
        ("create snapshot log for select", 1, 25, "quote it as an identifier"),
        ("", 1, 1, "no statement given"),
        (";;", 1, 1, "no statement given"),
        ("create snapshot log for Orders;\n  drop snapshot", 2, 16, "expected a snapshot name"),
    ],
)
def test_malformed_input_gets_an_error_with_its_line_and_column(text, line, column, words):
    with pytest.raises(StatementError) as info:
        parse(text)
    error = info.value
    assert words in str(error)
    assert (error.line, error.column) == (line, column), str(error)
    assert str(error).startswith(f"line {line}, column {column}: ")


def test_sql_injection_through_names_stays_inside_the_name():
    statement = parse_one('create snapshot log for "x; drop table Orders; --"')
    assert statement.source == Name("x; drop table Orders; --")
    with pytest.raises(StatementError):
        parse("create snapshot log for x; drop table Orders")


def test_keywords_are_case_insensitive_and_identifiers_keep_their_case():
    assert parse_one("CrEaTe SnApShOt LoG fOr OrDeRs") == CreateSnapshotLog(source=Name("OrDeRs"))

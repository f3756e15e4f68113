"""Statements of bi-directional snapshot replication, verbatim from the reference, and their errors."""

from __future__ import annotations

import pytest

from replication_admin.engine.statements import (
    AddSnapshotCr,
    CreateSnapshotPub,
    CreateSnapshotSub,
    DropSnapshotPub,
    DropSnapshotSub,
    InitSnapshot,
    Name,
    ServerNameOf,
    ServerNameStatement,
    SnpServer,
    StatementError,
    UpdateSnapshotPub,
    parse,
    parse_one,
)
from replication_admin.statements import shown_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPL_CREATE_SNAPSHOT_PUB ('Demo.Shippers', 2)", CreateSnapshotPub(item=Name("Shippers", "Demo"))),
        ("repl_drop_snapshot_pub('Shippers', 2)", DropSnapshotPub(item=Name("Shippers"))),
        ("REPL_SNP_SERVER ('localhost:1121', 'dba', 'dba')", SnpServer(dsn="localhost:1121", user="dba", password="dba")),
        ("REPL_SNP_SERVER ('lite')", SnpServer(dsn="lite")),
        ("SELECT REPL_SERVER_NAME ('localhost:1121')", ServerNameStatement(dsn="localhost:1121")),
        (
            "REPL_CREATE_SNAPSHOT_SUB (REPL_SERVER_NAME ('localhost:1121'), 'Demo.Shippers', 2)",
            CreateSnapshotSub(server=ServerNameOf("localhost:1121"), item=Name("Shippers", "Demo")),
        ),
        (
            "REPL_INIT_SNAPSHOT (REPL_SERVER_NAME ('localhost:1121'), 'Demo.Shippers', 2)",
            InitSnapshot(server=ServerNameOf("localhost:1121"), item=Name("Shippers", "Demo"), rows_per_commit=100),
        ),
        (
            "call REPL_INIT_SNAPSHOT ('my2', 'Demo.\"ab \"\"cd\"', 2, 5000)",
            InitSnapshot(server="my2", item=Name('ab "cd', "Demo"), rows_per_commit=5000),
        ),
        ("REPL_UPDATE_SNAPSHOT ('Demo.Shippers', 2)", UpdateSnapshotPub(item=Name("Shippers", "Demo"))),
        ("REPL_DROP_SNAPSHOT_SUB ('my2', 'Shippers', 2)", DropSnapshotSub(server="my2", item=Name("Shippers"))),
        (
            "REPL_ADD_SNAPSHOT_CR ('Demo.items', 'u', 'minprice', 10, 'MIN', 'price')",
            AddSnapshotCr(table=Name("items", "Demo"), cr_type="U", suffix="minprice", order=10, cls="min", column="price"),
        ),
        (
            "REPL_ADD_SNAPSHOT_CR ('items', 'I', 'c', 1, 'custom', NULL, 'CASE WHEN pub.price < new.price THEN 3 ELSE 1 END')",
            AddSnapshotCr(
                table=Name("items"), cr_type="I", suffix="c", order=1, cls="custom",
                expression="CASE WHEN pub.price < new.price THEN 3 ELSE 1 END",
            ),
        ),
    ],
)  # fmt: skip
def test_the_references_bidirectional_statements_parse(text, expected):
    assert parse_one(text) == expected


def test_the_reference_example_runs_as_one_script():
    script = (
        "REPL_SNP_SERVER ('localhost:1121', 'dba', 'dba');\n"
        "REPL_CREATE_SNAPSHOT_SUB (REPL_SERVER_NAME ('localhost:1121'), 'Demo.Shippers', 2);\n"
        "REPL_INIT_SNAPSHOT (REPL_SERVER_NAME ('localhost:1121'), 'Demo.Shippers', 2);\n"
        "REPL_UPDATE_SNAPSHOT ('Demo.Shippers', 2);"
    )
    assert [s.verb for s in parse(script)] == ["SnpServer", "CreateSnapshotSub", "InitSnapshot", "UpdateSnapshotPub"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("REPL_CREATE_SNAPSHOT_PUB ('Demo.Shippers', 1)", "WebDAV collections are not replicated"),
        ("REPL_CREATE_SNAPSHOT_PUB ('Demo.Shippers', 3)", "item type is 2"),
        ("REPL_CREATE_SNAPSHOT_PUB ('Demo.Shippers')", "takes 2 argument(s)"),
        ("REPL_INIT_SNAPSHOT ('my2', 'Shippers', 2, 0)", "rows_per_commit must be a whole number from 1"),
        ("REPL_INIT_SNAPSHOT ('my2', 'Shippers', 2, 'ten')", "rows_per_commit must be a whole number"),
        ("REPL_CREATE_SNAPSHOT_SUB (REPL_SERVER_NAME (), 'Shippers', 2)", "expected a string"),
        ("REPL_CREATE_SNAPSHOT_SUB (REPL_SERVER_NAME ('x'), 'a.b.c', 2)", "at most two parts"),
        ("REPL_ADD_SNAPSHOT_CR ('items', 'X', 's', 1, 'min', 'price')", "conflict type must be 'I', 'U' or 'D'"),
        ("REPL_UPDATE_SNAPSHOT ('Shippers', 2); drop table x", "this is plain SQL"),
        ("REPL_UPDATE_SNAPSHOT ('Shippers'' ; delete from t', 2)", "is not closed"),
    ],
)
def test_malformed_bidirectional_statements_are_refused_with_the_reason(text, message):
    with pytest.raises(StatementError) as info:
        parse(text)
    assert message in str(info.value)


def test_a_password_given_to_repl_snp_server_is_never_shown_or_recorded():
    statement = parse_one("REPL_SNP_SERVER ('localhost:1121', 'dba', 's3cr''et')")
    assert statement.password == "s3cr'et"
    assert "s3cr" not in shown_text(statement) and "********" in shown_text(statement)
    assert "s3cr" not in repr(statement)

"""The type matrix and the reference's own tables, for every ordered pair of live dialects, in snapshot,
bidir and transactional modes: every value arrives exactly, through the initial copy (Spark) and the
change path, and the reference's `name varchar` key works on every destination."""

from __future__ import annotations

import itertools

import pytest

from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.models import Server
from replication_admin.statements import execute
from tests.fidelity.typed_rows import BIG, HIGH, LOW, ROWS, create_typed, differences, expected, insert_typed, stored
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

DIALECTS = ["sqlite", "postgresql", "mysql"]
PAIRS = [(s, d) for s, d in itertools.product(DIALECTS, DIALECTS) if s != d]

# The reference's example table as written; MariaDB has no varchar without a length.
REFERENCE_TABLE = {
    "postgresql": 'CREATE TABLE "TEST" (id integer, name varchar, tm timestamp, content text, PRIMARY KEY (id, name))',
    "sqlite": 'CREATE TABLE "TEST" (id integer, name varchar, tm timestamp, content text, PRIMARY KEY (id, name))',
    "mysql": "CREATE TABLE `TEST` (id integer, name varchar(255), tm timestamp(6) NULL, content text, "
    "PRIMARY KEY (id, name))",
}


def run(text: str, context: Server | None = None) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def reference_rows(server: Server, ids: range) -> None:
    q = dialects.get(server.dialect).quote
    for i in ids:
        run_sql(
            server,
            f"INSERT INTO {q('TEST')} (id, name, tm, content) VALUES (?, ?, ?, ?)",
            [i, f"name {i} " + "表😀" * 100, "2024-02-29 12:00:00.000000", "x" * (i * 1000)],
        )


def reference_content(server: Server) -> list[tuple]:
    q = dialects.get(server.dialect).quote
    got = fetch_all(server, f"SELECT id, name, content FROM {q('TEST')} ORDER BY id, name")
    return [(int(i), n, c) for i, n, c in got]


def changed(row: tuple, new_id: int) -> tuple:
    return (new_id, *row[1:])


def change_rows(server: Server) -> None:
    """After the initial copy: the edge rows inserted again under new keys, one row updated to the other
    edge, one deleted, and reference rows added."""
    q = dialects.get(server.dialect).quote
    insert_typed(server, [changed(LOW, 12), changed(HIGH, 13)])
    run_sql(server, f"DELETE FROM {q('typed')} WHERE {q('id')} = 3")
    insert_typed(server, [HIGH])
    run_sql(server, f"DELETE FROM {q('typed')} WHERE {q('id')} = 1")
    reference_rows(server, range(4, 6))


FINAL = [LOW, HIGH, changed(LOW, 12), changed(HIGH, 13)]


def assert_arrived(source: Server, dest: Server, rows: list[tuple]) -> None:
    assert differences(expected(rows), stored(dest)) == []
    assert reference_content(dest) == reference_content(source)


def setup_source(source: Server) -> None:
    run_sql(source, REFERENCE_TABLE[source.dialect])
    reference_rows(source, range(1, 4))
    create_typed(source)
    insert_typed(source, ROWS)
    assert differences(expected(ROWS), stored(source)) == []


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), PAIRS)
def test_every_type_arrives_exactly_in_transactional_replication(
    make_server, jobs_sync, spark, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "tsrc"), make_server(dest_dialect, "tdst")
    setup_source(source)
    run(
        "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'TEST', 2, 0, null); REPL_PUB_ADD ('tbl', 'typed', 2, 0, null)",
        source,
    )
    run("REPL_SERVER ('tsrc', '1111'); REPL_SUBSCRIBE ('tsrc', 'tbl'); REPL_INIT_COPY ('tsrc', 'tbl')", dest)
    assert_arrived(source, dest, ROWS)
    change_rows(source)
    assert run("REPL_SYNC ('tsrc', 'tbl')", dest)[0].details["skipped"] == 0
    assert_arrived(source, dest, FINAL)


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), PAIRS)
def test_every_type_arrives_exactly_in_bidir_replication(make_server, jobs_sync, spark, source_dialect, dest_dialect):
    source, dest = make_server(source_dialect, "bsrc"), make_server(dest_dialect, "bdst")
    setup_source(source)
    for table in ("TEST", "typed"):
        run(
            f"REPL_CREATE_SNAPSHOT_PUB ('bsrc.{table}', 2); REPL_CREATE_SNAPSHOT_SUB ('bdst', 'bsrc.{table}', 2);"
            f"REPL_INIT_SNAPSHOT ('bdst', 'bsrc.{table}', 2)"
        )
    assert_arrived(source, dest, ROWS)
    change_rows(source)
    # The subscriber's own change travels back.
    insert_typed(dest, [changed(HIGH, 20)])
    for table in ("TEST", "typed"):
        run(f"REPL_UPDATE_SNAPSHOT ('bsrc.{table}', 2)")
    assert_arrived(source, dest, [*FINAL, changed(HIGH, 20)])
    assert differences(expected([*FINAL, changed(HIGH, 20)]), stored(source)) == []


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), list(itertools.product(DIALECTS, DIALECTS)))
def test_every_type_arrives_exactly_in_snapshot_replication(make_server, spark, source_dialect, dest_dialect):
    source, dest = make_server(source_dialect, "ssrc"), make_server(dest_dialect, "sdst")
    setup_source(source)
    insert_typed(source, [BIG])
    run("create snapshot log for TEST; create snapshot sdst.TEST from TEST", source)
    run("create snapshot log for typed; create snapshot sdst.typed from typed", source)
    assert_arrived(source, dest, [*ROWS, BIG])
    change_rows(source)
    insert_typed(source, [changed(BIG, 14)])
    run("update snapshot sdst.TEST; update snapshot sdst.typed")
    assert_arrived(source, dest, [*FINAL, BIG, changed(BIG, 14)])

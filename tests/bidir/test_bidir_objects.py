"""The ROWGUID column, the updateable snapshot log and its triggers, live on every dialect."""

from __future__ import annotations

import pyodbc
import pytest

from replication_admin.core import connections
from replication_admin.engine import bidir_sql as bidir
from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from tests.tables import create_table, execute, fetch_all, insert_rows

pytestmark = [pytest.mark.live_db]

DIALECTS = ("sqlite", "postgresql", "mysql")
COLUMNS = [("id", LogicalType("integer")), ("name", LogicalType("varchar", length=40))]


def prepare(server, publisher: bool, local: str):
    d = dialects.get(server.dialect)
    create_table(server, "items", COLUMNS, ["id"])
    insert_rows(server, "items", ["id", "name"], [(1, "one"), (2, "two")])
    table = connections.describe_table(server, "items")
    execute(server, bidir.add_rowguid_ddl(d, table))
    execute(server, bidir.fill_rowguid_sql(d, table, local))
    table = connections.describe_table(server, "items")
    for statement in bidir.bidir_objects(d, table, local, publisher).create:
        execute(server, statement)
    return d


def log_rows(server, d) -> dict:
    rows = fetch_all(
        server,
        f"SELECT {d.quote('RLOG_id')}, {d.quote('DMLTYPE')}, {d.quote('RLOG_ROWGUID')}, {d.quote('OLD_ROWGUID')} "
        f"FROM {d.quote('RLOG_items')}",
    )
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def guid_of(server, d, key: int) -> str:
    return fetch_all(server, f"SELECT {d.quote('ROWGUID')} FROM {d.quote('items')} WHERE id = ?", [key])[0][0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_existing_rows_get_a_rowguid_of_their_server_and_no_log_rows(make_server, dialect):
    server = make_server(dialect)
    d = prepare(server, publisher=True, local="pub")
    guids = [r[0] for r in fetch_all(server, f"SELECT {d.quote('ROWGUID')} FROM {d.quote('items')}")]
    assert len(guids) == 2 and all(g.startswith("pub@") and len(g) > 20 for g in guids)
    assert len(set(guids)) == 2
    assert log_rows(server, d) == {}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_subscriber_logs_local_changes_with_the_version_the_publisher_knows(make_server, dialect):
    server = make_server(dialect)
    d = prepare(server, publisher=False, local="sub")
    g1 = guid_of(server, d, 1)
    execute(server, f"UPDATE {d.quote('items')} SET name = 'uno' WHERE id = 1")
    first = guid_of(server, d, 1)
    assert first != g1 and first.startswith("sub@")
    execute(server, f"UPDATE {d.quote('items')} SET name = 'eins' WHERE id = 1")
    second = guid_of(server, d, 1)
    assert second not in {g1, first}
    execute(server, f"INSERT INTO {d.quote('items')} (id, name) VALUES (3, 'three')")
    execute(server, f"UPDATE {d.quote('items')} SET name = 'drei' WHERE id = 3")
    execute(server, f"DELETE FROM {d.quote('items')} WHERE id = 2")
    log = log_rows(server, d)
    # Two updates: one log row, the newest version, still based on the version the publisher has.
    assert log[1] == ("U", second, g1)
    # Insert then update: still an insert, of the newest version.
    assert log[3] == ("I", guid_of(server, d, 3), None)
    assert log[2][0] == "D" and log[2][1].startswith("sub@") and log[2][2] is not None


@pytest.mark.parametrize("dialect", DIALECTS)
def test_subscriber_does_not_log_what_replication_writes(make_server, dialect):
    server = make_server(dialect)
    d = prepare(server, publisher=False, local="sub")
    q = d.quote
    execute(server, f"INSERT INTO {q('items')} (id, name, {q('ROWGUID')}) VALUES (5, 'five', 'pub@x1')")
    execute(server, f"UPDATE {q('items')} SET name = 'fünf', {q('ROWGUID')} = 'pub@x2' WHERE id = 5")
    execute(server, f"UPDATE {q('items')} SET {q('ROWGUID')} = 'del:pub@x3' WHERE id = 1")
    execute(server, f"DELETE FROM {q('items')} WHERE id = 1")
    assert log_rows(server, d) == {}
    assert guid_of(server, d, 5) == "pub@x2"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_publisher_logs_every_change_with_its_origin(make_server, dialect):
    server = make_server(dialect)
    d = prepare(server, publisher=True, local="pub")
    q = d.quote
    execute(server, f"INSERT INTO {q('items')} (id, name, {q('ROWGUID')}) VALUES (5, 'five', 'sub@x1')")
    execute(server, f"UPDATE {q('items')} SET {q('ROWGUID')} = 'del:sub@x3' WHERE id = 1")
    execute(server, f"DELETE FROM {q('items')} WHERE id = 1")
    execute(server, f"UPDATE {q('items')} SET name = 'zwei' WHERE id = 2")
    log = log_rows(server, d)
    assert log[5] == ("I", "sub@x1", None)
    assert log[1][:2] == ("D", "sub@x3")
    assert log[2][0] == "U" and log[2][1].startswith("pub@") and log[2][1] == guid_of(server, d, 2)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_primary_key_updates_are_refused(make_server, dialect):
    server = make_server(dialect)
    d = prepare(server, publisher=True, local="pub")
    with pytest.raises(pyodbc.Error, match="cannot be updated"):
        execute(server, f"UPDATE {d.quote('items')} SET id = 9 WHERE id = 1")
    assert fetch_all(server, f"SELECT id FROM {d.quote('items')} ORDER BY id") == [(1,), (2,)]

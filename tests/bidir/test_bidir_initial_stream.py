"""A bi-directional initial copy between PostgreSQL and MariaDB streams natively (core.native_copy): every row
staged once with its own row number across the key ranges, and a stream that fails leaves the subscriber's
copy as it was, to be copied again."""

from __future__ import annotations

import pytest

from replication_admin.core import native_copy
from replication_admin.core.audit import Actor
from replication_admin.models import SnapshotSubscription
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import COLUMNS, assert_same_rows, rows
from tests.tables import create_table, fetch_all
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

ROWS = 120_000  # enough for the copy to run in several key ranges


def run(text: str) -> list:
    outcomes = execute(Actor.command(), text, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def fill(server, first: int, last: int, name: str) -> None:
    if server.dialect == "postgresql":
        select = f"SELECT g, '{name} ' || g, g / 100.0 FROM generate_series({first}, {last}) g"
    else:
        select = f"SELECT seq, CONCAT('{name} ', seq), seq / 100.0 FROM seq_{first}_to_{last}"
    run_sql(server, f"INSERT INTO items (id, name, price) {select}")


def published(make_server, pub_dialect: str, sub_dialect: str):
    pub, sub = make_server(pub_dialect, "spub"), make_server(sub_dialect, "ssub")
    create_table(pub, "items", COLUMNS, ["id"])
    fill(pub, 1, ROWS, "item")
    run("REPL_CREATE_SNAPSHOT_PUB ('spub.items', 2); REPL_CREATE_SNAPSHOT_SUB ('ssub', 'spub.items', 2)")
    return pub, sub


@pytest.mark.parametrize(("pub_dialect", "sub_dialect"), [("postgresql", "mysql"), ("mysql", "postgresql")])
def test_an_initial_copy_streams_in_key_ranges_and_stages_every_row_once(
    make_server, jobs_sync, spark, pub_dialect, sub_dialect
):
    pub, sub = published(make_server, pub_dialect, sub_dialect)
    details = run("REPL_INIT_SNAPSHOT ('ssub', 'spub.items', 2, 50000)")[-1].details
    assert details["path"] == "stream" and details["rows"] == ROWS and details["inserted"] == ROWS
    assert fetch_all(sub, "SELECT COUNT(*) FROM items") == [(ROWS,)]
    assert_same_rows(pub, sub)
    assert SnapshotSubscription.objects.get(server="ssub").init_state == "done"


def test_an_initial_copy_whose_stream_fails_leaves_the_copy_as_it_was_and_copies_again(
    make_server, jobs_sync, spark, monkeypatch
):
    pub, sub = published(make_server, "postgresql", "mysql")
    run("REPL_INIT_SNAPSHOT ('ssub', 'spub.items', 2, 50000)")
    before = rows(sub)
    run_sql(pub, "UPDATE items SET name = 'changed' WHERE id % 1000 = 0")
    fill(pub, ROWS + 1, ROWS + 500, "new")
    chunks = native_copy._Export.chunks

    def cut(self):  # the first key range's stream breaks after its first chunk
        for chunk in chunks(self):
            yield chunk
            if "IS NULL" in self.statement:
                raise ConnectionResetError("the publisher went away")

    monkeypatch.setattr(native_copy._Export, "chunks", cut)
    outcome = execute(Actor.command(), "REPL_INIT_SNAPSHOT ('ssub', 'spub.items', 2, 50000)", wait=True)[-1]
    assert not outcome.ok and "the publisher went away" in outcome.message
    assert rows(sub) == before
    assert SnapshotSubscription.objects.get(server="ssub").init_state != "done"

    monkeypatch.setattr(native_copy._Export, "chunks", chunks)
    details = run("REPL_INIT_SNAPSHOT ('ssub', 'spub.items', 2, 50000)")[-1].details
    assert details["rows"] == ROWS + 500 and not details["resumed"]
    assert_same_rows(pub, sub)

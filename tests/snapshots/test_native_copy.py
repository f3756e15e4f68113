"""Full copies as native streams (core.native_copy): the same rows as Spark's path, the rule that picks the
path, and a stream that fails leaving the destination as it was."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from replication_admin.core import native_copy
from replication_admin.core.audit import Actor
from replication_admin.core.introspection import find_table
from replication_admin.engine import dialects
from replication_admin.engine.refresh_sql import staging_name
from replication_admin.engine.types import LogicalType
from replication_admin.models import JobRun, Server, Snapshot
from replication_admin.statements import execute
from tests.fidelity.typed_rows import (
    BIG,
    HIGH,
    ROWS,
    TYPED_COLUMNS,
    create_typed,
    differences,
    expected,
    insert_typed,
    stored,
)
from tests.tables import create_table, fetch_all, insert_rows
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

LIVE = ("postgresql", "mysql")
# Characters CSV and both loaders treat specially, and the NULL token as a value.
AWKWARD = (5, *HIGH[1:8], "NULL", 'a,b\r\n"c"\\N \\x00', *HIGH[10:])
HOSTILE_TABLE = 'ab "cd'
HOSTILE_COLUMNS = [('ab "cd', LogicalType("integer")), ("x,y", LogicalType("varchar", length=20)),
                   ("Größe 表", LogicalType("long_varchar"))]  # fmt: skip


def run(text: str, context: Server | None = None) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def content(server: Server, table: str, columns: list[tuple[str, LogicalType]]) -> tuple[int, str]:
    """(count, hash) of a table's rows as the database stores them, in key order (times read as text)."""
    d = dialects.get(server.dialect)
    cast = "text" if server.dialect == "postgresql" else "char"
    items = [f"CAST({d.quote(n)} AS {cast})" if t.kind == "time" else d.quote(n) for n, t in columns]
    rows = fetch_all(server, f"SELECT {', '.join(items)} FROM {d.quote(table)} ORDER BY {d.quote(columns[0][0])}")
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(tuple(row)).encode())
    return len(rows), digest.hexdigest()


def noted_table(server: Server, table: str, rows: int) -> list[tuple[str, LogicalType]]:
    """A table (id, note) of `rows` rows 'first <id>'; its columns."""
    columns = [("id", LogicalType("integer")), ("note", LogicalType("varchar", length=30))]
    create_table(server, table, columns, ["id"])
    insert_rows(server, table, ["id", "note"], [(i, f"first {i}") for i in range(1, rows + 1)])
    return columns


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), list(itertools.product(LIVE, LIVE)))
def test_a_streamed_full_copy_gives_exactly_the_rows_of_sparks_path(
    make_server, spark, settings, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "nsrc"), make_server(dest_dialect, "ndst")
    create_typed(source)
    insert_typed(source, [*ROWS, BIG, AWKWARD])
    create_table(source, HOSTILE_TABLE, HOSTILE_COLUMNS, [HOSTILE_COLUMNS[0][0]])
    hostile_rows = [(i, f'v"{i}",\n', "表😀" * i if i % 3 else ("" if i % 2 else None)) for i in range(1, 40)]
    insert_rows(source, HOSTILE_TABLE, [n for n, _ in HOSTILE_COLUMNS], hostile_rows)

    settings.FULL_COPY_PATH = native_copy.SPARK
    run(f"create snapshot ndst.typed from typed; create snapshot ndst.{quoted(HOSTILE_TABLE)} from "
        f"{quoted(HOSTILE_TABLE)}", source)  # fmt: skip
    by_spark = content(dest, "typed", TYPED_COLUMNS), content(dest, HOSTILE_TABLE, HOSTILE_COLUMNS)
    assert differences(expected([*ROWS, BIG, AWKWARD]), stored(dest)) == []

    settings.FULL_COPY_PATH = native_copy.STREAM
    hostile = Snapshot.objects.get(dest_server=dest, dest_table=HOSTILE_TABLE).name
    outcomes = run(f"update snapshot ndst.typed; update snapshot {hostile}")
    assert [o.details["path"] for o in outcomes] == ["stream", "stream"]
    by_stream = content(dest, "typed", TYPED_COLUMNS), content(dest, HOSTILE_TABLE, HOSTILE_COLUMNS)
    assert by_stream == by_spark
    assert by_stream[0][0] == 5 and by_stream[1][0] == 39
    assert differences(expected([*ROWS, BIG, AWKWARD]), stored(dest)) == []


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "postgresql")])
def test_an_incremental_snapshots_first_refresh_streams_and_starts_no_spark(
    make_server, settings, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "isrc"), make_server(dest_dialect, "idst")
    columns = noted_table(source, "items", 3000)
    settings.FULL_COPY_PATH = native_copy.AUTO
    run("create snapshot log for items", source)
    run_sql(source, "UPDATE items SET note = 'logged' WHERE id <= 40")  # log rows the first copy reflects

    run("create snapshot idst.items from items", source)
    first = JobRun.objects.filter(kind="snapshot_refresh").latest("id")
    assert first.result["mode"] == "full" and first.result["path"] == "stream" and first.result["last_ts"]
    assert "spark_session" not in first.timings, first.timings
    assert content(dest, "items", columns) == content(source, "items", columns)

    # The log rows the copy reflected were listed as replayed: the next refresh has nothing to apply.
    again = run("update snapshot idst.items")[0].details
    assert again["mode"] == "incremental" and again["changes"] == 0
    run_sql(source, "UPDATE items SET note = 'later' WHERE id > 2990")
    later = run("update snapshot idst.items")[0].details
    assert later["mode"] == "incremental" and later["changes"] == 10
    assert content(dest, "items", columns) == content(source, "items", columns)


def _server(dialect: str, dsn: str = "") -> Server:
    return Server(name=f"s_{dialect}", dialect=dialect, odbc_dsn=dsn)


def _columns(*pairs: tuple[str, str]) -> tuple[native_copy.StreamColumn, ...]:
    return tuple(
        native_copy.StreamColumn(f"v{i}", f"c{i}", LogicalType(a), LogicalType(b)) for i, (a, b) in enumerate(pairs)
    )


def test_the_path_chooser_streams_between_live_servers_and_leaves_the_rest_to_spark(settings):
    settings.FULL_COPY_PATH = native_copy.AUTO
    plain = _columns(("integer", "bigint"), ("timestamptz", "timestamp"), ("real", "double"), ("json", "json"))
    for a, b in itertools.product(LIVE, LIVE):
        assert native_copy.copy_path(_server(a), _server(b), plain) == native_copy.STREAM
    for a, b in [("sqlite", "postgresql"), ("postgresql", "sqlite"), ("mysql", "sqlite"), ("sqlite", "sqlite")]:
        assert native_copy.copy_path(_server(a), _server(b), plain) == native_copy.SPARK
    # A value Spark converts to another family, a type moved as its text, a server only ODBC reaches.
    assert native_copy.copy_path(_server("mysql"), _server("postgresql"), _columns(("integer", "boolean"))) == "spark"
    assert (
        native_copy.copy_path(_server("postgresql"), _server("mysql"), _columns(("other", "long_varchar"))) == "spark"
    )
    assert native_copy.copy_path(_server("postgresql", dsn="pgdsn"), _server("mysql"), plain) == native_copy.SPARK

    settings.FULL_COPY_PATH = native_copy.SPARK
    assert native_copy.copy_path(_server("postgresql"), _server("postgresql"), plain) == native_copy.SPARK
    settings.FULL_COPY_PATH = native_copy.STREAM
    with pytest.raises(native_copy.StreamCopyError, match="SQLite has no native export"):
        native_copy.copy_path(_server("sqlite"), _server("postgresql"), plain)


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "postgresql")])
def test_a_stream_failing_midway_leaves_the_destination_as_it_was(
    make_server, spark, settings, monkeypatch, source_dialect, dest_dialect
):
    source, dest = make_server(source_dialect, "fsrc"), make_server(dest_dialect, "fdst")
    columns = noted_table(source, "big", 120_000)
    settings.FULL_COPY_PATH = native_copy.STREAM
    run("create snapshot fdst.big from big", source)
    before = content(dest, "big", columns)
    assert before[0] == 120_000

    insert_rows(source, "big", ["id", "note"], [(i, f"second {i}") for i in range(120_001, 120_101)])
    chunks = native_copy._Export.chunks
    seen: list[str] = []

    def cut(self):  # the last key range's stream breaks after its first chunk; the others complete
        for n, chunk in enumerate(chunks(self)):
            yield chunk
            if n == 0 and ">= " in self.statement and "<" not in self.statement.split(">= ")[-1]:
                seen.append(self.statement)
                raise ConnectionResetError("the source went away")

    monkeypatch.setattr(native_copy._Export, "chunks", cut)
    outcomes = execute(Actor.command(), "update snapshot fdst.big", wait=True)
    assert not outcomes[0].ok and "the source went away" in outcomes[0].message
    assert seen, "the copy ran in key ranges"
    assert content(dest, "big", columns) == before
    assert find_table(dest, staging_name(dialects.get(dest.dialect), "big", "RSTG")) is None

"""A dialect is its Dialect class and one registry entry: a throwaway dialect defined here (SQLite under another
name, with trigger names of its own), registered with one call, serves a server and a real snapshot, created and
refreshed on Spark and by the control plane, without any other module knowing its name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.engine.dialects.sqlite import SQLite
from replication_admin.models import Server, dialect_choices
from replication_admin.servers.actions import ServerData, do_register_server
from tests.snapshots.test_snapshot_refresh import COLUMNS, NAMES, Workload, compare, run
from tests.tables import create_table, fetch_all

pytestmark = [pytest.mark.spark]

VARIANT = "sqlite_variant"


class SQLiteVariant(SQLite):
    """SQLite under another name: a dialect nobody outside this file has heard of."""

    name = VARIANT
    label = "SQLite (variant)"
    snapshot_trigger_suffixes = ("_vI", "_vU", "_vD")


@pytest.fixture
def variant(db) -> Iterator[str]:
    dialects.register(SQLiteVariant())
    try:
        yield VARIANT
    finally:
        dialects.unregister(VARIANT)


def register(name: str, path: str) -> Server:
    return do_register_server(Actor.command(), ServerData(name=name, dialect=VARIANT, database=path))


def rows(server: Server, table: str) -> list[tuple]:
    d = dialects.get(server.dialect)
    columns = ", ".join(d.quote(c) for c in NAMES)
    return fetch_all(server, f"SELECT {columns} FROM {d.qualify(table)} ORDER BY {d.quote('id')}")


def test_a_dialect_registered_with_one_call_is_offered_for_servers_and_gone_when_taken_out(variant):
    assert (VARIANT, "SQLite (variant)") in dialect_choices()
    assert VARIANT in dialects.live_names()
    dialects.unregister(VARIANT)
    assert VARIANT not in dict(dialect_choices())
    dialects.register(SQLiteVariant())


@pytest.mark.parametrize("small_window", [0, 20000], ids=["spark", "control plane"])
def test_a_snapshot_between_servers_of_a_new_dialect_matches_its_source_by_content(
    variant, sqlite_path, spark, settings, small_window
):
    settings.REFRESH_SMALL_WINDOW = small_window
    source = register("var_src", sqlite_path("var_src"))
    dest = register("var_dst", sqlite_path("var_dst"))
    assert connections.test_connection(source).ok
    assert connections.server_label(source) == f"var_src ({source.database})"
    create_table(source, "items", COLUMNS, ["id"])
    work = Workload(source, "items", seed=7)
    work.insert(60)

    run("create snapshot log for items", source)
    triggers = fetch_all(source, "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
    assert triggers == [("items_vD",), ("items_vI",), ("items_vU",)]
    run("create snapshot var_dst.items_copy from var_src.items", source)
    assert rows(dest, "items_copy") == rows(source, "items")
    assert compare("var_dst.items_copy")["equal"]

    ops = {work.step() for _ in range(40)}
    assert {"insert", "update", "delete"} <= ops
    refreshed = run("update snapshot var_dst.items_copy")[0].details
    assert refreshed["mode"] == "incremental" and refreshed["changes"] > 0
    assert refreshed["path"] == ("spark" if small_window == 0 else "control plane")
    assert rows(dest, "items_copy") == rows(source, "items")
    result = compare("var_dst.items_copy")
    assert result["equal"] and result["left_count"] == len(work.ids), result

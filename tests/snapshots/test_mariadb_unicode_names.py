"""MariaDB and 4-byte UTF-8: text of any plane replicates (utf8mb4 connections and tables); names, which
MariaDB keeps in utf8mb3, are refused in one clear line when they hold characters it cannot store, instead
of a collation error from its catalog."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils.html import escape

from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from replication_admin.models import Snapshot, SnapshotLog
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.live_db, pytest.mark.django_db]

VALUES = ["😀 smile", "𠀀 ext-B", "表 plain", "a ''quoted'' \"x\""]


def rows(server, table: str) -> list:
    return sorted(fetch_all(server, f"SELECT * FROM {dialects.get(server.dialect).quote(table)}"))


def replsql(text: str, server: str) -> str:
    out = io.StringIO()
    call_command("replsql", text, "--server", server, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(("table", "column"), [('ab "cd', 'x "y'), ("表", "列")])
def test_snapshot_log_snapshot_and_compare_of_quoted_names_and_four_byte_text(
    make_server, spark, editor_client, table, column
):
    source = make_server("mysql", "my_src")
    dest = make_server("mysql", "my_dst")
    create_table(source, table, [("id", LogicalType("integer")), (column, LogicalType("varchar", length=20))], ["id"])
    insert_rows(source, table, ["id", column], list(enumerate(VALUES, start=1)))
    quoted = '"' + table.replace('"', '""') + '"'
    replsql(f"create snapshot log for {quoted}; create snapshot my_dst.{quoted} from {quoted}", "my_src")
    assert SnapshotLog.objects.get().table == table
    snapshot = Snapshot.objects.get()
    assert rows(dest, table) == list(enumerate(VALUES, start=1))
    insert_rows(source, table, ["id", column], [(9, "🦄 new")])
    replsql(f"update snapshot {snapshot.name}", "my_src")
    assert (9, "🦄 new") in rows(dest, table)
    out = io.StringIO()
    call_command("compare", "my_src", table, "my_dst", table, stdout=out)
    assert json.loads(out.getvalue())["equal"] is True
    page = editor_client.get(reverse("snapshots-detail", args=[snapshot.name]))
    assert page.status_code == 200 and escape(table) in page.content.decode()


def test_a_missing_table_with_a_four_byte_name_is_one_clear_line(make_server, editor_client):
    server = make_server("mysql", "my_src")
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("replsql", 'create snapshot log for "表😀"', "--server", "my_src", stdout=out)
    line = next(ln for ln in out.getvalue().splitlines() if "表😀" in ln)
    assert "table '表😀' does not exist on server 'my_src'" in line
    assert "outside the Basic Multilingual Plane" in line and "collation" not in out.getvalue().lower()
    response = editor_client.post(
        reverse("statements"), {"server": server.name, "text": 'create snapshot log for "表😀"'}
    )
    assert response.status_code == 200
    assert "does not exist on server" in response.content.decode()
    assert not SnapshotLog.objects.exists()


def test_a_four_byte_name_cannot_be_created_on_mariadb(make_server, spark):
    make_server("postgresql", "pg_src")
    make_server("mysql", "my_dst")
    source = make_server("postgresql", "pg_src2")
    create_table(source, "表😀", [("id", LogicalType("integer")), ("列😀", LogicalType("varchar", length=20))], ["id"])
    insert_rows(source, "表😀", ["id", "列😀"], [(1, "😀")])
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("replsql", 'create snapshot my_dst."表😀" from "表😀"', "--server", "pg_src2", stdout=out)
    assert "outside the Basic Multilingual Plane" in out.getvalue(), out.getvalue()
    assert not Snapshot.objects.exists()

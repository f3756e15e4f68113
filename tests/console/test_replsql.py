"""manage.py replsql: statements from an argument, a file or stdin, printed as a table."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, SnapshotLog
from tests.tables import create_table

pytestmark = [pytest.mark.django_db, pytest.mark.live_db]


@pytest.fixture
def shop(make_server):
    server = make_server("sqlite", "shop")
    for table in ("Orders", "Customers"):
        create_table(server, table, [("id", LogicalType("integer"))], ["id"])
    return server


def test_statements_given_as_arguments_run_against_the_context_server(shop):
    out = io.StringIO()
    call_command("replsql", "create snapshot log for Orders", "--server", "shop", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["statement", "result", "message", "job"]
    assert "create snapshot log for Orders" in lines[2] and " ok " in lines[2] and "shop.RLOG_Orders" in lines[2]
    assert SnapshotLog.objects.get().source == "shop.Orders"
    assert AuditEntry.objects.get(action="snapshot_log.create").via == "command"


def test_statements_come_from_a_file_or_stdin(shop, tmp_path, monkeypatch):
    script = tmp_path / "logs.sql"
    script.write_text("-- both tables\ncreate snapshot log for Orders;\nrepl_create_snapshot_log('shop.Customers');\n")
    call_command("replsql", "-f", str(script), "--server", "shop", stdout=io.StringIO())
    assert SnapshotLog.objects.count() == 2
    monkeypatch.setattr("sys.stdin", io.StringIO("drop snapshot log for shop.Orders"))
    call_command("replsql", stdout=io.StringIO())
    assert list(SnapshotLog.objects.values_list("table", flat=True)) == ["Customers"]


def test_a_malformed_script_runs_nothing_and_shows_where_it_is_wrong(shop):
    with pytest.raises(CommandError) as info:
        call_command("replsql", "create snapshot log for Orders; create snapshot log Customers", "--server", "shop")
    assert "line 1, column 53: expected FOR" in str(info.value) and "^" in str(info.value)
    assert not SnapshotLog.objects.exists()


def test_a_failing_statement_stops_the_script_and_the_command_fails(shop):
    out = io.StringIO()
    with pytest.raises(CommandError, match="a statement failed"):
        call_command(
            "replsql", "create snapshot log for Nowhere; create snapshot log for Orders", "--server", "shop", stdout=out
        )
    assert "'Nowhere' does not exist on server 'shop'" in out.getvalue()
    assert not SnapshotLog.objects.exists()
    # The failure is said once, in its row; the command's own error points at it.
    with pytest.raises(CommandError) as info:
        call_command("replsql", "create snapshot log for Nowhere", "--server", "shop", stdout=io.StringIO())
    assert "does not exist" not in str(info.value) and "number 1" in str(info.value)


def test_an_unknown_context_server_is_refused(shop):
    with pytest.raises(CommandError, match="server 'nope' is not registered"):
        call_command("replsql", "update snapshot x", "--server", "nope")

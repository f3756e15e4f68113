"""manage.py replsql: statements from an argument, a file or stdin, printed as a table."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import socket
import threading

import pytest
from django.core.management import CommandError, call_command

from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, SnapshotLog
from tests.conftest import unavailable
from tests.dev_env import free_ports
from tests.spark_service import wait_for_spark
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


def test_an_unknown_context_server_is_refused(shop):
    with pytest.raises(CommandError, match="server 'nope' is not registered"):
        call_command("replsql", "update snapshot x", "--server", "nope")


# --- the running Spark service ------------------------------------------------------------------------------


def run_replsql_without_a_remote(settings, host: str, port: int) -> str:
    settings.SPARK_REMOTE, settings.SPARK_CONNECT_HOST, settings.SPARK_CONNECT_PORT = "", host, port
    err = io.StringIO()
    call_command("replsql", "repl_this_server ()", stdout=io.StringIO(), stderr=err)
    assert settings.SPARK_REMOTE == ""  # for that command only
    return err.getvalue()


def test_replsql_uses_the_spark_service_that_answers_at_the_configured_address(db, settings):
    remote = os.environ.get("REPLADMIN_SPARK_REMOTE", "")
    if not remote.startswith("sc://"):
        unavailable("a Spark service for the suite (REPLADMIN_TEST_SPARK=cluster or service)")
    wait_for_spark()
    host, _, port = remote.removeprefix("sc://").partition(":")
    said = run_replsql_without_a_remote(settings, host, int(port.split("/")[0]))
    assert f"Spark: the service at sc://{host}:{port.split('/')[0]}" in said


def test_replsql_says_so_when_what_listens_there_is_not_a_spark_service(db, settings):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def refuse() -> None:  # accepts and hangs up at once, as a service that is not Spark's might
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                conn.close()

    threading.Thread(target=refuse, daemon=True).start()
    try:
        said = run_replsql_without_a_remote(settings, "127.0.0.1", listener.getsockname()[1])
    finally:
        listener.close()
    assert "Spark: no service answers at sc://127.0.0.1:" in said and "embedded session" in said


def test_replsql_with_nothing_listening_says_nothing_of_spark(db, settings):
    port = free_ports(1)
    assert run_replsql_without_a_remote(settings, "127.0.0.1", port) == ""


def test_replsql_prints_no_job_queue_chatter(shop, capfd):
    queue_log = logging.getLogger("django-q")
    queue_log.setLevel(logging.INFO)
    call_command("replsql", "repl_this_server ()", "--server", "shop")
    queue_log.info("Enqueued [replication_admin] 7")  # what django-q2 says of each job a statement queues
    out, err = capfd.readouterr()
    assert "repl_this_server ()" in out and "Enqueued" not in out + err

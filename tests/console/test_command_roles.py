"""manage.py replsql --user: statements run with a console user's role and are audited under its name; without
--user they run as the shell (every permission), as before."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun, Snapshot, SnapshotLog
from tests.console.test_roles import roles  # noqa: F401 (the fixture)
from tests.tables import create_table

pytestmark = [pytest.mark.django_db, pytest.mark.live_db]


@pytest.fixture
def shop(make_server, roles):  # noqa: F811
    """Server shop with tables Orders and Customers, the snapshot branch.orders_copy of Orders, and one user per
    role: vera (viewer), olga (operator), eddie (editor)."""
    server = make_server("sqlite", "shop")
    branch = make_server("sqlite", "branch")
    for table in ("Orders", "Customers"):
        create_table(server, table, [("id", LogicalType("integer"))], ["id"])
    create_table(branch, "orders_copy", [("id", LogicalType("integer"))], ["id"])
    Snapshot.objects.create(
        name="branch.orders_copy", query="SELECT id FROM Orders", is_incremental=None, source_server=server,
        source_table="Orders", dest_server=branch, dest_table="orders_copy",
    )  # fmt: skip
    for username, role in (("vera", "viewer"), ("olga", "operator"), ("eddie", "editor")):
        User.objects.create_user(username)
        call_command("grant_role", username, role, stdout=io.StringIO())
    return server


def replsql(*args: str) -> str:
    out = io.StringIO()
    call_command("replsql", *args, stdout=out)
    return out.getvalue()


def test_a_viewer_is_refused_with_the_missing_permission_audited_and_nothing_is_run(shop):
    with pytest.raises(CommandError) as info:
        replsql("create snapshot log for Orders", "--server", "shop", "--user", "vera")
    assert str(info.value) == (
        "vera may not run statements: the permission replication_admin.operate is missing "
        "(give it the operator or editor role)"
    )
    assert not SnapshotLog.objects.exists()
    denied = AuditEntry.objects.get(outcome="denied")
    assert (denied.username, denied.user.username, denied.via, denied.action) == (
        "vera",
        "vera",
        "command",
        "statement",
    )
    assert denied.detail == {"missing_permission": "replication_admin.operate"}
    assert not AuditEntry.objects.filter(username="vera").exclude(outcome="denied").exists()


def test_a_refused_viewer_makes_the_command_exit_with_a_non_zero_status(shop):
    with pytest.raises(CommandError) as info:
        replsql("update snapshot branch.orders_copy", "--user", "vera")
    assert info.value.returncode == 1  # what manage.py exits with
    assert not JobRun.objects.exists()


def test_an_operator_may_refresh_a_snapshot_and_the_job_and_audit_name_the_operator(shop):
    output = replsql("update snapshot branch.orders_copy", "--queue", "--user", "olga")
    job = JobRun.objects.get(kind="snapshot_refresh")
    assert f"refresh queued as job #{job.pk}" in output
    assert job.created_by.username == "olga"
    entry = AuditEntry.objects.get(action="job.snapshot_refresh")
    assert (entry.username, entry.via, entry.outcome) == ("olga", "command", "ok")


def test_an_operator_may_not_create_or_drop_and_each_refusal_names_the_edit_permission(shop):
    with pytest.raises(CommandError, match=r"needs replication_admin\.edit"):
        replsql("create snapshot log for Orders", "--server", "shop", "--user", "olga")
    with pytest.raises(CommandError, match=r"needs replication_admin\.edit"):
        replsql("drop snapshot branch.orders_copy", "--user", "olga")
    assert not SnapshotLog.objects.exists() and Snapshot.objects.filter(name="branch.orders_copy").exists()
    denied = AuditEntry.objects.filter(outcome="denied").order_by("id")
    assert [(e.username, e.via, e.action, e.detail["missing_permission"]) for e in denied] == [
        ("olga", "command", "snapshot_log.create", "replication_admin.edit"),
        ("olga", "command", "snapshot.drop", "replication_admin.edit"),
    ]


def test_an_editor_may_create_and_the_audit_log_names_the_editor(shop):
    output = replsql("create snapshot log for Orders", "--server", "shop", "--user", "eddie")
    assert " ok " in output.splitlines()[2]
    assert SnapshotLog.objects.get().source == "shop.Orders"
    entry = AuditEntry.objects.get(action="snapshot_log.create")
    assert (entry.username, entry.user.username, entry.via, entry.outcome) == ("eddie", "eddie", "command", "ok")


def test_without_user_the_command_runs_as_the_shell_with_every_permission(shop):
    replsql("create snapshot log for Orders", "--server", "shop")
    entry = AuditEntry.objects.get(action="snapshot_log.create")
    assert entry.user is None and entry.via == "command" and entry.username.startswith("command")
    assert SnapshotLog.objects.exists()


def test_an_unknown_or_inactive_user_is_refused_before_anything_runs(shop):
    with pytest.raises(CommandError, match="no active user named 'nobody'"):
        replsql("create snapshot log for Orders", "--server", "shop", "--user", "nobody")
    User.objects.filter(username="eddie").update(is_active=False)
    with pytest.raises(CommandError, match="no active user named 'eddie'"):
        replsql("create snapshot log for Orders", "--server", "shop", "--user", "eddie")
    assert not SnapshotLog.objects.exists()

"""Views: login everywhere, permissions, CSRF on htmx posts, the audit log, live job pages."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    Server,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.servers.actions import do_register_server
from tests.conftest import server_data
from tests.tables import create_table, insert_rows
from tests.users import make_user

pytestmark = pytest.mark.django_db

PAGES = [
    ("dashboard", []),
    ("servers", []),
    ("servers-add", []),
    ("servers-detail", ["demo"]),
    ("servers-edit", ["demo"]),
    ("servers-delete", ["demo"]),
    ("servers-tables", ["demo"]),
    ("servers-table", ["demo", 'ab "cd']),
    ("snapshots", []),
    ("publications", []),
    ("subscriptions", []),
    ("conflicts", []),
    ("scheduler", []),
    ("jobs", []),
    ("jobs-compare", []),
    ("jobs-compare-tables", []),
    ("jobs-detail", [1]),
    ("audit", []),
    ("alerts", []),
    ("snapshots-new", []),
    ("snapshots-logs", ["demo"]),
    ("statements", []),
    ("publications-new", []),
    ("publications-detail", [1]),
    ("publications-drop", [1]),
    ("publications-resolvers", [1]),
    ("publications-resolver-edit", [1]),
    ("publications-resolver-remove", [1]),
    ("subscriptions-drop", [1]),
    ("conflicts-export", []),
    ("conflicts-detail", [1]),
    ("conflicts-reapply", [1]),
]
POSTS = [
    ("servers-test", []),
    ("servers-check", ["demo"]),
    ("jobs-cancel", [1]),
    ("snapshots-refresh", ["demo.t"]),
    ("snapshots-compare", ["demo.t"]),
    ("snapshots-repair", ["demo.t"]),
    ("snapshots-schedule", ["demo.t"]),
    ("snapshots-drop", ["demo.t"]),
    ("snapshots-log-action", ["demo", "create"]),
    ("publications-sync", [1]),
    ("publications-schedule", [1]),
    ("publications-subscribe", [1]),
    ("publications-resolvers-add", [1]),
    ("publications-dry-run", [1]),
    ("publications-resolver-move", [1]),
    ("subscriptions-init", [1]),
]
# Every URL of the bi-directional pages and the conflict inbox that changes something when posted to, with the
# action its refusal is audited as. Editors hold both console permissions (edit and operate); viewers neither.
CHANGES = [
    ("publications-new", [], "bidir.publish"),
    ("publications-drop", [1], "bidir.unpublish"),
    ("publications-sync", [1], "job.bidir_sync"),
    ("publications-schedule", [1], "bidir.schedule"),
    ("publications-subscribe", [1], "bidir.subscribe"),
    ("publications-resolvers-add", [1], "resolver.add"),
    ("publications-dry-run", [1], "job.resolver_dry_run"),
    ("publications-resolver-edit", [1], "resolver.update"),
    ("publications-resolver-move", [1], "resolver.move"),
    ("publications-resolver-remove", [1], "resolver.remove"),
    ("subscriptions-init", [1], "job.bidir_init"),
    ("subscriptions-drop", [1], "bidir.unsubscribe"),
    ("conflicts-reapply", [1], "conflict.reapply"),
]


@pytest.fixture
def sqlite_server(sqlite_path) -> Server:
    return do_register_server(Actor.command(), server_data("sqlite", "demo", sqlite_path("demo")))


@pytest.fixture
def bidir_catalog(sqlite_server, sqlite_path) -> SnapshotPublication:
    """Catalog rows with pk 1 for the bi-directional pages: demo.t (with its ROWGUID column) published, branch
    subscribed, an update resolver and a recorded conflict."""
    do_register_server(Actor.command(), server_data("sqlite", "branch", sqlite_path("branch")))
    columns = [("id", LogicalType("integer")), ("v", LogicalType("varchar", length=5))]
    create_table(sqlite_server, "t", [*columns, ("ROWGUID", LogicalType("varchar", length=80))], ["id"])
    publication = SnapshotPublication.objects.create(pk=1, item="demo.t", server=sqlite_server, table="t")
    SnapshotSubscription.objects.create(pk=1, server="branch", item="demo.t", init_state="done")
    SnapshotConflictResolver.objects.create(
        pk=1, table_name="demo.t", type="U", proc="t_cr_U_1", order=10, resolver_class="pub_wins"
    )
    ConflictBackup.objects.create(
        pk=1, item="demo.t", table_name="t", publisher="demo", source="branch", change_guid="branch@1",
        origin="branch", primary_key={"id": 1}, conflict_type="U", operation="U", decision=3, resolver="default",
        publisher_row={"id": 1, "v": "a"}, incoming_row={"id": 1, "v": "b"},
        winning_row={"id": 1, "v": "a"}, losing_row={"id": 1, "v": "b"},
    )  # fmt: skip
    return publication


@pytest.mark.parametrize(("name", "args"), PAGES + POSTS)
def test_anonymous_users_are_sent_to_the_login_page(client, name, args):
    url = reverse(name, args=args)
    response = client.post(url) if (name, args) in POSTS else client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_the_login_page_itself_is_open_and_logging_in_reaches_the_dashboard(client):
    make_user("alice")
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-for-tests-only"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("dashboard")
    assert b"Is replication working?" in response.content


@pytest.mark.parametrize(("name", "args"), [p for p in PAGES if p[0] not in {"servers-edit", "servers-add"}])
def test_every_page_renders_for_a_signed_in_viewer(viewer_client, bidir_catalog, name, args):
    JobRun.objects.create(pk=1, kind="compare", target="x")
    response = viewer_client.get(reverse(name, args=args))
    assert response.status_code == 200, response.content[:500]


@pytest.mark.parametrize(("name", "args"), PAGES)
def test_every_page_renders_for_a_signed_in_editor(editor_client, bidir_catalog, name, args):
    JobRun.objects.create(pk=1, kind="compare", target="x")
    response = editor_client.get(reverse(name, args=args))
    assert response.status_code == 200, response.content[:500]


@pytest.mark.parametrize(("name", "args", "action"), CHANGES)
def test_changes_need_a_login_then_the_permission_and_a_refusal_is_audited(client, bidir_catalog, name, args, action):
    url = reverse(name, args=args)
    # Invalid form values: the editor's post passes the permission check and stops at the form where there is one.
    data = {"server": "", "table": "", "every_minutes": "x", "rows_per_commit": "0", "type": "", "direction": "up"}
    response = client.post(url, data)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next=")

    client.force_login(make_user("viewer"))
    response = client.post(url, data)
    assert response.status_code == 403 and b"may not" in response.content
    denied = AuditEntry.objects.filter(username="viewer", outcome="denied")
    assert list(denied.values_list("action", flat=True)) == [action]

    client.force_login(make_user("editor", "edit", "operate"))
    response = client.post(url, data)
    assert response.status_code in (200, 302), response.content[:500]
    assert not AuditEntry.objects.filter(username="editor", outcome="denied").exists()


def test_htmx_posts_without_a_csrf_token_are_refused_and_with_one_succeed(sqlite_server):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("op", "edit", "operate"))
    url = reverse("servers-check", args=["demo"])
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 403
    assert not AuditEntry.objects.filter(action="server.test").exists()

    client.get(reverse("servers-detail", args=["demo"]))  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    response = client.post(url, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200
    assert b'id="server-status"' in response.content and b"<html" not in response.content
    assert AuditEntry.objects.filter(action="server.test", target="demo", outcome="ok").exists()


def test_the_page_sends_its_csrf_token_with_every_htmx_request(viewer_client):
    body = viewer_client.get(reverse("dashboard")).content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in body


def test_registering_a_server_through_the_form_is_audited(editor_client, sqlite_path):
    path = sqlite_path("form")
    response = editor_client.post(reverse("servers-add"), {"name": "fromform", "dialect": "sqlite", "database": path})
    assert response.status_code == 302 and response["Location"] == reverse("servers-detail", args=["fromform"])
    assert Server.objects.get(name="fromform").database == path
    entry = AuditEntry.objects.get(action="server.register")
    assert (entry.username, entry.target, entry.outcome, entry.via) == ("editor", "fromform", "ok", "web")


def test_an_invalid_form_shows_the_errors_and_registers_nothing(editor_client):
    response = editor_client.post(
        reverse("servers-add"),
        {"name": "x y", "dialect": "mysql", "host": "h/x", "database": "d", "user": "u"},
    )
    assert response.status_code == 200
    assert b"letters, digits or underscores" in response.content and b"not a valid host" in response.content
    assert not Server.objects.exists()


def test_the_test_connection_button_tests_unsaved_values_and_reports_the_cause(editor_client):
    url = reverse("servers-test")
    form = {"name": "tryme", "dialect": "mysql", "host": "127.0.0.1", "port": "3306", "database": "test"}
    response = editor_client.post(url, {**form, "user": "root"}, HTTP_HX_REQUEST="true")
    assert b'class="result ok"' in response.content, response.content
    response = editor_client.post(url, {**form, "user": "root", "password": "wrong"}, HTTP_HX_REQUEST="true")
    assert b"wrong user name or password" in response.content
    assert not Server.objects.exists()
    assert AuditEntry.objects.filter(action="server.test", target="tryme").count() == 2


def test_users_without_the_edit_permission_cannot_change_servers_and_the_attempt_is_audited(
    viewer_client, sqlite_server
):
    assert viewer_client.get(reverse("servers-add")).status_code == 403
    assert viewer_client.post(reverse("servers-delete", args=["demo"])).status_code == 403
    assert viewer_client.post(reverse("servers-check", args=["demo"])).status_code == 403
    assert viewer_client.get(reverse("servers-detail", args=["demo"])).status_code == 200  # reading is fine
    assert Server.objects.filter(name="demo").exists()
    denied = AuditEntry.objects.filter(outcome="denied").values_list("action", flat=True)
    assert set(denied) == {"server.register", "server.delete", "server.test"}


def test_removing_a_server_asks_for_confirmation_then_deletes_and_audits(editor_client, sqlite_server):
    page = editor_client.get(reverse("servers-delete", args=["demo"]))
    assert b"Remove server demo?" in page.content
    response = editor_client.post(reverse("servers-delete", args=["demo"]))
    assert response.status_code == 302 and not Server.objects.filter(name="demo").exists()
    assert AuditEntry.objects.filter(action="server.delete", target="demo", outcome="ok").exists()


def test_the_tables_partial_lists_tables_with_their_primary_keys(viewer_client, sqlite_server):
    create_table(sqlite_server, 'ab "cd', [("id key", LogicalType("integer"))], ["id key"])
    response = viewer_client.get(reverse("servers-tables", args=["demo"]), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert "<html" not in body and "ab &quot;cd" in body and "id key" in body
    table_page = viewer_client.get(reverse("servers-table", args=["demo", 'ab "cd'])).content.decode()
    assert "PK 1" in table_page and "integer" in table_page


def test_a_running_job_polls_for_progress_and_a_finished_one_stops(viewer_client):
    job = JobRun.objects.create(kind="compare", target="a ↔ b", state="running", progress_done=1, progress_total=4)
    partial = viewer_client.get(reverse("jobs-detail", args=[job.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 1s"' in partial and 'aria-valuenow="25"' in partial and "<html" not in partial
    JobRun.objects.filter(pk=job.pk).update(state="succeeded", progress_done=4)
    partial = viewer_client.get(reverse("jobs-detail", args=[job.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert "hx-trigger" not in partial and 'aria-valuenow="100"' in partial


@pytest.mark.spark
def test_a_compare_started_from_the_console_shows_its_result(
    editor_client, sqlite_server, sqlite_path, spark, jobs_sync
):
    other = do_register_server(Actor.command(), server_data("sqlite", "other", sqlite_path("other")))
    cols = [("id", LogicalType("integer")), ("v", LogicalType("varchar", length=5))]
    for server, rows in ((sqlite_server, [(1, "a"), (2, "b")]), (other, [(1, "a"), (2, "c")])):
        create_table(server, "t", cols, ["id"])
        insert_rows(server, "t", ["id", "v"], rows)
    response = editor_client.post(
        reverse("jobs-compare"),
        {"left_server": "demo", "left_table": "t", "right_server": "other", "right_table": "t"},
        follow=True,
    )
    body = response.content.decode()
    assert 'id="compare-result"' in body and "different" in body
    job = JobRun.objects.get()
    assert job.state == "succeeded" and job.result["different"] == 1 and job.created_by.username == "editor"


def test_a_compare_of_a_missing_table_is_refused_before_queueing(editor_client, sqlite_server):
    response = editor_client.post(
        reverse("jobs-compare"),
        {"left_server": "demo", "left_table": "nope", "right_server": "demo", "right_table": "x"},
    )
    assert response.status_code == 200 and b"&#x27;nope&#x27; does not exist" in response.content
    assert not JobRun.objects.exists()


def test_the_audit_page_filters_by_outcome(viewer_client):
    AuditEntry.objects.create(username="a", action="server.register", target="s1", outcome="ok")
    AuditEntry.objects.create(username="b", action="server.delete", target="s2", outcome="denied")
    body = viewer_client.get(reverse("audit"), {"outcome": "denied"}).content.decode()
    assert "server.delete" in body and "server.register" not in body


def test_the_audit_page_lists_peoples_actions_by_default_and_summarises_the_schedulers(viewer_client):
    AuditEntry.objects.create(username="alice", via="web", action="server.register", target="s1")
    AuditEntry.objects.create(username="command:root", via="command", action="snapshot.refresh", target="d1")
    for n in range(5):
        AuditEntry.objects.create(username="scheduler", via="scheduler", action="event.run", target=f"e{n}",
                                  outcome="error" if n == 0 else "ok")  # fmt: skip
    AuditEntry.objects.create(username="reaper", via="reaper", action="job.retry", target="job 9")
    response = viewer_client.get(reverse("audit"))
    targets = {e.target for e in response.context["page"]}
    assert targets == {"s1", "d1"}
    assert response.context["machine_summary"] == {"scheduler": {"n": 5, "failed": 1}, "reaper": {"n": 1, "failed": 0}}
    body = response.content.decode()
    assert "5 scheduler rows" in body and "?via=scheduler&amp;outcome=error" in body
    assert {e.target for e in viewer_client.get(reverse("audit"), {"via": "scheduler"}).context["page"]} == {
        f"e{n}" for n in range(5)
    }
    assert len(viewer_client.get(reverse("audit"), {"via": "all"}).context["page"]) == 8
    # An unknown origin is the default view, not an error.
    assert {e.target for e in viewer_client.get(reverse("audit"), {"via": "x'; --"}).context["page"]} == {"s1", "d1"}
    recent = viewer_client.get(reverse("dashboard")).context["recent_audit"]
    assert [e.target for e in recent] == ["d1", "s1"]  # people's actions only, newest first

"""Roles: viewer (reads), operator (runs replication), editor (also creates and drops). Every URL of the console is
classified below; the tables are the documentation of what each role may do."""

from __future__ import annotations

import importlib
from io import StringIO
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission, User
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import URLPattern, URLResolver, reverse
from django.utils import timezone

from replication_admin import urls
from replication_admin.core.crypto import encrypt
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    ApiToken,
    AuditEntry,
    ConflictBackup,
    JobRun,
    NotificationChannel,
    RegistryEntry,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Snapshot,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
    TpGrant,
    TpItem,
    TransactionalConflictResolver,
)
from tests.tables import create_table

pytestmark = pytest.mark.django_db

roles_migration = importlib.import_module("replication_admin.migrations.0007_roles")

ROLES = ("viewer", "operator", "editor")
HOLDS = {"viewer": set(), "operator": {"operate"}, "editor": {"operate", "edit"}}
SNAPSHOT = "branch.t_copy"
TRX_PUB = ["demo", "acct"]
TRX_SUB = ["branch", "demo", "acct"]

# What a POST to each URL needs. A URL that is not in this table (or in OPEN_POSTS or PAGES) fails
# test_every_url_of_the_console_is_classified, so a new view has to be given its permission here.
POST_NEEDS = {
    "alerts-acknowledge": "operate",
    "servers-add": "edit",
    "servers-test": "edit",
    "servers-edit": "edit",
    "servers-delete": "edit",
    "servers-check": "operate",
    "snapshots-new": "edit",
    "snapshots-log-action": "edit",  # create and drop; purge needs operate (LOG_ACTIONS)
    "snapshots-refresh": "operate",
    "snapshots-compare": "operate",
    "snapshots-validate": "operate",
    "snapshots-repair": "operate",
    "snapshots-schedule": "operate",
    "snapshots-drop": "edit",
    "statements": "operate",  # statements that create or drop are refused by their own actions without edit
    "publications-new": "edit",
    "publications-drop": "edit",
    "publications-sync": "operate",
    "publications-schedule": "operate",
    "publications-subscribe": "edit",
    "publications-resolvers-add": "edit",
    "publications-dry-run": "operate",
    "publications-resolver-edit": "edit",
    "publications-resolver-move": "edit",
    "publications-resolver-remove": "edit",
    "trx-items-resolvers-add": "edit",
    "trx-items-dry-run": "operate",
    "trx-resolver-edit": "edit",
    "trx-resolver-move": "edit",
    "trx-resolver-remove": "edit",
    "trx-publications-ack": "edit",
    "trx-publications-tracer": "operate",
    "trx-publications-tracer-schedule": "operate",
    "trx-publications-on-conflict": "edit",
    "trx-publications-schema-policy": "edit",
    "trx-publications-lag-alert": "edit",
    "trx-schema-change-approve": "edit",
    "trx-publications-new": "edit",
    "trx-publications-add-item": "edit",
    "trx-publications-remove-item": "edit",
    "trx-publications-column-conflicts": "edit",
    "trx-publications-grant": "edit",
    "trx-publications-revoke": "edit",
    "trx-publications-new-log": "edit",
    "trx-publications-purger": "edit",
    "trx-publications-purge": "operate",
    "trx-publications-drop": "edit",
    "trx-publications-row-filter": "edit",
    "trx-subscriptions-new": "edit",
    "trx-subscriptions-valid": "operate",
    "trx-subscriptions-init": "operate",
    "trx-subscriptions-reload": "operate",
    "trx-subscriptions-validate": "operate",
    "trx-subscriptions-sync": "operate",
    "trx-subscriptions-follow": "operate",
    "trx-subscriptions-schedule": "operate",
    "trx-subscriptions-profile": "edit",
    "trx-subscriptions-row-filter": "edit",
    "trx-subscriptions-drop": "edit",
    "trx-subscriptions-skip": "edit",
    "trx-subscriptions-repair": "operate",
    "subscriptions-init": "operate",
    "subscriptions-validate": "operate",
    "subscriptions-drop": "edit",
    "conflicts-reapply": "operate",
    "conflicts-decide": "operate",
    "conflicts-bulk": "operate",
    "conflicts-retention": "edit",
    "jobs-compare": "operate",
    "jobs-cancel": "operate",
    "jobs-retry": "operate",
    "scheduler-run": "operate",
    "scheduler-pause": "operate",
    "scheduler-resume": "operate",
    "scheduler-interval": "operate",
    "jobs-compare-repair": "operate",
    "jobs-compare-again": "operate",
    "jobs-validate-again": "operate",
    "setup-step": "edit",
    "setup-reset": "edit",
    "tokens": "edit",  # making an API token; the list is a page every role reads
    "tokens-revoke": "edit",
    "alerts-channels": "edit",  # adding a channel, or the default-rule conflicts' address; every role reads the page
    "alerts-channels-change": "edit",
    "alerts-channels-test": "edit",
    "alerts-channels-delete": "edit",
}
# The snapshot log actions, by the action named in the URL.
LOG_ACTIONS = {"create": "edit", "drop": "edit", "purge": "operate"}
# Posts every signed-in user (and the login page everyone) may make.
OPEN_POSTS = {"login", "logout"}
# Pages read with GET. Every role sees them, except the server form pages, which need edit to be shown at all.
PAGES = {
    "dashboard", "login", "servers", "servers-add", "servers-detail", "servers-edit", "servers-delete",
    "servers-tables", "servers-table", "snapshots", "snapshots-new", "snapshots-columns", "snapshots-logs",
    "snapshots-log-ddl", "snapshots-detail", "snapshots-drop", "statements", "publications", "publications-new",
    "publications-detail", "publications-ddl", "publications-drop", "publications-resolvers", "publications-resolver-edit",
    "publications-resolver-remove", "trx-publications-new", "trx-publications-detail", "trx-publications-drop",
    "subscriptions", "trx-subscriptions-new", "trx-subscriptions-detail", "trx-subscriptions-drop",
    "subscriptions-drop", "conflicts", "conflicts-export", "conflicts-bulk", "conflicts-detail", "conflicts-reapply", "scheduler",
    "conflicts-statistics",
    "jobs", "jobs-compare", "jobs-compare-tables", "jobs-detail", "audit", "admin",
    # The confirmation pages of destructive actions (GET asks, POST acts; see test_confirmations.py).
    "snapshots-repair", "subscriptions-init", "trx-publications-remove-item", "trx-publications-revoke",
    "trx-publications-purge", "trx-subscriptions-init", "trx-subscriptions-reload", "trx-subscriptions-skip", "trx-subscriptions-repair",
    "jobs-cancel", "jobs-compare-repair",
    # The resolver editor over a transactional publication's table.
    "trx-items-resolvers", "trx-resolver-edit", "trx-resolver-remove",
    # API tokens: every role sees the list and the revoke confirmation; making and revoking need edit.
    "tokens", "tokens-revoke",
    # Notification channels: every role sees the page and the delete confirmation; changes need edit.
    "alerts-channels", "alerts-channels-delete",
}  # fmt: skip
PAGES |= {
    "setup",
    "setup-step",
    "setup-started",
    "dashboard-charts",
    "topology",
    "health",
    "alerts",
}  # the setup wizard: only editors set up replication
PAGE_NEEDS = {"servers-add": "edit", "servers-edit": "edit", "setup": "edit", "setup-step": "edit",
              "setup-started": "edit"}  # fmt: skip

BY_SERVER = {"servers-detail", "servers-edit", "servers-delete", "servers-check", "servers-tables", "snapshots-logs"}
BY_SNAPSHOT = {"snapshots-detail", "snapshots-refresh", "snapshots-compare", "snapshots-repair", "snapshots-schedule",
               "snapshots-drop", "snapshots-validate"}  # fmt: skip
BY_PK = {
    "publications-detail", "publications-ddl", "publications-drop", "publications-sync", "publications-schedule",
    "publications-subscribe", "publications-resolvers", "publications-resolvers-add", "publications-dry-run", "publications-resolver-edit",
    "publications-resolver-move", "publications-resolver-remove", "subscriptions-init", "subscriptions-validate",
    "subscriptions-drop",
    "conflicts-detail", "conflicts-reapply", "conflicts-decide", "jobs-detail", "jobs-cancel", "jobs-retry",
    "alerts-acknowledge", "jobs-compare-repair", "jobs-compare-again", "jobs-validate-again",
    "trx-items-resolvers", "trx-items-resolvers-add", "trx-items-dry-run", "trx-resolver-edit", "trx-resolver-move",
    "trx-resolver-remove", "trx-schema-change-approve", "tokens-revoke",
    "alerts-channels-change", "alerts-channels-test", "alerts-channels-delete",
}  # fmt: skip
BY_NAME = {
    "servers-table": ["demo", "t"],
    "snapshots-log-ddl": ["demo", "t"],
    "snapshots-log-action": ["demo", "create"],
    "trx-publications-new": [],
    "trx-subscriptions-new": [],
    "setup-step": ["publisher"],
    "scheduler-run": [f"snapshot {SNAPSHOT}"],
    "scheduler-pause": [f"snapshot {SNAPSHOT}"],
    "scheduler-resume": [f"snapshot {SNAPSHOT}"],
    "scheduler-interval": [f"snapshot {SNAPSHOT}"],
}


def sample_args(name: str) -> list:
    """The arguments a URL is resolved with (none when it takes none): rows the `console` fixture makes."""
    if name in BY_NAME:
        return BY_NAME[name]
    if name in BY_SERVER:
        return ["demo"]
    if name in BY_SNAPSHOT:
        return [SNAPSHOT]
    if name in BY_PK:
        return [1]
    if name.startswith("trx-publications-"):
        return TRX_PUB
    if name.startswith("trx-subscriptions-"):
        return TRX_SUB
    return []


# Form data that passes validation, so that a check made only by the action (after the form) is reached too.
DATA = {
    "servers-add": {"name": "fresh", "dialect": "sqlite", "database": "/nonexistent/fresh.sqlite3"},
    "servers-test": {"name": "fresh", "dialect": "sqlite", "database": "/nonexistent/fresh.sqlite3"},
    "snapshots-new": {"kind": "incremental", "source_server": "demo", "source_table": "t", "dest_server": "spare",
                      "dest_table": "t_new"},
    "snapshots-log-action": {"table": "t"},
    "snapshots-schedule": {"every_minutes": "10"},
    "statements": {"server": "demo", "text": "repl_this_server ()"},
    "publications-new": {"server": "spare", "table": "t"},
    "publications-schedule": {"every_minutes": "10"},
    "publications-subscribe": {"server": "spare"},
    "publications-resolvers-add": {"type": "U", "resolver_class": "pub_wins", "order": "20"},
    "publications-resolver-move": {"direction": "down"},
    "trx-items-resolvers-add": {"type": "U", "resolver_class": "pub_wins", "order": "20"},
    "trx-resolver-move": {"direction": "down"},
    "trx-publications-ack": {"ack_policy": "one", "ack_timeout": "5"},
    "trx-publications-tracer-schedule": {"every_minutes": "10"},
    "trx-publications-on-conflict": {"on_conflict": "resolve"},
    "trx-publications-schema-policy": {"schema_policy": "approve"},
    "conflicts-decide": {"choice": "3"},
    "trx-publications-new": {"server": "spare", "account": "other"},
    "trx-publications-add-item": {"item": "u"},
    "trx-publications-remove-item": {"item": "1"},
    "trx-publications-column-conflicts": {"item": "1", "on": "1"},
    "trx-publications-grant": {"grantee": "spare"},
    "trx-publications-revoke": {"grantee": "branch"},
    "trx-publications-new-log": {"log_file": "acct2.log"},
    "trx-publications-purger": {"kind": "daily", "p_time": "01:00"},
    "trx-subscriptions-new": {"subscriber": "spare", "publisher": "demo", "account": "acct"},
    "trx-subscriptions-valid": {"valid": "0"},
    "trx-subscriptions-follow": {"follow": "0"},
    "trx-subscriptions-schedule": {"minutes": "5"},
    "trx-subscriptions-profile": {"apply_batch": "20"},
    "trx-subscriptions-row-filter": {"table": "tbl", "condition": ""},
    "trx-publications-row-filter": {"table": "tbl", "condition": ""},
    "subscriptions-init": {"rows_per_commit": "100"},
    "setup-step": {"use": "existing", "existing": "demo"},
    "jobs-compare": {"left_server": "demo", "left_table": "t", "right_server": "branch", "right_table": "t"},
    "tokens": {"name": "monitoring", "scopes": ["status"]},
    "alerts-channels": {"form": "create", "name": "hook", "url": "json://127.0.0.1:9/hook", "events": ["alerts"]},
    "alerts-channels-change": {"c1-enabled": "on", "c1-events": ["alerts"]},
    "scheduler-interval": {"interval": "15"},
}  # fmt: skip
IGNORED = ("api-",)  # token-protected endpoints, outside the console's login and roles
# Pages of admins (who may change users), outside the three roles: tests/console/test_security.py covers them.
ADMIN_ONLY = {"logins", "logins-unlock"}


# Files every browser may fetch, signed in or not (tests/console/test_pages.py covers them).
PUBLIC_FILES = {"favicon"}


def ignored(name: str) -> bool:
    return name.startswith(IGNORED) or name == "metrics" or name in ADMIN_ONLY or name in PUBLIC_FILES


def url_names() -> set[str]:
    """The name of every URL of the console (replication_admin/urls.py and the features' urls it includes);
    the admin site counts as one page, `admin`."""
    names = set()
    entries = list(urls.urlpatterns)
    while entries:
        entry = entries.pop()
        if isinstance(entry, URLResolver):
            if entry.namespace:
                names.add(entry.namespace)
            else:
                entries.extend(entry.url_patterns)
        elif isinstance(entry, URLPattern) and entry.name:
            names.add(entry.name)
    return {name for name in names if not ignored(name)}


def url(name: str, args: list | None = None) -> str:
    if name == "admin":
        return reverse("admin:index")
    return reverse(name, args=sample_args(name) if args is None else args)


POST_CASES = [(name, sample_args(name), perm) for name, perm in POST_NEEDS.items()] + [
    ("snapshots-log-action", ["demo", action], perm) for action, perm in LOG_ACTIONS.items() if action != "create"
]


@pytest.fixture
def roles(db):
    """The three groups, as the migration makes them (again: a flushed test database has lost them)."""
    roles_migration.create_roles(apps, SimpleNamespace(connection=connection))
    return {group.name: group for group in Group.objects.filter(name__in=ROLES)}


def signed_in(role: str | None, roles: dict) -> Client:
    client = Client()
    if role is not None:
        user = User.objects.create_user(role, password="pw-for-tests-only")
        user.groups.add(roles[role])
        client.force_login(user)
    return client


@pytest.fixture
def console(make_server, roles):
    """A sample row for every kind of URL argument: servers demo (with tables t and u), branch and spare; snapshot
    branch.t_copy of demo.t with a schedule; demo.t published bi-directionally (pk 1) to branch (pk 1) with a
    resolver and a recorded conflict; transactional publication demo/acct with an item, a grant and the subscriber
    branch; a queued job; an alert; an API token; a notification channel."""
    demo = make_server("sqlite", "demo")
    branch = make_server("sqlite", "branch")
    make_server("sqlite", "spare")
    columns = [("id", LogicalType("integer")), ("v", LogicalType("varchar", length=5))]
    create_table(demo, "t", [*columns, ("ROWGUID", LogicalType("varchar", length=80))], ["id"])
    create_table(demo, "u", columns, ["id"])
    create_table(branch, "t", [*columns, ("ROWGUID", LogicalType("varchar", length=80))], ["id"])
    create_table(branch, "t_copy", columns, ["id"])
    Snapshot.objects.create(
        name=SNAPSHOT, query="SELECT id, v FROM t", is_incremental=1, source_server=demo, source_table="t",
        dest_server=branch, dest_table="t_copy",
    )  # fmt: skip
    ScheduledEvent.objects.create(
        name=f"snapshot {SNAPSHOT}", start=timezone.now(), sql=f"update snapshot {SNAPSHOT}", interval=10
    )
    SnapshotPublication.objects.create(pk=1, item="demo.t", server=demo, table="t")
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
    ReplAccount.objects.create(
        server="demo", account="acct", log_file="acct.log", created_at=timezone.now(), is_updateable=1
    )
    TpItem.objects.create(pk=1, server="demo", acct="acct", type=2, item="t", is_copy=1)
    TransactionalConflictResolver.objects.create(
        pk=1, table_name="demo.t", type="U", proc="t_cr_U_1", order=10, resolver_class="pub_wins"
    )
    TpGrant.objects.create(acct="acct", grantee="branch")
    apps.get_model("replication_admin", "SchemaChange").objects.create(
        pk=1, server="demo", account="acct", table="t", detected_at=timezone.now(),
        changes=[{"kind": "add", "column": "c", "new_name": "", "text": "add column c integer"}],
    )  # fmt: skip
    ReplSubscriber.objects.create(server="demo", account="acct", subscriber="branch", init_state="done")
    JobRun.objects.create(pk=1, kind="compare", target="demo.t ↔ branch.t")
    ApiToken.objects.create(pk=1, name="monitoring", prefix="ra_sample0", token_hash="0" * 64, scopes=["status"])
    NotificationChannel.objects.create(
        pk=1,
        name="on-call",
        url_encrypted=encrypt("json://127.0.0.1:9/hook"),
        hint="json://127.0.0.1:9/hook",
        events=["alerts"],
    )  # nothing listens on port 9: a test message is refused at once
    if "alerts-acknowledge" in url_names():
        apps.get_model("replication_admin", "Alert").objects.create(
            pk=1, kind="job_failed", target="job #1", message="failed", last_seen_at=timezone.now()
        )
    return roles


# --- the groups ----------------------------------------------------------------------------------------------


def role_permissions() -> dict[str, set[str]]:
    return {
        group.name: {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}
        for group in Group.objects.filter(name__in=ROLES)
    }


def test_the_roles_migration_is_applied_after_the_catalog_migrations():
    executor = MigrationExecutor(connection)
    node = executor.loader.graph.node_map[("replication_admin", "0007_roles")]
    assert ("replication_admin", "0006_transactional") in {parent.key for parent in node.parents}
    assert ("replication_admin", "0007_roles") in executor.loader.applied_migrations


def test_the_migration_makes_the_three_groups_with_exactly_their_permissions_even_on_a_fresh_database():
    state = MigrationExecutor(connection).loader.project_state(("replication_admin", "0007_roles"))
    schema_editor = SimpleNamespace(connection=connection)
    roles_migration.remove_roles(state.apps, schema_editor)
    assert not Group.objects.filter(name__in=ROLES).exists()
    # On a fresh database the permissions do not exist yet when the migration runs: it makes them itself.
    Permission.objects.filter(content_type__app_label="replication_admin", codename__in=["operate", "edit"]).delete()

    roles_migration.create_roles(state.apps, schema_editor)
    roles_migration.create_roles(state.apps, schema_editor)  # idempotent

    assert role_permissions() == {
        "viewer": set(),
        "operator": {"replication_admin.operate"},
        "editor": {"replication_admin.operate", "replication_admin.edit"},
    }
    names = dict(Permission.objects.filter(content_type__app_label="replication_admin").values_list("codename", "name"))
    for codename, name in RegistryEntry._meta.permissions:
        assert names[codename] == name
    assert Group.objects.filter(name__in=ROLES).count() == 3


def test_undoing_the_migration_removes_the_three_groups_and_nothing_else(roles):
    Group.objects.create(name="auditors")
    roles_migration.remove_roles(apps, SimpleNamespace(connection=connection))
    assert list(Group.objects.values_list("name", flat=True)) == ["auditors"]
    assert Permission.objects.filter(content_type__app_label="replication_admin", codename="edit").exists()


def test_a_role_holds_its_permissions_through_its_group(roles):
    for role in ROLES:
        user = User.objects.create_user(role)
        user.groups.add(roles[role])
        user = User.objects.get(pk=user.pk)
        assert {p for p in ("operate", "edit") if user.has_perm(f"replication_admin.{p}")} == HOLDS[role], role


# --- every URL, every role ------------------------------------------------------------------------------------


def test_every_url_of_the_console_is_classified():
    classified = PAGES | POST_NEEDS.keys() | OPEN_POSTS
    assert url_names() - classified == set(), "classify these URLs in PAGES / POST_NEEDS / OPEN_POSTS"
    assert classified - url_names() == set(), "these classified URLs no longer exist"
    assert PAGE_NEEDS.keys() <= PAGES and set(PAGE_NEEDS.values()) | set(POST_NEEDS.values()) <= {"operate", "edit"}


def test_every_url_answers_exactly_the_methods_its_classification_says(console):
    client = signed_in("viewer", console)
    for name in sorted(url_names() - {"admin", "logout", "login"}):
        get = client.get(url(name))
        assert (get.status_code == 405) == (name not in PAGES), f"GET {name}: {get.status_code}"
        if name not in POST_NEEDS:
            assert client.post(url(name)).status_code == 405, f"POST {name}"
    assert client.get(reverse("logout")).status_code == 405


def test_anonymous_users_are_sent_to_the_login_page_from_every_url(console):
    client = Client()
    login = reverse("login")
    for name in sorted(url_names() - {"login"}):
        for method in ("get", "post"):
            response = getattr(client, method)(url(name), DATA.get(name, {}))
            assert response.status_code == 302, f"{method.upper()} {name}: {response.status_code}"
            # The admin site sends people to its own login page, which signs in only staff.
            expected = reverse("admin:login") if name == "admin" else login
            assert response["Location"].startswith(expected + "?next="), f"{method.upper()} {name}"
    assert client.get(login).status_code == 200
    assert not AuditEntry.objects.exclude(username="command").exclude(via="command").exists()


@pytest.mark.parametrize("role", ROLES)
def test_every_page_renders_or_redirects_for_every_role(console, role):
    client = signed_in(role, console)
    for name in sorted(PAGES):
        response = client.get(url(name))
        needs = PAGE_NEEDS.get(name)
        if needs and needs not in HOLDS[role]:
            assert response.status_code == 403, f"{name}: {response.status_code}"
            continue
        assert response.status_code in (200, 302), f"{name}: {response.status_code} {response.content[:300]!r}"
        if response.status_code == 302:
            # Only the admin site (for users who are not staff) sends a signed-in user to a login page.
            assert name == "admin" or "login" not in response["Location"], f"{name} -> {response['Location']}"
    assert not AuditEntry.objects.filter(outcome="ok", via="web").exists(), "a GET changed something"


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("name", "args", "needs"), POST_CASES, ids=[f"{n} {a[-1] if a else ''}" for n, a, _ in POST_CASES]
)
def test_a_post_is_refused_with_403_and_audited_unless_the_role_holds_the_permission_it_needs(
    console, role, name, args, needs
):
    client = signed_in(role, console)
    response = client.post(url(name, args), DATA.get(name, {}))
    denied = AuditEntry.objects.filter(username=role, outcome="denied")
    if needs in HOLDS[role]:
        assert response.status_code != 403, f"{role} was refused {name}: {response.content[:300]!r}"
        assert response.status_code in (200, 204, 302), f"{name}: {response.status_code} {response.content[:300]!r}"
        assert not denied.exists(), list(denied.values_list("action", "detail"))
    else:
        assert response.status_code == 403, f"{role} may {name} (needs {needs}): {response.status_code}"
        assert denied.exists(), f"{role}'s refused {name} left no denied audit entry"
        assert denied.first().detail["missing_permission"] == f"replication_admin.{needs}"


def test_a_superuser_is_an_admin_with_every_permission_and_the_admin_site(console):
    admin = User.objects.create_superuser("root", password="pw-for-tests-only")
    client = Client()
    client.force_login(admin)
    assert client.get(reverse("admin:index")).status_code == 200
    assert client.get(reverse("servers-add")).status_code == 200
    response = client.post(url("trx-subscriptions-valid"), {"valid": "0"})
    assert response.status_code == 302 and ReplSubscriber.objects.get(subscriber="branch").valid == 0


# --- grant_role -----------------------------------------------------------------------------------------------


def grant(*args: str) -> str:
    out = StringIO()
    call_command("grant_role", *args, stdout=out)
    return out.getvalue()


def test_grant_role_moves_a_user_from_one_role_to_another_and_audits_it(roles):
    alice = User.objects.create_user("alice")
    assert "alice now has the role viewer" in grant("alice", "viewer")
    output = grant("alice", "operator")
    assert "alice now has the role operator" in output and "removed from viewer" in output
    assert list(alice.groups.values_list("name", flat=True)) == ["operator"]
    assert User.objects.get(pk=alice.pk).has_perm("replication_admin.operate")
    assert not User.objects.get(pk=alice.pk).has_perm("replication_admin.edit")

    alice.groups.add(roles["viewer"], Group.objects.create(name="night shift"))
    grant("alice", "Editor")
    assert sorted(alice.groups.values_list("name", flat=True)) == ["editor", "night shift"]
    assert User.objects.get(pk=alice.pk).has_perm("replication_admin.edit")
    assert "already has the role editor" in grant("alice", "editor")

    entries = AuditEntry.objects.filter(action="user.grant_role").order_by("id")
    assert [(e.target, e.detail["role"], e.via, e.outcome) for e in entries] == [
        ("alice", "viewer", "command", "ok"),
        ("alice", "operator", "command", "ok"),
        ("alice", "editor", "command", "ok"),
        ("alice", "editor", "command", "ok"),
    ]
    assert entries[2].detail["removed"] == ["operator", "viewer"]
    assert Group.objects.count() == 4  # the three roles and night shift: nothing else was made


def test_grant_role_refuses_an_unknown_role_or_user_and_changes_nothing(roles):
    User.objects.create_user("alice")
    with pytest.raises(CommandError, match="unknown role 'admin': choose one of viewer, operator, editor"):
        grant("alice", "admin")
    with pytest.raises(CommandError, match="no user named 'bob'"):
        grant("bob", "operator")
    Group.objects.filter(name="operator").delete()
    with pytest.raises(CommandError, match=r"run manage\.py migrate to create the roles"):
        grant("alice", "operator")
    assert not User.objects.get(username="alice").groups.exists()
    assert not AuditEntry.objects.filter(action="user.grant_role").exists()


def test_grant_role_notes_that_a_superuser_holds_every_permission_anyway(roles):
    User.objects.create_superuser("root")
    assert "is a superuser" in grant("root", "viewer")

"""The setup wizard: steps with back and next, choices kept in the session and checked against the live servers,
the exact statements on the review, nothing changed before the confirmation; then the initial copy moves the
rows."""

from __future__ import annotations

import hashlib
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from replication_admin.core.introspection import lookup_table
from replication_admin.engine import statements as st
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    AuditEntry,
    JobRun,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Server,
    Snapshot,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)
from tests.conftest import PG
from tests.tables import create_table, fetch_all, insert_rows
from tests.users import make_user

pytestmark = pytest.mark.django_db

COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=10, scale=2)),
]
ROWS = [
    (1, "pen", Decimal("1.50")),
    (2, "ink", Decimal("3.20")),
    (3, "pad", Decimal("2.75")),
    (4, "clip", Decimal("0.10")),
]


def step(name: str) -> str:
    return reverse("setup-step", args=[name])


def post(client, name: str, data: dict, follow: bool = False):
    return client.post(step(name), {"action": "next", **data}, follow=follow)


def assert_next(response, expected: str) -> None:
    assert response.status_code == 302, response.content.decode()[:3000]
    assert response["Location"] == step(expected)


def digest(rows) -> str:
    canonical = sorted((int(i), str(n), Decimal(str(p)).quantize(Decimal("0.01"))) for i, n, p in rows)
    return hashlib.sha256(repr(canonical).encode()).hexdigest()


@pytest.fixture
def shop(make_server):
    server = make_server("sqlite", "shop")
    create_table(server, "items", COLUMNS, ["id"])
    insert_rows(server, "items", ["id", "name", "price"], ROWS)
    create_table(server, "notes", [("body", LogicalType("varchar", length=40))], [])  # no primary key
    return server


def walk_to_tables(client, publisher: str, subscriber: str, mode: str) -> None:
    assert_next(post(client, "publisher", {"use": "existing", "existing": publisher}), "subscriber")
    assert_next(post(client, "subscriber", {"use": "existing", "existing": subscriber}), "mode")
    assert_next(post(client, "mode", {"mode": mode}), "tables")


def catalog_counts() -> tuple:
    return (
        Server.objects.count(), Snapshot.objects.count(), SnapshotPublication.objects.count(),
        SnapshotSubscription.objects.count(), ReplAccount.objects.count(), ReplSubscriber.objects.count(),
        ScheduledEvent.objects.count(), SnapshotConflictResolver.objects.count(), JobRun.objects.count(),
    )  # fmt: skip


@pytest.mark.live_db
@pytest.mark.spark
def test_the_wizard_publishes_bidirectionally_from_sqlite_to_postgresql_and_copies_the_rows(
    editor_client, shop, make_server, jobs_sync, spark
):
    branch = make_server("postgresql", "branch")
    before = catalog_counts()
    walk_to_tables(editor_client, "shop", "branch", "bidir")
    page = editor_client.get(step("tables")).content.decode()
    assert 'value="items"' in page and 'value="notes"' in page and "RLOG_" not in page
    assert_next(post(editor_client, "tables", {"tables": ["items"], "rows_per_commit": "2"}), "resolvers")
    response = post(editor_client, "resolvers", {"cls_U": "max", "column_U": "price", "cls_I": "pub_wins"})
    assert_next(response, "schedule")
    assert_next(post(editor_client, "schedule", {"schedule_minutes": "15"}), "review")

    review = editor_client.get(step("review")).content.decode()
    assert catalog_counts() == before, "nothing may change before the confirmation"
    assert lookup_table(branch, "items") is None
    expected = [
        "REPL_CREATE_SNAPSHOT_PUB ('shop.items', 2)",
        "REPL_CREATE_SNAPSHOT_SUB ('branch', 'shop.items', 2)",
        "REPL_ADD_SNAPSHOT_CR ('shop.items', 'max_price', 'U', 10, 'max', 'price')",
        "REPL_ADD_SNAPSHOT_CR ('shop.items', 'pub_wins', 'I', 10, 'pub_wins')",
        "REPL_INIT_SNAPSHOT ('branch', 'shop.items', 2, 2)",
    ]
    for line in expected:
        assert line.replace("'", "&#x27;") in review
    assert "every 15 minute(s): REPL_UPDATE_SNAPSHOT (&#x27;shop.items&#x27;, 2)" in review
    assert [s.verb for s in st.parse(";\n".join(expected))] == [
        "CreateSnapshotPub", "CreateSnapshotSub", "AddSnapshotCr", "AddSnapshotCr", "InitSnapshot",
    ]  # fmt: skip

    response = editor_client.post(step("review"), {"action": "confirm"})
    assert response.status_code == 302 and response["Location"] == reverse("setup-started")
    started = editor_client.get(reverse("setup-started")).content.decode()
    publication = SnapshotPublication.objects.get()
    assert (publication.item, publication.server_id) == ("shop.items", "shop")
    subscription = SnapshotSubscription.objects.get()
    assert (subscription.server, subscription.init_state, subscription.init_rows_done) == ("branch", "done", 4)
    assert sorted(SnapshotConflictResolver.objects.values_list("type", "resolver_class")) == [
        ("I", "pub_wins"),
        ("U", "max"),
    ]
    assert ScheduledEvent.objects.get(sql="REPL_UPDATE_SNAPSHOT ('shop.items', 2)").interval == 15
    job = JobRun.objects.get(kind="bidir_init")
    assert job.state == JobRun.State.SUCCEEDED and f'data-job="{job.pk}"' in started
    assert 'aria-valuenow="100"' in started and reverse("publications-detail", args=[publication.pk]) in started
    source = fetch_all(shop, "SELECT id, name, price FROM items")
    copied = fetch_all(branch, "SELECT id, name, price FROM items")
    assert len(copied) == len(source) == 4 and digest(copied) == digest(source)
    assert AuditEntry.objects.filter(action="wizard.run", outcome=AuditEntry.Outcome.OK, username="editor").exists()
    assert editor_client.get(reverse("setup")).status_code == 302  # the plan is gone: a new run starts afresh


def test_back_keeps_every_choice_and_skipping_ahead_is_sent_back(editor_client, shop, make_server):
    make_server("sqlite", "branch")
    assert editor_client.get(step("review"))["Location"] == step("publisher")
    walk_to_tables(editor_client, "shop", "branch", "inc")
    page = editor_client.get(step("tables")).content.decode()
    assert 'href="/setup/mode/"' in page  # back
    mode_page = editor_client.get(step("mode")).content.decode()
    assert 'value="inc" checked' in mode_page
    subscriber_page = editor_client.get(step("subscriber")).content.decode()
    assert '<option value="branch" selected>' in subscriber_page
    # Changing the mode forgets the later steps' checks: the tables step must be passed again.
    assert_next(
        post(editor_client, "tables", {"tables": "items", "columns": ["name"], "condition": "price > 1"}), "schedule"
    )
    assert_next(post(editor_client, "mode", {"mode": "noninc"}), "tables")
    assert editor_client.get(step("schedule"))["Location"] == step("tables")


def test_impossible_choices_are_refused_with_the_reason(editor_client, shop, make_server):
    branch = make_server("sqlite", "branch")
    create_table(branch, "items", COLUMNS, ["id"])
    walk_to_tables(editor_client, "shop", "branch", "bidir")
    response = post(editor_client, "tables", {"tables": ["notes"], "rows_per_commit": "100"})
    assert response.status_code == 200
    assert "table notes has no primary key" in response.content.decode()
    response = post(editor_client, "tables", {"tables": ["items"], "rows_per_commit": "100"})
    assert "table items already exists on the subscriber branch" in response.content.decode()
    # The same server on both sides is refused for the modes that need two.
    assert_next(post(editor_client, "subscriber", {"use": "existing", "existing": "shop"}), "mode")
    response = post(editor_client, "mode", {"mode": "trx"})
    assert "needs two servers: the publisher and the subscriber are both shop" in response.content.decode()
    # SQLite cannot take part in updateable transactional replication.
    assert_next(post(editor_client, "subscriber", {"use": "existing", "existing": "branch"}), "mode")
    response = post(editor_client, "mode", {"mode": "trx_upd"})
    assert "needs PostgreSQL or MariaDB on both sides: the publisher shop is SQLite" in response.content.decode()
    assert_next(post(editor_client, "subscriber", {"use": "existing", "existing": "shop"}), "mode")
    # An incremental snapshot on the same server needs another destination name, and a valid condition.
    assert_next(post(editor_client, "mode", {"mode": "inc"}), "tables")
    response = post(editor_client, "tables", {"tables": "items"})
    assert "needs a destination table of another name" in response.content.decode()
    for condition, reason in [
        ("price > 1; delete from items", "no &#x27;;&#x27;"),
        ("colour = 'red'", "colour"),
        ("id in (select id from notes)", "no subqueries"),
    ]:
        response = post(
            editor_client, "tables", {"tables": "items", "dest_table": "items_copy", "condition": condition}
        )
        assert response.status_code == 200 and reason in response.content.decode(), condition
    assert Snapshot.objects.count() == 0


def test_a_new_server_is_tested_and_registered_only_on_confirmation(editor_client, shop, sqlite_path, jobs_sync):
    response = post(editor_client, "publisher", {"use": "existing", "existing": "shop"})
    assert_next(response, "subscriber")
    unreachable = {
        "use": "new", "new-name": "far", "new-dialect": "postgresql", "new-host": "127.0.0.1", "new-port": "1",
        "new-database": "test", "new-user": PG["user"],
    }  # fmt: skip
    response = post(editor_client, "subscriber", unreachable)
    assert response.status_code == 200
    assert "the subscriber far cannot be reached" in response.content.decode()
    path = sqlite_path("copy")
    new = {"use": "new", "new-name": "copy", "new-dialect": "sqlite", "new-database": path}
    response = editor_client.post(step("subscriber"), {"action": "test", **new})
    assert response.status_code == 200 and "connected to SQLite" in response.content.decode()
    assert_next(post(editor_client, "subscriber", new), "mode")
    assert not Server.objects.filter(name="copy").exists()
    assert_next(post(editor_client, "mode", {"mode": "noninc"}), "tables")
    assert_next(
        post(editor_client, "tables", {"tables": "items", "columns": ["price"], "condition": "price > 1"}), "schedule"
    )
    assert_next(post(editor_client, "schedule", {"schedule_minutes": "0"}), "review")
    review = editor_client.get(step("review")).content.decode()
    assert "First, register <strong>copy</strong>" in review
    assert (
        "CREATE NONINCREMENTAL SNAPSHOT copy.items AS &#x27;SELECT &quot;id&quot;, &quot;price&quot; FROM &quot;items&quot; WHERE price &gt; 1&#x27;"
        in review
    )
    assert not Server.objects.filter(name="copy").exists()
    response = editor_client.post(step("review"), {"action": "confirm"})
    assert response["Location"] == reverse("setup-started")
    copy = Server.objects.get(name="copy")
    copied = sorted((int(i), Decimal(str(p))) for i, p in fetch_all(copy, "SELECT id, price FROM items"))
    assert copied == sorted((i, p) for i, _, p in ROWS if p > 1)
    assert [c.name for c in lookup_table(copy, "items").columns] == ["id", "price"]


@pytest.mark.live_db
@pytest.mark.spark
def test_a_transactional_setup_runs_its_statements_on_the_publisher_and_on_the_subscriber(
    editor_client, shop, make_server, jobs_sync, spark
):
    branch = make_server("mysql", "branch")
    walk_to_tables(editor_client, "shop", "branch", "trx")
    assert_next(post(editor_client, "tables", {"tables": ["items"], "account": "shop's"}), "schedule")
    assert_next(post(editor_client, "schedule", {"sync_mode": "scheduled", "schedule_minutes": "5"}), "review")
    review = editor_client.get(step("review")).content.decode()
    assert 'data-context="shop"' in review and 'data-context="branch"' in review
    assert "A sync every 5 minute(s)" in review
    assert "REPL_PUBLISH (&#x27;shop&#x27;&#x27;s&#x27;, &#x27;shop&#x27;&#x27;s.log&#x27;)" in review
    assert "SUB_SCHEDULE (&#x27;shop&#x27;, &#x27;shop&#x27;&#x27;s&#x27;, 5)" in review
    assert ReplAccount.objects.count() == 0
    response = editor_client.post(step("review"), {"action": "confirm"})
    assert response["Location"] == reverse("setup-started")
    account = ReplAccount.objects.get()
    assert (account.server, account.account, account.is_updateable) == ("shop", "shop's", 0)
    sub = ReplSubscriber.objects.get()
    assert (sub.subscriber, sub.init_state) == ("branch", "done")
    assert digest(fetch_all(branch, "SELECT id, name, price FROM items")) == digest(ROWS)


def test_a_viewer_and_an_operator_cannot_open_the_wizard(viewer_client, db):
    operator = Client()
    operator.force_login(make_user("operator", "operate"))
    assert operator.get(step("publisher")).status_code == 403
    assert viewer_client.get(step("publisher")).status_code == 403
    assert viewer_client.post(step("review"), {"action": "confirm"}).status_code == 403
    entry = AuditEntry.objects.filter(action="wizard").latest("pk")
    assert entry.outcome == AuditEntry.Outcome.DENIED and entry.username == "viewer"


@pytest.mark.spark
def test_a_hostile_table_name_is_quoted_in_every_statement_and_the_snapshot_copies_it(
    editor_client, make_server, jobs_sync, spark
):
    source = make_server("sqlite", "src")
    make_server("sqlite", "dst")
    hostile = 'ab "cd'
    create_table(source, hostile, COLUMNS, ["id"])
    insert_rows(source, hostile, ["id", "name", "price"], ROWS)
    walk_to_tables(editor_client, "src", "dst", "inc")
    assert_next(post(editor_client, "tables", {"tables": hostile, "condition": "price < 3"}), "schedule")
    assert_next(post(editor_client, "schedule", {"schedule_minutes": "30"}), "review")
    review = editor_client.get(step("review")).content.decode()
    assert "CREATE SNAPSHOT LOG FOR &quot;ab &quot;&quot;cd&quot;" in review
    assert (
        "CREATE SNAPSHOT dst.&quot;ab &quot;&quot;cd&quot; FROM &quot;ab &quot;&quot;cd&quot; WHERE &#x27;price &lt; 3&#x27;"
        in review
    )
    response = editor_client.post(step("review"), {"action": "confirm"})
    assert response["Location"] == reverse("setup-started")
    snapshot = Snapshot.objects.get()
    assert (snapshot.source_table, snapshot.dest_table, snapshot.condition) == (hostile, hostile, "price < 3")
    assert ScheduledEvent.objects.get(sql__icontains="update snapshot").interval == 30
    dst = Server.objects.get(name="dst")
    copied = fetch_all(dst, 'SELECT id, name, price FROM "ab ""cd"')
    assert digest(copied) == digest([r for r in ROWS if r[2] < 3])


@pytest.mark.live_db
def test_an_updateable_transactional_review_publishes_updateable_with_the_chosen_resolvers(editor_client, make_server):
    shop = make_server("postgresql", "shop")
    create_table(shop, "items", COLUMNS, ["id"])
    make_server("mysql", "branch")
    walk_to_tables(editor_client, "shop", "branch", "trx_upd")
    assert_next(post(editor_client, "tables", {"tables": ["items"], "account": "upd"}), "resolvers")
    response = post(editor_client, "resolvers", {"cls_U": "add", "column_U": "name"})
    assert "update resolver on items" in response.content.decode()  # adding to a text column does not fit
    assert_next(
        post(editor_client, "resolvers", {"cls_U": "min", "column_U": "price", "cls_D": "sub_wins"}), "schedule"
    )
    assert_next(post(editor_client, "schedule", {"sync_mode": "manual", "schedule_minutes": "0"}), "review")
    page = editor_client.get(step("review")).content.decode()
    publisher_script = page.split('data-context="shop">', 1)[1].split("</pre>", 1)[0].replace("&#x27;", "'")
    assert publisher_script.splitlines() == [
        "REPL_PUBLISH ('upd', 'upd.log', 1);",
        "REPL_PUB_ADD ('upd', 'items', 2, 0);",
        "REPL_ADD_CR ('shop.items', 'min_price', 'U', 10, 'min', 'price');",
        "REPL_ADD_CR ('shop.items', 'sub_wins', 'D', 10, 'sub_wins');",
    ]
    parsed = st.parse(publisher_script)
    assert parsed[0].updateable and [s.verb for s in parsed] == ["Publish", "PubAdd", "AddCr", "AddCr"]
    assert ReplAccount.objects.count() == 0


@pytest.mark.live_db
@pytest.mark.spark
def test_a_transactional_setup_with_the_defaults_names_the_publication_and_ends_in_sync(
    editor_client, shop, make_server, jobs_sync, spark
):
    branch = make_server("postgresql", "branch")
    walk_to_tables(editor_client, "shop", "branch", "trx")
    assert_next(post(editor_client, "tables", {"tables": ["items"], "account": ""}), "schedule")
    page = editor_client.get(step("schedule"))
    assert page.context["form"]["sync_mode"].initial == "in_sync"
    assert_next(post(editor_client, "schedule", {"sync_mode": "in_sync"}), "review")
    review = editor_client.get(step("review")).content.decode()
    assert "REPL_PUBLISH (&#x27;items&#x27;, &#x27;items.log&#x27;)" in review  # named after its table
    assert "SUB_SCHEDULE" not in review and "SYNC_REPL" not in review
    assert "In sync: once the initial copy is in, the follower" in review
    editor_client.post(step("review"), {"action": "confirm"})
    sub = ReplSubscriber.objects.get()
    assert (sub.account, sub.follow, sub.state, sub.init_state) == ("items", True, ReplSubscriber.IN_SYNC, "done")
    assert not ScheduledEvent.objects.filter(sql__icontains="REPL_SYNC").exists()
    assert digest(fetch_all(branch, "SELECT id, name, price FROM items")) == digest(ROWS)
    assert AuditEntry.objects.get(action="wizard.run").detail["sync_mode"] == "in_sync"


def test_a_publication_name_taken_or_malformed_is_refused_at_its_field(editor_client, shop, make_server):
    make_server("sqlite", "branch")
    ReplAccount.objects.create(server="shop", account="items", level=0, count=0)
    walk_to_tables(editor_client, "shop", "branch", "trx")
    response = post(editor_client, "tables", {"tables": ["items"], "account": ""})  # the default name: taken
    assert response.status_code == 200
    form = response.context["form"]
    assert "already has a publication named 'items'" in " ".join(form.errors["account"])
    assert not form.non_field_errors()
    response = post(editor_client, "tables", {"tables": ["items"], "account": "a\x00b"})
    assert "account" in response.context["form"].errors


def test_a_scheduled_sync_without_an_interval_is_refused_at_the_interval(editor_client, shop, make_server):
    make_server("sqlite", "branch")
    walk_to_tables(editor_client, "shop", "branch", "trx")
    assert_next(post(editor_client, "tables", {"tables": ["items"], "account": "shop"}), "schedule")
    response = post(editor_client, "schedule", {"sync_mode": "scheduled", "schedule_minutes": "0"})
    assert response.status_code == 200
    assert "needs its interval" in " ".join(response.context["form"].errors["schedule_minutes"])
    assert_next(post(editor_client, "schedule", {"sync_mode": "manual", "schedule_minutes": "0"}), "review")
    assert "No sync runs by itself" in editor_client.get(step("review")).content.decode()


def test_the_wizard_and_the_inbox_state_the_same_default_rule(editor_client, shop, make_server):
    make_server("sqlite", "branch")
    walk_to_tables(editor_client, "shop", "branch", "bidir")
    assert_next(post(editor_client, "tables", {"tables": ["items"]}), "resolvers")
    wizard = editor_client.get(step("resolvers")).content.decode()
    inbox = editor_client.get(reverse("conflicts")).content.decode()
    rule = "inserts and updates: publisher wins (3); deletes: ignore (5)"
    assert rule in wizard and "an insert of an existing key is refused" not in wizard
    assert rule in inbox  # an empty inbox says what decides a conflict


@pytest.mark.live_db
@pytest.mark.spark
def test_a_transactional_setup_may_take_part_of_one_table(editor_client, shop, make_server, jobs_sync, spark):
    branch = make_server("postgresql", "branch")
    walk_to_tables(editor_client, "shop", "branch", "trx")
    refused = post(editor_client, "tables", {"tables": ["items"], "condition": "upper(name) = 'PEN'"})
    assert refused.status_code == 200 and "cannot use" in refused.content.decode()
    assert_next(
        post(editor_client, "tables", {"tables": ["items"], "condition": "price >= 2", "filter_columns": "price"}),
        "schedule",
    )
    assert_next(post(editor_client, "schedule", {"sync_mode": "manual"}), "review")
    review = editor_client.get(step("review")).content.decode()
    assert (
        "REPL_ROW_FILTER (&#x27;shop&#x27;, &#x27;items&#x27;, &#x27;items&#x27;, &#x27;price &gt;= 2&#x27;" in review
    )
    editor_client.post(step("review"), {"action": "confirm"})
    assert ReplSubscriber.objects.get().row_filters["items"]["columns"] == ["price"]
    copied = fetch_all(branch, "SELECT id, price FROM items ORDER BY id")
    assert [(int(i), Decimal(str(p))) for i, p in copied] == [(2, Decimal("3.20")), (3, Decimal("2.75"))]
    assert [c.name for c in lookup_table(branch, "items").columns] == ["id", "price"]

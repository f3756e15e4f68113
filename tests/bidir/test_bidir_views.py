"""Bi-directional snapshot pages: publications, subscribers, initial copies, syncs, schedules and the
resolver editor; live tests publish a SQLite table and replicate it to SQLite and PostgreSQL subscribers."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    ScheduledEvent,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)
from tests.tables import create_table, execute, fetch_all, insert_rows

pytestmark = pytest.mark.django_db

COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=12, scale=2)),
]


@pytest.fixture
def catalog(make_server):
    """Catalog rows only (no replication objects): a publication of shop.items with two subscribers."""
    shop = make_server("sqlite", "shop")
    make_server("sqlite", "branch")
    make_server("sqlite", "kiosk")
    make_server("sqlite", "spare")
    publication = SnapshotPublication.objects.create(item="shop.items", server=shop, table="items")
    branch = SnapshotSubscription.objects.create(server="branch", item="shop.items", init_state="done",
                                                 init_rows_done=20, init_rows_total=20)  # fmt: skip
    kiosk = SnapshotSubscription.objects.create(server="kiosk", item="shop.items", init_state="copying",
                                                init_rows_done=300, init_rows_total=1200, init_rows_per_commit=50)  # fmt: skip
    resolver = SnapshotConflictResolver.objects.create(
        table_name="shop.items", type="U", proc="items_cr_U_1", order=10, resolver_class="pub_wins"
    )
    return publication, branch, kiosk, resolver


def urls(publication, subscription, resolver) -> tuple[list[str], list[str]]:
    pages = [
        reverse("publications"),
        reverse("publications-new"),
        reverse("publications-detail", args=[publication.pk]),
        reverse("publications-drop", args=[publication.pk]),
        reverse("publications-resolvers", args=[publication.pk]),
        reverse("publications-resolver-edit", args=[resolver.pk]),
        reverse("publications-resolver-remove", args=[resolver.pk]),
        reverse("subscriptions"),
        reverse("subscriptions-drop", args=[subscription.pk]),
    ]
    posts = [
        reverse("publications-new"),
        reverse("publications-drop", args=[publication.pk]),
        reverse("publications-sync", args=[publication.pk]),
        reverse("publications-schedule", args=[publication.pk]),
        reverse("publications-subscribe", args=[publication.pk]),
        reverse("publications-resolvers-add", args=[publication.pk]),
        reverse("publications-dry-run", args=[publication.pk]),
        reverse("publications-resolver-edit", args=[resolver.pk]),
        reverse("publications-resolver-move", args=[resolver.pk]),
        reverse("publications-resolver-remove", args=[resolver.pk]),
        reverse("subscriptions-init", args=[subscription.pk]),
        reverse("subscriptions-drop", args=[subscription.pk]),
    ]
    return pages, posts


def test_every_new_url_sends_anonymous_users_to_the_login_page(client, catalog):
    publication, branch, _, resolver = catalog
    pages, posts = urls(publication, branch, resolver)
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next="), url
    for url in posts:
        response = client.post(url, {"every_minutes": "5", "direction": "up", "rows_per_commit": "10"})
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next="), url
    assert SnapshotPublication.objects.count() == 1 and SnapshotSubscription.objects.count() == 2
    assert not JobRun.objects.exists() and not AuditEntry.objects.exclude(action="server.register").exists()


def test_viewers_see_every_page_but_every_post_is_refused_and_audited(viewer_client, catalog):
    publication, branch, _, resolver = catalog
    pages, posts = urls(publication, branch, resolver)
    for url in pages:
        assert viewer_client.get(url).status_code == 200, url
    data = {
        "server": "spare", "table": "items", "every_minutes": "5", "direction": "down", "rows_per_commit": "10",
        "type": "U", "resolver_class": "sub_wins", "expression": "1", "drop_table": "on",
    }  # fmt: skip
    for url in posts:
        response = viewer_client.post(url, data)
        assert response.status_code == 403, url
        assert b"may not" in response.content
    denials = AuditEntry.objects.filter(username="viewer", outcome="denied")
    assert denials.count() == len(posts)
    assert {"bidir.publish", "bidir.unpublish", "job.bidir_sync", "bidir.schedule", "bidir.subscribe",
            "job.bidir_init", "bidir.unsubscribe"} <= set(denials.values_list("action", flat=True))  # fmt: skip
    assert SnapshotPublication.objects.count() == 1 and SnapshotSubscription.objects.count() == 2
    assert SnapshotConflictResolver.objects.get().order == 10
    assert not JobRun.objects.exists() and not ScheduledEvent.objects.exists()
    # Nothing offers what a viewer may not do.
    detail = viewer_client.get(reverse("publications-detail", args=[publication.pk])).content.decode()
    assert (
        'id="sync-now"' not in detail and 'id="add-subscriber"' not in detail and "Initial copy</button>" not in detail
    )
    listing = viewer_client.get(reverse("publications")).content.decode()
    assert 'id="publication-form"' not in listing


def test_the_list_shows_publisher_subscribers_last_sync_and_schedule(viewer_client, catalog):
    publication, *_ = catalog
    SnapshotPublication.objects.filter(pk=publication.pk).update(
        last_sync_at=timezone.now(), last_sync_error="branch: connection refused"
    )
    ScheduledEvent.objects.create(name="bidir shop.items", start=timezone.now(), sql="REPL_UPDATE_SNAPSHOT ('shop.items', 2)",
                                  interval=15)  # fmt: skip
    SnapshotPublication.objects.create(item="kiosk.notes", server_id="kiosk", table="notes")
    body = viewer_client.get(reverse("publications")).content.decode()
    rows = body.split('id="publication-rows"', 1)[1].split("<tbody>", 1)[1].split("</table>", 1)[0].split("<tr>")[1:]
    assert len(rows) == 2
    notes, items = rows  # ordered by item
    assert "kiosk.notes" in notes and '<td class="num">0</td>' in notes and "never" in notes
    assert f'href="{reverse("publications-detail", args=[publication.pk])}"' in items
    assert '<td class="num">2</td>' in items and "every 15 min" in items
    assert "branch: connection refused" in items and "<time" in items


def test_the_detail_page_shows_each_subscribers_copy_progress_and_polls_while_copying(viewer_client, catalog):
    publication, _, kiosk, _ = catalog
    job = JobRun.objects.create(kind="bidir_init", target="REPL_INIT_SNAPSHOT kiosk shop.items", state="running",
                                params={"subscription": kiosk.pk, "rows_per_commit": 50})  # fmt: skip
    JobRun.objects.create(kind="bidir_init", target="other", params={"subscription": 999999})
    body = viewer_client.get(reverse("publications-detail", args=[publication.pk])).content.decode()
    assert f'hx-get="/publications/{publication.pk}/" hx-trigger="every 2s"' in body
    kiosk_row = body.split('data-server="kiosk"', 1)[1].split("</tr>", 1)[0]
    assert 'aria-valuenow="25"' in kiosk_row and "300 / 1200 rows · 25%" in kiosk_row and "50 per commit" in kiosk_row
    assert f'href="{reverse("jobs-detail", args=[job.pk])}"' in kiosk_row
    branch_row = body.split('data-server="branch"', 1)[1].split("</tr>", 1)[0]
    assert 'aria-valuenow="100"' in branch_row and "copied" in branch_row and "jobs-detail" not in branch_row
    # An htmx poll gets the subscriber table only; once every copy is done it stops polling.
    SnapshotSubscription.objects.filter(pk=kiosk.pk).update(init_state="done", init_rows_done=1200)
    JobRun.objects.filter(pk=job.pk).update(state="succeeded")
    part = viewer_client.get(
        reverse("publications-detail", args=[publication.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    # the subscribers, with the facts above them swapped out of band (a sync's end shows there too)
    assert part.lstrip().startswith('<dl class="facts" id="publication-facts" hx-swap-oob="true">')
    assert '<div id="subscribers"' in part and "<html" not in part
    subscribers = part.split('<div id="subscribers"', 1)[1]
    assert "hx-trigger" not in subscribers.split(">", 1)[0] and "1200 / 1200 rows · 100%" in part


def test_the_subscribe_form_offers_only_other_registered_servers(editor_client, catalog):
    publication, *_ = catalog
    body = editor_client.get(reverse("publications-detail", args=[publication.pk])).content.decode()
    form = body.split('id="add-subscriber"', 1)[1].split("</form>", 1)[0]
    assert re.findall(r'<option value="(\w+)"', form) == ["spare"]
    response = editor_client.post(
        reverse("publications-subscribe", args=[publication.pk]), {"server": "shop"}, follow=True
    )
    assert "neither the publisher nor already subscribed" in response.content.decode()
    assert SnapshotSubscription.objects.count() == 2


def test_dropping_asks_first_and_says_what_goes(editor_client, catalog):
    publication, branch, *_ = catalog
    page = editor_client.get(reverse("publications-drop", args=[publication.pk])).content.decode()
    assert (
        "Drop publication shop.items?" in page and "its 2 subscription(s)" in page and "stay, with their rows" in page
    )
    page = editor_client.get(reverse("subscriptions-drop", args=[branch.pk])).content.decode()
    assert "Drop the subscription of branch to shop.items?" in page and "its table items stays" in page
    page = editor_client.get(reverse("subscriptions-drop", args=[branch.pk]) + "?drop_table=on").content.decode()
    assert "and its table?" in page and "is dropped on branch" in page
    assert '<input type="hidden" name="drop_table" value="on">' in page
    assert SnapshotSubscription.objects.count() == 2  # asking changes nothing


def test_a_bad_schedule_or_copy_size_is_refused_with_a_message(editor_client, catalog):
    publication, branch, *_ = catalog
    response = editor_client.post(
        reverse("publications-schedule", args=[publication.pk]), {"every_minutes": "0"}, follow=True
    )
    assert "whole number of minutes" in response.content.decode() and not ScheduledEvent.objects.exists()
    response = editor_client.post(
        reverse("subscriptions-init", args=[branch.pk]), {"rows_per_commit": "0"}, follow=True
    )
    assert "Rows per commit is a whole number" in response.content.decode() and not JobRun.objects.exists()


def test_scheduling_a_sync_from_the_page(editor_client, catalog):
    publication, *_ = catalog
    editor_client.post(reverse("publications-schedule", args=[publication.pk]), {"every_minutes": "30"})
    event = ScheduledEvent.objects.get(name="bidir shop.items")
    assert event.interval == 30 and event.sql == "REPL_UPDATE_SNAPSHOT ('shop.items', 2)"
    page = editor_client.get(reverse("publications-detail", args=[publication.pk])).content.decode()
    assert "REPL_UPDATE_SNAPSHOT (&#x27;shop.items&#x27;, 2)" in page and 'value="30"' in page
    editor_client.post(reverse("publications-schedule", args=[publication.pk]), {"every_minutes": ""})
    assert not ScheduledEvent.objects.exists()


def test_the_subscriptions_page_links_each_subscription_to_its_publication(viewer_client, catalog):
    publication, *_ = catalog
    body = viewer_client.get(reverse("subscriptions")).content.decode()
    table = body.split('id="snapshot-subscriptions"', 1)[1].split("</table>", 1)[0]
    assert table.count(f'href="{reverse("publications-detail", args=[publication.pk])}"') == 2
    assert "copying" in table and "300 / 1200" in table


# --- live: a SQLite publisher, SQLite and PostgreSQL subscribers, Spark jobs run in the test process ------


@pytest.fixture
def shop(make_server):
    server = make_server("sqlite", "shop")
    create_table(server, "items", COLUMNS, ["id"])
    insert_rows(
        server, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) + Decimal("0.5")) for i in range(1, 31)]
    )
    create_table(server, "nokey", [("a", LogicalType("integer"))], [])
    return server


def price_of(server, key: int) -> Decimal:
    return Decimal(str(fetch_all(server, f"SELECT price FROM items WHERE id = {key}")[0][0]))


@pytest.mark.spark
@pytest.mark.live_db
def test_publish_subscribe_copy_sync_and_drop_from_the_pages(editor_client, shop, make_server, spark, jobs_sync):
    branch = make_server("postgresql", "branch")
    kiosk = make_server("sqlite", "kiosk")

    # A table without a primary key cannot be published: the reason is shown and nothing is created.
    response = editor_client.post(reverse("publications-new"), {"server": "shop", "table": "nokey"})
    assert response.status_code == 200 and b"primary key" in response.content
    assert not SnapshotPublication.objects.exists()

    response = editor_client.post(reverse("publications-new"), {"server": "shop", "table": "items"})
    publication = SnapshotPublication.objects.get()
    assert response["Location"] == reverse("publications-detail", args=[publication.pk])
    assert publication.item == "shop.items" and publication.table == "items"

    for name in ("branch", "kiosk"):
        editor_client.post(reverse("publications-subscribe", args=[publication.pk]), {"server": name})
    subs = {s.server: s for s in SnapshotSubscription.objects.all()}
    assert set(subs) == {"branch", "kiosk"}

    response = editor_client.post(reverse("subscriptions-init", args=[subs["branch"].pk]), {"rows_per_commit": "7"})
    assert response["Location"] == reverse("publications-detail", args=[publication.pk])
    editor_client.post(reverse("subscriptions-init", args=[subs["kiosk"].pk]), {"rows_per_commit": "100"})
    init = JobRun.objects.filter(kind="bidir_init").order_by("id")
    assert [j.state for j in init] == ["succeeded", "succeeded"], [j.error for j in init]
    assert fetch_all(branch, "SELECT count(*) FROM items") == [(30,)]
    sub = SnapshotSubscription.objects.get(server="branch")
    assert (sub.init_state, sub.init_rows_done, sub.init_rows_per_commit) == ("done", 30, 7)
    page = editor_client.get(reverse("publications-detail", args=[publication.pk])).content.decode()
    branch_row = page.split('data-server="branch"', 1)[1].split("</tr>", 1)[0]
    assert "30 / 30 rows · 100%" in branch_row and f'href="{reverse("jobs-detail", args=[init[0].pk])}"' in branch_row
    assert 'id="subscribers" hx-get' not in page  # nothing left to follow

    # Changes on a subscriber reach the publisher and the other subscriber through "sync now".
    execute(kiosk, "UPDATE items SET name = 'from kiosk' WHERE id = 3")
    execute(branch, "INSERT INTO items (id, name, price) VALUES (100, 'from branch', 1.25)")
    editor_client.post(reverse("publications-sync", args=[publication.pk]))
    sync = JobRun.objects.get(kind="bidir_sync")
    assert sync.state == "succeeded", sync.error
    assert fetch_all(shop, "SELECT name FROM items WHERE id IN (3, 100) ORDER BY id") == [
        ("from kiosk",),
        ("from branch",),
    ]
    assert fetch_all(kiosk, "SELECT name FROM items WHERE id = 100") == [("from branch",)]
    assert fetch_all(branch, "SELECT name FROM items WHERE id = 3") == [("from kiosk",)]
    listing = editor_client.get(reverse("publications")).content.decode()
    row = listing.split('id="publication-rows"', 1)[1].split("</tr>", 2)[1]
    assert '<td class="num">2</td>' in row and "never" not in row

    # Dropping the kiosk's subscription with its table.
    editor_client.post(reverse("subscriptions-drop", args=[subs["kiosk"].pk]), {"drop_table": "on"})
    assert list(SnapshotSubscription.objects.values_list("server", flat=True)) == ["branch"]
    assert fetch_all(kiosk, "SELECT count(*) FROM sqlite_master WHERE name = 'items'") == [(0,)]
    actions = set(AuditEntry.objects.filter(username="editor", outcome="ok").values_list("action", flat=True))
    assert {"bidir.publish", "bidir.subscribe", "job.bidir_init", "job.bidir_sync", "bidir.unsubscribe"} <= actions

    # Dropping the publication.
    confirm = editor_client.get(reverse("publications-drop", args=[publication.pk])).content.decode()
    assert "its 1 subscription(s)" in confirm
    response = editor_client.post(reverse("publications-drop", args=[publication.pk]))
    assert response["Location"] == reverse("publications")
    assert not SnapshotPublication.objects.exists() and not SnapshotSubscription.objects.exists()


@pytest.mark.spark
@pytest.mark.live_db
def test_a_conflict_from_a_sync_is_listed_shown_and_its_loser_reapplied(
    editor_client, shop, make_server, spark, jobs_sync
):
    branch = make_server("sqlite", "branch")
    editor_client.post(reverse("publications-new"), {"server": "shop", "table": "items"})
    publication = SnapshotPublication.objects.get()
    editor_client.post(reverse("publications-subscribe", args=[publication.pk]), {"server": "branch"})
    editor_client.post(
        reverse("subscriptions-init", args=[SnapshotSubscription.objects.get().pk]), {"rows_per_commit": "10"}
    )

    execute(shop, "UPDATE items SET price = 9.99 WHERE id = 5")
    execute(branch, "UPDATE items SET price = 4.44 WHERE id = 5")
    editor_client.post(reverse("publications-sync", args=[publication.pk]))
    backup = ConflictBackup.objects.get()
    assert (backup.conflict_type, backup.decision, backup.resolver) == ("U", 3, "default")
    assert price_of(shop, 5) == Decimal("9.99") and price_of(branch, 5) == Decimal("9.99")

    inbox = editor_client.get(reverse("conflicts"), {"item": "shop.items", "type": "U"}).content.decode()
    assert f'href="{reverse("conflicts-detail", args=[backup.pk])}"' in inbox and "publisher wins" in inbox
    detail = editor_client.get(reverse("conflicts-detail", args=[backup.pk])).content.decode()
    table = detail.split('id="winner-loser"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<tr class="diff" data-column="([^"]+)">', table) == ["price", "ROWGUID"]

    response = editor_client.post(reverse("conflicts-reapply", args=[backup.pk]), follow=True)
    assert "wrote the losing version" in response.content.decode()
    assert price_of(shop, 5) == Decimal("4.44")
    editor_client.post(reverse("publications-sync", args=[publication.pk]))
    assert price_of(branch, 5) == Decimal("4.44")
    backup.refresh_from_db()
    assert backup.reapplied_at is not None and backup.reapplied_by == "editor"
    detail = editor_client.get(reverse("conflicts-detail", args=[backup.pk])).content.decode()
    assert "Re-applied by <strong>editor</strong>" in detail and 'id="reapply"' not in detail
    assert AuditEntry.objects.filter(action="conflict.reapply", outcome="ok", username="editor").exists()


# --- the resolver editor ----------------------------------------------------------------------------------


@pytest.fixture
def published(shop):
    """shop.items in the catalog (the resolver editor reads the table's columns; no triggers needed)."""
    return SnapshotPublication.objects.create(item="shop.items", server=shop, table="items")


def chain(body: str, cr_type: str) -> list[str]:
    table = body.split(f'id="chain-{cr_type}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<td class="mono">(items_cr_\w+|shop\.items_cr_\w+|[\w.]+_cr_\w+)</td>', table)


def add(client, publication, **fields):
    data = {
        "type": "U",
        "resolver_class": "pub_wins",
        "column": "",
        "expression": "",
        "assignments": "",
        "notify": "",
        "order": "",
    }
    data.update(fields)
    return client.post(reverse("publications-resolvers-add", args=[publication.pk]), data, HTTP_HX_REQUEST="true")


def test_the_resolver_page_explains_codes_defaults_and_what_expressions_may_read(viewer_client, published):
    body = viewer_client.get(reverse("publications-resolvers", args=[published.pk])).content.decode()
    help_text = body.split('id="resolver-help"', 1)[1].split("</div>", 1)[0]
    for code, name in [(0, "undecided"), (1, "subscriber wins"), (2, "subscriber wins, origin changes to the publisher"),
                       (3, "publisher wins"), (5, "ignore")]:  # fmt: skip
        assert f'<td class="num mono">{code}</td><td>{name}</td>' in help_text
    assert "inserts and updates: publisher wins (3); deletes: ignore (5)" in help_text
    assert "<code>pub.column</code>" in help_text and "<code>new.column</code>" in help_text
    assert "<code>old.ROWGUID</code>" in help_text and "only by its" in help_text
    assert '<td class="mono">price</td><td class="muted">decimal(12,2)</td>' in body
    assert '<td class="mono">id</td><td class="muted">bigint, key</td>' in body
    for cr_type in "IUD":
        assert f'id="chain-{cr_type}"' in body
    assert "then the default: 3 · publisher wins" in body and "then the default: 5 · ignore" in body
    assert 'id="resolver-form"' not in body and 'id="dry-run-chain"' not in body  # a viewer may not change or run


def test_resolvers_are_added_from_a_class_or_an_expression_and_reordered(editor_client, published):
    response = add(editor_client, published, resolver_class="pub_wins")
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="resolver-editor">') and "<html" not in body
    proc = SnapshotConflictResolver.objects.get().proc
    assert f'<div class="result ok" id="resolver-saved">Added {proc} to the update chain.</div>' in body
    add(editor_client, published, resolver_class="min", column="price")
    body = add(
        editor_client, published, resolver_class="custom",
        expression="CASE WHEN new.price < pub.price THEN 2 ELSE 0 END", assignments="name = concat(new.name, ' (sub)')",
        notify="dba@example.com",
    ).content.decode()  # fmt: skip
    saved = list(SnapshotConflictResolver.objects.filter(table_name="shop.items", type="U").order_by("order"))
    assert [r.resolver_class for r in saved] == ["pub_wins", "min", "custom"]
    assert saved[1].column == "price" and saved[2].assignments and saved[2].notify == "dba@example.com"
    assert chain(body, "U") == [r.proc for r in saved]
    row = body.split(f'data-resolver="{saved[2].pk}"', 1)[1].split("</tr>", 1)[0]
    assert "new.price &lt; pub.price" in row and "dba@example.com" in row and "name = " in row

    body = editor_client.post(reverse("publications-resolver-move", args=[saved[2].pk]), {"direction": "up"},
                              HTTP_HX_REQUEST="true").content.decode()  # fmt: skip
    assert chain(body, "U") == [saved[0].proc, saved[2].proc, saved[1].proc]
    editor_client.post(reverse("publications-resolver-move", args=[saved[0].pk]), {"direction": "down"})
    page = editor_client.get(reverse("publications-resolvers", args=[published.pk])).content.decode()
    assert chain(page, "U") == [saved[2].proc, saved[0].proc, saved[1].proc]
    actions = list(AuditEntry.objects.filter(username="editor", outcome="ok").values_list("action", flat=True))
    assert actions.count("resolver.add") == 3 and actions.count("resolver.move") == 2


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"resolver_class": "custom", "expression": "pub.nope > 1"}, "expression", "nope"),
        ({"resolver_class": "custom", "expression": "7"}, "expression", "not a code of an update resolver"),
        (
            {"resolver_class": "custom", "expression": "2", "assignments": "price 3"},
            "assignments",
            "write it as column = expression",
        ),
        (
            {"resolver_class": "custom", "expression": "2", "assignments": "id = 3"},
            "assignments",
            "part of the primary key",
        ),
        ({"resolver_class": "custom", "expression": ""}, "expression", "needs an expression"),
        ({"resolver_class": "min"}, "column", "min compares a column"),
        ({"resolver_class": "ave", "column": "name"}, "column", "numeric column"),
        ({"resolver_class": "max", "column": "price", "type": "D"}, "resolver_class", "not to deletes"),
        ({"resolver_class": "sub_wins", "notify": "not-an-address"}, "notify", "valid email"),
    ],
)
def test_a_wrong_resolver_is_explained_next_to_its_field_and_not_saved(
    editor_client, published, fields, field, message
):
    response = add(editor_client, published, **fields)
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert body.lstrip().startswith('<div id="resolver-editor">')
    # The message sits in the field's own paragraph, after the field.
    paragraph = body.split(f'id="id_{field}"', 1)[1].split("</p>", 1)[0]
    assert 'class="errorlist' in paragraph and message in paragraph, paragraph
    assert not SnapshotConflictResolver.objects.exists()
    assert f'value="{fields.get("type", "U")}" selected' in body  # what was typed is kept


def test_a_resolver_is_edited_and_removed_after_confirmation(editor_client, published):
    add(editor_client, published, resolver_class="custom", expression="1")
    resolver = SnapshotConflictResolver.objects.get()
    url = reverse("publications-resolver-edit", args=[resolver.pk])
    page = editor_client.get(url).content.decode()
    assert "resolver-edit-form" in page and 'id="id_expression">\n1</textarea>' in page
    bad = editor_client.post(url, {"expression": "pub.nope", "assignments": "", "notify": ""}, HTTP_HX_REQUEST="true")
    bad_body = bad.content.decode()
    assert bad_body.lstrip().startswith('<div class="panel" id="edit-resolver">') and "<html" not in bad_body
    assert "nope" in bad_body.split('id="id_expression"', 1)[1].split("</p>", 1)[0]
    assert SnapshotConflictResolver.objects.get().expression == "1"
    good = editor_client.post(
        url, {"expression": "CASE WHEN new.price > 10 THEN 3 ELSE 1 END", "assignments": "", "notify": ""}
    )
    assert good["Location"] == reverse("publications-resolvers", args=[published.pk])
    assert SnapshotConflictResolver.objects.get().expression.startswith("CASE WHEN new.price > 10")

    confirm = editor_client.get(reverse("publications-resolver-remove", args=[resolver.pk])).content.decode()
    assert f"Remove resolver {resolver.proc}?" in confirm and SnapshotConflictResolver.objects.exists()
    editor_client.post(reverse("publications-resolver-remove", args=[resolver.pk]))
    assert not SnapshotConflictResolver.objects.exists()
    assert AuditEntry.objects.filter(action="resolver.remove", outcome="ok").exists()


def test_a_dry_run_is_followed_by_polling_until_it_is_done(editor_client, published):
    body = editor_client.post(
        reverse("publications-dry-run", args=[published.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    job = JobRun.objects.get(kind="resolver_dry_run")
    assert body.lstrip().startswith('<div id="dry-run"') and "<html" not in body
    assert f'hx-get="{reverse("publications-resolvers", args=[published.pk])}?dry_run={job.pk}"' in body
    assert f'href="{reverse("publications-resolvers", args=[published.pk])}?dry_run={job.pk}"' in body
    JobRun.objects.filter(pk=job.pk).update(state="succeeded", result={"rows": [], "changed": 0})
    poll = editor_client.get(reverse("publications-resolvers", args=[published.pk]), {"dry_run": job.pk},
                             HTTP_HX_REQUEST="true").content.decode()  # fmt: skip
    assert "hx-get" not in poll and "No conflicts are recorded for shop.items yet" in poll
    page = editor_client.get(reverse("publications-resolvers", args=[published.pk]) + "?dry_run=nonsense")
    assert page.status_code == 200


def recorded(key: int, pub_price: str, new_price: str, decision: int = 3) -> ConflictBackup:
    pub = {"id": key, "name": f"item {key}", "price": pub_price, "ROWGUID": f"shop@{key}"}
    new = {"id": key, "name": f"item {key}", "price": new_price, "ROWGUID": f"branch@{key}"}
    return ConflictBackup.objects.create(
        item="shop.items", table_name="items", publisher="shop", source="branch", change_guid=f"branch@{key}",
        origin="branch", primary_key={"id": key}, conflict_type="U", operation="U", decision=decision,
        resolver="default", publisher_row=pub, incoming_row=new, old_rowguid=f"shop@old{key}",
        winning_row=pub, losing_row=new,
    )  # fmt: skip


@pytest.mark.spark
def test_a_dry_run_shows_which_recorded_decisions_the_chain_would_change(editor_client, published, spark, jobs_sync):
    cheaper = recorded(1, "5.00", "3.00")
    dearer = recorded(2, "5.00", "8.00")
    deleted = ConflictBackup.objects.create(
        item="shop.items", table_name="items", publisher="shop", source="branch", change_guid="branch@d",
        origin="branch", primary_key={"id": 3}, conflict_type="D", operation="D", decision=5, resolver="default",
        publisher_row={"id": 3, "name": "item 3", "price": "1.00", "ROWGUID": "shop@3"},
    )  # fmt: skip

    # The saved chain is empty: every recorded (default) decision stays.
    body = editor_client.post(
        reverse("publications-dry-run", args=[published.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<strong>0</strong> of 3 recorded decisions would change" in body, body
    assert 'class="changed"' not in body

    # The expression being written: the cheaper version wins.
    body = editor_client.post(reverse("publications-dry-run", args=[published.pk]), {
        "type": "U", "resolver_class": "custom",
        "expression": "CASE WHEN new.price < pub.price THEN 1 WHEN new.price > pub.price THEN 3 ELSE 0 END",
    }, HTTP_HX_REQUEST="true").content.decode()  # fmt: skip
    assert "<strong>1</strong> of 3 recorded decisions would change" in body
    rows = body.split('id="dry-run-rows"', 1)[1].split("</table>", 1)[0].split("<tr")[2:]
    changed = {int(re.search(r"/conflicts/(\d+)/", r).group(1)) for r in rows if 'class="changed"' in r}
    assert changed == {cheaper.pk}
    row = next(r for r in rows if f"/conflicts/{cheaper.pk}/" in r)
    assert "3 · publisher wins" in row and "1 · subscriber wins" in row and "proposed" in row
    assert not SnapshotConflictResolver.objects.exists()  # a dry run saves nothing

    # A saved sub_wins chain for updates, as the full page shows it after the redirect.
    add(editor_client, published, resolver_class="sub_wins")
    response = editor_client.post(reverse("publications-dry-run", args=[published.pk]))
    job = JobRun.objects.filter(kind="resolver_dry_run").latest("id")
    assert response["Location"] == reverse("publications-resolvers", args=[published.pk]) + f"?dry_run={job.pk}"
    page = editor_client.get(response["Location"]).content.decode()
    rows = page.split('id="dry-run-rows"', 1)[1].split("</table>", 1)[0].split("<tr")[2:]
    changed = {int(re.search(r"/conflicts/(\d+)/", r).group(1)) for r in rows if 'class="changed"' in r}
    assert changed == {cheaper.pk, dearer.pk} and deleted.pk not in changed
    assert "<html" in page and "<strong>2</strong> of 3" in page


def test_a_proposed_expression_that_does_not_parse_is_shown_and_starts_nothing(editor_client, published):
    body = editor_client.post(reverse("publications-dry-run", args=[published.pk]), {
        "type": "U", "resolver_class": "custom", "expression": "CASE WHEN pub.price > THEN 1 END",
    }, HTTP_HX_REQUEST="true").content.decode()  # fmt: skip
    assert 'id="dry-run-error"' in body and "<html" not in body
    assert not JobRun.objects.filter(kind="resolver_dry_run").exists()


def test_the_subscriber_ddl_page_gives_sql_server_oracle_and_db2_scripts_for_the_published_table(
    viewer_client, published
):
    page = reverse("publications-ddl", args=[published.pk])
    assert page in viewer_client.get(reverse("publications-detail", args=[published.pk])).content.decode()
    body = viewer_client.get(page, {"subscriber": "branch 'o"}).content.decode()
    scripts = dict(re.findall(r'data-dialect="([^"]+)">(.*?)</div>\n', body, re.S))
    assert set(scripts) == {"SQL Server", "Oracle", "IBM DB2"}
    # The copy with its ROWGUID column, the log of its key, the triggers stamping the subscriber's own name.
    assert (
        "CREATE TABLE [items] ([id] int NOT NULL, [name] varchar(40), [price] numeric(12, 2), [ROWGUID]"
        in scripts["SQL Server"]
    )
    assert "CREATE TABLE &quot;RLOG_items&quot; (&quot;RLOG_id&quot; INTEGER NOT NULL" in scripts["Oracle"]
    assert "N&#x27;branch &#x27;&#x27;o@&#x27;" in scripts["SQL Server"]
    assert "items_IR, items_UR" in scripts["IBM DB2"] and "OPL_GETUTCDATE" in scripts["Oracle"]
    assert "ALTER TABLE [items] ADD [ROWGUID] varchar(255)" in scripts["SQL Server"]  # for a table there already


def test_the_subscriber_ddl_page_says_when_the_publisher_cannot_be_read(viewer_client, catalog):
    publication = catalog[0]
    publication.table = "gone"
    publication.save()
    body = viewer_client.get(reverse("publications-ddl", args=[publication.pk])).content.decode()
    assert 'id="ddl-error"' in body and "gone" in body and "data-dialect" not in body

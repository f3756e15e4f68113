"""Transactional replication pages: publications with their items, grants, log and purger; subscribers with their
level, lag, validity, gaps and charts; subscriptions with their schedule. The live test publishes a PostgreSQL table,
subscribes a SQLite server and replicates it through the pages."""

from __future__ import annotations

import json
import re
from datetime import time, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    AuditEntry,
    DeclaredServer,
    JobRun,
    LevelSample,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Server,
    SkippedTransaction,
    TpGrant,
    TpItem,
)
from replication_admin.transactional.actions import purge_event_name, schedule_event_name
from replication_admin.transactional.selectors import capture_summary
from tests.tables import create_table, execute, fetch_all, insert_rows

pytestmark = pytest.mark.django_db

PUB = ("pub", "tbl")


def sub_args(subscriber: str) -> list[str]:
    return [subscriber, *PUB]


@pytest.fixture
def catalog(make_server):
    """Catalog rows only: pub/tbl with a table and a procedure, a grant, two subscribers, a gap and level samples."""
    for name in ("pub", "s1", "s2", "spare"):
        make_server("sqlite", name)
    account = ReplAccount.objects.create(
        server="pub", account="tbl", level=12, count=12, is_updateable=1, sync_user="dba", log_file="tbl.log",
        log_started_at=timezone.now(), p_wday=7, p_time=time(3, 30),
    )  # fmt: skip
    TpItem.objects.create(server="pub", acct="tbl", type=2, item="DB.DBA.items", is_copy=1)
    TpItem.objects.create(server="pub", acct="tbl", type=3, item="DB.DBA.restock", options=1)
    TpGrant.objects.create(acct="tbl", grantee="s1")
    s1 = ReplSubscriber.objects.create(server="pub", account="tbl", subscriber="s1", level=12, count=12,
                                       state=ReplSubscriber.IN_SYNC, follow=True, init_state="done",
                                       last_sync_at=timezone.now())  # fmt: skip
    s2 = ReplSubscriber.objects.create(server="pub", account="tbl", subscriber="s2", level=9, count=9,
                                       state=ReplSubscriber.DISCONNECTED, init_state="done",
                                       last_error="connection refused", last_error_at=timezone.now())  # fmt: skip
    SkippedTransaction.objects.create(server="pub", account="tbl", subscriber="s2", level=7, count=7,
                                      error="duplicate key value violates unique constraint",
                                      entries=[["I", "items", {"id": 3}]])  # fmt: skip
    start = timezone.now() - timedelta(minutes=10)
    for n, (l1, l2) in enumerate([(3, 2), (8, 5), (12, 9)]):
        at = start + timedelta(minutes=3 * n)
        LevelSample.objects.create(server="pub", account="tbl", subscriber="s1", at=at, level=l1,
                                   publisher_level=12, lag=12 - l1)  # fmt: skip
        LevelSample.objects.create(server="pub", account="tbl", subscriber="s2", at=at, level=l2,
                                   publisher_level=12, lag=12 - l2)  # fmt: skip
    return account, s1, s2


def changes(account: ReplAccount) -> list[tuple[str, list]]:
    """Every URL that changes something, with the form data that would pass validation."""
    s1 = sub_args("s1")
    return [
        (reverse("trx-publications-new"), {"server": "spare", "account": "other"}),
        (reverse("trx-publications-add-item", args=PUB), {"item": "items2"}),
        (reverse("trx-publications-remove-item", args=PUB), {"item": str(TpItem.objects.first().pk)}),
        (reverse("trx-publications-grant", args=PUB), {"grantee": "s2"}),
        (reverse("trx-publications-revoke", args=PUB), {"grantee": "s1"}),
        (reverse("trx-publications-new-log", args=PUB), {"log_file": "tbl2.log"}),
        (reverse("trx-publications-purger", args=PUB), {"kind": "daily", "p_time": "01:00"}),
        (reverse("trx-publications-purge", args=PUB), {}),
        (reverse("trx-publications-drop", args=PUB), {}),
        (reverse("trx-subscriptions-new"), {"subscriber": "spare", "publisher": "pub", "account": "tbl"}),
        (reverse("trx-subscriptions-valid", args=s1), {"valid": "0"}),
        (reverse("trx-subscriptions-init", args=s1), {}),
        (reverse("trx-subscriptions-sync", args=s1), {}),
        (reverse("trx-subscriptions-follow", args=s1), {"follow": "0"}),
        (reverse("trx-subscriptions-schedule", args=s1), {"minutes": "5"}),
        (reverse("trx-subscriptions-drop", args=s1), {}),
    ]


def snapshot_of_catalog() -> tuple:
    return (
        list(ReplAccount.objects.values_list("server", "account", "log_file", "p_wday", "p_time", "p_day")),
        list(ReplSubscriber.objects.values_list("subscriber", "valid", "state", "follow").order_by("subscriber")),
        list(TpItem.objects.values_list("item", flat=True).order_by("item")),
        list(TpGrant.objects.values_list("grantee", flat=True)),
        DeclaredServer.objects.count(),
    )


def test_every_new_url_sends_anonymous_users_to_the_login_page(client, catalog):
    account, *_ = catalog
    pages = [
        reverse("trx-publications-new"),
        reverse("trx-publications-detail", args=PUB),
        reverse("trx-publications-drop", args=PUB),
        reverse("trx-subscriptions-new"),
        reverse("trx-subscriptions-detail", args=sub_args("s1")),
        reverse("trx-subscriptions-drop", args=sub_args("s1")),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next="), url
    before = snapshot_of_catalog()
    for url, data in changes(account):
        response = client.post(url, data)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next="), url
    assert snapshot_of_catalog() == before
    assert not AuditEntry.objects.exclude(action="server.register").exists()


def test_viewers_see_the_pages_without_buttons_and_every_post_is_refused_and_audited(viewer_client, catalog):
    account, *_ = catalog
    detail = viewer_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    for control in ("Set invalid", "Re-initialise", "Sync now", 'id="trx-add-table"', 'id="trx-purger-form"',
                    'id="trx-purge-now"', 'id="trx-unpublish"', 'id="trx-grant-form"', 'id="trx-add-subscriber"',
                    'id="trx-new-log-form"', ">Remove<", ">Revoke<"):  # fmt: skip
        assert control not in detail, control
    sub_page = viewer_client.get(reverse("trx-subscriptions-detail", args=sub_args("s1"))).content.decode()
    for control in ('id="trx-sync-now"', 'id="trx-disconnect"', 'id="trx-reinit"', "Set invalid",
                    'id="trx-schedule-form"', 'id="trx-unsubscribe"'):  # fmt: skip
        assert control not in sub_page, control
    assert 'id="trx-publish-form"' not in viewer_client.get(reverse("publications")).content.decode()
    assert 'id="trx-subscribe-form"' not in viewer_client.get(reverse("subscriptions")).content.decode()

    for url in (
        reverse("trx-publications-new"),
        reverse("trx-subscriptions-new"),
        reverse("trx-publications-drop", args=PUB),
        reverse("trx-subscriptions-drop", args=sub_args("s2")),
    ):
        assert viewer_client.get(url).status_code == 200, url  # fmt: skip

    before = snapshot_of_catalog()
    posts = changes(account)
    for url, data in posts:
        response = viewer_client.post(url, data)
        assert response.status_code == 403 and b"may not" in response.content, url
    assert snapshot_of_catalog() == before
    assert not JobRun.objects.exists() and not ScheduledEvent.objects.exclude(name=purge_event_name(account)).exists()
    denials = AuditEntry.objects.filter(username="viewer", outcome="denied")
    assert denials.count() == len(posts)
    assert {
        "trx.publish", "trx.pub_add", "trx.pub_remove", "trx.grant", "trx.revoke", "trx.new_log", "trx.purger",
        "trx.purge", "trx.unpublish", "trx.subscribe", "trx.mark_invalid", "job.trx_init", "job.trx_sync",
        "trx.disconnect", "trx.schedule", "trx.unsubscribe",
    } == set(denials.values_list("action", flat=True))  # fmt: skip
    assert not AuditEntry.objects.filter(outcome="ok").exclude(action="server.register").exists()


def test_the_publications_page_lists_transactional_publications_next_to_the_bidirectional_ones(editor_client, catalog):
    ReplAccount.objects.create(server="s1", account="notes", log_file="notes.log")
    body = editor_client.get(reverse("publications")).content.decode()
    assert "Bi-directional snapshot publications" in body and 'id="publication-form"' in body  # still there
    rows = body.split('id="trx-publication-rows"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = rows.split("<tr ")[1:]
    assert len(rows) == 2
    tbl, notes = rows  # ordered by server, account
    assert f'href="{reverse("trx-publications-detail", args=PUB)}"' in tbl
    cells = [c.split(">", 1)[1].split("</td>")[0] for c in tbl.split("<td")[1:]]
    assert ">pub<" in cells[0] and ">tbl<" in cells[1]
    assert 'data-state="broken"' in cells[2]  # its state, then how far behind and what waits (none known)
    assert cells[5:11] == ["12", "yes", "dba", "tbl.log", "2", "2"]
    assert cells[11] == "weekly on Sunday at 03:30"
    assert "notes.log" in notes and "off" in notes and "no" in notes
    assert 'id="trx-publish-form"' in body and 'id="id_trx_server"' in body and 'id="id_server"' in body


def test_the_publication_page_shows_items_grants_log_purger_and_subscribers(editor_client, catalog):
    account, *_ = catalog
    ScheduledEvent.objects.create(name=purge_event_name(account), start=timezone.now() + timedelta(days=2),
                                  sql="REPL_PURGE ('pub', 'tbl')", interval=10080)  # fmt: skip
    body = editor_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    assert "Transactional publication tbl on pub" in body
    facts = body.split('id="trx-facts"', 1)[1].split("</dl>", 1)[0]
    assert 'id="trx-level">12 ' in facts and "12 transactions logged" in facts and "yes: subscribers may" in facts
    assert "dba" in facts
    items = body.split('id="trx-item-rows"', 1)[1].split("</table>", 1)[0]
    table_row = items.split('data-item="DB.DBA.items"', 1)[1].split("</tr>", 1)[0]
    assert "2 (table)" in table_row and "<td>1</td>" in table_row and "—" in table_row
    proc_row = items.split('data-item="DB.DBA.restock"', 1)[1].split("</tr>", 1)[0]
    assert "3 (procedure)" in proc_row and "1 (calls)" in proc_row
    assert 'data-grantee="s1"' in body
    assert 'id="trx-log-file">tbl.log<' in body
    assert 'id="trx-capture">triggers; SQLite has one writer at a time' in body
    Server.objects.filter(name="pub").update(dialect="postgresql")
    assert "writers never wait for each other" in capture_summary(account)
    Server.objects.filter(name="pub").update(dialect="mysql")
    assert "writers never wait for each other (the log is versioned" in capture_summary(account)
    purger = body.split('id="trx-purger"', 1)[1].split("</dl>", 1)[0]
    assert "weekly on Sunday at 03:30" in purger and "NULL / NULL / 7 / 03:30" in purger
    assert "REPL_PURGE (&#x27;pub&#x27;, &#x27;tbl&#x27;)" in purger and 'id="trx-purge-next"><time' in purger

    s1_row = body.split('data-subscriber="s1"', 1)[1].split("</tr>\n", 1)[0]
    assert 'class="num level">12<' in s1_row and 'class="num lag">0<' in s1_row and 'badge ok">valid' in s1_row
    assert "IN SYNC" in s1_row and "in-sync mode" in s1_row and "Set invalid" in s1_row
    assert 'class="num gaps">0<' in s1_row
    s2_row = body.split('data-subscriber="s2"', 1)[1].split("</tr>\n", 1)[0]
    assert 'class="num lag">3<' in s2_row and "DISCONNECTED" in s2_row and "connection refused" in s2_row
    assert "Re-initialise" in s2_row and "Sync now" in s2_row
    # The gap is counted and listed with its level and error.
    gaps = s2_row.split('class="num gaps">', 1)[1]
    assert "1 skipped" in gaps and '<td class="num">7</td>' in gaps and "duplicate key value" in gaps
    # Only servers that do not subscribe yet are offered.
    offered = body.split('id="id_add_subscriber"', 1)[1].split("</select>", 1)[0]
    assert 'value="spare"' in offered and 'value="s1"' not in offered and 'value="pub"' not in offered


def test_the_charts_carry_each_subscribers_level_and_lag(viewer_client, catalog):
    body = viewer_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    assert 'src="/static/vendor/plotly-basic-3.7.0.min.js"' in body and 'id="trx-level-chart"' in body
    level = json.loads(body.split('<script id="trx-level-figure" type="application/json">', 1)[1].split("</script>")[0])
    lag = json.loads(body.split('<script id="trx-lag-figure" type="application/json">', 1)[1].split("</script>")[0])
    by_name = {t["name"]: t for t in level["data"]}
    assert by_name["s1"]["y"] == [3, 8, 12] and by_name["s2"]["y"] == [2, 5, 9]
    assert by_name["pub (publisher)"]["y"] == [12, 12, 12]
    assert len(by_name["s1"]["x"]) == 3 and by_name["s1"]["x"] == sorted(by_name["s1"]["x"])
    assert {t["name"]: t["y"] for t in lag["data"]} == {"s1": [9, 4, 0], "s2": [10, 7, 3]}
    assert level["layout"]["xaxis"]["type"] == "date"
    # The subscription's page charts only its own samples.
    body = viewer_client.get(reverse("trx-subscriptions-detail", args=sub_args("s2"))).content.decode()
    level = json.loads(body.split('<script id="trx-level-figure" type="application/json">', 1)[1].split("</script>")[0])
    assert [t["name"] for t in level["data"]] == ["s2", "pub (publisher)"]


def test_the_level_and_lag_charts_have_table_views_refreshed_with_them(viewer_client, catalog):
    body = viewer_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    lag_view = body.split('id="trx-lag-table"', 1)[1].split("</table>", 1)[0]
    header = re.findall(r'<th scope="col"[^>]*>([^<]*)</th>', lag_view)
    assert header == ["Time", "s1", "s2"]
    cells = [re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", row) for row in re.findall(r"<tr>(.*?)</tr>", lag_view)[1:]]
    assert [c[1] for c in cells if c[1]] == ["9", "4", "0"] and [c[2] for c in cells if c[2]] == ["10", "7", "3"]
    # An htmx refresh of the part with the figures brings the table views again, out of band.
    part = viewer_client.get(reverse("trx-publications-detail", args=PUB), HTTP_HX_REQUEST="true").content.decode()
    assert (
        '<div id="trx-lag-table" hx-swap-oob="true">' in part
        and '<div id="trx-level-table" hx-swap-oob="true">' in part
    )
    assert "pub (publisher)" in part.split('id="trx-level-table"', 1)[1]


def test_set_invalid_and_set_valid_change_rs_valid_and_are_audited(editor_client, catalog):
    url = reverse("trx-subscriptions-valid", args=sub_args("s1"))
    response = editor_client.post(url, {"valid": "0", "back": "publication"})
    assert response.status_code == 302 and response["Location"] == reverse("trx-publications-detail", args=PUB)
    assert ReplSubscriber.objects.get(subscriber="s1").valid == 0
    entry = AuditEntry.objects.get(action="trx.mark_invalid")
    assert (entry.username, entry.target, entry.outcome, entry.via) == ("editor", "s1 <- pub/tbl", "ok", "web")

    # From the page, through htmx: only the subscribers table comes back, with the message.
    response = editor_client.post(url, {"valid": "1", "back": "publication"}, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body and body.lstrip().startswith('<div id="trx-subscribers"')
    assert "s1 is marked valid for pub/tbl" in body
    assert 'data-subscriber="s1" data-valid="1"' in body
    assert ReplSubscriber.objects.get(subscriber="s1").valid == 1
    assert AuditEntry.objects.filter(action="trx.mark_valid", username="editor", outcome="ok").count() == 1

    # From the subscription's page: its status part comes back.
    response = editor_client.post(url, {"valid": "0"}, HTTP_HX_REQUEST="true")
    assert response.content.decode().lstrip().startswith('<div id="trx-status"')
    assert 'id="trx-sub-valid" data-valid="0"' in response.content.decode()
    assert editor_client.post(url, {"valid": "yes"}).status_code == 400


def test_the_purger_form_stores_p_fields_and_schedules_repl_purge(editor_client, catalog):
    account, *_ = catalog
    url = reverse("trx-publications-purger", args=PUB)
    response = editor_client.post(url, {"kind": "monthly", "p_day": "15", "p_wday": "3", "p_time": "02:15"})
    assert response.status_code == 302
    account.refresh_from_db()
    assert (account.p_month, account.p_day, account.p_wday, account.p_time) == (None, 15, None, time(2, 15))
    event = ScheduledEvent.objects.get(name=purge_event_name(account))
    assert event.sql == "REPL_PURGE ('pub', 'tbl')" and event.interval == 43200 and event.disabled == 0
    local = timezone.localtime(event.start)
    assert (local.day, local.hour, local.minute) == (15, 2, 15) and event.start >= timezone.now()
    assert AuditEntry.objects.filter(action="trx.purger", username="editor", outcome="ok").count() == 1
    page = editor_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    assert "monthly on day 15 at 02:15" in page

    editor_client.post(url, {"kind": "yearly", "p_month": "2", "p_day": "29", "p_time": "23:00"})
    account.refresh_from_db()
    assert (account.p_month, account.p_day, account.p_wday, account.p_time) == (2, 29, None, time(23, 0))
    event = ScheduledEvent.objects.get(name=purge_event_name(account))
    assert event.interval == 525600 and timezone.localtime(event.start).month == 2

    # A weekly purger without its weekday is refused and changes nothing.
    editor_client.post(url, {"kind": "weekly", "p_time": "01:00"})
    account.refresh_from_db()
    assert (account.p_month, account.p_day) == (2, 29)
    assert AuditEntry.objects.filter(action="trx.purger").count() == 2

    editor_client.post(url, {"kind": "off"})
    account.refresh_from_db()
    assert (account.p_month, account.p_day, account.p_wday, account.p_time) == (None, None, None, None)
    assert not ScheduledEvent.objects.filter(name=purge_event_name(account)).exists()

    editor_client.post(url, {"kind": "every", "purge_every": "5", "p_time": "04:00"})
    account.refresh_from_db()
    assert (account.p_time, account.purge_every) == (None, 5)
    assert ScheduledEvent.objects.get(name=purge_event_name(account)).interval == 5
    assert "every 5 minute(s)" in editor_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    editor_client.post(url, {"kind": "daily", "p_time": "04:00"})
    account.refresh_from_db()
    assert (account.p_time, account.purge_every) == (time(4, 0), None)


def test_the_schedule_form_creates_and_removes_the_subscriptions_event(editor_client, catalog):
    _, s1, _ = catalog
    url = reverse("trx-subscriptions-schedule", args=sub_args("s1"))
    response = editor_client.post(url, {"minutes": "15"})
    assert response["Location"] == reverse("trx-subscriptions-detail", args=sub_args("s1"))
    name = schedule_event_name("s1", s1)
    assert name == "repl_pub_tbl@s1"
    event = ScheduledEvent.objects.get(name=name)
    assert (event.sql, event.interval, event.server, event.disabled) == ("REPL_SYNC ('pub', 'tbl')", 15, "s1", 0)
    assert AuditEntry.objects.filter(action="trx.schedule", username="editor", outcome="ok").count() == 1
    listing = editor_client.get(reverse("subscriptions")).content.decode()
    row = listing.split('data-subscription="s1 pub/tbl"', 1)[1].split("</tr>", 1)[0]
    assert "every 15 min" in row and "IN SYNC" in row and "valid" in row
    page = editor_client.get(reverse("trx-subscriptions-detail", args=sub_args("s1"))).content.decode()
    assert "REPL_SYNC (&#x27;pub&#x27;, &#x27;tbl&#x27;)" in page

    assert editor_client.post(url, {"minutes": "-1"}).status_code == 302
    assert ScheduledEvent.objects.get(name=name).interval == 15
    editor_client.post(url, {"minutes": "0"})
    assert not ScheduledEvent.objects.filter(name=name).exists()


def test_disconnect_grants_new_log_and_unsubscribe_go_through_their_actions(editor_client, catalog):
    _, s1, _ = catalog
    editor_client.post(reverse("trx-subscriptions-follow", args=sub_args("s1")), {"follow": "0"})
    s1.refresh_from_db()
    assert (s1.follow, s1.state) == (False, ReplSubscriber.DISCONNECTED)

    editor_client.post(reverse("trx-publications-grant", args=PUB), {"grantee": "s2"})
    editor_client.post(reverse("trx-publications-revoke", args=PUB), {"grantee": "s1"})
    assert list(TpGrant.objects.values_list("grantee", flat=True)) == ["s2"]

    confirm = editor_client.get(reverse("trx-subscriptions-drop", args=sub_args("s2"))).content.decode()
    assert "Unsubscribe s2 from pub/tbl?" in confirm
    response = editor_client.post(reverse("trx-subscriptions-drop", args=sub_args("s2")))
    assert response["Location"] == reverse("subscriptions")
    assert list(ReplSubscriber.objects.values_list("subscriber", flat=True)) == ["s1"]
    done = set(AuditEntry.objects.filter(username="editor", outcome="ok").values_list("action", flat=True))
    assert {"trx.disconnect", "trx.grant", "trx.revoke", "trx.unsubscribe"} <= done

    # An action's refusal is shown as a message.
    response = editor_client.post(reverse("trx-publications-revoke", args=PUB), {"grantee": "nobody"}, follow=True)
    assert "nobody has no grant on tbl" in response.content.decode()


def test_subscribing_declares_the_publisher_first_and_explains_a_refusal(editor_client, catalog):
    response = editor_client.post(reverse("trx-subscriptions-new"), {"subscriber": "pub", "publisher": "pub",
                                                                      "account": "tbl"})  # fmt: skip
    assert response.status_code == 200 and "identical names" in response.content.decode()
    response = editor_client.post(reverse("trx-subscriptions-new"), {"subscriber": "spare", "publisher": "pub",
                                                                      "account": "nope"})  # fmt: skip
    assert "pub has no publication &#x27;nope&#x27;" in response.content.decode()
    assert not ReplSubscriber.objects.filter(subscriber="spare").exists()
    declared = DeclaredServer.objects.get(subscriber="spare")
    assert (declared.server, declared.dsn) == ("pub", "pub")


COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=12, scale=2)),
]


def rows_of(server) -> list[tuple[int, str, Decimal]]:
    return [
        (int(i), n, Decimal(str(p))) for i, n, p in fetch_all(server, "SELECT id, name, price FROM items ORDER BY id")
    ]


@pytest.mark.spark
@pytest.mark.live_db
def test_publish_add_subscribe_initialise_and_sync_through_the_pages(editor_client, make_server, spark, jobs_sync):
    shop = make_server("postgresql", "shop")
    branch = make_server("sqlite", "branch")
    create_table(shop, "items", COLUMNS, ["id"])
    insert_rows(shop, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) + Decimal("0.25"))
                                                          for i in range(1, 21)])  # fmt: skip

    response = editor_client.post(
        reverse("trx-publications-new"),
        {"server": "shop", "account": "sales", "log_file": "", "updateable": "", "sync_user": ""},
    )
    assert response["Location"] == reverse("trx-publications-detail", args=["shop", "sales"])
    account = ReplAccount.objects.get()
    assert (account.server, account.account, account.log_file, account.is_updateable) == ("shop", "sales",
                                                                                           "sales.log", 0)  # fmt: skip

    detail = reverse("trx-publications-detail", args=["shop", "sales"])
    response = editor_client.post(reverse("trx-publications-add-item", args=["shop", "sales"]), {"item": "items"})
    assert response["Location"] == detail
    assert list(TpItem.objects.values_list("item", "type", "is_copy")) == [("items", 2, 0)]

    response = editor_client.post(
        reverse("trx-subscriptions-new"), {"subscriber": "branch", "publisher": "shop", "account": "sales"}
    )
    sub_url = reverse("trx-subscriptions-detail", args=["branch", "shop", "sales"])
    assert response["Location"] == sub_url
    assert DeclaredServer.objects.filter(subscriber="branch", server="shop").exists()
    sub = ReplSubscriber.objects.get()

    args = ["branch", "shop", "sales"]
    response = editor_client.post(reverse("trx-subscriptions-init", args=args), {"back": "publication"})
    assert response["Location"] == detail
    init = JobRun.objects.get(kind="trx_init")
    assert init.state == "succeeded", init.error
    assert rows_of(branch) == rows_of(shop)

    execute(shop, "INSERT INTO items (id, name, price) VALUES (100, 'new', 9.50)")
    execute(shop, "UPDATE items SET price = 0.99 WHERE id = 3")
    execute(shop, "DELETE FROM items WHERE id = 4")
    response = editor_client.post(reverse("trx-subscriptions-sync", args=args), {"back": "publication"})
    assert response["Location"] == detail
    sync = JobRun.objects.get(kind="trx_sync")
    assert sync.state == "succeeded", sync.error
    assert fetch_all(branch, "SELECT count(*) FROM items") == fetch_all(shop, "SELECT count(*) FROM items") == [(20,)]
    assert rows_of(branch) == rows_of(shop)
    assert (100, "new", Decimal("9.50")) in rows_of(branch) and 4 not in [r[0] for r in rows_of(branch)]

    sub.refresh_from_db()
    account.refresh_from_db()
    assert sub.level > 0 and sub.level == account.level and sub.valid == 1
    page = editor_client.get(detail).content.decode()
    assert f'id="trx-level">{account.level} ' in page
    row = page.split('data-subscriber="branch"', 1)[1].split("</tr>\n", 1)[0]
    assert f'class="num level">{sub.level}<' in row and 'class="num lag">0<' in row
    assert LevelSample.objects.filter(subscriber="branch").exists()
    status = editor_client.get(sub_url).content.decode()
    assert f'id="trx-sub-level">{sub.level} ' in status
    done = set(AuditEntry.objects.filter(username="editor", outcome="ok").values_list("action", flat=True))
    assert {"trx.publish", "trx.pub_add", "trx.server", "trx.subscribe", "job.trx_init", "job.trx_sync"} <= done


def test_the_publish_form_captures_from_the_wal_where_postgresql_allows_it_and_says_why_not(editor_client, make_server):
    plain, logical, maria = (
        make_server("postgresql", "plain"),
        make_server("pgwal", "logical"),
        make_server("mysql", "maria"),
    )
    for server in (plain, logical, maria):
        execute(server, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(20))")
    form = {"account": "sales", "log_file": "", "updateable": "", "sync_user": "", "capture": "wal"}
    page = editor_client.get(reverse("trx-publications-new")).content.decode()
    choice = page.split('name="capture"', 1)[1].split("</select>", 1)[0]
    assert 'value="auto" selected' in choice and 'value="wal"' in choice and 'value="triggers"' in choice

    response = editor_client.post(reverse("trx-publications-new"), {**form, "server": "plain"})
    assert response.status_code == 200
    assert "cannot capture from the WAL of plain: wal_level is replica" in response.content.decode()
    response = editor_client.post(reverse("trx-publications-new"), {**form, "server": "maria"})
    assert "MariaDB / MySQL has no logical decoding" in response.content.decode()
    assert not ReplAccount.objects.exists()
    assert AuditEntry.objects.filter(action="trx.publish", outcome=AuditEntry.Outcome.ERROR).count() == 2

    response = editor_client.post(reverse("trx-publications-new"), {**form, "server": "logical"})
    assert response.status_code == 302
    response = editor_client.post(reverse("trx-publications-new"), {**form, "server": "plain", "capture": "auto"})
    assert response.status_code == 302
    captures = dict(ReplAccount.objects.values_list("server", "capture"))
    assert captures == {"logical": "wal", "plain": "triggers"}
    body = editor_client.get(reverse("trx-publications-detail", args=["logical", "sales"])).content.decode()
    assert 'id="trx-capture">the write-ahead log: a logical replication slot' in body
    body = editor_client.get(reverse("trx-publications-detail", args=["plain", "sales"])).content.decode()
    assert (
        "never wait for each other (bulk inserts and deletes are logged once per statement); not the WAL: "
        "wal_level is replica" in body
    )


def test_the_acknowledgement_form_sets_the_policy_for_editors_only(editor_client, operator_client, catalog):
    account, *_ = catalog
    url = reverse("trx-publications-ack", args=PUB)
    page = editor_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    assert 'id="trx-ack-policy">none: the commit is enough' in page and 'id="trx-ack-voters">s1' in page
    assert editor_client.post(url, {"ack_policy": "quorum", "ack_timeout": "2.5"}).status_code == 302
    account.refresh_from_db()
    assert (account.ack_policy, account.ack_timeout) == ("quorum", 2.5)
    assert AuditEntry.objects.filter(action="trx.ack_policy", username="editor", outcome="ok").count() == 1
    assert (
        "a majority of the in-sync subscribers"
        in editor_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    )

    editor_client.post(url, {"ack_policy": "most", "ack_timeout": "2"})  # refused, nothing changes
    editor_client.post(url, {"ack_policy": "all", "ack_timeout": "0"})
    account.refresh_from_db()
    assert (account.ack_policy, account.ack_timeout) == ("quorum", 2.5)
    assert operator_client.post(url, {"ack_policy": "all", "ack_timeout": "5"}).status_code == 403
    account.refresh_from_db()
    assert account.ack_policy == "quorum"
    assert AuditEntry.objects.filter(action="trx.ack_policy", outcome="denied").count() == 1


def test_the_answer_to_conflicts_is_chosen_on_the_page_of_an_updateable_publication(
    editor_client, viewer_client, catalog
):
    account, *_ = catalog
    url = reverse("trx-publications-on-conflict", args=PUB)
    page = editor_client.get(reverse("trx-publications-detail", args=PUB)).content.decode()
    assert (
        'id="trx-on-conflict">decide each conflict with the resolvers' in page and 'id="trx-on-conflict-form"' in page
    )
    assert editor_client.post(url, {"on_conflict": "reinitialize"}).status_code == 302
    account.refresh_from_db()
    assert account.on_conflict == "reinitialize"
    assert AuditEntry.objects.filter(action="trx.on_conflict", username="editor", outcome="ok").count() == 1
    assert viewer_client.post(url, {"on_conflict": "resolve"}).status_code == 403
    editor_client.post(url, {"on_conflict": "sometimes"})
    account.refresh_from_db()
    assert account.on_conflict == "reinitialize"


def test_only_an_editor_may_skip_a_halted_transaction_and_only_an_operator_may_repair_gaps(
    catalog, editor_client, viewer_client, operator_client
):
    _, _, s2 = catalog
    ReplSubscriber.objects.filter(pk=s2.pk).update(
        halt_count=10, halt_level=10, halt_error="s2 halted at level 10 of pub/tbl (transaction 10): denied",
        halt_keys=[{"table": "items", "key": [4]}], halted_at=timezone.now(), halt_attempts=2,
    )  # fmt: skip
    detail = reverse("trx-subscriptions-detail", args=sub_args("s2"))
    skip, repair = (reverse(f"trx-subscriptions-{what}", args=sub_args("s2")) for what in ("skip", "repair"))

    page = editor_client.get(detail).content.decode()
    assert 'id="trx-halt"' in page and "items [4]" in page and 'id="trx-skip"' in page and "Repair these keys" in page
    page = viewer_client.get(detail).content.decode()
    assert 'id="trx-halt"' in page and 'id="trx-skip"' not in page and "Repair these keys" not in page
    assert "Skip this transaction" in editor_client.get(skip).content.decode()  # the confirmation first

    assert viewer_client.post(skip).status_code == 403
    assert operator_client.post(skip).status_code == 403
    assert viewer_client.post(repair).status_code == 403
    denied = AuditEntry.objects.filter(outcome=AuditEntry.Outcome.DENIED)
    assert set(denied.values_list("action", flat=True)) == {"trx.skip_transaction", "trx.repair_keys"}

    # Allowed: the action runs (and fails in one line here: the catalog's servers are empty files), no 403.
    assert editor_client.post(skip).status_code == 302
    assert operator_client.post(repair).status_code == 302
    assert AuditEntry.objects.filter(action="trx.skip_transaction", outcome=AuditEntry.Outcome.ERROR).exists()
    assert AuditEntry.objects.filter(action="trx.repair_keys", outcome=AuditEntry.Outcome.ERROR).exists()
    assert ReplSubscriber.objects.get(pk=s2.pk).halt_count == 10

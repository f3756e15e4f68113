"""Pages that say the right thing: plain SQL refused in plain words, each user's statement history, the snapshot
logs page (a table with its log, none offered on the product's own tables), the favicon, messages without Python
dicts, and the admin's plurals."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from replication_admin.core.audit import Actor
from replication_admin.core.words import key_label
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, SnapshotLog, SnapshotPublication, StatementRun
from replication_admin.snapshots.actions import SnapshotError, do_create_snapshot_log
from tests.tables import create_table

pytestmark = [pytest.mark.django_db]

INT = LogicalType("integer")


@pytest.fixture
def shop(make_server):
    server = make_server("sqlite", "shop")
    create_table(server, "Orders", [("OrderID", INT)], ["OrderID"])
    create_table(server, "Products", [("ProductID", INT)], ["ProductID"])
    create_table(server, "RTTX_acct", [("TXID", INT)], ["TXID"])
    return server


def run(client: Client, text: str, server: str = "shop") -> str:
    return client.post(reverse("statements"), {"server": server, "text": text}, HTTP_HX_REQUEST="true").content.decode()


def test_a_select_in_the_statement_console_is_refused_in_plain_words_with_a_link_to_the_table(operator_client, shop):
    body = run(operator_client, "select * from Orders")
    assert "Only replication statements run here." in body
    assert "expected a function name" not in body
    assert f'href="{reverse("servers-table", args=["shop", "Orders"])}"' in body
    union = run(operator_client, "select OrderID from Orders union select ProductID from Products")
    assert "Only replication statements run here." in union and "no ';'" not in union
    assert f'href="{reverse("servers-table", args=["shop", "Products"])}"' in union


def test_a_misspelt_replication_call_is_still_named_as_such(operator_client, shop):
    body = run(operator_client, "select repl_stats()")
    assert "unknown replication function" in body and "Only replication statements" not in body


def test_the_console_keeps_each_users_recent_statements_to_put_back_in_the_editor(operator_client, shop):
    run(operator_client, "repl_this_server ()")
    run(operator_client, "select * from Orders")
    other = Client()
    other.force_login(User.objects.create_user("someone", password="pw-for-tests-only"))
    assert "repl_this_server" not in other.get(reverse("statements")).content.decode()
    page = operator_client.get(reverse("statements")).content.decode()
    history = page[page.index('id="statement-history"') :]
    items = re.findall(r'<li><a class="mono" href="([^"]*)"[^>]*>([^<]*)</a>.*?class="badge (\w+)"', history, re.S)
    assert [(text, badge) for _, text, badge in items] == [
        ("select * from Orders", "bad"),
        ("repl_this_server ()", "ok"),
    ]
    again = operator_client.get(items[1][0].replace("&amp;", "&")).content.decode()
    assert re.search(r"<textarea[^>]*>\s*repl_this_server \(\)</textarea>", again)
    assert '<option value="shop" selected>' in again


def test_the_history_keeps_the_newest_fifty_runs_of_a_user(operator_client, shop):
    for n in range(52):
        run(operator_client, f"repl_this_server () -- {n}")
    user = User.objects.get(username="operator")
    assert StatementRun.objects.filter(user=user).count() == 50
    assert not StatementRun.objects.filter(text__endswith="-- 0").exists()


def test_the_snapshot_logs_page_shows_a_bidirectional_logs_table_and_offers_no_log_on_internal_tables(
    editor_client, shop
):
    do_create_snapshot_log(Actor.command(), shop, "Orders")
    # A bi-directional publication's log: an RLOG_ table with no SYS_SNAPSHOT_LOG row (as the demo's Products).
    create_table(shop, "RLOG_Products", [("RLOG_ProductID", INT)], [])
    publication = SnapshotPublication.objects.create(item="shop.Products", server=shop, table="Products")
    page = editor_client.get(reverse("snapshots-logs", args=["shop"])).content.decode()
    rows = dict(re.findall(r'<tr data-table="([^"]*)">(.*?)</tr>', page, re.S))
    assert set(rows) == {"Orders", "Products"}  # RLOG_Orders, RLOG_Products, RTTX_acct apart
    assert "RLOG_Orders" in rows["Orders"] and "Create log" not in rows["Orders"]
    assert "RLOG_Products" in rows["Products"] and publication.get_absolute_url() in rows["Products"]
    assert "Create log" not in rows["Products"]
    internal = page[page.index('id="internal-tables"') :]
    assert all(name in internal for name in ("RLOG_Orders", "RLOG_Products", "RTTX_acct"))
    assert "Create log" not in internal
    # The action refuses an internal table whatever a form posts, and says so in the audit log.
    with pytest.raises(SnapshotError, match="replication's own tables"):
        do_create_snapshot_log(Actor.command(), shop, "RTTX_acct")
    assert not SnapshotLog.objects.filter(table="RTTX_acct").exists()
    assert AuditEntry.objects.filter(action="snapshot_log.create", outcome="error").exists()


def test_the_favicon_answers_at_the_root_for_everyone_and_the_pages_link_it():
    response = Client().get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in response.content and "max-age=86400" in response["Cache-Control"]
    login = Client().get(reverse("login")).content.decode()
    assert re.search(r'<link rel="icon" href="/static/favicon[^"]*\.svg"', login)


def test_a_key_in_a_message_reads_as_names_and_values_not_a_python_dict():
    assert key_label({"OrderID": 10248, "ProductID": 11}) == "OrderID=10248, ProductID=11"


def test_every_admin_plural_is_spelt_right():
    for model in apps.get_app_config("replication_admin").get_models():
        plural = str(model._meta.verbose_name_plural)
        assert not re.search(r"[^aeiou]ys$", plural), f"{model.__name__}: {plural}"
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw-for-tests-only"))
    index = admin.get(reverse("admin:index")).content.decode()
    assert "Registry entries" in index and "entrys" not in index

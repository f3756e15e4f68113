"""Server pages that say the right thing: the product's own tables apart from the user's and never offered as a
source, row counts and sizes per table (estimates where the dialect keeps them), and the replications that use the
server."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.core.introspection import COUNT_BOUND, source_tables, split_tables, table_sizes
from replication_admin.engine import bidir_sql, dialects, refresh_sql, transactional_sql
from replication_admin.engine.objects import is_internal_table, rlog_name, rplog_name
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    ReplAccount,
    ReplSubscriber,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.snapshots.actions import do_create_snapshot_log
from tests.tables import create_table, execute
from tests.wizard.test_wizard import walk_to_tables

pytestmark = [pytest.mark.django_db]

DIALECTS = ("sqlite", "postgresql", "mysql")
INT = LogicalType("integer")
TEXT = LogicalType("varchar", length=40)


def test_every_table_name_the_engine_makes_on_a_server_is_internal_and_user_names_are_not():
    d = dialects.get("postgresql")
    names = [
        rlog_name("Orders"), rplog_name("demo", "Orders"), transactional_sql.LEVEL_TABLE,
        transactional_sql.TEXT_TABLE, transactional_sql.CONTEXT_TABLE, transactional_sql.PROC_TABLE,
        transactional_sql.SCHEMA_TABLE, *vars(transactional_sql.log_names(d, "acct")).values(),
        *(refresh_sql.staging_name(d, "Orders", kind) for kind in ("RSTG", "RSWP", "RSRP", "RTIC")),
        *(bidir_sql.work_table(d, kind, "Orders") for kind in ("BSIN", "BSAP", "BSPL", "BSCN", "BSPS", "BSIC")),
    ]  # fmt: skip
    assert [n for n in names if not is_internal_table(n)] == []
    assert is_internal_table("rlog_orders") and is_internal_table("rtlevel")  # as MariaDB may fold them
    for user_table in ("Orders", "Products", "replies", "RTL", "stage", "Order_Details", "sys_users"):
        assert not is_internal_table(user_table), user_table
    assert split_tables(["RLOG_Orders", "orders", "Customers"]) == (["Customers", "orders"], ["RLOG_Orders"])


def shop(make_server, dialect: str):
    """A server with two user tables (Orders with 3 rows), a snapshot log on Orders (RLOG_Orders) and a
    transactional level table (RTLEVEL)."""
    server = make_server(dialect, "shop")
    create_table(server, "Orders", [("OrderID", INT), ("Customer", TEXT)], ["OrderID"])
    create_table(server, "Customers", [("Name", TEXT)], ["Name"])
    create_table(server, "RTLEVEL", [("SERVER", TEXT)], ["SERVER"])
    for n in range(1, 4):
        execute(server, f"INSERT INTO {dialects.get(server.dialect).quote('Orders')} VALUES ({n}, 'c{n}')")
    do_create_snapshot_log(Actor.command(), server, "Orders")
    return server


@pytest.mark.live_db
@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_table_has_its_rows_and_size_from_the_dialect_estimates_where_it_keeps_them(make_server, dialect):
    server = shop(make_server, dialect)
    d = dialects.get(server.dialect)
    if dialect == "postgresql":
        execute(server, 'ANALYZE "Orders"')  # reltuples is the last ANALYZE's count
    if dialect == "mysql":
        execute(server, "ANALYZE TABLE `Orders`")
    with connections.connect(server, readonly=True) as conn:
        sizes = table_sizes(server, conn, ["Orders", "Customers"])
    assert sizes["Orders"].rows == 3 and sizes["Orders"].estimated == d.row_counts_are_estimates
    assert sizes["Orders"].rows_text == ("≈ 3" if d.row_counts_are_estimates else "3")
    assert sizes["Orders"].bytes is not None and sizes["Orders"].bytes > 0
    assert sizes["Customers"].rows == 0


def test_a_table_sqlite_cannot_estimate_is_counted_no_further_than_the_bound(make_server, monkeypatch):
    server = make_server("sqlite", "big")
    create_table(server, "t", [("id", INT)], ["id"])
    execute(server, "INSERT INTO t WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30) "
                    "SELECT i FROM n")  # fmt: skip
    monkeypatch.setattr("replication_admin.core.introspection.COUNT_BOUND", 10)
    with connections.connect(server, readonly=True) as conn:
        size = table_sizes(server, conn, ["t"])["t"]
    assert (size.rows, size.at_least, size.rows_text) == (10, True, "≥ 10")
    assert COUNT_BOUND == 100_000


def test_the_tables_page_lists_user_tables_with_rows_and_sizes_and_the_replication_objects_apart(
    make_server, viewer_client
):
    shop(make_server, "sqlite")
    page = viewer_client.get(reverse("servers-tables", args=["shop"])).content.decode()
    user_part = page[page.index('id="user-tables"') : page.index("</table>")]
    internal_part = page[page.index('id="internal-tables"') :]
    assert "Orders" in user_part and "Customers" in user_part
    assert "RLOG_Orders" not in user_part and "RTLEVEL" not in user_part
    assert "RLOG_Orders" in internal_part and "RTLEVEL" in internal_part
    assert "<details" in page[page.index('id="internal-tables"') - 30 : page.index('id="internal-tables"')]
    orders_row = re.search(r"<tr>\s*<td><a[^>]*>Orders</a>.*?</tr>", user_part, re.S)
    assert orders_row is not None
    assert re.search(r'class="num table-rows">3<', orders_row.group(0))  # SQLite counts: no ≈
    assert re.search(r'class="num table-size">\d+(\.\d)?\xa0(bytes|KB)<', orders_row.group(0))


def test_no_table_picker_offers_the_products_own_tables(make_server, viewer_client, editor_client):
    server = shop(make_server, "sqlite")
    assert source_tables(server) == ["Customers", "Orders"]
    options = viewer_client.get(reverse("jobs-compare-tables"), {"server": "shop"}).content.decode()
    # the snapshot form, the publication form and the compare form all take their options from here
    assert re.findall(r'<option value="([^"]*)">', options) == ["Customers", "Orders"]
    make_server("sqlite", "branch")
    walk_to_tables(editor_client, "shop", "branch", "bidir")
    wizard = editor_client.get(reverse("setup-step", args=["tables"])).content.decode()
    assert set(re.findall(r'name="tables" value="([^"]*)"', wizard)) == {"Customers", "Orders"}


def test_the_server_page_lists_every_replication_that_uses_the_server_with_links(make_server, viewer_client):
    shop_server = shop(make_server, "sqlite")
    branch = make_server("sqlite", "branch")
    Snapshot.objects.create(name="branch.o", query="SELECT 1", source_server=shop_server, dest_server=branch,
                            dest_table="o")  # fmt: skip
    Snapshot.objects.create(name="shop.back", query="SELECT 1", dest_server=shop_server, dest_table="back")
    publication = SnapshotPublication.objects.create(item="shop.Products", server=shop_server, table="Products")
    SnapshotSubscription.objects.create(server="branch", item="shop.Products")
    ReplAccount.objects.create(server="shop", account="acct")
    ReplSubscriber.objects.create(server="branch", account="bacct", subscriber="shop")
    page = viewer_client.get(reverse("servers-detail", args=["shop"])).content.decode()
    uses = page[page.index('id="server-uses"') : page.index("</table>", page.index('id="server-uses"'))]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", uses))
    assert "snapshot branch.o source" in text
    assert "snapshot shop.back destination" in text
    assert "snapshot log shop.RLOG_Orders on Orders" in text
    assert "bi-directional publication shop.Products publisher" in text
    assert "transactional publication shop/acct publisher" in text
    assert "transactional subscription branch/bacct subscriber" in text
    assert f'href="{reverse("snapshots-detail", args=["branch.o"])}"' in uses
    assert f'href="{reverse("snapshots-logs", args=["shop"])}"' in uses
    assert f'href="{publication.get_absolute_url()}"' in uses
    other = viewer_client.get(reverse("servers-detail", args=["branch"])).content.decode()
    other_uses = other[other.index('id="server-uses"') : other.index("</table>", other.index('id="server-uses"'))]
    assert "bi-directional subscription" in other_uses and f'href="{publication.get_absolute_url()}"' in other_uses
    assert "snapshot branch.o destination" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", other_uses))


def test_a_server_no_replication_uses_says_so(make_server, viewer_client):
    make_server("sqlite", "idle")
    page = viewer_client.get(reverse("servers-detail", args=["idle"])).content.decode()
    assert "No replication uses idle yet." in page

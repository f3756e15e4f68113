"""A publication's row filters (REPL_PUB_ROW_FILTER), on live databases: every subscriber's copy of the table holds
the publication's rows and columns unless its subscription has a filter of its own, which replaces it; a new
publication filter reloads the copies that follow it and leaves the others alone; clearing a subscription's own
filter takes the publication's again; removing the item takes its filter away; and a filter that cannot be used is
refused in one line, changing nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from replication_admin.models import AuditEntry, JobRun, ReplSubscriber, TpItem, Validation
from tests.transactional.test_row_filters import columns, copy, expected
from tests.transactional.test_trx_replication import refused, run, sql

pytestmark = [pytest.mark.live_db, pytest.mark.spark]

ORDERS = "CREATE TABLE orders (id integer PRIMARY KEY, Region varchar(10), total numeric(10,2), secret varchar(20))"
EVERY_COLUMN = ["id", "region", "secret", "total"]


def filters_of(subscriber: str) -> dict:
    return ReplSubscriber.objects.get(subscriber=subscriber).row_filters


def published(pub) -> None:
    sql(pub, ORDERS, *[f"INSERT INTO orders VALUES ({i}, '{'EU' if i % 2 else 'US'}', {i}.50, 'pin {i}')"
                       for i in range(1, 31)])  # fmt: skip
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'orders', 2, 0, null)")


def test_every_subscriber_holds_the_publications_filter_unless_its_subscription_has_its_own(
    make_server, jobs_sync, spark
):
    pub = make_server("mysql", "rep1")
    follows = make_server("postgresql", "rep2")
    own = make_server("sqlite", "rep3")
    published(pub)
    set_eu = run(pub, "REPL_PUB_ROW_FILTER ('tbl', 'orders', 'Region = ''EU''', 'Region, total')")
    assert "WHERE `Region` = 'EU'; columns Region, total for every subscriber" in set_eu[0].message
    for sub in (follows, own):
        run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')")
    assert filters_of("rep3")["orders"]["publication"] is True  # a new subscription starts from the publication's
    answer = run(own, "REPL_ROW_FILTER ('rep1', 'tbl', 'orders', 'total >= 20')")[0].message
    assert "this subscription's own, in place of the publication's WHERE `Region` = 'EU'" in answer
    for sub in (follows, own):
        run(sub, "REPL_INIT_COPY ('rep1', 'tbl')")
    assert copy(follows, "postgresql") == expected(pub, "mysql", "Region = 'EU'")
    assert columns(follows, "postgresql") == ["id", "region", "total"]
    assert copy(own, "sqlite") == expected(pub, "mysql", "total >= 20")
    assert columns(own, "sqlite") == EVERY_COLUMN

    sql(
        pub,
        "INSERT INTO orders VALUES (41, 'EU', 5, 'in for rep2 only')",
        "INSERT INTO orders VALUES (42, 'US', 99, 'in for rep3 only')",
        "UPDATE orders SET Region = 'US' WHERE id = 25",  # leaves rep2's copy, stays in rep3's
        "UPDATE orders SET total = 1 WHERE id = 27",  # stays in rep2's copy, leaves rep3's
        "DELETE FROM orders WHERE id = 29",
    )
    for sub in (follows, own):
        run(sub, "REPL_SYNC ('rep1', 'tbl')")
    assert copy(follows, "postgresql") == expected(pub, "mysql", "Region = 'EU'")
    assert copy(own, "sqlite") == expected(pub, "mysql", "total >= 20")
    assert {41, 27} <= {r[0] for r in copy(follows, "postgresql")} and 25 not in {
        r[0] for r in copy(follows, "postgresql")
    }

    # A new publication filter reloads the copy that follows it; the one with its own filter is left alone.
    reloads_before = JobRun.objects.filter(kind="trx_reload").count()
    answer = run(pub, "REPL_PUB_ROW_FILTER ('tbl', 'orders', 'Region = ''US''')")[0].message
    assert "for every subscriber but rep3 (a filter of its own)" in answer and "the reload of rep2" in answer
    assert JobRun.objects.filter(kind="trx_reload").count() == reloads_before + 1
    assert AuditEntry.objects.filter(action="trx.pub_row_filter").order_by("pk").last().detail["subscribers"] == [
        "rep2"
    ]
    assert copy(follows, "postgresql") == expected(pub, "mysql", "Region = 'US'")
    assert columns(follows, "postgresql") == EVERY_COLUMN  # the reload widened it: the new filter lists no columns
    assert copy(own, "sqlite") == expected(pub, "mysql", "total >= 20")
    run(follows, "REPL_VALIDATE ('rep1', 'tbl', 'orders')")
    assert Validation.objects.get(subscription__subscriber="rep2").verdict == Validation.EQUAL

    # TRUE: every row whatever the publication's says; both empty: the publication's again.
    run(own, "REPL_ROW_FILTER ('rep1', 'tbl', 'orders', 'TRUE')")
    assert copy(own, "sqlite") == expected(pub, "mysql", "1 = 1")
    assert filters_of("rep3")["orders"]["condition"] == "" and "publication" not in filters_of("rep3")["orders"]
    answer = run(own, "REPL_ROW_FILTER ('rep1', 'tbl', 'orders', NULL)")[0].message
    assert "WHERE `Region` = 'US' (the publication's)" in answer
    assert copy(own, "sqlite") == expected(pub, "mysql", "Region = 'US'")

    # The publication's filter cleared: both copies take every row again; the item removed takes its filter away.
    run(pub, "REPL_PUB_ROW_FILTER ('tbl', 'orders', '')")
    assert copy(follows, "postgresql") == copy(own, "sqlite") == expected(pub, "mysql", "1 = 1")
    assert filters_of("rep2") == filters_of("rep3") == {}
    run(pub, "REPL_PUB_ROW_FILTER ('tbl', 'orders', 'total > 1')")
    assert filters_of("rep2")["orders"]["publication"] is True
    run(pub, "REPL_PUB_REMOVE ('tbl', 'orders', 2)")
    assert filters_of("rep2") == filters_of("rep3") == {}


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("REPL_PUB_ROW_FILTER ('tbl', 'orders', 'total > 1; DELETE FROM orders')", "no ';'"),
        ("REPL_PUB_ROW_FILTER ('tbl', 'orders', 'nope = 1')", "'nope', which is not a column"),
        ("REPL_PUB_ROW_FILTER ('tbl', 'orders', '', 'id')", "only key columns"),
        ("REPL_PUB_ROW_FILTER ('tbl', '表😀', 'total > 1')", "not an item of the publication tbl"),
        ("REPL_PUB_ROW_FILTER ('nope', 'orders', 'total > 1')", "nope"),
    ],
)
def test_a_publication_filter_that_cannot_be_used_is_refused_in_one_line_and_changes_nothing(
    make_server, statement, message
):
    pub = make_server("postgresql", "rep1")
    sub = make_server("sqlite", "rep2")
    published(pub)
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')")
    text = refused(pub, statement)
    assert message in text and "\n" not in text
    assert TpItem.objects.get().row_filter == {} and filters_of("rep2") == {}


def test_an_updateable_publication_takes_no_publication_filter(make_server):
    pub = make_server("postgresql", "rep1")
    sql(pub, ORDERS)
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log', 1); REPL_PUB_ADD ('tbl', 'orders', 2, 0, null)")
    assert "updateable" in refused(pub, "REPL_PUB_ROW_FILTER ('tbl', 'orders', 'total > 1')")
    assert TpItem.objects.get().row_filter == {}
    assert AuditEntry.objects.filter(action="trx.pub_row_filter", outcome=AuditEntry.Outcome.ERROR).count() == 1


def test_the_publication_page_shows_each_tables_filter_and_an_editor_sets_one(
    make_server, editor_client, viewer_client
):
    pub = make_server("postgresql", "rep1")
    sub = make_server("sqlite", "rep2")
    published(pub)
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')")
    page = reverse("trx-publications-detail", args=["rep1", "tbl"])
    form = reverse("trx-publications-row-filter", args=["rep1", "tbl"])
    body = viewer_client.get(page).content.decode()
    assert 'id="trx-item-filter-rows"' in body and 'id="trx-item-filter-form"' not in body
    assert viewer_client.post(form, {"table": "orders", "condition": "total > 1"}).status_code == 403
    assert TpItem.objects.get().row_filter == {}
    editor_client.post(form, {"table": "orders", "condition": "total > 5", "columns": "total"})
    assert TpItem.objects.get().row_filter["condition"] == '"total" > 5'
    assert filters_of("rep2")["orders"]["columns"] == ["total"]  # the subscriber follows it (not copied yet)
    body = editor_client.get(page).content.decode()
    assert "WHERE &quot;total&quot; &gt; 5" in body and "key, total" in body
    sub_page = editor_client.get(reverse("trx-subscriptions-detail", args=["rep2", "rep1", "tbl"])).content.decode()
    assert 'data-origin="publication"' in sub_page and '<td class="origin">the publication\'s</td>' in sub_page
    refusal = editor_client.post(form, {"table": "orders", "condition": "secret IN (SELECT 1)"}, follow=True)
    assert "no subqueries" in refusal.content.decode()
    assert TpItem.objects.get().row_filter["columns"] == ["total"]  # unchanged

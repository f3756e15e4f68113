"""Row filters and column lists of a transactional subscription's table (REPL_ROW_FILTER), on live databases: the
initial copy holds the filter's rows and the listed columns only; an update that takes a row out of the filter
deletes it from the copy, one that brings it in inserts it; a new filter reloads the copy; a validation compares
only what the copy is meant to hold; and a filter the apply cannot evaluate is refused in one line, changing
nothing."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from replication_admin.core import connections
from replication_admin.models import AuditEntry, ReplSubscriber, Validation
from tests.transactional.test_trx_replication import refused, run, sql

pytestmark = [pytest.mark.live_db, pytest.mark.spark]

TABLES = {
    "pgwal": 'CREATE TABLE orders (id integer PRIMARY KEY, "Region" varchar(10), total numeric(10,2), '
    "secret varchar(20))",
    "postgresql": 'CREATE TABLE orders (id integer PRIMARY KEY, "Region" varchar(10), total numeric(10,2), '
    "secret varchar(20))",
    "mysql": "CREATE TABLE orders (id integer PRIMARY KEY, Region varchar(10), total numeric(10,2), secret varchar(20))",
    "sqlite": "CREATE TABLE orders (id integer PRIMARY KEY, Region varchar(10), total numeric(10,2), "
    "secret varchar(20))",
}
REGION = {"pgwal": '"Region"', "postgresql": '"Region"', "mysql": "Region", "sqlite": "Region"}


def rows(server, query: str) -> list[tuple]:
    with connections.connect(server) as conn:
        return [tuple(r) for r in conn.cursor().execute(query).fetchall()]


def columns(server, dialect: str) -> list[str]:
    info = connections.describe_table(server, "orders")
    return sorted(c.name.lower() for c in info.columns)


def _typed(found: list[tuple]) -> list[tuple]:
    """(id, region, total) with the total as a decimal (SQLite keeps decimals as text)."""
    return [(int(i), r, None if t is None else Decimal(str(t))) for i, r, t in found]


def expected(pub, dialect: str, where: str) -> list[tuple]:
    return _typed(rows(pub, f"SELECT id, {REGION[dialect]}, total FROM orders WHERE {where} ORDER BY id"))


def copy(sub, sub_dialect: str) -> list[tuple]:
    return _typed(rows(sub, f"SELECT id, {REGION[sub_dialect]}, total FROM orders ORDER BY id"))


@pytest.mark.parametrize(("pub_dialect", "sub_dialect"), [("postgresql", "mysql"), ("pgwal", "mysql"),
                                                          ("mysql", "sqlite"), ("sqlite", "postgresql")])  # fmt: skip
def test_a_filtered_copy_holds_the_filters_rows_and_columns_as_rows_move_in_and_out(
    make_server, jobs_sync, spark, pub_dialect, sub_dialect
):
    pub = make_server(pub_dialect, "rep1")
    sub = make_server(sub_dialect, "rep2")
    region = REGION[pub_dialect]
    sql(pub, TABLES[pub_dialect])
    sql(
        pub, *[f"INSERT INTO orders VALUES ({i}, '{'EU' if i % 2 else 'US'}', {i}.50, 'pin {i}')" for i in range(1, 31)]
    )
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'orders', 2, 0, null)")
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')")
    where = f"{region} = 'EU' AND total >= 10"
    done = run(sub, "REPL_ROW_FILTER ('rep1', 'tbl', 'orders', 'Region = ''EU'' AND total >= 10', 'Region, total')")
    assert "WHERE" in done[0].message and "columns Region, total" in done[0].message
    run(sub, "REPL_INIT_COPY ('rep1', 'tbl')")
    # The copy: odd ids from 11 (EU, total >= 10), without the column left out of the list.
    assert copy(sub, sub_dialect) == expected(pub, pub_dialect, where)
    assert [r[0] for r in copy(sub, sub_dialect)] == list(range(11, 31, 2))
    assert columns(sub, sub_dialect) == ["id", "region", "total"]

    sql(
        pub,
        "INSERT INTO orders VALUES (41, 'EU', 99.00, 'in')",  # enters
        "INSERT INTO orders VALUES (42, 'US', 99.00, 'out')",  # stays out
        f"UPDATE orders SET {region} = 'EU' WHERE id = 12",  # brought in by an update: inserted
        f"UPDATE orders SET {region} = 'US' WHERE id = 13",  # taken out: deleted
        "UPDATE orders SET total = 1 WHERE id = 15",  # taken out by another column
        "UPDATE orders SET total = 77 WHERE id = 17",  # changed inside
        "UPDATE orders SET secret = 'changed' WHERE id = 19",  # only a column the copy does not take
        "DELETE FROM orders WHERE id = 21",
        "DELETE FROM orders WHERE id = 2",  # was never in the copy
    )
    run(sub, "REPL_SYNC ('rep1', 'tbl')")
    held = copy(sub, sub_dialect)
    assert held == expected(pub, pub_dialect, where)
    ids = [r[0] for r in held]
    assert 41 in ids and 12 in ids and 42 not in ids and 13 not in ids and 15 not in ids and 21 not in ids
    assert dict((r[0], r[2]) for r in held)[17] == Decimal("77")

    # A column added to the publisher's table is not one the list names: the copy does not get it, rows go on.
    sql(pub, "ALTER TABLE orders ADD COLUMN note varchar(10)", "INSERT INTO orders VALUES (43, 'EU', 50, 's', 'n')")
    run(sub, "REPL_SYNC ('rep1', 'tbl')")
    assert columns(sub, sub_dialect) == ["id", "region", "total"]
    assert copy(sub, sub_dialect) == expected(pub, pub_dialect, where) and 43 in [r[0] for r in copy(sub, sub_dialect)]

    # A validation compares what the copy is meant to hold: equal, not drift over the rows left out.
    run(sub, "REPL_VALIDATE ('rep1', 'tbl', 'orders')")
    assert Validation.objects.get().verdict == Validation.EQUAL

    # Another filter reloads the copy at once; clearing both brings back every row and column.
    run(sub, "REPL_ROW_FILTER ('rep1', 'tbl', 'orders', 'Region = ''US''')")
    assert copy(sub, sub_dialect) == expected(pub, pub_dialect, f"{region} = 'US'")
    assert columns(sub, sub_dialect) == ["id", "note", "region", "secret", "total"]  # the reload widened the copy
    run(sub, "REPL_ROW_FILTER ('rep1', 'tbl', 'orders', '', '')")
    assert copy(sub, sub_dialect) == expected(pub, pub_dialect, "1 = 1")
    assert ReplSubscriber.objects.get().row_filters == {}
    assert AuditEntry.objects.filter(action="trx.row_filter", outcome=AuditEntry.Outcome.OK).count() == 3


@pytest.mark.parametrize(
    ("condition", "columns", "message"),
    [
        ("total > (SELECT 1)", "", "no subqueries"),
        ("lower(Region) = ''eu''", "", "cannot use"),
        ("total > 1; DELETE FROM orders", "", "no ';'"),
        ("nope = 1", "", "'nope', which is not a column"),
        ("", "total, nope", "nope"),
        ("", "id", "only key columns"),
    ],
)
def test_a_filter_the_apply_cannot_evaluate_is_refused_in_one_line_and_changes_nothing(
    make_server, condition, columns, message
):
    pub = make_server("postgresql", "rep1")
    sub = make_server("sqlite", "rep2")
    sql(pub, TABLES["postgresql"])
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'orders', 2, 0, null)")
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')")
    text = refused(sub, f"REPL_ROW_FILTER ('rep1', 'tbl', 'orders', '{condition}', '{columns}')")
    assert message in text and "\n" not in text
    assert ReplSubscriber.objects.get().row_filters == {}
    assert AuditEntry.objects.filter(action="trx.row_filter", outcome=AuditEntry.Outcome.ERROR).count() == 1


def test_an_updateable_publication_takes_no_filter(make_server):
    pub = make_server("postgresql", "rep1")
    sub = make_server("postgresql", "rep2")
    sql(pub, TABLES["postgresql"])
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log', 1); REPL_PUB_ADD ('tbl', 'orders', 2, 0, null)")
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')")
    assert "updateable" in refused(sub, "REPL_ROW_FILTER ('rep1', 'tbl', 'orders', 'total > 1')")


def test_the_subscription_page_shows_each_tables_filter_and_an_editor_sets_one(
    make_server, editor_client, viewer_client
):
    pub = make_server("postgresql", "rep1")
    sub = make_server("sqlite", "rep2")
    sql(pub, TABLES["postgresql"])
    run(pub, "REPL_PUBLISH ('tbl', 'tbl.log'); REPL_PUB_ADD ('tbl', 'orders', 2, 0, null)")
    run(sub, "REPL_SERVER ('rep1', '1111'); REPL_SUBSCRIBE ('rep1', 'tbl')")
    page = reverse("trx-subscriptions-detail", args=["rep2", "rep1", "tbl"])
    form = reverse("trx-subscriptions-row-filter", args=["rep2", "rep1", "tbl"])
    body = viewer_client.get(page).content.decode()
    assert 'data-table="orders"' in body and "every row" in body and 'id="trx-row-filter-form"' not in body
    assert viewer_client.post(form, {"table": "orders", "condition": "total > 1"}).status_code == 403
    assert ReplSubscriber.objects.get().row_filters == {}
    editor_client.post(form, {"table": "orders", "condition": 'total > 5 OR "Region" IS NULL', "columns": "total"})
    stored = ReplSubscriber.objects.get().row_filters["orders"]
    assert stored["condition"] == '"total" > 5 OR "Region" IS NULL' and stored["columns"] == ["total"]
    body = editor_client.get(page).content.decode()
    assert "WHERE &quot;total&quot; &gt; 5 OR &quot;Region&quot; IS NULL" in body and "key, total" in body
    refusal = editor_client.post(form, {"table": "orders", "condition": "secret IN (SELECT 1)"}, follow=True)
    assert "no subqueries" in refusal.content.decode()
    assert ReplSubscriber.objects.get().row_filters["orders"]["columns"] == ["total"]  # unchanged

"""The resolver editor over an updateable transactional publication's table (SYS_REPL_CR): the same page,
checks and dry run as the bi-directional one, on live databases; what it saves is what the next sync asks."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from replication_admin.models import AuditEntry, ConflictBackup, JobRun, TpItem, TransactionalConflictResolver
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


@pytest.fixture
def shop(make_server, jobs_sync, spark):
    """pub (PostgreSQL) publishes items updateably; my (MariaDB) subscribes; one update conflict recorded."""
    pub, my = make_server("postgresql", "pub"), make_server("mysql", "my")
    sql(
        pub,
        "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), price numeric(10, 2))",
        *[f"INSERT INTO items VALUES ({i}, 'item {i}', 5.00)" for i in range(1, 4)],
    )
    run(pub, "repl_publish ('shop', 'shop.log', 1); repl_pub_add ('shop', 'items', 2, 0, null)")
    run(my, "repl_server ('pub', 'pub'); repl_subscribe ('pub', 'shop'); repl_init_copy ('pub', 'shop')")
    sql(pub, "UPDATE items SET price = 5.50 WHERE id = 1")
    sql(my, "UPDATE items SET price = 3.00 WHERE id = 1")  # cheaper on the subscriber: the publisher wins (default)
    run(my, "repl_sync ('pub', 'shop')")
    assert ConflictBackup.objects.filter(kind="transactional", decision=3).count() == 1
    return pub, my, TpItem.objects.get(server="pub", acct="shop", type=2)


def test_the_transactional_chain_is_edited_checked_and_dry_run_like_the_bidir_one(
    shop, editor_client, viewer_client, operator_client
):
    pub, my, item = shop
    page_url = reverse("trx-items-resolvers", args=[item.pk])
    publication_page = viewer_client.get(reverse("trx-publications-detail", args=["pub", "shop"])).content.decode()
    assert f'href="{page_url}"' in publication_page
    page = viewer_client.get(page_url).content.decode()
    assert "Conflict resolvers of pub.items" in page and "Columns of pub.items" in page
    assert 'id="resolvers-back">← transactional publication shop on pub' in page
    # The transactional classes are offered to editors (ave and add exist only there).
    form = editor_client.get(page_url).content.decode()
    assert 'value="ave"' in form and 'value="add"' in form

    add_url = reverse("trx-items-resolvers-add", args=[item.pk])
    refused = editor_client.post(add_url, {"type": "U", "resolver_class": "custom", "expression": "new.name"})
    assert "returns text (new.name); a resolver returns an integer code" in refused.content.decode()
    assert not TransactionalConflictResolver.objects.exists()
    assert viewer_client.post(add_url, {"type": "U", "resolver_class": "sub_wins"}).status_code == 403
    assert operator_client.post(add_url, {"type": "U", "resolver_class": "sub_wins"}).status_code == 403

    # A dry run of the expression being written: the cheaper version would have won.
    cheaper = "CASE WHEN new.price < pub.price THEN 1 WHEN new.price > pub.price THEN 3 ELSE 0 END"
    body = operator_client.post(
        reverse("trx-items-dry-run", args=[item.pk]),
        {"type": "U", "resolver_class": "custom", "expression": cheaper},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "<strong>1</strong> of 1 recorded decision would change" in body, body
    job = JobRun.objects.filter(kind="resolver_dry_run").latest("pk")
    assert job.params["kind"] == "transactional" and job.params["item"] == "pub.items"
    rows = body.split('id="dry-run-rows"', 1)[1].split("</table>", 1)[0]
    assert "3 · publisher wins" in rows and "1 · subscriber wins" in rows

    response = editor_client.post(add_url, {"type": "U", "resolver_class": "custom", "expression": cheaper})
    assert response.status_code == 302 and response["Location"] == page_url
    resolver = TransactionalConflictResolver.objects.get()
    assert (resolver.table_name, resolver.type, resolver.resolver_class) == ("pub.items", "U", "custom")
    assert AuditEntry.objects.filter(action="resolver.add", username="editor", outcome="ok").count() == 1

    # What the editor saved is what the next sync asks.
    sql(pub, "UPDATE items SET price = 6.00 WHERE id = 2")
    sql(my, "UPDATE items SET price = 2.00 WHERE id = 2")
    run(my, "repl_sync ('pub', 'shop')")
    assert Decimal(value(pub, "SELECT price FROM items WHERE id = 2")) == Decimal("2.00")

    # Edited (a string-valued expression is refused there too), then removed after confirmation.
    edit_url = reverse("trx-resolver-edit", args=[resolver.pk])
    body = editor_client.post(edit_url, {"expression": "upper(pub.name)", "assignments": "", "notify": ""})
    assert "returns text (UPPER(pub.name))" in body.content.decode()
    editor_client.post(edit_url, {"expression": "CASE WHEN new.price < pub.price THEN 1 ELSE 0 END", "notify": ""})
    resolver.refresh_from_db()
    assert resolver.expression == "CASE WHEN new.price < pub.price THEN 1 ELSE 0 END"
    remove_url = reverse("trx-resolver-remove", args=[resolver.pk])
    assert "Remove resolver" in editor_client.get(remove_url).content.decode()
    assert editor_client.post(remove_url).status_code == 302
    assert not TransactionalConflictResolver.objects.exists()
    assert re.search(r"Removed \w+", editor_client.get(page_url).content.decode())

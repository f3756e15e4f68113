"""Column-level conflicts on an updateable transactional publication (REPL_COLUMN_CONFLICTS), on live databases: a
subscriber's update of columns the publisher did not change merges into the publisher's row instead of losing to it;
only the columns both sides changed conflict, the resolver's decision is theirs, the subscriber's other columns merge,
and the backup records each conflicting column's versions; every node ends with the same rows. (Updateable
subscriptions need PostgreSQL or MariaDB, whose BEFORE triggers give rows their ROWGUID; SQLite is not one.)"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from replication_admin.conflicts.actions import do_update_resolver
from replication_admin.conflicts.chains import table_columns
from replication_admin.core.audit import Actor
from replication_admin.models import AuditEntry, ConflictBackup, TpItem, TransactionalConflictResolver
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = [pytest.mark.live_db, pytest.mark.spark]


@pytest.fixture(params=[("postgresql", "mysql", "postgresql"), ("mysql", "postgresql", "mysql")], ids=["pg", "mariadb"])
def nodes(request, make_server, jobs_sync, spark):
    publisher, first, second = request.param
    pub = make_server(publisher, "pub")
    one, two = make_server(first, "one"), make_server(second, "two")
    sql(
        pub,
        "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), price numeric(10, 2), qty integer)",
        *[f"INSERT INTO items (id, name, price, qty) VALUES ({i}, 'item {i}', {i}0.00, 10)" for i in range(1, 6)],
    )
    run(pub, "repl_publish ('shop', 'shop.log', 1); repl_pub_add ('shop', 'items', 2, 0, null)")
    for sub in (one, two):
        run(sub, "repl_server ('pub', 'pub'); repl_subscribe ('pub', 'shop'); repl_init_copy ('pub', 'shop')")
    return pub, one, two


def sync_all(*subs) -> None:
    for _ in range(2):  # what a later subscriber pushed reaches the earlier ones on the next round
        for sub in subs:
            run(sub, "repl_sync ('pub', 'shop')")


def row(server, key: int) -> tuple:
    with_price = value(server, f"SELECT price FROM items WHERE id = {key}")
    return (
        value(server, f"SELECT name FROM items WHERE id = {key}"),
        Decimal(str(with_price)),
        int(value(server, f"SELECT qty FROM items WHERE id = {key}")),
    )


def converged(pub, *subs) -> None:
    for sub in subs:
        result = same(pub, sub, "items")
        assert result["equal"], result


def test_without_column_conflicts_a_concurrent_change_of_another_column_loses_the_whole_row(nodes):
    pub, one, two = nodes
    sql(pub, "UPDATE items SET name = 'renamed' WHERE id = 1")
    sql(one, "UPDATE items SET price = 99.00 WHERE id = 1")
    sync_all(one, two)
    assert row(pub, 1) == ("renamed", Decimal("10.00"), 10)  # the reference's rule: the publisher's row stands
    assert ConflictBackup.objects.get().losing_row["price"] in ("99.00", "99.0", 99.0, "99")


def test_changes_of_different_columns_merge_and_reach_every_node(nodes):
    pub, one, two = nodes
    run(pub, "REPL_COLUMN_CONFLICTS ('shop', 'items', 1)")
    sql(pub, "UPDATE items SET name = 'renamed' WHERE id = 1")
    sql(one, "UPDATE items SET price = 99.00 WHERE id = 1")
    sql(two, "UPDATE items SET qty = 7 WHERE id = 1")
    sync_all(one, two)
    assert row(pub, 1) == ("renamed", Decimal("99.00"), 7)
    converged(pub, one, two)  # the originators got the merged row back
    assert not ConflictBackup.objects.exists()


def test_only_the_columns_both_sides_changed_conflict_and_the_backup_keeps_their_versions(nodes):
    pub, one, two = nodes
    run(pub, "REPL_COLUMN_CONFLICTS ('shop', 'items', 1)")
    sql(pub, "UPDATE items SET name = 'publisher', qty = 1 WHERE id = 2")
    sql(one, "UPDATE items SET name = 'subscriber', price = 55.50 WHERE id = 2")
    sync_all(one, two)
    # The default decision (the publisher wins) is the conflicting column's; the subscriber's price merges.
    assert row(pub, 2) == ("publisher", Decimal("55.50"), 1)
    converged(pub, one, two)
    backup = ConflictBackup.objects.get()
    assert backup.conflict_type == "U" and backup.decision == 3
    assert backup.column_versions["merged"] == ["price"]
    name = backup.column_versions["conflicted"]["name"]
    assert (name["old"], name["publisher"], name["incoming"], name["kept"]) == (
        "item 2", "publisher", "subscriber", "publisher",
    )  # fmt: skip
    assert list(backup.column_versions["conflicted"]) == ["name"]

    # A resolver that lets the subscriber win takes the conflicting column from it; the publisher's qty stays.
    run(pub, "REPL_ADD_CR ('items', 'U', 'sub', 10, 'sub_wins')")
    sql(pub, "UPDATE items SET name = 'publisher again', qty = 2 WHERE id = 3")
    sql(two, "UPDATE items SET name = 'two wins', price = 1.25 WHERE id = 3")
    sync_all(one, two)
    assert row(pub, 3) == ("two wins", Decimal("1.25"), 2)
    converged(pub, one, two)
    won = ConflictBackup.objects.get(primary_key__id=3)
    assert won.decision == 1 and won.column_versions["conflicted"]["name"]["kept"] == "incoming"


def test_the_inbox_shows_each_conflicting_columns_versions(nodes, viewer_client):
    pub, one, _two = nodes
    run(pub, "REPL_COLUMN_CONFLICTS ('shop', 'items', 1)")
    sql(pub, "UPDATE items SET name = 'publisher' WHERE id = 4")
    sql(one, "UPDATE items SET name = 'subscriber', qty = 3 WHERE id = 4")
    sync_all(one)
    backup = ConflictBackup.objects.get()
    body = viewer_client.get(reverse("conflicts-detail", args=[backup.pk])).content.decode()
    section = body.split('id="column-versions"', 1)[1].split("</table>", 1)[0]
    assert 'data-column="name"' in section and "item 4" in section and "subscriber" in section
    assert "merged without conflict: qty" in body


def test_column_conflicts_are_refused_for_a_publication_that_is_not_updateable(make_server):
    pub = make_server("postgresql", "pub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "repl_publish ('shop', 'shop.log'); repl_pub_add ('shop', 'items', 2, 0, null)")
    message = refused(pub, "REPL_COLUMN_CONFLICTS ('shop', 'items', 1)")
    assert "not updateable" in message and "\n" not in message
    assert not TpItem.objects.get().column_conflicts
    assert AuditEntry.objects.filter(action="trx.column_conflicts", outcome=AuditEntry.Outcome.ERROR).exists()


def test_a_resolver_sees_which_columns_conflicted(nodes):
    pub, one, two = nodes
    run(pub, "REPL_COLUMN_CONFLICTS ('shop', 'items', 1); REPL_ADD_CR ('items', 'U', 'price', 10, 'sub_wins')")
    resolver = TransactionalConflictResolver.objects.get()
    expression = "CASE WHEN array_contains(conflict.columns, 'price') THEN 1 ELSE 3 END"
    do_update_resolver(Actor.command(), resolver, expression, {}, "", table_columns(pub, "items"))
    sql(pub, "UPDATE items SET price = 1.00 WHERE id = 1", "UPDATE items SET name = 'pub name' WHERE id = 2")
    sql(one, "UPDATE items SET price = 2.00 WHERE id = 1", "UPDATE items SET name = 'one name' WHERE id = 2")
    sync_all(one, two)
    assert row(pub, 1)[1] == Decimal("2.00")  # price conflicted: the subscriber wins
    assert row(pub, 2)[0] == "pub name"  # only the name conflicted: the publisher wins
    converged(pub, one, two)
    decided = dict(ConflictBackup.objects.values_list("primary_key__id", "decision"))
    assert decided == {1: 1, 2: 3}


def test_an_editor_turns_column_conflicts_on_and_off_from_the_publication_page(nodes, editor_client, viewer_client):
    assert nodes
    item = TpItem.objects.get()
    page = reverse("trx-publications-detail", args=["pub", "shop"])
    toggle = reverse("trx-publications-column-conflicts", args=["pub", "shop"])
    assert 'data-column-conflicts="0"' in viewer_client.get(page).content.decode()
    assert viewer_client.post(toggle, {"item": item.pk, "on": "1"}).status_code == 403
    editor_client.post(toggle, {"item": item.pk, "on": "1"})
    assert TpItem.objects.get().column_conflicts
    body = editor_client.get(page).content.decode()
    assert 'data-column-conflicts="1"' in body and "conflicts by column" in body
    editor_client.post(toggle, {"item": item.pk, "on": "0"})
    assert not TpItem.objects.get().column_conflicts
    audited = AuditEntry.objects.filter(action="trx.column_conflicts", outcome=AuditEntry.Outcome.OK)
    assert audited.count() == 2

"""Held conflicts (the `manual` resolver class): a conflicting row is held on both sides, later changes of it
wait behind the conflict, and the version a person picks in the inbox then replicates to every copy."""

from __future__ import annotations

from decimal import Decimal

import pytest

from replication_admin.conflicts.actions import do_decide_held
from replication_admin.conflicts.chains import ConflictError
from replication_admin.core.audit import Actor
from replication_admin.models import AuditEntry, ConflictBackup
from tests.bidir.test_bidir_sync import nodes as bidir_nodes  # noqa: F401 - the bi-directional fixture
from tests.bidir.test_bidir_sync import rows, sync
from tests.bidir.test_bidir_sync import run as bidir_run
from tests.bidir.test_bidir_sync import sql as bidir_sql
from tests.transactional.test_trx_replication import run, sql, value
from tests.transactional.test_trx_updateable import converged

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


@pytest.fixture
def trx_nodes(make_server, jobs_sync, spark):
    pub, my = make_server("postgresql", "pub"), make_server("mysql", "my")
    sql(
        pub,
        "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), price numeric(10, 2), qty integer)",
        *[f"INSERT INTO items (id, name, price, qty) VALUES ({i}, 'item {i}', {i}0.00, 10)" for i in range(1, 6)],
    )
    run(pub, "repl_publish ('shop', 'shop.log', 1); repl_pub_add ('shop', 'items', 2, 0, null)")
    run(my, "repl_server ('pub', 'pub'); repl_subscribe ('pub', 'shop'); repl_init_copy ('pub', 'shop')")
    run(pub, "REPL_ADD_CR ('items', 'U', 'hold', 10, 'manual')")
    return pub, my


def names(server) -> dict[int, str]:
    return {int(k): str(v) for k, v in _rows(server, "SELECT id, name FROM items ORDER BY id")}


def _rows(server, text: str) -> list:
    from tests.tables import fetch_all  # noqa: PLC0415

    return fetch_all(server, text)


def held() -> ConflictBackup:
    backups = list(ConflictBackup.objects.filter(decision=ConflictBackup.HELD))
    assert len(backups) == 1, backups
    return backups[0]


def test_a_transactional_conflict_is_held_on_both_sides_and_the_edited_version_reaches_every_copy(trx_nodes):
    pub, my = trx_nodes
    sql(pub, "UPDATE items SET name = 'publisher' WHERE id = 1")
    sql(my, "UPDATE items SET name = 'subscriber' WHERE id = 1")
    sql(my, "UPDATE items SET name = 'other row' WHERE id = 2")
    run(my, "repl_sync ('pub', 'shop')")
    # Held: each side keeps its version; the row without conflict went through.
    assert names(pub)[1] == "publisher" and names(my)[1] == "subscriber"
    assert names(pub)[2] == names(my)[2] == "other row"
    conflict = held()
    assert conflict.primary_key == {"id": 1} and conflict.incoming_row["name"] == "subscriber"
    assert conflict.publisher_row["name"] == "publisher" and conflict.resolver == "pub.items_cr_U_hold"
    # Later changes of the row wait behind it, on both sides.
    sql(pub, "UPDATE items SET qty = 77 WHERE id = 1")
    sql(my, "UPDATE items SET name = 'subscriber again' WHERE id = 1")
    run(my, "repl_sync ('pub', 'shop')")
    assert value(my, "SELECT qty FROM items WHERE id = 1") == 10
    assert names(pub)[1] == "publisher"
    conflict = held()
    assert conflict.incoming_row["name"] == "subscriber again"  # the latest subscriber version is what it offers
    with pytest.raises(ConflictError, match="not a whole number"):
        do_decide_held(Actor.command(), conflict, 2, {"name": "x", "price": "1", "qty": "many"})
    message = do_decide_held(Actor.command(), conflict, 2, {"name": "agreed", "price": "12.50", "qty": "5"})
    assert "an edited version" in message
    run(my, "repl_sync ('pub', 'shop')")
    converged(pub, my)
    assert names(my)[1] == "agreed" and value(my, "SELECT qty FROM items WHERE id = 1") == 5
    decided = ConflictBackup.objects.get(pk=conflict.pk)
    assert (decided.decision, decided.chosen) == (2, 2) and decided.decided_by.startswith("command")
    assert decided.winning_row["name"] == "agreed"
    assert AuditEntry.objects.filter(action="conflict.decide", detail__choice=2).exists()
    with pytest.raises(ConflictError, match="is not held"):
        do_decide_held(Actor.command(), decided, 3)
    # The row flows again in both directions.
    sql(pub, "UPDATE items SET name = 'after' WHERE id = 1")
    run(my, "repl_sync ('pub', 'shop')")
    assert names(my)[1] == "after"


def test_the_publishers_version_picked_for_a_held_transactional_conflict_replaces_the_subscribers(trx_nodes):
    pub, my = trx_nodes
    sql(pub, "UPDATE items SET name = 'publisher' WHERE id = 3")
    sql(my, "UPDATE items SET name = 'subscriber' WHERE id = 3")
    run(my, "repl_sync ('pub', 'shop')")
    do_decide_held(Actor.command(), held(), 3)
    run(my, "repl_sync ('pub', 'shop')")
    converged(pub, my)
    assert names(my)[3] == "publisher"
    assert not ConflictBackup.objects.filter(decision=ConflictBackup.HELD).exists()


def test_a_bidirectional_conflict_is_held_until_the_subscribers_version_is_picked(bidir_nodes):  # noqa: F811
    pub, sub_my, sub_lite = bidir_nodes
    bidir_run("REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 'hold', 10, 'manual')")
    bidir_sql(pub, 'UPDATE "items" SET name = ? WHERE id = 4', ["publisher"])
    bidir_sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 4', ["subscriber"])
    sync()
    assert rows(pub)[4][0] == "publisher" and rows(sub_my)[4][0] == "subscriber"
    assert rows(sub_lite)[4][0] == "publisher"
    conflict = held()
    assert conflict.kind == "snapshot" and conflict.source == "my2"
    # The publisher's later change of the row is not pushed over the held version; another row still flows.
    bidir_sql(pub, 'UPDATE "items" SET price = 99 WHERE id = 4')
    bidir_sql(pub, 'UPDATE "items" SET name = ? WHERE id = 5', ["five"])
    sync()
    assert rows(sub_my)[4][:2] == ("subscriber", Decimal("4.50")) and rows(sub_my)[5][0] == "five"
    assert held().pk == conflict.pk  # the next pull met the same held change and kept holding it
    message = do_decide_held(Actor.command(), held(), 1)
    assert "sync job" in message
    sync()  # the queued sync ran inline; one more brings the other subscriber along
    data = rows(pub)
    assert data[4][0] == "subscriber"
    assert rows(sub_my)[4] == data[4] and rows(sub_lite)[4] == data[4]
    decided = ConflictBackup.objects.get(pk=conflict.pk)
    assert (decided.decision, decided.chosen) == (1, 1) and not decided.pending

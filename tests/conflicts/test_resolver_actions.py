"""Resolver actions on the catalog: add (generated classes and custom expressions), edit, move, remove,
permissions and audit, and dry runs that decide recorded conflicts again on Spark."""

from __future__ import annotations

import pytest

from replication_admin.conflicts.actions import (
    do_add_resolver,
    do_move_resolver,
    do_remove_resolver,
    do_start_dry_run,
    do_update_resolver,
)
from replication_admin.conflicts.chains import conflict_input, table_columns
from replication_admin.core.audit import Actor, PermissionDenied
from replication_admin.core.conflicts import resolver_chain
from replication_admin.core.errors import ReplicationError
from replication_admin.engine.resolvers import ResolverColumn, ResolverSpec
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    SnapshotConflictResolver,
    TransactionalConflictResolver,
)
from tests.tables import create_table
from tests.users import make_user

pytestmark = pytest.mark.django_db

ITEM = "shop.items"
COLUMNS = [
    ResolverColumn("item_id", "bigint", True),
    ResolverColumn("name", "string", False),
    ResolverColumn("price", "decimal(12,2)", False),
    ResolverColumn("ROWGUID", "string", False),
]
ACTOR = Actor.command()


@pytest.fixture
def shop(make_server):
    """A SQLite server `shop` with the reference's items table (and its ROWGUID)."""
    server = make_server("sqlite", "shop")
    create_table(
        server,
        "items",
        [
            ("item_id", LogicalType("integer")),
            ("name", LogicalType("varchar", length=40)),
            ("price", LogicalType("numeric", precision=12, scale=2)),
            ("ROWGUID", LogicalType("varchar", length=300)),
        ],
        ["item_id"],
    )
    return server


def add(cr_type="U", cls="custom", **kw):
    return do_add_resolver(ACTOR, ITEM, COLUMNS, cr_type, cls, **kw)


def chain_procs(cr_type="U") -> list[tuple[str, int]]:
    return list(
        SnapshotConflictResolver.objects.filter(table_name=ITEM, type=cr_type)
        .order_by("order", "id")
        .values_list("proc", "order")
    )


# --- columns ------------------------------------------------------------------------------------------


def test_table_columns_describe_the_published_table(shop):
    assert table_columns(shop, "items") == COLUMNS
    with pytest.raises(ReplicationError, match="'nope' does not exist"):
        table_columns(shop, "nope")


# --- add ----------------------------------------------------------------------------------------------


def test_generated_classes_fill_the_expression_and_go_after_the_last_of_their_chain():
    minimum = add("U", "min", column="PRICE")
    assert (minimum.proc, minimum.order, minimum.resolver_class, minimum.column) == (
        "shop.items_cr_U_min_price",
        10,
        "min",
        "price",
    )
    assert minimum.expression == "CASE WHEN pub.price < new.price THEN 3 WHEN pub.price > new.price THEN 1 ELSE 0 END"
    ave = add("U", "ave", column="price")
    assert (ave.order, ave.expression, ave.assignments) == (20, "2", {"price": "(pub.price + new.price) / 2"})
    again = add("U", "min", column="price")
    assert again.proc == "shop.items_cr_U_min_price_2"
    pub_wins = add("I", "pub_wins", suffix="pw", order=5, notify="owner@example.com")
    assert (pub_wins.proc, pub_wins.order, pub_wins.expression, pub_wins.notify) == (
        "shop.items_cr_I_pw",
        5,
        "3",
        "owner@example.com",
    )
    assert add("D", "sub_wins").expression == "1"

    entry = AuditEntry.objects.filter(action="resolver.add").order_by("id").first()
    assert entry.outcome == AuditEntry.Outcome.OK
    assert entry.target == "shop.items shop.items_cr_U_min_price"
    assert entry.detail["class"] == "min" and entry.detail["expression"] == minimum.expression


def test_custom_resolvers_keep_their_normalised_expression_and_assignments():
    resolver = add(
        "U",
        "custom",
        suffix="minimal",
        expression="case when PUB.price < new.price then 2 else 1 end",
        assignments={"PRICE": "pub.price"},
    )
    resolver.refresh_from_db()
    assert resolver.expression == "CASE WHEN pub.price < new.price THEN 2 ELSE 1 END"
    assert resolver.assignments == {"price": "pub.price"}
    assert resolver.resolver_class == "custom"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cls": "custom"}, "a custom resolver needs an expression"),
        ({"cls": "custom", "expression": "3; DROP TABLE items"}, "';' is not allowed"),
        ({"cls": "custom", "expression": "reflect('java.lang.Runtime', 'exec', 'x')"}, "may not call REFLECT()"),
        ({"cls": "custom", "expression": "CASE WHEN new.cost > 1 THEN 3 ELSE 0 END"}, "unknown column 'cost'"),
        ({"cls": "custom", "expression": "2", "assignments": {"item_id": "1"}}, "part of the primary key"),
        ({"cls": "min"}, "the min class needs a column"),
        ({"cls": "min", "column": "name", "expression": "1"}, "makes its own expression"),
        ({"cls": "ave", "column": "name"}, "needs a numeric column"),
        ({"cls": "add", "column": "price"}, "transactional publications only"),
        ({"cls": "ave", "column": "price", "cr_type": "D"}, "insert and update conflicts only"),
        ({"cls": "wins"}, "unknown resolver class 'wins'"),
        ({"cls": "pub_wins", "notify": "not an address"}, "is not an e-mail address"),
        ({"cls": "pub_wins", "suffix": "x y"}, "1-40 letters, digits or underscores"),
        ({"cls": "pub_wins", "cr_type": "X"}, "resolver type must be I"),
    ],
)
def test_invalid_resolvers_are_refused_and_the_failure_is_audited(kwargs, message):
    kwargs = dict(kwargs)
    cr_type = kwargs.pop("cr_type", "U")
    cls = kwargs.pop("cls")
    with pytest.raises(ReplicationError) as caught:
        add(cr_type, cls, **kwargs)
    assert message in str(caught.value)
    assert not SnapshotConflictResolver.objects.exists()
    entry = AuditEntry.objects.get(action="resolver.add")
    assert entry.outcome == AuditEntry.Outcome.ERROR and message in entry.detail["error"]


def test_a_suffix_is_unique_per_table():
    add("U", "pub_wins", suffix="one")
    with pytest.raises(ReplicationError, match=r"already has a resolver named shop\.items_cr_U_one"):
        add("U", "sub_wins", suffix="one")
    # The same suffix on another table is fine.
    other = do_add_resolver(ACTOR, "shop.other", COLUMNS, "U", "sub_wins", suffix="one")
    assert other.proc == "shop.other_cr_U_one"


def test_transactional_resolvers_may_add():
    resolver = add("U", "add", column="price", model=TransactionalConflictResolver)
    assert isinstance(resolver, TransactionalConflictResolver)
    assert resolver.assignments == {"price": "pub.price + (new.price - old.price)"}
    assert not SnapshotConflictResolver.objects.exists()


def test_a_viewer_may_not_change_resolvers_and_the_refusal_is_audited():
    viewer = Actor(user=make_user("viewer"), via="web")
    with pytest.raises(PermissionDenied, match=r"needs replication_admin\.edit"):
        do_add_resolver(viewer, ITEM, COLUMNS, "U", "pub_wins")
    resolver = add("U", "pub_wins")
    with pytest.raises(PermissionDenied):
        do_move_resolver(viewer, resolver, "up")
    with pytest.raises(PermissionDenied):
        do_update_resolver(viewer, resolver, "1", {}, "", COLUMNS)
    with pytest.raises(PermissionDenied):
        do_remove_resolver(viewer, resolver)
    with pytest.raises(PermissionDenied, match=r"needs replication_admin\.operate"):
        do_start_dry_run(viewer, ITEM, "shop", "items")
    denied = AuditEntry.objects.filter(outcome=AuditEntry.Outcome.DENIED, username="viewer")
    assert sorted(denied.values_list("action", flat=True)) == [
        "job.resolver_dry_run",
        "resolver.add",
        "resolver.move",
        "resolver.remove",
        "resolver.update",
    ]
    resolver.refresh_from_db()
    assert resolver.expression == "3"
    assert SnapshotConflictResolver.objects.count() == 1


# --- edit, move, remove ----------------------------------------------------------------------------------


def test_an_edited_generated_resolver_becomes_custom_and_the_change_is_audited():
    resolver = add("U", "min", column="price")
    do_update_resolver(
        ACTOR, resolver, "CASE WHEN pub.price < new.price THEN 2 ELSE 1 END", {"price": "pub.price"}, "a@b.org", COLUMNS
    )
    resolver.refresh_from_db()
    assert (resolver.resolver_class, resolver.column, resolver.notify) == ("custom", "", "a@b.org")
    assert resolver.assignments == {"price": "pub.price"}
    entry = AuditEntry.objects.get(action="resolver.update")
    assert entry.detail["before"]["expression"].startswith("CASE WHEN pub.price < new.price THEN 3")
    assert entry.detail["after"]["expression"] == "CASE WHEN pub.price < new.price THEN 2 ELSE 1 END"

    with pytest.raises(ReplicationError, match="may not contain a query"):
        do_update_resolver(ACTOR, resolver, "(select 1)", {}, "", COLUMNS)
    resolver.refresh_from_db()
    assert resolver.expression == "CASE WHEN pub.price < new.price THEN 2 ELSE 1 END"

    # Changing only the e-mail keeps a generated resolver's class.
    ave = add("U", "ave", column="price")
    do_update_resolver(ACTOR, ave, ave.expression, ave.assignments, "", COLUMNS)
    ave.refresh_from_db()
    assert (ave.resolver_class, ave.column) == ("ave", "price")


def test_moving_swaps_with_the_neighbour_of_the_same_table_and_type():
    a = add("U", "pub_wins", suffix="a")
    b = add("U", "sub_wins", suffix="b")
    c = add("U", "custom", suffix="c", expression="0")
    add("I", "pub_wins", suffix="other_type")
    assert chain_procs() == [("shop.items_cr_U_a", 10), ("shop.items_cr_U_b", 20), ("shop.items_cr_U_c", 30)]
    do_move_resolver(ACTOR, c, "up")
    assert chain_procs() == [("shop.items_cr_U_a", 10), ("shop.items_cr_U_c", 20), ("shop.items_cr_U_b", 30)]
    do_move_resolver(ACTOR, a, "down")
    assert chain_procs() == [("shop.items_cr_U_c", 10), ("shop.items_cr_U_a", 20), ("shop.items_cr_U_b", 30)]
    # At either end nothing moves.
    do_move_resolver(ACTOR, b, "down")
    c.refresh_from_db()
    do_move_resolver(ACTOR, c, "up")
    assert chain_procs() == [("shop.items_cr_U_c", 10), ("shop.items_cr_U_a", 20), ("shop.items_cr_U_b", 30)]
    assert chain_procs("I") == [("shop.items_cr_I_other_type", 10)]
    entry = AuditEntry.objects.filter(action="resolver.move").order_by("id").first()
    assert entry.detail["direction"] == "up" and entry.detail["after"]["shop.items_cr_U_c"] == 20
    with pytest.raises(ReplicationError, match="direction must be up or down"):
        do_move_resolver(ACTOR, a, "left")


def test_moving_renumbers_orders_that_tie():
    a = add("U", "pub_wins", suffix="a", order=5)
    b = add("U", "sub_wins", suffix="b", order=5)
    c = add("U", "custom", suffix="c", order=5, expression="0")
    assert [p for p, _ in chain_procs()] == ["shop.items_cr_U_a", "shop.items_cr_U_b", "shop.items_cr_U_c"]
    do_move_resolver(ACTOR, b, "up")
    assert chain_procs() == [("shop.items_cr_U_b", 10), ("shop.items_cr_U_a", 20), ("shop.items_cr_U_c", 30)]
    do_move_resolver(ACTOR, c, "up")
    assert chain_procs() == [("shop.items_cr_U_b", 10), ("shop.items_cr_U_c", 20), ("shop.items_cr_U_a", 30)]
    assert a.pk != b.pk


def test_removing_a_resolver_and_the_chain_specs():
    keep = add("U", "min", column="price")
    gone = add("U", "pub_wins")
    first = add("U", "sub_wins", order=1)
    delete = add("D", "sub_wins", order=1)
    assert resolver_chain(ITEM) == [
        ResolverSpec(first.pk, first.proc, "U", 1, "1", {}),
        ResolverSpec(delete.pk, delete.proc, "D", 1, "1", {}),
        ResolverSpec(keep.pk, keep.proc, "U", 10, keep.expression, {}),
        ResolverSpec(gone.pk, gone.proc, "U", 20, "3", {}),
    ]
    message = do_remove_resolver(ACTOR, gone)
    assert message == f"removed {gone.proc} from {ITEM}"
    assert not SnapshotConflictResolver.objects.filter(pk=gone.pk).exists()
    assert [s.id for s in resolver_chain(ITEM)] == [first.pk, delete.pk, keep.pk]
    entry = AuditEntry.objects.get(action="resolver.remove")
    assert entry.target == f"{ITEM} {gone.proc}" and entry.detail["expression"] == "3"
    assert resolver_chain(ITEM, model=TransactionalConflictResolver) == []


# --- dry runs ------------------------------------------------------------------------------------------


def backup(n, conflict_type, publisher_row, incoming_row, decision, resolver="default", old="shop@0"):
    return ConflictBackup.objects.create(
        item=ITEM,
        table_name="items",
        publisher="shop",
        source="branch",
        change_guid=f"branch@{n}",
        origin="branch",
        primary_key={"item_id": n},
        conflict_type=conflict_type,
        operation=conflict_type,
        decision=decision,
        resolver=resolver,
        publisher_row=publisher_row,
        incoming_row=incoming_row,
        old_rowguid=old,
    )


def item_row(n, price, guid):
    return {"item_id": n, "name": f"item {n}", "price": price, "ROWGUID": guid}


def test_conflict_input_is_what_decide_rows_takes():
    row = backup(1, "U", item_row(1, "9.50", "shop@1"), item_row(1, "10.00", "branch@1"), 3)
    assert conflict_input(row) == {
        "key": row.pk,
        "type": "U",
        "pub": item_row(1, "9.50", "shop@1"),
        "new": item_row(1, "10.00", "branch@1"),
        "old": {"ROWGUID": "shop@0"},
    }
    gone = backup(2, "D", None, None, 5)
    assert conflict_input(gone)["new"] == {"item_id": 2} and conflict_input(gone)["pub"] is None


@pytest.fixture
def recorded(shop):
    """Three recorded conflicts, decided by the defaults when they happened."""
    return [
        backup(1, "U", item_row(1, "9.50", "shop@1"), item_row(1, "10.00", "branch@1"), 3),
        backup(2, "U", item_row(2, "12.00", "shop@2"), item_row(2, "10.00", "branch@2"), 3),
        backup(3, "D", None, {"item_id": 3, "ROWGUID": "branch@3"}, 5),
    ]


@pytest.mark.spark
def test_a_dry_run_decides_recorded_conflicts_with_the_saved_chain(spark, shop, recorded):
    minimum = add("U", "min", column="price")
    job = do_start_dry_run(ACTOR, ITEM, shop, "items", sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    rows = {r["conflict"]: r for r in job.result["rows"]}
    assert set(rows) == {b.pk for b in recorded}
    first, second, gone = (rows[b.pk] for b in recorded)
    assert (first["type"], first["recorded_decision"], first["decision"], first["resolver"], first["same"]) == (
        "U",
        3,
        3,
        minimum.proc,
        True,
    )
    assert (second["recorded_decision"], second["decision"], second["resolver"], second["same"]) == (
        3,
        1,
        minimum.proc,
        False,
    )
    assert (gone["decision"], gone["resolver"], gone["same"]) == (5, "default", True)
    assert job.result["changed"] == 1
    assert AuditEntry.objects.filter(action="job.resolver_dry_run", outcome=AuditEntry.Outcome.OK).count() == 1


@pytest.mark.spark
def test_a_dry_run_tries_a_proposed_resolver_in_place_of_the_saved_one(spark, shop, recorded):
    minimum = add("U", "min", column="price")
    proposed = {
        "id": minimum.pk,
        "cr_type": "U",
        "order": minimum.order,
        "expression": "CASE WHEN pub.price < new.price THEN 2 ELSE 1 END",
        "assignments": {"price": "pub.price"},
    }
    job = do_start_dry_run(ACTOR, ITEM, "shop", "items", proposed=proposed, sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    rows = {r["conflict"]: r for r in job.result["rows"]}
    first, second, _ = (rows[b.pk] for b in recorded)
    assert (first["decision"], first["resolver"], first["final"]["price"]) == (2, minimum.proc, "9.50")
    assert (second["decision"], second["resolver"]) == (1, minimum.proc)
    assert job.result["changed"] == 2
    # The saved resolver is untouched.
    minimum.refresh_from_db()
    assert minimum.expression.startswith("CASE WHEN pub.price < new.price THEN 3")

    # An unsaved one (a ResolverSpec, as the editor sends it) goes after the saved chain of its type.
    unsaved = ResolverSpec(None, "proposed", "D", 10**6, "CASE WHEN pub.ROWGUID IS NULL THEN 1 ELSE 0 END", {})
    job = do_start_dry_run(ACTOR, ITEM, shop, "items", proposed=unsaved, sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    gone = next(r for r in job.result["rows"] if r["conflict"] == recorded[2].pk)
    assert (gone["decision"], gone["resolver"], gone["resolver_id"], gone["same"]) == (1, "proposed", None, False)


def test_a_proposed_resolver_is_checked_before_the_job_is_queued(shop, recorded):
    bad = {"id": None, "cr_type": "U", "order": 1, "expression": "(select 1)", "assignments": {}}
    with pytest.raises(ReplicationError, match="may not contain a query"):
        do_start_dry_run(ACTOR, ITEM, shop, "items", proposed=bad)
    with pytest.raises(ReplicationError, match="resolver 999 does not exist"):
        do_start_dry_run(ACTOR, ITEM, shop, "items", proposed={**bad, "id": 999, "expression": "1"})
    assert not JobRun.objects.exists()


@pytest.mark.spark
def test_a_dry_run_with_a_resolver_failing_in_spark_fails_with_its_name(spark, shop, recorded):
    SnapshotConflictResolver.objects.create(
        table_name=ITEM, type="U", proc="broken", order=1, resolver_class="custom", expression="CAST(pub.name AS INT)"
    )
    job = do_start_dry_run(ACTOR, ITEM, shop, "items", sync=True)
    assert job.state == JobRun.State.FAILED
    assert "resolver broken" in job.error and "CAST_INVALID_INPUT" in job.error

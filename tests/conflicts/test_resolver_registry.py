"""The forms, the wizard, the statement parser and the catalog offer what the engine's registry of resolver
classes and conflict types holds: one registry entry is a new class everywhere."""

from __future__ import annotations

import pytest
from django.urls import reverse

from replication_admin.conflicts.actions import check_definition, do_add_resolver
from replication_admin.conflicts.forms import ResolverForm
from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.engine import resolvers
from replication_admin.engine import statements as st
from replication_admin.engine.resolvers import NUMERIC, ColumnTypes, ResolverClass, ResolverColumn, ResolverError
from replication_admin.engine.types import LogicalType
from replication_admin.models import SnapshotConflictResolver, SnapshotPublication, TransactionalConflictResolver
from replication_admin.models.catalog import CR_TYPES as MODEL_CR_TYPES
from replication_admin.wizard.forms import ResolversForm
from replication_admin.wizard.plan import CR_TYPES as WIZARD_CR_TYPES
from tests.tables import create_table

COLUMNS = [
    ResolverColumn("id", "bigint", True),
    ResolverColumn("qty", "bigint", False),
    ResolverColumn("updated", "timestamp", False),
]
ACTOR = Actor.command()

# A class fit for every publication, and one that reads the old row (transactional publications only).
LATEST = ResolverClass(
    "latest",
    "latest of a column",
    "the row with the later date or time wins",
    lambda c: (f"CASE WHEN {c.new} > {c.pub} THEN 1 ELSE 3 END", {}),
    conflict_types=("I", "U"),
    column=ColumnTypes("date or time", ("date", "timestamp")),
)
DELTA = ResolverClass(
    "delta",
    "delta of a column",
    "the subscriber's change is added to the publisher's value",
    lambda c: ("2", {c.name: f"{c.pub} + {c.new} - {c.old}"}),
    conflict_types=("U",),
    column=NUMERIC,
    needs_old_row=True,
)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(resolvers.RESOLVER_CLASSES, "latest", LATEST)
    monkeypatch.setitem(resolvers.RESOLVER_CLASSES, "delta", DELTA)


def choices(field) -> dict[str, str]:
    return dict(field.choices)


def test_the_forms_offer_todays_classes_and_types_from_the_registry():
    form = ResolverForm(column_names=["id", "qty"])
    assert choices(form.fields["resolver_class"]) == {
        "pub_wins": "pub_wins — the publisher's row wins",
        "sub_wins": "sub_wins — the subscriber's row wins",
        "min": "min — the row with the smaller value of a column wins",
        "max": "max — the row with the larger value of a column wins",
        "ave": "ave — the column becomes the average of both rows",
        "manual": "manual — both sides keep their version until a person picks one in the conflict inbox",
        "custom": "custom — your own expression",
    }  # add needs the old row, which a bi-directional snapshot does not have
    assert form.fields["column"].help_text == "min, max and ave compare this column"
    assert choices(form.fields["type"]) == {"I": "insert", "U": "update", "D": "delete"}

    wizard = ResolversForm(columns=["qty"])
    assert list(wizard.fields) == ["cls_U", "column_U", "cls_I", "column_I", "cls_D", "column_D"]
    assert choices(wizard.fields["cls_U"]) == {
        "": "no resolver: the default rule",
        "pub_wins": "publisher wins",
        "sub_wins": "subscriber wins",
        "min": "min of a column",
        "max": "max of a column",
        "ave": "ave of a column",
        "add": "add of a column",
        "manual": "held for a person",
    }
    assert wizard.fields["column_U"].label == "column (min, max, ave, add)"
    assert WIZARD_CR_TYPES == (("U", "update"), ("I", "insert"), ("D", "delete"))
    assert MODEL_CR_TYPES == [("I", "insert"), ("U", "update"), ("D", "delete")]  # the migrations' choices


def test_a_class_needing_a_column_or_an_expression_says_so_next_to_the_field():
    form = ResolverForm({"type": "U", "resolver_class": "ave"}, column_names=["id", "qty"])
    assert not form.is_valid() and form.errors["column"] == ["ave compares a column: choose it."]
    form = ResolverForm({"type": "U", "resolver_class": "custom"}, column_names=["id", "qty"])
    assert not form.is_valid()
    assert form.errors["expression"] == ["A custom resolver needs an expression returning its decision."]


@pytest.mark.django_db
def test_one_registry_entry_is_offered_by_the_parser_the_forms_and_the_wizard(registered):
    # The statement parser: REPL_ADD_CR checks the class, REPL_ADD_SNAPSHOT_CR passes it on.
    for cls, column in (("latest", "updated"), ("delta", "qty")):
        assert st.parse_one(f"REPL_ADD_CR ('items', 'U', 's', 10, '{cls}', '{column}')").cls == cls
    assert st.parse_one("REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 's', 10, 'latest', 'updated')").cls == "latest"

    # The bi-directional resolver editor: every class a snapshot can use, the new one's column asked for.
    form = ResolverForm(column_names=["id", "qty", "updated"])
    offered = choices(form.fields["resolver_class"])
    assert offered["latest"] == "latest — the row with the later date or time wins"
    assert "delta" not in offered and list(offered)[-1] == "latest"
    assert form.fields["column"].help_text == "min, max, ave and latest compare this column"
    form = ResolverForm({"type": "U", "resolver_class": "latest"}, column_names=["id", "qty", "updated"])
    assert not form.is_valid() and form.errors["column"] == ["latest compares a column: choose it."]
    form = ResolverForm(
        {"type": "U", "resolver_class": "latest", "column": "updated"}, column_names=["id", "qty", "updated"]
    )
    assert form.is_valid(), form.errors

    # The wizard: offered for every conflict type it asks about, and its plan check takes it.
    wizard = ResolversForm(columns=["qty", "updated"])
    for cr_type, _ in WIZARD_CR_TYPES:
        assert choices(wizard.fields[f"cls_{cr_type}"])["latest"] == "latest of a column"
        assert choices(wizard.fields[f"cls_{cr_type}"])["delta"] == "delta of a column"
        assert wizard.fields[f"column_{cr_type}"].label == "column (min, max, ave, add, latest, delta)"
    wizard = ResolversForm({"cls_U": "latest", "column_U": "updated"}, columns=["qty", "updated"])
    assert wizard.is_valid() and wizard.resolvers() == {"U": {"cls": "latest", "column": "updated"}}
    check_definition("latest", "U", "updated", COLUMNS, transactional=False)
    check_definition("delta", "U", "qty", COLUMNS, transactional=True)
    with pytest.raises(ResolverError, match="the delta class is for transactional publications only"):
        check_definition("delta", "U", "qty", COLUMNS, transactional=False)
    with pytest.raises(ResolverError, match="applies to update conflicts only, not to inserts"):
        check_definition("delta", "I", "qty", COLUMNS, transactional=True)

    # Transactional resolvers (REPL_ADD_CR; there is no form of their own) and snapshot ones are saved.
    saved = do_add_resolver(
        ACTOR, "pg1.items", COLUMNS, "U", "delta", column="qty", model=TransactionalConflictResolver
    )
    assert (saved.proc, saved.resolver_class, saved.column, saved.expression, saved.assignments) == (
        "pg1.items_cr_U_delta_qty", "delta", "qty", "2", {"qty": "pub.qty + new.qty - old.qty"},
    )  # fmt: skip
    with pytest.raises(ReplicationError, match="transactional publications only"):
        do_add_resolver(ACTOR, "pg1.items", COLUMNS, "U", "delta", column="qty")


def test_a_new_class_is_added_from_the_bidirectional_editor(registered, editor_client, make_server):
    shop = make_server("sqlite", "shop")
    create_table(
        shop,
        "items",
        [("id", LogicalType("integer")), ("qty", LogicalType("integer")), ("updated", LogicalType("timestamp"))],
        ["id"],
    )
    publication = SnapshotPublication.objects.create(item="shop.items", server=shop, table="items")
    page = editor_client.get(reverse("publications-resolvers", args=[publication.pk])).content.decode()
    assert '<option value="latest">latest — the row with the later date or time wins</option>' in page
    assert 'value="delta"' not in page
    data = {"type": "I", "resolver_class": "latest", "column": "updated", "expression": "", "assignments": "",
            "notify": "", "order": ""}  # fmt: skip
    response = editor_client.post(reverse("publications-resolvers-add", args=[publication.pk]), data)
    assert response.status_code == 302
    resolver = SnapshotConflictResolver.objects.get()
    assert (resolver.type, resolver.resolver_class, resolver.column, resolver.expression) == (
        "I", "latest", "updated", "CASE WHEN new.updated > pub.updated THEN 1 ELSE 3 END",
    )  # fmt: skip

"""The conflict inbox's bulk actions: tick conflicts (or take all the filter selects), one confirmation naming how
many and which, then each is re-applied or dismissed through the action its own page uses; held conflicts are
left for a person to decide on their page."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from replication_admin.bidir import actions as bidir_actions
from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, ConflictBackup, SnapshotSubscription
from tests.tables import create_table, fetch_all, insert_rows

pytestmark = pytest.mark.django_db
COLUMNS = [("id", LogicalType("integer")), ("v", LogicalType("varchar", length=10))]


@pytest.fixture
def inbox(make_server):
    """demo.b published bi-directionally to branch, rows 1..5 on the publisher, a conflict per row whose losing
    version is 'lost <id>' (the fifth held for a person)."""
    command = Actor.command()
    demo, branch = make_server("sqlite", "demo"), make_server("sqlite", "branch")
    create_table(demo, "b", COLUMNS, ["id"])
    publication = bidir_actions.do_create_publication(command, demo, "b")
    subscription = bidir_actions.do_create_subscription(command, publication, branch)
    SnapshotSubscription.objects.filter(pk=subscription.pk).update(init_state="done")
    insert_rows(demo, "b", ["id", "v"], [(i, f"kept {i}") for i in range(1, 6)])
    guids = {row[0]: row[2] for row in fetch_all(demo, 'SELECT id, v, "ROWGUID" FROM b')}
    conflicts = []
    for i in range(1, 6):
        won = {"id": i, "v": f"kept {i}", "ROWGUID": guids[i]}
        lost = {"id": i, "v": f"lost {i}", "ROWGUID": guids[i]}
        conflicts.append(ConflictBackup.objects.create(
            item=publication.item, table_name="b", publisher="demo", source="branch", change_guid=f"branch@{i}",
            origin="branch", primary_key={"id": i}, conflict_type="U", operation="U",
            decision=ConflictBackup.HELD if i == 5 else 3, resolver="default",
            publisher_row=won, incoming_row=lost, winning_row=won, losing_row=lost,
        ))  # fmt: skip
    return demo, conflicts


def values(demo) -> dict[int, str]:
    return dict(fetch_all(demo, "SELECT id, v FROM b ORDER BY id"))


def confirm_page(client, action: str, ids=(), **query):
    return client.get(reverse("conflicts-bulk"), {"action": action, "id": [str(i) for i in ids], **query})


def test_bulk_re_apply_asks_once_then_writes_exactly_the_selected_losing_versions(inbox, operator_client):
    demo, conflicts = inbox
    chosen = [conflicts[0].pk, conflicts[2].pk, conflicts[4].pk]  # the fifth is held

    page = confirm_page(operator_client, "reapply", chosen)
    body = page.content.decode()
    assert page.templates[0].name == "replication_admin/confirm.html"
    assert "Re-apply 2 conflicts?" in body and "held conflicts wait for a person" in body
    assert {int(pk) for pk in re.findall(r'<tr data-conflict="(\d+)"', body)} == set(chosen)
    assert page.context["hidden"]["ids"] == f"{conflicts[2].pk},{conflicts[0].pk}"
    assert values(demo) == {i: f"kept {i}" for i in range(1, 6)}, "the confirmation page changed something"

    response = operator_client.post(reverse("conflicts-bulk"), page.context["hidden"], follow=True)
    assert "2 conflicts re-applied" in response.content.decode()
    assert values(demo) == {1: "lost 1", 2: "kept 2", 3: "lost 3", 4: "kept 4", 5: "kept 5"}
    reapplied = set(ConflictBackup.objects.filter(reapplied_at__isnull=False).values_list("pk", flat=True))
    assert reapplied == {conflicts[0].pk, conflicts[2].pk}
    rows = AuditEntry.objects.filter(action="conflict.reapply", username="operator", outcome="ok")
    assert sorted(rows.values_list("target", flat=True)) == [
        f"conflict #{c.pk} (demo.b)" for c in (conflicts[0], conflicts[2])
    ]
    summary = AuditEntry.objects.get(action="conflict.bulk_reapply")
    assert summary.detail["done"] == [conflicts[0].pk, conflicts[2].pk]

    # Posted again (a second click): nothing is written twice.
    again = operator_client.post(reverse("conflicts-bulk"), page.context["hidden"], follow=True)
    assert "0 conflicts re-applied; 2 left as they were" in again.content.decode()
    assert AuditEntry.objects.filter(action="conflict.reapply", outcome="ok").count() == 2


def test_bulk_dismiss_marks_exactly_the_selected_conflicts_and_they_are_kept_and_filterable(inbox, operator_client):
    demo, conflicts = inbox
    chosen = [conflicts[1].pk, conflicts[3].pk, conflicts[4].pk]
    page = confirm_page(operator_client, "dismiss", chosen)
    assert "Dismiss 2 conflicts?" in page.content.decode()
    operator_client.post(reverse("conflicts-bulk"), page.context["hidden"])

    dismissed = ConflictBackup.objects.filter(dismissed_at__isnull=False)
    assert set(dismissed.values_list("pk", flat=True)) == {conflicts[1].pk, conflicts[3].pk}
    assert set(dismissed.values_list("dismissed_by", flat=True)) == {"operator"}
    assert ConflictBackup.objects.count() == 5 and values(demo) == {i: f"kept {i}" for i in range(1, 6)}
    held = ConflictBackup.objects.get(pk=conflicts[4].pk)
    assert held.dismissed_at is None and held.decision == ConflictBackup.HELD
    assert AuditEntry.objects.filter(action="conflict.dismiss", outcome="ok").count() == 2

    listed = operator_client.get(reverse("conflicts"), {"status": "dismissed"}).content.decode()
    assert {int(pk) for pk in re.findall(r'<tr data-conflict="(\d+)"', listed)} == {conflicts[1].pk, conflicts[3].pk}
    assert "2 conflicts match" in listed
    open_ones = operator_client.get(reverse("conflicts"), {"status": "open"}).content.decode()
    assert {int(pk) for pk in re.findall(r'<tr data-conflict="(\d+)"', open_ones)} == {conflicts[0].pk, conflicts[2].pk}
    assert "dismissed by" not in open_ones.lower()
    detail = operator_client.get(reverse("conflicts-detail", args=[conflicts[1].pk])).content.decode()
    assert "Dismissed from the inbox by <strong>operator</strong>" in detail


def test_all_matching_the_filter_takes_every_conflict_the_filter_selects_not_only_the_ticked(inbox, operator_client):
    _, conflicts = inbox
    ConflictBackup.objects.filter(pk=conflicts[0].pk).update(table_name="other")
    page = confirm_page(operator_client, "dismiss", [conflicts[0].pk], all="1", table="b")
    listed = {int(pk) for pk in re.findall(r'<tr data-conflict="(\d+)"', page.content.decode())}
    assert listed == {c.pk for c in conflicts[1:]}
    operator_client.post(reverse("conflicts-bulk"), page.context["hidden"])
    assert set(ConflictBackup.objects.filter(dismissed_at__isnull=False).values_list("pk", flat=True)) == {
        c.pk for c in conflicts[1:4]
    }


def test_the_inbox_offers_the_selection_to_operators_only(inbox, operator_client, viewer_client):
    page = operator_client.get(reverse("conflicts")).content.decode()
    assert page.count('class="pick"') == 5 and 'id="pick-page"' in page and "all 5 matching the filter" in page
    assert 'class="pick"' not in viewer_client.get(reverse("conflicts")).content.decode()


def test_a_viewer_may_read_the_confirmation_but_its_post_is_refused_audited_and_changes_nothing(inbox, viewer_client):
    demo, conflicts = inbox
    page = confirm_page(viewer_client, "reapply", [conflicts[0].pk])
    assert page.status_code == 200
    response = viewer_client.post(reverse("conflicts-bulk"), page.context["hidden"])
    assert response.status_code == 403
    assert values(demo)[1] == "kept 1" and not ConflictBackup.objects.filter(reapplied_at__isnull=False).exists()
    denied = AuditEntry.objects.get(username="viewer", outcome="denied")
    assert denied.action == "conflict.bulk" and denied.detail["missing_permission"] == "replication_admin.operate"


def test_nothing_ticked_or_no_action_is_said_in_one_line(inbox, operator_client):
    response = operator_client.get(reverse("conflicts-bulk"), {"action": "dismiss"}, follow=True)
    assert "Tick the conflicts to handle first" in response.content.decode()
    response = operator_client.get(reverse("conflicts-bulk"), {"id": "1"}, follow=True)
    assert "Choose re-apply or dismiss" in response.content.decode()
    assert not AuditEntry.objects.exclude(via="command").exists()

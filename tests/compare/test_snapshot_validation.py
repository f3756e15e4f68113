"""Continuous validation of incremental snapshots (a PostgreSQL source with a MariaDB destination, a SQLite source
with a PostgreSQL one): a validation that finds differences refreshes the snapshot incrementally once and compares
again, so changes its snapshot log holds are in flight while a destination row written or deleted by hand is drift
(an alert, the snapshot failing, its keys repaired from the job, the alert resolved by the next equal validation or
a refresh of every row); validations are scheduled by the registry and shown on the snapshot's page, and a snapshot
no incremental refresh brings up to its source is refused in one line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.compare import actions, validation
from replication_admin.compare.selectors import compare_result
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from replication_admin.models import Alert, AuditEntry, JobRun, RegistryEntry, Snapshot, Validation
from replication_admin.snapshots.actions import SnapshotError
from replication_admin.snapshots.selectors import snapshot_states
from replication_admin.statements import execute as run_statements
from tests.tables import create_table, execute, fetch_all, insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

COMMAND = Actor.command()
COLUMNS = [("id", LogicalType("integer")), ("name", LogicalType("varchar", length=40)), ("qty", LogicalType("integer"))]
SNAPSHOT = "dst.items_copy"


def run(text: str, context) -> None:
    outcomes = run_statements(COMMAND, text, context=context, wait=True)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes]


def make_snapshot(make_server, source_dialect: str, dest_dialect: str):
    """20 source rows, a snapshot log, and an incremental snapshot of the rows with id <= 18 (copied at once)."""
    source, dest = make_server(source_dialect, "src"), make_server(dest_dialect, "dst")
    create_table(source, "items", COLUMNS, ["id"])
    insert_rows(source, "items", ["id", "name", "qty"], [(i, f"item {i}", i * 10) for i in range(1, 21)])
    run("create snapshot log for items", source)
    run("create snapshot dst.items_copy from src.items where 'id <= 18'", source)
    return source, dest


def q(server, name: str) -> str:
    return dialects.get(server.dialect).quote(name)


def copied(dest) -> dict[int, tuple]:
    return {r[0]: tuple(r[1:]) for r in fetch_all(dest, f"SELECT id, name, qty FROM {q(dest, 'items_copy')}")}


def validated() -> tuple[JobRun, Validation]:
    job = actions.do_validate_snapshot(COMMAND, Snapshot.objects.get(name=SNAPSHOT), sync=True)
    job.refresh_from_db()
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job, Validation.objects.get(job=job.pk)


def drift_alerts() -> list[Alert]:
    return list(Alert.objects.filter(kind="validation_drift", resolved_at__isnull=True))


def state() -> tuple[str, str]:
    (row,) = snapshot_states([SNAPSHOT])
    return row["state"], row["last_error"]


def test_changes_its_log_holds_are_not_drift_but_rows_written_on_the_destination_are_until_repaired(
    make_server, jobs_sync, spark
):
    RegistryEntry.objects.update_or_create(key="repl_validate_slices", defaults={"value": "1"})
    source, dest = make_snapshot(make_server, "postgresql", "mysql")
    job, equal = validated()
    assert (equal.verdict, equal.drift, equal.in_flight) == ("equal", 0, 0)
    assert equal.compared == 36 and (equal.publisher_rows, equal.subscriber_rows) == (18, 18)  # the condition's rows
    assert job.target == "snapshot dst.items_copy: items"

    # In flight: source changes the snapshot log holds, not refreshed yet. The validation's own incremental refresh
    # applies them, and its second compare finds the destination equal.
    execute(source, "UPDATE items SET name = 'changed 5' WHERE id = 5")
    execute(source, "DELETE FROM items WHERE id = 6")
    _, in_flight = validated()
    assert (in_flight.verdict, in_flight.drift, in_flight.in_flight) == ("equal", 0, 2)
    assert copied(dest)[5] == ("changed 5", 50) and 6 not in copied(dest)
    assert not drift_alerts() and state()[0] == "ok"

    # Drift: a row changed and one deleted on the destination by hand: no refresh will ever bring them back.
    execute(dest, f"UPDATE {q(dest, 'items_copy')} SET qty = 0 WHERE id = 7")
    execute(dest, f"DELETE FROM {q(dest, 'items_copy')} WHERE id = 8")
    job, drift = validated()
    assert (drift.verdict, drift.drift) == ("drift", 2)
    result = compare_result(job)
    assert result is not None
    assert sorted((r.kind, r.key["id"]) for r in result.rows) == [("different", "7"), ("missing_in_right", "8")]
    (alert,) = drift_alerts()
    assert alert.target == "snapshot dst.items_copy: items" and alert.url == reverse("jobs-detail", args=[job.pk])
    assert "2 key(s) of items differ between src and dst's copy" in alert.message
    assert state()[0] == "failing" and "validation: 2 key(s)" in state()[1]

    # The keys are repaired from the validation's job; the same slice validated again is equal and resolves it.
    repair = actions.do_repair_keys(COMMAND, job, [0, 1], sync=True)
    assert repair.state == JobRun.State.SUCCEEDED, repair.error
    assert copied(dest)[7] == ("item 7", 70) and copied(dest)[8] == ("item 8", 80)
    _, again = validated()
    assert again.verdict == "equal" and not drift_alerts() and state()[0] == "ok"

    # A refresh of every row resolves a drift alert too: the destination is then its source's rows.
    execute(dest, f"DELETE FROM {q(dest, 'items_copy')} WHERE id = 9")
    assert validated()[1].verdict == "drift" and len(drift_alerts()) == 1
    run("update snapshot dst.items_copy as nonincremental", source)
    assert not drift_alerts() and copied(dest)[9] == ("item 9", 90)


def test_snapshot_validations_are_scheduled_sliced_shown_on_its_page_and_refused_where_no_refresh_tells(
    make_server, jobs_sync, spark, viewer_client, operator_client, settings
):
    RegistryEntry.objects.update_or_create(key="repl_validate_slices", defaults={"value": "2"})
    source, dest = make_snapshot(make_server, "sqlite", "postgresql")
    run("create nonincremental snapshot dst.whole as 'select id, name from items'", source)
    snapshot = Snapshot.objects.get(name=SNAPSHOT)

    assert validation.due_snapshots() == []  # made just now: the first validation comes an interval later
    Snapshot.objects.update(created_at=timezone.now() - timedelta(hours=2))
    assert [s.name for s in validation.due_snapshots()] == [SNAPSHOT]  # not the non-incremental one
    started = actions.start_due_validations()  # the scheduler's round
    assert [JobRun.objects.get(pk=j.pk).state for j in started] == [JobRun.State.SUCCEEDED]
    assert validation.due_snapshots() == []
    _, second = validated()  # the other half of the key range: every row compared once over the cycle
    halves = list(Validation.objects.filter(snapshot=snapshot).order_by("pk"))
    assert [(v.slice_index, v.slices, v.verdict) for v in halves] == [(0, 2, "equal"), (1, 2, "equal")]
    assert sum(v.compared for v in halves) == 36 and second.publisher_rows == 18

    page = viewer_client.get(reverse("snapshots-detail", args=[SNAPSHOT])).content.decode()
    assert 'id="snapshot-validation-rows"' in page and page.count('data-verdict="equal"') == 2
    assert 'id="validate-now"' not in page  # a viewer has no button
    url = reverse("snapshots-validate", args=[SNAPSHOT])
    assert viewer_client.post(url).status_code == 403
    assert Validation.objects.filter(snapshot=snapshot).count() == 2
    settings.STATUS_TOKENS = ["metrics-token"]
    text = operator_client.get(reverse("metrics"), HTTP_AUTHORIZATION="Bearer metrics-token").content.decode()
    assert (
        'repladmin_validation_drift_keys{publisher="src",account="snapshot dst.items_copy",subscriber="dst",'
        'table="items"} 0' in text
    )
    response = operator_client.post(url)
    job = JobRun.objects.filter(kind="snapshot_validate").latest("pk")
    assert response.status_code == 302 and response["Location"] == reverse("jobs-detail", args=[job.pk])

    whole = Snapshot.objects.get(name="dst.whole")
    with pytest.raises(SnapshotError, match=r"dst\.whole is not incremental") as refusal:
        actions.do_validate_snapshot(COMMAND, whole)
    assert "\n" not in str(refusal.value)
    assert not JobRun.objects.filter(kind="snapshot_validate", params__snapshot="dst.whole").exists()
    assert AuditEntry.objects.filter(action="job.snapshot_validate", outcome=AuditEntry.Outcome.ERROR).count() == 1
    page = operator_client.get(reverse("snapshots-detail", args=["dst.whole"])).content.decode()
    assert 'id="snapshot-validation"' not in page
    assert sorted(copied(dest)) == list(range(1, 19))

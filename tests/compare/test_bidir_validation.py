"""Continuous validation of bi-directional subscriptions, on a PostgreSQL publisher with MariaDB and SQLite
subscribers: a validation that finds differences synchronises the publication once and compares again, so changes
in flight on either side are not drift while a copy that lost a change is (an alert, a refused direct repair, the
alert resolved by a new initial copy); validations are scheduled by the registry and shown on the publication's
page, and a viewer may not start one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.bidir.actions import BidirError
from replication_admin.compare import actions, validation
from replication_admin.compare.key_repair import RepairRefused
from replication_admin.compare.selectors import compare_result
from replication_admin.core.audit import Actor
from replication_admin.models import (
    Alert,
    AuditEntry,
    JobRun,
    RegistryEntry,
    SnapshotPublication,
    SnapshotSubscription,
    Validation,
)
from tests.bidir.test_bidir_sync import COLUMNS, assert_same_rows, nodes, rows, run, sql  # noqa: F401 - nodes: the fixture
from tests.tables import create_table
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

COMMAND = Actor.command()


def subscription(server: str) -> SnapshotSubscription:
    return SnapshotSubscription.objects.get(server=server)


def validated(server: str) -> tuple[JobRun, Validation]:
    job = actions.do_validate_bidir(COMMAND, subscription(server), sync=True)
    job.refresh_from_db()
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job, Validation.objects.get(job=job.pk)


def drift_alerts() -> list[Alert]:
    return list(Alert.objects.filter(kind="validation_drift", resolved_at__isnull=True))


@pytest.fixture
def whole_table():
    RegistryEntry.objects.update_or_create(key="repl_validate_slices", defaults={"value": "1"})


def test_changes_in_flight_on_either_side_are_not_drift_but_a_copy_that_lost_one_is(nodes, whole_table):  # noqa: F811
    pub, sub_my, sub_lite = nodes
    job, equal = validated("my2")
    assert (equal.verdict, equal.drift, equal.in_flight) == ("equal", 0, 0)
    assert equal.compared == 40 and (equal.publisher_rows, equal.subscriber_rows) == (20, 20)

    # In flight: a subscriber's change and the publisher's, neither synchronised yet. The validation's own sync
    # carries them, and its second compare finds the slice equal.
    sql(sub_lite, 'UPDATE "items" SET name = ? WHERE id = 4', ["lite change"])
    sql(pub, 'UPDATE "items" SET price = 7.25 WHERE id = 5')
    job, in_flight = validated("lite3")
    assert (in_flight.verdict, in_flight.drift, in_flight.in_flight) == ("equal", 0, 2)
    assert rows(pub)[4][0] == "lite change"
    assert_same_rows(pub, sub_my, sub_lite)
    assert not drift_alerts()

    # Drift: a change of the MariaDB copy its log lost (no sync will ever carry it).
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 6', ["lost"])
    run_sql(sub_my, "DELETE FROM `RLOG_items`")
    job, drift = validated("my2")
    assert (drift.verdict, drift.drift) == ("drift", 1)
    result = compare_result(job)
    assert result is not None and [(r.kind, r.key["id"]) for r in result.rows] == [("different", "6")]
    (alert,) = drift_alerts()
    assert alert.target == "pg1.items ↔ my2: items"
    assert (
        "1 key(s) of items differ between pg1 and my2's copy" in alert.message and "REPL_INIT_SNAPSHOT" in alert.message
    )
    assert alert.url == reverse("jobs-detail", args=[job.pk])
    with pytest.raises(RepairRefused, match="re-initialise the subscription"):
        actions.do_repair_keys(COMMAND, job, [0], sync=True)
    assert rows(sub_my)[6][0] == "lost"  # the refused repair wrote nothing

    # A new initial copy resolves the alert; the next validation finds the copy equal.
    run("REPL_INIT_SNAPSHOT ('my2', 'pg1.items', 2)")
    assert not drift_alerts()
    _, again = validated("my2")
    assert again.verdict == "equal" and rows(sub_my)[6][0] == rows(pub)[6][0]


def test_bidirectional_validations_are_scheduled_by_the_registry_and_shown_on_the_publication_page(
    nodes,  # noqa: F811
    whole_table,
    viewer_client,
    operator_client,
    settings,
):
    hours_ago = timezone.now() - timedelta(hours=2)
    assert validation.due_bidir() == []  # copied just now: the first validation comes an interval later
    SnapshotSubscription.objects.update(init_started_at=hours_ago)
    assert {s.server for s in validation.due_bidir()} == {"my2", "lite3"}
    started = actions.start_due_validations()  # the scheduler's round
    assert sorted(JobRun.objects.get(pk=j.pk).state for j in started) == [JobRun.State.SUCCEEDED] * 2
    assert validation.due_bidir() == []  # both validated within the interval
    my2 = subscription("my2")
    Validation.objects.filter(bidir=my2).update(at=hours_ago)
    JobRun.objects.filter(kind="bidir_validate", params__bidir=my2.pk).update(created_at=hours_ago)
    assert {s.server for s in validation.due_bidir()} == {"my2"}
    RegistryEntry.objects.update_or_create(key="repl_validate_every", defaults={"value": "0"})
    assert validation.due_bidir() == []

    publication = SnapshotPublication.objects.get()
    page = viewer_client.get(publication.get_absolute_url()).content.decode()
    assert 'id="bidir-validation-rows"' in page and 'data-subscriber="my2" data-verdict="equal"' in page
    assert 'data-subscriber="lite3" data-verdict="equal"' in page and "Not on a schedule" in page
    assert 'data-validate="my2"' not in page  # a viewer has no button
    url = reverse("subscriptions-validate", args=[subscription("lite3").pk])
    assert viewer_client.post(url).status_code == 403
    assert Validation.objects.filter(bidir=subscription("lite3")).count() == 1
    # /metrics: the latest validation of each bi-directional subscriber, named by the publication's server and item.
    settings.STATUS_TOKENS = ["metrics-token"]
    text = operator_client.get(reverse("metrics"), HTTP_AUTHORIZATION="Bearer metrics-token").content.decode()
    assert (
        'repladmin_validation_drift_keys{publisher="pg1",account="pg1.items",subscriber="lite3",table="items"} 0'
        in text
    )
    response = operator_client.post(url)
    job = JobRun.objects.filter(kind="bidir_validate", params__bidir=subscription("lite3").pk).latest("pk")
    assert response.status_code == 302 and response["Location"] == reverse("jobs-detail", args=[job.pk])


def test_a_subscription_not_copied_yet_is_refused_in_one_line_and_starts_nothing(make_server, jobs_sync):
    pub = make_server("postgresql", "pg1")
    make_server("sqlite", "lite3")
    create_table(pub, "items", COLUMNS, ["id"])
    run("REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2); REPL_CREATE_SNAPSHOT_SUB ('lite3', 'pg1.items', 2)")
    with pytest.raises(BidirError, match=r"lite3 has no initial copy of pg1\.items yet") as refusal:
        actions.do_validate_bidir(COMMAND, subscription("lite3"))
    assert "\n" not in str(refusal.value)
    assert not JobRun.objects.filter(kind="bidir_validate").exists()
    assert AuditEntry.objects.filter(action="job.bidir_validate", outcome=AuditEntry.Outcome.ERROR).count() == 1

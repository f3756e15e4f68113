"""Continuous validation of a transactional subscription: each validation compares one slice of a table with the
publisher's rows, the next slice the next time; a key that still differs once the subscriber applied what the
publisher had committed is drift (an alert, its keys repaired from the job, the alert resolved when that slice is
equal again); a difference in flight is not drift; a subscriber that stays behind makes it inconclusive."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.compare import actions, validation
from replication_admin.compare.selectors import compare_result
from replication_admin.core.audit import Actor
from replication_admin.engine.statements import StatementError
from replication_admin.models import Alert, AuditEntry, JobRun, ReplSubscriber, Validation
from replication_admin.statements import execute
from replication_admin.transactional.selectors import TrxError, applied_count
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = pytest.mark.live_db

COMMAND = Actor.command()


def subscribed(make_server, dialect: str, slices: int = 4):
    pub, sub = make_server("postgresql", "pub"), make_server(dialect, "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), price numeric(10, 2))")
    sql(pub, *[f"INSERT INTO items VALUES ({i}, 'item {i}', {i}.50)" for i in range(1, 201)])
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    subscription = ReplSubscriber.objects.get(subscriber="sub")
    ReplSubscriber.objects.filter(pk=subscription.pk).update(validate_slices=slices)
    subscription.refresh_from_db()
    return pub, sub, subscription


def validated(subscription: ReplSubscriber) -> tuple[JobRun, Validation]:
    (job,) = actions.do_validate(COMMAND, subscription, "items", sync=True)
    job.refresh_from_db()
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job, Validation.objects.get(job=job.pk)


def drift_alerts() -> list[Alert]:
    return list(Alert.objects.filter(kind="validation_drift", resolved_at__isnull=True))


@pytest.mark.parametrize("dialect", ["mysql", "sqlite", "postgresql"])
def test_a_drifted_slice_is_found_alerted_repaired_from_its_job_and_its_alert_resolves(
    make_server, jobs_sync, spark, dialect
):
    pub, sub, subscription = subscribed(make_server, dialect)
    # Slices of 50 keys: 1-50, 51-100, 101-150, 151 and up. The third drifts: a value, a lost row; the last has a
    # stray row beyond the publisher's largest key.
    sql(sub, "UPDATE items SET name = 'drifted' WHERE id = 120", "DELETE FROM items WHERE id = 140",
        "INSERT INTO items VALUES (999, 'stray', 1)")  # fmt: skip

    job, first = validated(subscription)
    assert (first.slice_index, first.slices, first.verdict, first.drift) == (0, 4, "equal", 0)
    assert first.compared == 100 and (first.publisher_rows, first.subscriber_rows) == (200, 200)
    _, second = validated(subscription)
    assert (second.slice_index, second.verdict) == (1, "equal") and not drift_alerts()

    job, third = validated(subscription)
    assert (third.slice_index, third.verdict, third.drift) == (2, "drift", 2)
    result = compare_result(job)
    assert result is not None and not result.equal
    assert {(r.kind, r.key["id"]) for r in result.rows} == {("different", "120"), ("missing_in_right", "140")}
    (alert,) = drift_alerts()
    assert "2 key(s) of items differ between pub and sub's copy" in alert.message
    assert alert.url == reverse("jobs-detail", args=[job.pk])

    # Drift keeps the validation on its slice; the repair is the compare's, from the validation's job.
    _, again = validated(subscription)
    assert (again.slice_index, again.verdict) == (2, "drift") and len(drift_alerts()) == 1
    repair = actions.do_repair_keys(COMMAND, JobRun.objects.get(pk=again.job), [0, 1], sync=True)
    assert JobRun.objects.get(pk=repair.pk).state == JobRun.State.SUCCEEDED
    _, healed = validated(subscription)
    assert (healed.slice_index, healed.verdict, healed.drift) == (2, "equal", 0)
    assert not drift_alerts()
    assert Alert.objects.get(pk=alert.pk).resolved_at is not None

    # The last slice is open above: the stray row the publisher never had is drift there.
    job, last = validated(subscription)
    assert (last.slice_index, last.verdict, last.drift) == (3, "drift", 1)
    assert [(r.kind, r.key["id"]) for r in compare_result(job).rows] == [("missing_in_left", "999")]
    actions.do_repair_keys(COMMAND, job, [0], sync=True)
    assert validated(subscription)[1].verdict == "equal"
    assert validated(subscription)[1].slice_index == 0  # the cycle starts again
    assert same(pub, sub, "items")["equal"]


def test_changes_in_flight_are_not_drift_and_a_subscriber_that_stays_behind_is_inconclusive(
    make_server, jobs_sync, spark, settings, monkeypatch
):
    pub, sub, subscription = subscribed(make_server, "mysql", slices=1)
    applied = applied_count(subscription)
    # Two transactions the subscriber has not applied.
    sql(pub, "UPDATE items SET name = 'changed' WHERE id IN (3, 30, 130)", "DELETE FROM items WHERE id = 7")
    settings.VALIDATE_WAIT_SECONDS = 1
    job, behind = validated(subscription)
    assert (behind.verdict, behind.drift, behind.in_flight) == ("inconclusive", 0, 4)
    assert f"sub had applied {applied} of the {applied + 2} transaction(s)" in behind.note
    assert compare_result(job).rows == [] and not drift_alerts()  # nothing to repair: nothing is known to differ

    # This time the subscriber syncs while the validation waits for it (a real sync, at the moment it waits).
    settings.VALIDATE_WAIT_SECONDS = 120
    waits = []

    def sync_then_wait(*args):
        waits.append(run(sub, "REPL_SYNC ('pub', 'shop')")[0].details["applied"])
        return caught_up(*args)

    caught_up = validation._caught_up
    monkeypatch.setattr(validation, "_caught_up", sync_then_wait)
    job, caught = validated(subscription)
    assert waits == [2]
    assert (caught.verdict, caught.drift, caught.in_flight) == ("equal", 0, 4)
    assert value(sub, "SELECT name FROM items WHERE id = 130") == "changed"
    assert not drift_alerts()


def test_a_table_keyed_by_text_is_validated_whole(make_server, jobs_sync, spark):
    pub, sub = make_server("postgresql", "pub"), make_server("sqlite", "sub")
    sql(pub, 'CREATE TABLE "表😀" (code varchar(10) PRIMARY KEY, "ab ""cd" integer)')
    sql(pub, *[f"INSERT INTO \"表😀\" VALUES ('k{i}', {i})" for i in range(20)])
    run(pub, """REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', '表😀', 2, 0, null)""")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    subscription = ReplSubscriber.objects.get(subscriber="sub")
    sql(sub, 'UPDATE "表😀" SET "ab ""cd" = -1 WHERE code = \'k5\'')
    (job,) = actions.do_validate(COMMAND, subscription, sync=True)
    done = Validation.objects.get(job=job.pk)
    assert (done.slices, done.slice_text, done.verdict, done.drift, done.compared) == (
        1, "the whole table", "drift", 1, 40,
    )  # fmt: skip
    assert [r.key["code"] for r in compare_result(JobRun.objects.get(pk=job.pk)).rows] == ["k5"]


def test_scheduled_validations_start_an_interval_after_the_copy_and_then_every_interval(make_server, jobs_sync, spark):
    _pub, _sub, subscription = subscribed(make_server, "postgresql", slices=2)
    assert actions.start_due_validations() == []  # just copied: every row was copied whole
    ReplSubscriber.objects.filter(pk=subscription.pk).update(init_at=timezone.now() - timedelta(hours=2))
    (job,) = actions.start_due_validations()
    assert JobRun.objects.get(pk=job.pk).state == JobRun.State.SUCCEEDED
    assert Validation.objects.filter(subscription=subscription).count() == 1
    assert actions.start_due_validations() == []  # validated within the hour
    Validation.objects.update(at=timezone.now() - timedelta(hours=2))
    JobRun.objects.filter(kind="trx_validate").update(created_at=timezone.now() - timedelta(hours=2))
    assert len(actions.start_due_validations()) == 1
    assert list(Validation.objects.order_by("at").values_list("slice_index", flat=True)) == [0, 1]
    ReplSubscriber.objects.filter(pk=subscription.pk).update(validate_every=0)  # this subscription: never
    Validation.objects.update(at=timezone.now() - timedelta(hours=2))
    JobRun.objects.filter(kind="trx_validate").update(created_at=timezone.now() - timedelta(hours=2))
    assert actions.start_due_validations() == []
    assert AuditEntry.objects.filter(action="job.trx_validate", username="scheduler").count() == 2


def test_a_validation_is_refused_in_one_line_for_a_subscription_never_copied_or_a_table_not_published(
    make_server, jobs_sync, spark
):
    pub, sub = make_server("postgresql", "pub"), make_server("postgresql", "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY)")
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop')")
    subscription = ReplSubscriber.objects.get(subscriber="sub")
    with pytest.raises(TrxError, match="sub has no initial copy of pub/shop yet"):
        actions.do_validate(COMMAND, subscription)
    run(sub, "REPL_INIT_COPY ('pub', 'shop')")
    subscription.refresh_from_db()
    with pytest.raises(TrxError) as wrong:
        actions.do_validate(COMMAND, subscription, '"ab ""cd"')
    assert str(wrong.value) == """'"ab ""cd"' is not a published table of pub/shop (its tables: 'items')"""
    assert not JobRun.objects.filter(kind="trx_validate").exists()
    assert AuditEntry.objects.filter(action="job.trx_validate", outcome=AuditEntry.Outcome.ERROR).count() == 2


def test_a_viewer_may_not_validate_and_the_page_shows_the_validations(make_server, jobs_sync, spark, viewer_client):
    _pub, sub, subscription = subscribed(make_server, "postgresql", slices=2)
    sql(sub, "UPDATE items SET name = 'x' WHERE id = 10")
    url = reverse("trx-subscriptions-validate", args=["sub", "pub", "shop"])
    viewer = viewer_client
    assert viewer.post(url, {"table": "items"}).status_code == 403
    assert not JobRun.objects.filter(kind="trx_validate").exists()
    assert AuditEntry.objects.filter(action="job.trx_validate", outcome=AuditEntry.Outcome.DENIED).count() == 1

    job, done = validated(subscription)
    assert done.verdict == "drift"
    page = viewer.get(subscription.get_absolute_url()).content.decode()
    assert 'data-table="items" data-verdict="drift"' in page and f"#{job.pk}" in page
    assert "slice 1 of 2" in page and "Keys that differ, by validation" in page
    assert 'id="trx-validate"' not in page  # a viewer has no button
    detail = viewer.get(reverse("jobs-detail", args=[job.pk])).content.decode()
    assert 'id="validation-verdict"' in detail and "drift" in detail and 'id="repair-selected"' not in detail


def test_repl_validate_runs_on_the_subscriber_and_says_each_tables_verdict_in_one_line(make_server, jobs_sync, spark):
    _pub, sub, subscription = subscribed(make_server, "sqlite", slices=2)
    sql(sub, "DELETE FROM items WHERE id = 3")
    outcome = run(sub, "REPL_VALIDATE ('pub', 'shop')")[0]
    assert outcome.message == "items: drift, 1 key(s) differ (slice 1 of 2 (key < 101))"
    assert Validation.objects.get(job=outcome.job_id).drift == 1
    outcome = run(sub, "REPL_VALIDATE ('pub', 'shop', 'items')")[0]  # the same slice, until it is equal
    assert outcome.message == "items: drift, 1 key(s) differ (slice 1 of 2 (key < 101))"
    with pytest.raises(StatementError, match="repl_validate takes 2 to 3 argument"):
        execute(COMMAND, "REPL_VALIDATE ('pub')", context=sub)
    message = refused(sub, "REPL_VALIDATE ('pub', 'shop', 'items; DROP TABLE items')")
    assert message == "'items; DROP TABLE items' is not a published table of pub/shop (its tables: 'items')"
    assert value(sub, "SELECT count(*) FROM items") == 199  # nothing ran, nothing changed
    assert Validation.objects.filter(subscription=subscription).count() == 2


def test_a_drift_alert_resolves_when_the_subscription_is_copied_again_or_dropped(make_server, jobs_sync, spark):
    _pub, sub, subscription = subscribed(make_server, "postgresql", slices=1)
    sql(sub, "UPDATE items SET name = 'x' WHERE id = 10")
    assert validated(subscription)[1].verdict == "drift" and len(drift_alerts()) == 1
    run(sub, "REPL_INIT_COPY ('pub', 'shop')")
    assert not drift_alerts()
    assert value(sub, "SELECT name FROM items WHERE id = 10") == "item 10"
    sql(sub, "UPDATE items SET name = 'y' WHERE id = 11")
    assert validated(subscription)[1].verdict == "drift" and len(drift_alerts()) == 1
    run(sub, "REPL_UNSUBSCRIBE ('pub', 'shop')")
    assert not drift_alerts() and not Validation.objects.exists()

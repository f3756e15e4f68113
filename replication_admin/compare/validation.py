"""Continuous validation of transactional and bi-directional subscriptions and of incremental snapshots: on a
schedule (a transactional subscription's profile, the registry's for the others), each published table's copy is
compared with the publisher's rows, one slice of the table at a time, by the compare's canonical text and row hashes
on Spark. A drift found opens an alert whose job lists the keys (repaired one click away on a transactional copy and
a snapshot's destination).

One validation of one table (a `trx_validate` or `bidir_validate` job):
1. It notes what the publisher has committed (transactional: its count P of the publication's transactions), then
   counts both tables and compares the slice on both sides.
2. Equal: done. Different: rows in flight differ too, so the subscriber is caught up and the slice compared again.
   A transactional subscriber is waited for (REPLADMIN_VALIDATE_WAIT, 60 s) until it has applied P; a
   bi-directional one is synchronised once by the validation itself (its pull and push, under the publication's
   item lock, waiting as long for a running sync), which settles every change committed on either side before
   it; an incremental snapshot is refreshed once (incrementally, under its item lock), which applies every change
   its snapshot log holds. A key that differs in both compares is drift; one that differed in only one of them was
   in flight. Not caught up in time (a halted or stopped subscription, a sync or refresh that failed or never got
   the lock): inconclusive.
   Nothing is called drift before the subscriber has caught up with what the first compare read.
3. The slice (engine.compare.KeySlice): the first key column's integer values cut into equal widths between the
   publisher's smallest and largest key; the next validation takes the next slice, so a cycle of `validate_slices`
   validations compares every row. After drift or an inconclusive one it takes the same slice again: its alert
   resolves only when that slice is found equal (after a repair, say). A table whose first key column is not an
   integer is compared whole each time.
Whole-table counts are kept for the trend but never decide drift (writes in flight make them differ)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from jobs import compare
from replication_admin.bidir import actions as bidir
from replication_admin.compare.runs import CompareParams, CompareResult, compared_pair
from replication_admin.core import connections, spark_sizing
from replication_admin.core.alerts import raise_alert, resolve_alerts
from replication_admin.core.errors import LockBusy, ReplicationError
from replication_admin.core.jobs import JobError, JobRunner, Subject, register
from replication_admin.core.spark import spark_session
from replication_admin.engine.compare import ComparePlan, KeySlice, Side, sliced
from replication_admin.engine.dialects import JdbcEndpoint
from replication_admin.engine.row_filter import FilterSpec
from replication_admin.models import (
    Alert,
    JobRun,
    ReplSubscriber,
    Server,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
    Validation,
)
from replication_admin.snapshots import actions as snapshots
from replication_admin.transactional import selectors as trx

log = logging.getLogger(__name__)

DRIFT = Alert.Kind.VALIDATION_DRIFT.value
KINDS = ("different", "missing_in_right", "missing_in_left")
POLL = 0.5  # seconds between two reads of the subscriber's level while a validation waits for it


@dataclass(frozen=True)
class ValidateParams(CompareParams):
    """A compare of one published table with its copy (left: the publisher, right: the subscriber), for the
    subscription `subscription`; its listed keys are repaired as a compare's are."""

    subscription: int = 0
    table: str = ""  # the published table


@dataclass(frozen=True)
class BidirValidateParams(CompareParams):
    """A compare of a bi-directional publication's table with one subscriber's copy (left: the publisher, right:
    the subscriber), for the subscription `bidir` (SYS_SNAPSHOT_SUB)."""

    bidir: int = 0
    table: str = ""


@dataclass(frozen=True)
class SnapshotValidateParams(CompareParams):
    """A compare of an incremental snapshot's source query (left) with its destination (right); `table`: its
    source table."""

    table: str = ""


@dataclass(frozen=True)
class Validated:
    """What one validation validates, for the steps they share: whose Validation rows it writes (`owner`, their
    filter), the names its log, alert and rows use, its slice count, and how its subscriber is caught up."""

    owner: dict[str, Any]
    label: str
    publisher: str
    subscriber: str
    slices: int
    mark: Callable[[], Any]  # read before anything else: what the first compare may see
    marked: Callable[[Any], str]  # that, in words
    catch_up: Callable[[Any], str]  # "" once the subscriber has it, else why not
    repair_hint: str  # what the drift alert offers


@dataclass(frozen=True)
class ValidationResult(CompareResult):
    """A compare's result over one slice, its `rows` the drifted keys only, and the validation's verdict."""

    verdict: str = ""
    slice_index: int = 0
    slices: int = 1
    slice_text: str = ""
    drift: int = 0  # keys that still differ once the subscriber applied what the publisher had committed
    in_flight: int = 0  # keys that differed in one compare only
    publisher_rows: int | None = None
    subscriber_rows: int | None = None
    note: str = ""


def item_target(sub: ReplSubscriber, table: str) -> str:
    """The alert's and the job's target: the subscription and the table."""
    return f"{sub.label}: {table}"


def bidir_target(subscription: SnapshotSubscription, table: str) -> str:
    return f"{bidir.subscription_label(subscription)}: {table}"


def next_slice(owner: dict[str, Any], table: str, slices: int) -> int:
    """The slice after the last validated one, or the same one again when that found drift or was inconclusive."""
    last = Validation.objects.filter(**owner, table=table).order_by("-at", "-pk").first()
    if last is None:
        return 0
    if last.verdict != Validation.EQUAL and last.slices == slices:
        return last.slice_index
    return (last.slice_index + 1) % slices if last.slices == slices else 0


def _scalar_row(server: Server, sql: str) -> tuple[Any, ...]:
    with connections.connect(server, readonly=True) as conn:
        return tuple(conn.cursor().execute(sql).fetchone())


def _count(server: Server, side: Side, where: str | None = None) -> int:
    return int(
        _scalar_row(server, f"SELECT COUNT(*) FROM {side.source_sql()}" + (f" WHERE {where}" if where else ""))[0]
    )


def key_slice_of(publisher: Server, plan: ComparePlan, index: int, slices: int) -> KeySlice:
    """Slice `index` of `slices` over the publisher's smallest and largest first key (the whole table when its
    first key column is not an integer)."""
    column = plan.left.slice_column
    if column is None or slices <= 1:
        return KeySlice(0, 1, None, None)
    name = plan.left.dialect.quote(column.column.name)
    low, high = _scalar_row(publisher, f"SELECT MIN({name}), MAX({name}) FROM {plan.left.source_sql()}")
    return KeySlice.of(index, slices, None if low is None else int(low), None if high is None else int(high))


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row["key"].values())


def _caught_up(sub: ReplSubscriber, count: int, wait: float) -> bool:
    """Whether the subscriber applies `count` transactions within `wait` seconds (its own database's level)."""
    deadline = time.monotonic() + wait
    while True:
        applied = trx.applied_count(sub)
        if applied is not None and applied >= count:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)


def _verdict(first: dict[str, Any], second: dict[str, Any]) -> tuple[list[dict[str, Any]], int, int]:
    """(drifted rows, drift count, in-flight count) from two compares of one slice, the second after the
    subscriber caught up with the first. When a listing was cut (more differences than it lists), every key
    the second one found counts as drift: the verdict errs on the side a DBA looks at."""
    first_keys = {_key(r) for r in first["rows"]}
    second_keys = {_key(r) for r in second["rows"]}
    complete = len(first["rows"]) == first["rows_total"] and len(second["rows"]) == second["rows_total"]
    if not complete:
        return list(second["rows"]), int(second["rows_total"]), max(0, int(first["rows_total"]) - len(first_keys))
    drifted = [r for r in second["rows"] if _key(r) in first_keys]
    return drifted, len(drifted), len(first_keys ^ second_keys)


def _endpoints(left: Server, right: Server) -> tuple[JdbcEndpoint, JdbcEndpoint]:
    return connections.jdbc_endpoint(left, readonly=True), connections.jdbc_endpoint(right, readonly=True)


def validate_table(job: JobRun, reporter: Any, params: ValidateParams) -> dict[str, Any]:
    """One validation of one table of a transactional subscription (the module's steps)."""
    sub = ReplSubscriber.objects.filter(pk=params.subscription).first()
    if sub is None:
        raise JobError("the subscription no longer exists")
    if sub.init_state != "done":
        raise JobError(f"{sub.subscriber} has no initial copy of {sub.server}/{sub.account} yet: nothing to validate")
    wait = float(settings.VALIDATE_WAIT_SECONDS)

    def catch_up(committed: int) -> str:
        if _caught_up(sub, committed, wait):
            return ""
        return (
            f"{sub.subscriber} had applied {trx.applied_count(sub)} of the {committed} transaction(s) the publisher "
            f"had committed after {settings.VALIDATE_WAIT_SECONDS} s: the differences may be in flight"
        )

    validated = Validated(
        owner={"subscription": sub}, label=sub.label, publisher=sub.server, subscriber=sub.subscriber,
        slices=trx.validate_slices(sub), mark=lambda: trx.publisher_count(sub),
        marked=lambda count: f"the publisher had committed {count} transaction(s)", catch_up=catch_up,
        repair_hint="repair them from job #{job}",
    )  # fmt: skip
    return _validate(job, reporter, params, params.table, validated)


def _under_item_lock(run: Callable[[], str], what: str) -> str:
    """A catch-up that takes the item's lock (a sync, a refresh) run inside the validation: tried again while
    another job holds the lock, up to REPLADMIN_VALIDATE_WAIT; "" once done, else why not (`what` names it)."""
    deadline = time.monotonic() + float(settings.VALIDATE_WAIT_SECONDS)
    while True:
        try:
            return run()
        except LockBusy:
            if time.monotonic() >= deadline:
                return f"another {what} held it for {settings.VALIDATE_WAIT_SECONDS} s"
            time.sleep(POLL)
        except ReplicationError as exc:
            return f"the {what} failed: {exc}"


def validate_bidir_table(job: JobRun, reporter: Any, params: BidirValidateParams) -> dict[str, Any]:
    """One validation of a bi-directional subscription's table (the module's steps; its catch-up: one sync)."""
    subscription = SnapshotSubscription.objects.filter(pk=params.bidir).first()
    if subscription is None:
        raise JobError("the subscription no longer exists")
    publication = SnapshotPublication.objects.filter(item=subscription.item, type=subscription.type).first()
    if publication is None or publication.server_id is None:
        raise JobError(f"{subscription.item} is no longer published")
    if subscription.init_state != "done":
        raise JobError(f"{subscription.server} has no initial copy of {subscription.item} yet: nothing to validate")

    def synchronised() -> str:
        reporter.log(f"synchronising {publication.item} so that what either side had committed is applied")
        bidir.sync_within(job, reporter, publication)
        return ""

    def catch_up(_started: Any) -> str:
        return _under_item_lock(synchronised, f"sync of {publication.item}")

    validated = Validated(
        owner={"bidir": subscription}, label=bidir.subscription_label(subscription),
        publisher=str(publication.server_id), subscriber=subscription.server, slices=trx.validate_slices({}),
        mark=lambda: None, marked=lambda _mark: "either side's changes since the last sync are in flight",
        catch_up=catch_up, repair_hint="see job #{job}; re-initialise the subscription (REPL_INIT_SNAPSHOT)",
    )  # fmt: skip
    return _validate(job, reporter, params, params.table, validated)


def validate_snapshot(job: JobRun, reporter: Any, params: SnapshotValidateParams) -> dict[str, Any]:
    """One validation of an incremental snapshot (the module's steps; its catch-up: one incremental refresh, which
    brings every change the snapshot log holds, so what still differs after it no refresh will ever bring)."""
    snapshot = Snapshot.objects.filter(name=params.snapshot or "").first()
    if snapshot is None:
        raise JobError(f"snapshot {params.snapshot} no longer exists")
    why_not = snapshots.validatable(snapshot)
    if why_not:
        raise JobError(why_not)

    def refreshed() -> str:
        reporter.log(f"refreshing {snapshot.name} so that the changes its log holds are applied")
        mode = snapshots.refresh_within(job, reporter, snapshot).get("mode")
        if mode != "incremental":
            return f"the refresh of {snapshot.name} copied every row ({mode}): nothing is left to tell apart"
        return ""

    def catch_up(_started: Any) -> str:
        return _under_item_lock(refreshed, f"refresh of {snapshot.name}")

    validated = Validated(
        owner={"snapshot": snapshot}, label=snapshots.drift_label(snapshot.name),
        publisher=str(snapshot.source_server_id), subscriber=str(snapshot.dest_server_id),
        slices=trx.validate_slices({}), mark=lambda: None,
        marked=lambda _mark: "changes the snapshot log holds are in flight", catch_up=catch_up,
        repair_hint="repair them from job #{job}",
    )  # fmt: skip
    return _validate(job, reporter, params, params.table, validated)


def _validate(job: JobRun, reporter: Any, params: CompareParams, table: str, validated: Validated) -> dict[str, Any]:
    """The steps every validation shares; the result a compare's, typed."""
    with reporter.phase("introspect"):
        left, right, plan = compared_pair(params)
        slices = validated.slices
        key_slice = key_slice_of(left, plan, next_slice(validated.owner, table, slices), slices)
        plan = sliced(plan, key_slice)
        mark = validated.mark()  # before anything is read: what the first compare may see
        counts = (_count(left, plan.left, params.left_where), _count(right, plan.right))
        left_endpoint, right_endpoint = _endpoints(left, right)
    reporter.log(f"{key_slice.describe()}; {validated.marked(mark)}")
    with reporter.phase("spark_session"):
        spark = spark_session()

    def compared() -> dict[str, Any]:
        with reporter.phase("spark_job"):
            return compare.run(spark, plan, left_endpoint, right_endpoint, parallelism=spark_sizing.parallelism())

    first = compared()
    outcome = {"verdict": Validation.EQUAL, "drift": 0, "in_flight": 0, "note": ""}
    result = first
    if not first["equal"]:
        reporter.log(f"{first['rows_total']} key(s) differ; catching {validated.subscriber} up")
        with reporter.phase("catch_up"):
            why_not = validated.catch_up(mark)
        if why_not:
            outcome = {
                "verdict": Validation.INCONCLUSIVE, "drift": 0, "in_flight": int(first["rows_total"]),
                "note": why_not,
            }  # fmt: skip
            result = {**first, "rows": [], "equal": False}
        else:
            second = compared()
            drifted, drift, in_flight = _verdict(first, second)
            complete = len(second["rows"]) == second["rows_total"]
            kinds = {k: sum(1 for r in drifted if r["kind"] == k) if complete else int(second[k]) for k in KINDS}
            duplicates = int(second["duplicate_keys_right"])
            result = {**second, **kinds, "rows": drifted, "rows_total": drift, "equal": not (drift or duplicates)}
            outcome = {"verdict": Validation.DRIFT if drift or duplicates else Validation.EQUAL,
                       "drift": drift + duplicates, "in_flight": in_flight, "note": ""}  # fmt: skip
    result = {
        **result, **outcome, "slice_index": key_slice.index, "slices": key_slice.count,
        "slice_text": key_slice.describe(), "publisher_rows": counts[0], "subscriber_rows": counts[1],
    }  # fmt: skip
    _record(job, validated, table, result)
    reporter.progress(1, 1, f"{key_slice.describe()}: {outcome['verdict']}")
    return result


def _record(job: JobRun, validated: Validated, table: str, result: dict[str, Any]) -> None:
    """The validation's row of the trend, and its alert opened or resolved, in one transaction."""
    target = f"{validated.label}: {table}"
    with transaction.atomic():
        Validation.objects.create(
            **validated.owner, table=table, job=job.pk, at=timezone.now(), slice_index=result["slice_index"],
            slices=result["slices"], slice_text=result["slice_text"][:200],
            compared=int(result["left_count"]) + int(result["right_count"]),
            publisher_rows=result["publisher_rows"], subscriber_rows=result["subscriber_rows"],
            drift=result["drift"], in_flight=result["in_flight"], verdict=result["verdict"], note=result["note"],
        )  # fmt: skip
        if result["verdict"] == Validation.DRIFT:
            message = (
                f"{result['drift']} key(s) of {table} differ between {validated.publisher} and "
                f"{validated.subscriber}'s copy ({result['slice_text']}), after it caught up with what the first "
                f"compare read: {validated.repair_hint.format(job=job.pk)}"
            )
            raise_alert(DRIFT, target, message, reverse("jobs-detail", args=[job.pk]))
        elif result["verdict"] == Validation.EQUAL:
            resolve_alerts(DRIFT, target, f"job #{job.pk} found {result['slice_text']} equal")


@register
class TrxValidate(JobRunner[ValidateParams]):
    kind = "trx_validate"
    label = "Validate a table of a transactional subscription"
    params_type = ValidateParams
    result_type = ValidationResult
    subject = staticmethod(trx.subscription_subject)

    def run(self) -> ValidationResult:
        return ValidationResult.from_json(validate_table(self.job, self.reporter, self.params))


def bidir_subject(params: dict[str, Any]) -> Subject:
    subscription = SnapshotSubscription.objects.filter(pk=params.get("bidir") or 0).first()
    if subscription is None:
        return Subject(f"bi-directional subscription #{params.get('bidir')} (dropped)")
    publication = SnapshotPublication.objects.filter(item=subscription.item, type=subscription.type).first()
    url = publication.get_absolute_url() if publication is not None else ""
    return Subject(f"bi-directional subscription {bidir.subscription_label(subscription)}", url)


@register
class BidirValidate(JobRunner[BidirValidateParams]):
    kind = "bidir_validate"
    label = "Validate a bi-directional subscription's table"
    params_type = BidirValidateParams
    result_type = ValidationResult
    subject = staticmethod(bidir_subject)

    def run(self) -> ValidationResult:
        return ValidationResult.from_json(validate_bidir_table(self.job, self.reporter, self.params))


def snapshot_subject(params: dict[str, Any]) -> Subject:
    name = params.get("snapshot") or ""
    if not Snapshot.objects.filter(name=name).exists():
        return Subject(f"snapshot {name} (dropped)")
    return Subject(f"snapshot {name}", reverse("snapshots-detail", args=[name]))


@register
class SnapshotValidate(JobRunner[SnapshotValidateParams]):
    kind = "snapshot_validate"
    label = "Validate an incremental snapshot"
    params_type = SnapshotValidateParams
    result_type = ValidationResult
    subject = staticmethod(snapshot_subject)

    def run(self) -> ValidationResult:
        return ValidationResult.from_json(validate_snapshot(self.job, self.reporter, self.params))


def snapshot_target(snapshot: Snapshot) -> str:
    return snapshots.drift_target(snapshot.name, snapshot.source_table or "")


def snapshot_validation_params(snapshot: Snapshot) -> SnapshotValidateParams:
    return SnapshotValidateParams(
        snapshot=snapshot.name, left_server=snapshot.source_server_id, right_server=snapshot.dest_server_id,
        right_table=snapshot.dest_table, table=snapshot.source_table or "",
    )  # fmt: skip


def due_snapshots(now: Any | None = None) -> list[Snapshot]:
    """Incremental snapshots whose scheduled validation is due (the registry's repl_validate_every): those a
    validation can take (snapshots.validatable), made longer ago than the interval, last validated (or started)
    longer ago, none queued or running."""
    now = now or timezone.now()
    every = trx.validate_every({})
    if every <= 0:
        return []
    since = now - timedelta(seconds=every)
    active = _active_targets(SnapshotValidate.kind)
    due = []
    for snapshot in Snapshot.objects.filter(is_incremental__isnull=False, last_ts__isnull=False, created_at__lte=since):
        if _validated_since(since, SnapshotValidate.kind, {"snapshot": snapshot}, {"params__snapshot": snapshot.name}):
            continue
        if snapshot_target(snapshot) not in active and not snapshots.validatable(snapshot):
            due.append(snapshot)
    return due


def _validated_since(since: Any, kind: str, owner: dict[str, Any], params: dict[str, Any]) -> bool:
    """Whether the item (`owner`, its Validation rows; `params`, its jobs') was validated, or its validation started,
    since `since`."""
    return (
        Validation.objects.filter(**owner, at__gte=since).exists()
        or JobRun.objects.filter(kind=kind, created_at__gte=since, **params).exists()
    )


def _active_targets(kind: str) -> set[str]:
    return set(
        JobRun.objects.filter(kind=kind, state__in=[JobRun.State.QUEUED, JobRun.State.RUNNING])
        .values_list("target", flat=True)
    )  # fmt: skip


def due_bidir(now: Any | None = None) -> list[SnapshotSubscription]:
    """Copied bi-directional subscriptions whose scheduled validation is due (the registry's repl_validate_every:
    they have no profile), as due_tables says for transactional ones."""
    now = now or timezone.now()
    every = trx.validate_every({})
    if every <= 0:
        return []
    since = now - timedelta(seconds=every)
    active = _active_targets(BidirValidate.kind)
    due = []
    for subscription in SnapshotSubscription.objects.filter(init_state="done"):
        if subscription.init_started_at is not None and subscription.init_started_at > since:
            continue
        if _validated_since(since, BidirValidate.kind, {"bidir": subscription}, {"params__bidir": subscription.pk}):
            continue
        table = bidir_table(subscription)
        if table and bidir_target(subscription, table) not in active:
            due.append(subscription)
    return due


def bidir_table(subscription: SnapshotSubscription) -> str:
    """The published table of a bi-directional subscription ("" when its publication is gone)."""
    return (
        SnapshotPublication.objects.filter(item=subscription.item, type=subscription.type)
        .values_list("table", flat=True)
        .first()
        or ""
    )


def bidir_validation_params(subscription: SnapshotSubscription) -> BidirValidateParams:
    publication = SnapshotPublication.objects.get(item=subscription.item, type=subscription.type)
    return BidirValidateParams(
        left_server=str(publication.server_id), left_table=publication.table, right_server=subscription.server,
        right_table=publication.table, bidir=subscription.pk, table=publication.table,
    )  # fmt: skip


def due_tables(now: Any | None = None) -> list[tuple[ReplSubscriber, str]]:
    """(subscription, table) whose scheduled validation is due: copied subscriptions whose profile validates them,
    copied longer ago than the interval, each table last validated (or started) longer ago than the interval, none
    of its validations queued or running."""
    now = now or timezone.now()
    due = []
    active = _active_targets(TrxValidate.kind)
    for sub in ReplSubscriber.objects.filter(init_state="done", subscribed=True):
        every = trx.validate_every(sub)
        if every <= 0:
            continue
        since = now - timedelta(seconds=every)
        if sub.init_at is not None and sub.init_at > since:
            continue  # the first validation comes an interval after the copy (which copied every row whole)
        recent = set(Validation.objects.filter(subscription=sub, at__gte=since).values_list("table", flat=True))
        recent |= set(
            JobRun.objects.filter(kind=TrxValidate.kind, params__subscription=sub.pk, created_at__gte=since)
            .values_list("params__table", flat=True)
        )  # fmt: skip
        for table in trx.validated_tables(sub):
            if table not in recent and item_target(sub, table) not in active:
                due.append((sub, table))
    return due


def validation_params(sub: ReplSubscriber, table: str) -> ValidateParams:
    spec = FilterSpec.for_table(sub.row_filters, table)  # the rows and columns the copy holds
    return ValidateParams(
        left_server=sub.server, left_table=table, right_server=sub.subscriber, right_table=table,
        subscription=sub.pk, table=table, left_where=spec.condition or None, left_columns=list(spec.columns),
    )  # fmt: skip

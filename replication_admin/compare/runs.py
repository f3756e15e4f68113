"""The compare feature's jobs: compare two tables (or a snapshot's destination with its source query) by content,
and repair chosen keys of a compare; each with its frozen parameters and result."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from django.urls import reverse

from jobs import compare
from replication_admin.compare.key_repair import ChosenKey, RepairKeysResult, RepairRefused, repair_keys
from replication_admin.core import connections, spark_sizing
from replication_admin.core.jobs import JobError, JobParams, JobResult, JobRunner, Subject, register, run_counts
from replication_admin.core.spark import spark_session
from replication_admin.engine import dialects
from replication_admin.engine.compare import ComparePlan, ComparePlanError, plan_compare
from replication_admin.engine.row_filter import FilterSpec, restricted
from replication_admin.models import Server
from replication_admin.snapshots.selectors import snapshot_source


@dataclass(frozen=True)
class CompareParams(JobParams):
    right_server: str
    right_table: str
    left_server: str | None = None
    left_table: str | None = None
    snapshot: str | None = None  # compare the snapshot's source query (on left_server) with its destination
    # Only the left rows of this condition (left's dialect) and, besides the key, these columns: the row filter and
    # column list of a filtered subscription's table (a validation's, and the repair of its keys).
    left_where: str | None = None
    left_columns: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DifferingRow(JobResult):
    """One key listed among a compare's differences: how it differs, its key (canonical text by key column), each
    side's key as that side stores it (None where it has no row), the columns shown and each side's values of them
    (a value cut at the listing limit is {"text", "length"})."""

    kind: str = ""  # different, missing_in_right, missing_in_left
    key: dict[str, Any] = field(default_factory=dict)
    left_key: list[Any] | None = None
    right_key: list[Any] | None = None
    columns: list[str] = field(default_factory=list)
    left: dict[str, Any] | None = None
    right: dict[str, Any] | None = None


@dataclass(frozen=True)
class CompareResult(JobResult):
    """A compare's counts, the differing keys it lists (the first `rows` of `rows_total`) and the columns compared."""

    left_count: int = 0
    right_count: int = 0
    missing_in_right: int = 0
    missing_in_left: int = 0
    different: int = 0
    duplicate_keys_right: int = 0
    rows: list[DifferingRow] = field(default_factory=list)
    rows_total: int = 0
    equal: bool = False
    key_columns: list[str] = field(default_factory=list)
    compared_columns: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.left_count + self.right_count, written=0)

    only_left_columns: list[str] = field(default_factory=list)
    only_right_columns: list[str] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)  # how each listed column's values are written


def _server(name: str | None) -> Server:
    server = Server.objects.filter(name=name or "").first()
    if server is None:
        raise JobError(f"server {name!r} is not registered")
    return server


def compared_pair(params: CompareParams) -> tuple[Server, Server, ComparePlan]:
    """(source server, destination server, plan) of a compare's parameters, as the tables are now."""
    right = _server(params.right_server)
    try:
        query = None
        if params.snapshot:
            left, left_info, query = snapshot_source(params.snapshot)
        else:
            left = _server(params.left_server)
            left_info = connections.describe_table(left, params.left_table or "")
            left_info = restricted(left_info, FilterSpec(columns=tuple(params.left_columns)))
        right_info = connections.describe_table(right, params.right_table)
        plan = plan_compare(
            dialects.get(left.dialect), left_info, dialects.get(right.dialect), right_info, left_query=query
        )
        if params.left_where:
            plan = replace(plan, left=replace(plan.left, where=params.left_where))
    except (connections.ConnectionFailed, connections.TableNotFound, ComparePlanError) as exc:
        raise JobError(str(exc)) from None
    return left, right, plan


@register
class Compare(JobRunner[CompareParams]):
    kind = "compare"
    label = "Compare tables"
    params_type = CompareParams
    result_type = CompareResult

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        if params.get("snapshot"):
            return Subject(f"snapshot {params['snapshot']}", reverse("snapshots-detail", args=[params["snapshot"]]))
        server, table = params["right_server"], params["right_table"]
        return Subject(f"table {server}.{table}", reverse("servers-table", args=[server, table]))

    def run(self) -> CompareResult:
        params, reporter = self.params, self.reporter
        with reporter.phase("introspect"):
            left, right, plan = compared_pair(params)
            left_endpoint = connections.jdbc_endpoint(left, readonly=True)
            right_endpoint = connections.jdbc_endpoint(right, readonly=True)
        reporter.log(f"key ({', '.join(plan.key_columns)}); comparing {len(plan.compared_columns)} column(s)")
        with reporter.phase("spark_session"):
            spark = spark_session()
        with reporter.phase("spark_job"):
            counted = compare.run(
                spark,
                plan,
                left_endpoint,
                right_endpoint,
                progress=reporter.progress,
                parallelism=spark_sizing.parallelism(),
            )
        return CompareResult.from_json(counted)  # the Spark job's pure dict, typed at the job's edge


@dataclass(frozen=True)
class RepairKeysParams(CompareParams):
    compare_job: int = 0  # the compare whose listed keys were chosen
    keys: list[list[Any]] = field(default_factory=list)  # canonical key text, in the compare's key order
    # Each key as the source and the destination stored it when compared (None where that side had no row).
    left_keys: list[list[Any] | None] = field(default_factory=list)
    right_keys: list[list[Any] | None] = field(default_factory=list)


@register
class RepairKeys(JobRunner[RepairKeysParams]):
    kind = "compare_repair"
    label = "Repair chosen keys"
    params_type = RepairKeysParams
    result_type = RepairKeysResult

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        return Compare.subject(params)  # the destination the keys are written to

    def run(self) -> RepairKeysResult:
        params, reporter = self.params, self.reporter
        with reporter.phase("introspect"):
            left, right, plan = compared_pair(params)
        with reporter.phase("apply"):
            try:
                chosen = [ChosenKey(lk, rk) for lk, rk in zip(params.left_keys, params.right_keys, strict=True)]
                return repair_keys(self.job, reporter, plan, left, right, chosen)
            except RepairRefused as exc:
                raise JobError(str(exc)) from None

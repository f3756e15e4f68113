"""The snapshot feature's jobs: refresh (UPDATE SNAPSHOT) and repair, with their parameters and results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from replication_admin.core.jobs import JobParams, JobResult, JobRunner, Subject, register, run_counts
from replication_admin.snapshots.refresh import refresh_snapshot, repair_snapshot


@dataclass(frozen=True)
class RefreshParams(JobParams):
    snapshot: str
    nonincremental: bool = False


@dataclass(frozen=True)
class RepairParams(JobParams):
    snapshot: str


@dataclass(frozen=True)
class RefreshResult(JobResult):
    """A refresh: a full copy or an incremental one (`mode`), each its own shape below."""

    mode: str = ""

    @classmethod
    def mode_of(cls, data: dict[str, Any]) -> str:
        """A row without its mode is known by its count: changes applied (incremental) or rows copied (full)."""
        if data.get("mode"):
            return str(data["mode"])
        return "incremental" if "changes" in data else "full" if "rows" in data else ""

    @property
    def moved(self) -> int | None:
        """The rows it moved: a full refresh's rows copied, an incremental one's changes applied."""
        return None


@dataclass(frozen=True)
class FullRefresh(RefreshResult):
    """The destination replaced by the source query's rows (swapped in, or replaced in one transaction)."""

    mode: str = "full"
    rows: int = 0
    swap: bool = False
    last_ts: str | None = None  # the newest source timestamp copied (ISO), for the next incremental refresh
    path: str = ""  # how the rows were copied: "stream" (native export into native load) or "spark"

    @property
    def moved(self) -> int | None:
        return self.rows

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.rows, written=self.rows)


@dataclass(frozen=True)
class IncrementalRefresh(RefreshResult):
    """The changes the snapshot log recorded since `since` (ISO, UTC), applied in batches (on Spark, or on the
    control plane for a few)."""

    mode: str = "incremental"
    changes: int = 0
    deleted_or_filtered: int = 0
    batches: int = 0
    since: str = ""
    path: str = ""

    @property
    def moved(self) -> int | None:
        return self.changes

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.changes, written=self.changes)


RefreshResult.modes = {"full": FullRefresh, "incremental": IncrementalRefresh}


@dataclass(frozen=True)
class RepairResult(JobResult):
    """A repair: the rows that differed written from the source, the rows the source lacks deleted."""

    mode: str = "repair"
    upserts: int = 0
    deletes: int = 0

    def counts(self) -> dict[str, int]:
        return run_counts(written=self.upserts + self.deletes)


def snapshot_subject(params: dict[str, Any]) -> Subject:
    return Subject(f"snapshot {params['snapshot']}", reverse("snapshots-detail", args=[params["snapshot"]]))


@register
class SnapshotRefresh(JobRunner[RefreshParams]):
    kind = "snapshot_refresh"
    label = "Refresh a snapshot"
    params_type = RefreshParams
    result_type = RefreshResult
    subject = staticmethod(snapshot_subject)

    def run(self) -> RefreshResult:
        done = refresh_snapshot(self.job, self.reporter, self.params.snapshot, self.params.nonincremental)
        return RefreshResult.from_json(done)


@register
class SnapshotRepair(JobRunner[RepairParams]):
    kind = "snapshot_repair"
    label = "Repair a snapshot"
    params_type = RepairParams
    result_type = RepairResult
    subject = staticmethod(snapshot_subject)

    def run(self) -> RepairResult:
        return RepairResult.from_json(repair_snapshot(self.job, self.reporter, self.params.snapshot))

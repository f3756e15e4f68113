"""The snapshot feature's jobs: refresh (UPDATE SNAPSHOT) and repair."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from replication_admin.core.jobs import JobParams, JobRunner, Subject, register
from replication_admin.snapshots.refresh import refresh_snapshot, repair_snapshot


@dataclass(frozen=True)
class RefreshParams(JobParams):
    snapshot: str
    nonincremental: bool = False


@dataclass(frozen=True)
class RepairParams(JobParams):
    snapshot: str


def snapshot_subject(params: dict[str, Any]) -> Subject:
    return Subject(f"snapshot {params['snapshot']}", reverse("snapshots-detail", args=[params["snapshot"]]))


@register
class SnapshotRefresh(JobRunner[RefreshParams]):
    kind = "snapshot_refresh"
    label = "Refresh a snapshot"
    params_type = RefreshParams
    subject = staticmethod(snapshot_subject)

    def run(self) -> dict:
        return refresh_snapshot(self.job, self.reporter, self.params.snapshot, self.params.nonincremental)


@register
class SnapshotRepair(JobRunner[RepairParams]):
    kind = "snapshot_repair"
    label = "Repair a snapshot"
    params_type = RepairParams
    subject = staticmethod(snapshot_subject)

    def run(self) -> dict:
        return repair_snapshot(self.job, self.reporter, self.params.snapshot)

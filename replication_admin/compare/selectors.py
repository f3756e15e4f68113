"""Reads of finished compares and repairs, typed: a job's result, and the listed rows chosen for a repair."""

from __future__ import annotations

from replication_admin.compare.key_repair import RepairKeysResult
from replication_admin.compare.runs import Compare, CompareResult, DifferingRow
from replication_admin.compare.validation import BidirValidate, SnapshotValidate, TrxValidate, ValidationResult
from replication_admin.core.jobs import result_of
from replication_admin.models import JobRun

__all__ = [
    "CompareResult", "DifferingRow", "RepairKeysResult", "ValidationResult", "compare_result", "compared_rows",
    "repair_result",
]  # fmt: skip


# Kinds whose result is a compare's and whose listed keys may be repaired: a compare, and a validation (its drift;
# a bi-directional copy's repair is refused by compare.key_repair, with its reason).
COMPARED_KINDS = (Compare.kind, TrxValidate.kind, BidirValidate.kind, SnapshotValidate.kind)


def compare_result(job: JobRun) -> CompareResult | None:
    """The result of a finished compare or validation (None for another kind, or one without a result)."""
    return result_of(job, CompareResult)


def repair_result(job: JobRun) -> RepairKeysResult | None:
    return result_of(job, RepairKeysResult)


def compared_rows(job: JobRun, chosen: list[int]) -> list[DifferingRow]:
    """The listed rows of a finished compare at the positions `chosen` (ValueError when one is not listed)."""
    result = compare_result(job)
    rows = result.rows if result is not None else []
    if job.kind not in COMPARED_KINDS or job.state != JobRun.State.SUCCEEDED:
        raise ValueError(f"job #{job.pk} is not a finished compare")
    if not chosen:
        raise ValueError("choose at least one key to repair")
    if any(i < 0 or i >= len(rows) for i in chosen):
        raise ValueError(f"job #{job.pk} lists {len(rows)} key(s); a chosen one is not among them")
    return [rows[i] for i in sorted(set(chosen))]

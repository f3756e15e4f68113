"""Each job kind's result is a frozen dataclass: the runner returns it, the JobRun stores it as the JSON rows already
hold (the same keys, in the same order), and pages read it back typed."""

from __future__ import annotations

import dataclasses

import pytest

from replication_admin.bidir.runs import InitResult as BidirInit
from replication_admin.bidir.runs import SubscriberSync, SyncResult
from replication_admin.compare.runs import CompareResult, DifferingRow
from replication_admin.compare.selectors import RepairKeysResult
from replication_admin.conflicts.runs import DryRunResult, DryRunRow
from replication_admin.core.jobs import RUNNERS, JobResult, result_of
from replication_admin.models import JobRun
from replication_admin.snapshots.runs import FullRefresh, IncrementalRefresh, RefreshResult, RepairResult
from replication_admin.tasks import RUNNER_MODULES
from replication_admin.transactional.runs import CopyInit, ImageInit
from replication_admin.transactional.runs import InitResult as TrxInit
from replication_admin.transactional.runs import SyncResult as TrxSync

assert RUNNER_MODULES  # every kind registered

STORED = [
    (RefreshResult, FullRefresh, {"mode": "full", "rows": 10, "swap": True, "last_ts": None, "path": "spark"}),
    (RefreshResult, IncrementalRefresh, {"mode": "incremental", "changes": 3, "deleted_or_filtered": 1,
                                         "batches": 1, "since": "2026-11-27T09:00:00", "path": "control plane"}),
    (RepairResult, RepairResult, {"mode": "repair", "upserts": 3, "deletes": 2}),
    (BidirInit, BidirInit, {"mode": "init", "rows": 5, "inserted": 5, "rows_per_commit": 100, "resumed": False,
                                     "path": "stream"}),
    (SyncResult, SyncResult, {"mode": "sync", "subscribers": {"b": {"read": 1, "applied": 1, "pulled": 1,
                              "conflicts": 0, "already_applied": 0, "decided_again": 0, "held": 0,
                              "left_for_next_sync": 0, "pushed": 2, "waiting": 0}}, "schema_changes": [],
                              "conflicts": 0}),
    (TrxInit, CopyInit, {"mode": "init", "rows": {"t": 4}, "level": 3, "count": 3, "path": "stream"}),
    (TrxInit, ImageInit, {"mode": "image", "image": "img", "rows": 4, "level": 3, "count": 3}),
    (TrxSync, TrxSync, {"applied": 1, "skipped": 0, "level": 2, "count": 2, "publisher_level": 2,
                        "publisher_count": 2, "batches": 1, "pushed": 0, "reinitialise": False, "discarded": 0,
                        "waiting": ""}),
    (TrxSync, TrxSync, {"applied": 0, "skipped": 0, "level": 2, "count": 2, "publisher_level": 2,
                        "publisher_count": 2, "batches": 0, "pushed": 0, "reinitialise": True, "discarded": 1,
                        "waiting": "", "copy": {"mode": "init", "rows": {"t": 4}, "level": 3, "count": 3, "path": "stream"}}),
    (DryRunResult, DryRunResult, {"rows": [{"conflict": 7, "type": "U", "recorded_decision": 1,
                                            "recorded_resolver": "r", "decision": 2, "resolver": "s",
                                            "resolver_id": 4, "final": {"a": 1}, "note": "", "same": False}],
                                  "changed": 1, "conflicts": 1, "item": "db.t"}),
    (CompareResult, CompareResult, {"left_count": 2, "right_count": 1, "missing_in_right": 1, "missing_in_left": 0,
                                    "different": 0, "duplicate_keys_right": 0,
                                    "rows": [{"kind": "missing_in_right", "key": {"id": "2"}, "left_key": [2],
                                              "right_key": None, "columns": ["v"], "left": {"v": "x"},
                                              "right": None}],
                                    "rows_total": 1, "equal": False, "key_columns": ["id"], "compared_columns": ["v"],
                                    "only_left_columns": [], "only_right_columns": [], "families": {"v": "text"}}),
    (RepairKeysResult, RepairKeysResult, {"mode": "repair_keys", "keys": 1, "destination": "d", "updated": 0,
                                          "inserted": 1, "deleted": 0}),
]  # fmt: skip


def test_every_job_kind_names_a_frozen_result_type():
    for kind, runner in RUNNERS.items():
        assert issubclass(runner.result_type, JobResult), kind
        assert runner.result_type.__dataclass_params__.frozen, kind  # type: ignore[attr-defined]


@pytest.mark.parametrize(("declared", "shape", "stored"), STORED, ids=[f"{s[1].__name__}" for s in STORED])
def test_a_stored_result_reads_back_typed_and_writes_the_same_json(declared, shape, stored):
    result = declared.from_json(stored)
    assert type(result) is shape
    assert list(result.as_json().items()) == list(stored.items())


def test_nested_results_are_typed_too():
    compare = CompareResult.from_json(STORED[-2][2])
    assert isinstance(compare.rows[0], DifferingRow) and compare.rows[0].left == {"v": "x"}
    sync = SyncResult.from_json(STORED[4][2])
    assert isinstance(sync.subscribers["b"], SubscriberSync) and sync.subscribers["b"].pushed == 2
    assert isinstance(TrxSync.from_json(STORED[8][2]).copy, CopyInit)
    assert isinstance(DryRunResult.from_json(STORED[9][2]).rows[0], DryRunRow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        compare.equal = True  # type: ignore[misc]


def test_an_older_row_without_a_field_reads_with_its_default():
    assert RepairResult.from_json({"mode": "repair"}) == RepairResult()


@pytest.mark.django_db
def test_a_page_reads_a_jobs_result_as_its_kind_declares_it():
    job = JobRun.objects.create(kind="compare", target="a ↔ b", state="succeeded", result=STORED[-2][2])
    assert isinstance(result_of(job), CompareResult)
    assert result_of(job, RefreshResult) is None
    assert result_of(JobRun(kind="compare", target="x")) is None


def test_a_refresh_stored_without_its_mode_is_known_by_its_count():
    assert RefreshResult.from_json({"changes": 40}) == IncrementalRefresh(changes=40)
    assert RefreshResult.from_json({"rows": 5}) == FullRefresh(rows=5)

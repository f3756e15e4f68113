"""The compare job on a real Spark against live SQLite, PostgreSQL and MariaDB tables."""

from __future__ import annotations

import itertools
from datetime import datetime
from decimal import Decimal

import pytest

from replication_admin.compare.actions import do_start_compare
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun
from tests.conftest import wait_for_job
from tests.tables import create_table, execute, insert_rows

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

DIALECTS = ("sqlite", "postgresql", "mysql")
COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=12, scale=2)),
    ("updated", LogicalType("timestamp")),
    ("note", LogicalType("long_varchar")),
]


def sample_rows(n: int) -> list[tuple]:
    return [
        (
            i,
            f"item {i} é",
            Decimal(f"{i}.{i % 100:02d}"),
            datetime(2024, 1, 1, 12, 0, 0, (i * 7919) % 1_000_000),
            None if i % 5 == 0 else ("" if i % 7 == 0 else f"note {i}"),
        )
        for i in range(1, n + 1)
    ]


def make_table(server, table: str = "items", rows: list[tuple] | None = None) -> None:
    create_table(server, table, COLUMNS, ["id"])
    insert_rows(server, table, [c for c, _ in COLUMNS], rows if rows is not None else sample_rows(60))


def run_compare(left, left_table, right, right_table) -> JobRun:
    job = do_start_compare(Actor.command(), left, left_table, right, right_table)
    return JobRun.objects.get(pk=job.pk)


@pytest.mark.parametrize(("left_dialect", "right_dialect"), list(itertools.product(DIALECTS, DIALECTS)))
def test_identical_tables_compare_equal_and_changes_are_reported_exactly(
    make_server, spark, jobs_sync, left_dialect, right_dialect
):
    left = make_server(left_dialect, "lhs")
    right = make_server(right_dialect, "rhs")
    make_table(left)
    make_table(right)

    job = run_compare(left, "items", right, "items")
    assert job.state == JobRun.State.SUCCEEDED, job.error
    result = job.result
    assert result["equal"] is True, repr(result)
    assert (result["left_count"], result["right_count"]) == (60, 60)
    assert result["missing_in_left"] == result["missing_in_right"] == result["different"] == 0

    d = dialects.get(right.dialect)
    execute(right, f"DELETE FROM {d.quote('items')} WHERE {d.quote('id')} IN (3, 4)")
    insert_rows(right, "items", [c for c, _ in COLUMNS], [(1001, "extra", Decimal("1.00"), None, None)])
    execute(right, f"UPDATE {d.quote('items')} SET {d.quote('name')} = 'changed' WHERE {d.quote('id')} = 10")
    # A NULL turned into an empty string is a difference too.
    execute(right, f"UPDATE {d.quote('items')} SET {d.quote('note')} = '' WHERE {d.quote('id')} = 15")

    job = run_compare(left, "items", right, "items")
    assert job.state == JobRun.State.SUCCEEDED, job.error
    result = job.result
    assert result["equal"] is False
    assert result["left_count"] == 60 and result["right_count"] == 59
    listed = {(row["kind"], row["key"]["id"]): row for row in result["rows"]}
    assert sorted(listed) == [
        ("different", "10"), ("different", "15"), ("missing_in_left", "1001"), ("missing_in_right", "3"),
        ("missing_in_right", "4"),
    ]  # fmt: skip
    assert [row["key"]["id"] for row in result["rows"]] == ["3", "4", "10", "15", "1001"]  # in key order
    assert result["rows_total"] == 5
    assert (listed["different", "10"]["left"], listed["different", "10"]["right"]) == (
        {"name": "item 10 é"},
        {"name": "changed"},
    )
    # NULL and the empty string are told apart.
    assert (listed["different", "15"]["left"], listed["different", "15"]["right"]) == ({"note": None}, {"note": ""})
    assert listed["missing_in_right", "3"]["right"] is None
    assert listed["missing_in_right", "3"]["left"]["name"] == "item 3 é"
    assert listed["missing_in_left", "1001"]["left"] is None
    assert listed["missing_in_left", "1001"]["right"]["name"] == "extra"
    assert result["different"] == 2


@pytest.mark.parametrize("dialect", DIALECTS)
def test_hostile_table_and_column_names_are_compared_on_every_dialect(make_server, spark, jobs_sync, dialect):
    left = make_server(dialect, "hostile_l")
    right = make_server("sqlite" if dialect != "sqlite" else "postgresql", "hostile_r")
    table = 'ab "cd'
    columns = [
        ("id key", LogicalType("integer")),
        ("select", LogicalType("varchar", length=20)),
        ("Größe", LogicalType("integer")),
    ]
    rows = [(i, f"v'{i}\"", i * 2) for i in range(1, 21)]
    for server in (left, right):
        create_table(server, table, columns, ["id key"])
        insert_rows(server, table, [c for c, _ in columns], rows)

    job = run_compare(left, table, right, table)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    assert job.result["equal"] is True
    assert job.result["compared_columns"] == ["select", "Größe"]

    d = dialects.get(right.dialect)
    execute(right, f"UPDATE {d.quote(table)} SET {d.quote('Größe')} = -1 WHERE {d.quote('id key')} = 7")
    job = run_compare(left, table, right, table)
    assert job.result["different"] == 1
    assert job.result["rows"] == [
        {"kind": "different", "key": {"id key": "7"}, "left_key": ["7"], "right_key": ["7"], "columns": ["Größe"],
         "left": {"Größe": "14"}, "right": {"Größe": "-1"}}
    ]  # fmt: skip


def test_values_equal_across_dialects_compare_equal_despite_storage_differences(make_server, spark, jobs_sync):
    """18.00 (PostgreSQL numeric) equals '18' (SQLite text); a microsecond of difference is seen."""
    pg = make_server("postgresql", "pgv")
    lite = make_server("sqlite", "litev")
    columns = [
        ("id", LogicalType("integer")),
        ("amount", LogicalType("numeric", precision=38, scale=10)),
        ("at", LogicalType("timestamp")),
        ("flag", LogicalType("boolean")),
        ("blob", LogicalType("long_varbinary")),
    ]
    rows = [
        (
            1,
            Decimal("12345678901234567890.1234567890"),
            datetime(2024, 2, 29, 23, 59, 59, 999999),
            True,
            b"\x00\xff",
        ),
        (2, Decimal("18.0000000000"), datetime(1999, 12, 31, 0, 0, 0, 1), False, b""),
        (3, None, None, None, None),
    ]
    for server in (pg, lite):
        create_table(server, "vals", columns, ["id"])
        insert_rows(server, "vals", [c for c, _ in columns], rows)
    # SQLite holds the same amount written differently.
    execute(lite, "UPDATE vals SET amount = '18' WHERE id = 2")

    job = run_compare(pg, "vals", lite, "vals")
    assert job.state == JobRun.State.SUCCEEDED, job.error
    assert job.result["equal"] is True, job.result

    execute(lite, "UPDATE vals SET at = '2024-02-29 23:59:59.999998' WHERE id = 1")
    job = run_compare(pg, "vals", lite, "vals")
    assert [(d["columns"], d["left"], d["right"]) for d in job.result["rows"]] == [
        (["at"], {"at": "2024-02-29 23:59:59.999999"}, {"at": "2024-02-29 23:59:59.999998"})
    ]


@pytest.mark.parametrize("right_dialect", ["postgresql", "mysql"])
def test_a_key_repeated_on_a_right_side_without_a_primary_key_is_counted_and_never_equal(
    make_server, spark, jobs_sync, right_dialect
):
    left = make_server("sqlite", "lhs")
    right = make_server(right_dialect, "rhs")
    make_table(left)
    create_table(right, "items", COLUMNS, [])  # no primary key: nothing stops a key from repeating
    rows = sample_rows(60)
    insert_rows(right, "items", [c for c, _ in COLUMNS], [*rows, rows[6], rows[7], rows[7]])  # id 7 twice, 8 thrice

    result = run_compare(left, "items", right, "items").result
    assert result["equal"] is False
    assert (result["left_count"], result["right_count"]) == (60, 63)
    assert result["duplicate_keys_right"] == 2
    assert result["missing_in_left"] == result["missing_in_right"] == result["different"] == 0


def test_compare_without_a_primary_key_fails_with_a_clear_message(make_server, spark, jobs_sync):
    left = make_server("sqlite", "nopk_l")
    right = make_server("sqlite", "nopk_r")
    for server in (left, right):
        execute(server, "CREATE TABLE heap (a INTEGER, b TEXT)")
    job = run_compare(left, "heap", right, "heap")
    assert job.state == JobRun.State.FAILED
    assert "has no primary key" in job.error


def test_compare_of_a_missing_table_fails_naming_table_and_server(make_server, spark, jobs_sync):
    left = make_server("mysql", "miss_l")
    right = make_server("sqlite", "miss_r")
    make_table(left)
    job = run_compare(left, "items", right, "nowhere")
    assert job.state == JobRun.State.FAILED
    assert "'nowhere'" in job.error and "'miss_r'" in job.error


def test_compare_runs_through_a_real_django_q2_worker(make_server, qcluster):
    left = make_server("postgresql", "worker_l")
    right = make_server("mysql", "worker_r")
    make_table(left, rows=sample_rows(500))
    make_table(right, rows=sample_rows(499))

    queued = do_start_compare(Actor.command(), left, "items", right, "items")
    assert JobRun.objects.get(pk=queued.pk).state == JobRun.State.QUEUED
    job = wait_for_job(queued.pk)
    assert job.state == JobRun.State.SUCCEEDED, job.error + job.log
    assert job.worker_pid and job.worker_pid != __import__("os").getpid()
    assert job.result["missing_in_right"] == 1
    assert [(row["kind"], row["key"]) for row in job.result["rows"]] == [("missing_in_right", {"id": "500"})]
    assert job.progress_done == job.progress_total > 0
    assert {"introspect", "spark_session", "spark_job", "total"} <= set(job.timings)
    assert AuditEntry.objects.filter(action="job.compare", target__contains="worker_l").exists()

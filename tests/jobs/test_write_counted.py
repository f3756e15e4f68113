"""Counting the rows a staging write wrote: from the observation as they stream through, or from the staging
table when Spark Connect hands the observation back without its value."""

from __future__ import annotations

import pytest

from jobs.snapshot_refresh import counted_rows, staged_rows, write_counted
from replication_admin.core.spark import endpoint
from tests.tables import execute, fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def never() -> int:
    raise AssertionError("the staging table was counted although the observation had the rows")


def test_an_observation_without_its_value_means_the_staging_table_is_counted():
    assert counted_rows({}, lambda: 0) == 0
    assert counted_rows({}, lambda: 7) == 7
    assert counted_rows({"rows": 0}, never) == 0
    assert counted_rows({"rows": 5}, never) == 5


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_writing_no_rows_counts_zero_and_a_staging_count_sees_what_was_written(make_server, spark, dialect):
    server = make_server(dialect)
    execute(server, "CREATE TABLE st (id bigint, v varchar(10))")
    target = endpoint(server)
    assert write_counted(spark.createDataFrame([], "id long, v string"), target, "st", "empty") == 0
    assert staged_rows(spark, target, "st") == 0
    rows = spark.createDataFrame([(1, "a"), (2, "b"), (3, None)], "id long, v string")
    assert write_counted(rows, target, "st", "three") == 3
    assert staged_rows(spark, target, "st") == 3
    assert fetch_all(server, "SELECT id FROM st ORDER BY id") == [(1,), (2,), (3,)]

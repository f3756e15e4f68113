"""A job's log grows by appending: each line is one small write, however long the log already is."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from replication_admin.core.jobs import Reporter
from replication_admin.models import JobRun

pytestmark = pytest.mark.django_db


def written(reporter: Reporter, line: str) -> tuple[int, int]:
    """(queries, characters of SQL and parameters sent) to log `line`."""
    with CaptureQueriesContext(connection) as queries:
        reporter.log(line)
    return len(queries.captured_queries), sum(len(q["sql"]) for q in queries.captured_queries)


def test_each_line_is_one_write_of_the_same_size_however_long_the_log_is() -> None:
    job = JobRun.objects.create(kind="compare", target="a ↔ b")
    reporter = Reporter(job)
    first = written(reporter, "line 0")
    for n in range(1, 200):
        reporter.log(f"line {n} " + "x" * 200)
    later = written(reporter, "line 0")
    assert first[0] == later[0] == 1
    assert later[1] == first[1]


def test_the_whole_log_is_kept_in_order() -> None:
    job = JobRun.objects.create(kind="compare", target="a ↔ b", log="[00:00:00] before\n")
    reporter = Reporter(job)
    for n in range(3):
        reporter.log(f"line {n}")
    lines = JobRun.objects.get(pk=job.pk).log.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == ["before", "line 0", "line 1", "line 2"]

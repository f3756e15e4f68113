"""A full refresh of a snapshot whose source holds no row: the copy exists, empty, and the job succeeded."""

from __future__ import annotations

import pytest

from replication_admin.models import JobRun
from tests.snapshots.test_snapshot_refresh import COLUMNS, run
from tests.tables import create_table, fetch_all

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "sqlite")])
def test_a_full_refresh_of_an_empty_table_makes_an_empty_copy_and_succeeds(
    make_server, spark, source_dialect, dest_dialect
):
    source = make_server(source_dialect, "empty_s")
    dest = make_server(dest_dialect, "empty_d")
    create_table(source, "t", COLUMNS, ["id"])
    created = run("create snapshot empty_d.t_copy from t", source)[0]
    assert created.details["mode"] == "full" and created.details["rows"] == 0
    again = run("update snapshot empty_d.t_copy as nonincremental")[0]
    assert again.details["rows"] == 0
    jobs = JobRun.objects.exclude(kind__startswith="compare").order_by("pk")
    assert jobs and all(job.state == JobRun.State.SUCCEEDED for job in jobs), [(j.kind, j.error) for j in jobs]
    assert fetch_all(dest, "SELECT COUNT(*) FROM t_copy") == [(0,)]

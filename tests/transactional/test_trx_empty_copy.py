"""An initial copy of a publication whose tables hold no row: the copies exist, empty, and the job succeeded."""

from __future__ import annotations

import pytest

from replication_admin.models import AuditEntry, JobRun
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


@pytest.mark.parametrize("subscriber", ["mysql", "postgresql"])
def test_an_initial_copy_of_empty_tables_creates_them_empty_and_succeeds(make_server, jobs_sync, spark, subscriber):
    pub = make_server("postgresql", "emp1")
    sub = make_server(subscriber, "emp2")
    sql(pub, "CREATE TABLE nothing (id integer PRIMARY KEY, name varchar(20))")
    run(pub, "REPL_PUBLISH ('none', 'none.log'); REPL_PUB_ADD ('none', 'DB.DBA.nothing', 2, 0, null)")
    run(
        sub,
        "REPL_SERVER ('emp1', '1111', 'localhost:1111');"
        "REPL_SUBSCRIBE ('emp1', 'none', null, null, 'dba', 'dba');"
        "DB..REPL_INIT_COPY ('emp1', 'none')",
    )
    job = JobRun.objects.filter(kind="trx_init").latest("pk")
    assert job.state == JobRun.State.SUCCEEDED, job.error
    assert job.result is not None and job.result["rows"] == {"nothing": 0}
    assert AuditEntry.objects.get(action="job.finished", detail__job=job.pk).outcome == AuditEntry.Outcome.OK
    assert value(sub, "SELECT COUNT(*) FROM nothing") == 0
    # The copy follows from here: a row written after it arrives with the next sync.
    sql(pub, "INSERT INTO nothing VALUES (1, 'one')")
    run(sub, "REPL_SYNC ('emp1', 'none')")
    assert value(sub, "SELECT COUNT(*) FROM nothing") == 1

"""A deadlock while replaying: an application on the subscriber holds one row of a transaction being applied and then
asks for another the apply holds. The database kills the apply (PostgreSQL: the waiter whose deadlock check runs
first, the apply, which waited first; MariaDB: the lighter transaction, the apply, against an application that has
changed many rows); the application commits, and the sync applies the transaction again, once, after it: the
subscriber ends as the publisher, the application's commit went through, and nothing is applied twice."""

from __future__ import annotations

import threading
import time

import pytest

from replication_admin.core import connections
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = pytest.mark.live_db


def apply_waits(monitor, dialect: str) -> bool:
    """Another session of the subscriber's database waits for a row lock (the apply, blocked on the application's
    row). MariaDB's INNODB_TRX does not always list a waiting INSERT … SELECT: its engine status does."""
    cursor = monitor.cursor()
    if dialect == "postgresql":
        query = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return bool(cursor.execute(query).fetchone()[0])
    database = cursor.execute("SELECT DATABASE()").fetchone()[0]
    status = cursor.execute("SHOW ENGINE INNODB STATUS").fetchone()[2]
    return any(f"of table `{database}`.`items`" in line and line.endswith("waiting") for line in status.splitlines())


# Deadlocks the server has met: of the subscriber's database (PostgreSQL), of the server (MariaDB).
DEADLOCKS = {
    "postgresql": "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
    "mysql": "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_DEADLOCKS'",
}
# What the sessions were doing, said when the apply never waited.
SESSIONS = {
    "postgresql": "SELECT pid, state, wait_event_type, wait_event, left(query, 200) FROM pg_stat_activity "
    "WHERE datname = current_database()",
    "mysql": "SELECT ID, COMMAND, STATE, LEFT(INFO, 200) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()",
}
# PostgreSQL: each waiter checks for a deadlock once, deadlock_timeout after it began to wait. The apply's sessions
# check after APPLY_DEADLOCK_CHECK, so the application has that long (not the default second, which a loaded machine
# can spend before the application sees the apply wait) to close the cycle; the application checks much later, so the
# apply, which waited first, is the one the server kills.
APPLY_DEADLOCK_CHECK, APPLICATION_DEADLOCK_CHECK = "5s", "60s"
FILLER_ROWS = 400  # what the MariaDB application changed first: it outweighs the apply, which InnoDB then kills


class Application(threading.Thread):
    """The subscriber's own writer: row 2 locked (and many filler rows changed) before the sync starts; once the
    apply waits for row 2, it updates row 1, which the apply holds, and commits."""

    def __init__(self, sub) -> None:
        super().__init__(daemon=True)
        self.sub = sub
        self.error: BaseException | None = None
        self.committed = False
        self.opened = connections.connect(sub, autocommit=False)  # held until run() ends
        self.conn = self.opened.__enter__()
        cursor = self.conn.cursor()
        if sub.dialect == "postgresql":
            cursor.execute(f"SET deadlock_timeout = '{APPLICATION_DEADLOCK_CHECK}'")
        cursor.execute("UPDATE items SET name = 'local 2' WHERE id = 2")
        cursor.execute("UPDATE filler SET n = n + 1")

    def run(self) -> None:
        try:
            with connections.connect(self.sub) as monitor:
                deadline = time.monotonic() + 120
                while not apply_waits(monitor, self.sub.dialect):
                    if time.monotonic() > deadline:
                        seen = monitor.cursor().execute(SESSIONS[self.sub.dialect]).fetchall()
                        raise AssertionError(f"the apply never waited for the application's row: {seen}")
                    time.sleep(0.05)
            cursor = self.conn.cursor()
            cursor.execute("UPDATE items SET name = 'local 1' WHERE id = 1")  # the apply holds it: a deadlock
            self.conn.commit()
            self.committed = True
        except BaseException as exc:  # said by the test
            self.error = exc
        finally:
            self.opened.__exit__(None, None, None)


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_a_deadlock_with_an_application_on_the_subscriber_is_retried_and_the_transaction_applied_once(
    make_server, jobs_sync, spark, dialect
):
    pub, sub = make_server("postgresql", "pub"), make_server(dialect, "sub")
    if dialect == "postgresql":  # before the product opens its first session there
        sql(sub, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET deadlock_timeout = %L', current_database(), "
            f"'{APPLY_DEADLOCK_CHECK}'); END $$")  # fmt: skip
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), hits integer)")
    sql(pub, *[f"INSERT INTO items VALUES ({i}, 'item {i}', 0)" for i in (1, 2, 3)])
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    sql(sub, "CREATE TABLE filler (id integer PRIMARY KEY, n integer)")
    sql(sub, *[f"INSERT INTO filler VALUES {', '.join(f'({i}, 0)' for i in range(k, k + 100))}"
               for k in range(0, FILLER_ROWS, 100)])  # fmt: skip
    # One publisher transaction that writes row 1, then row 2: its apply locks them in that order.
    with connections.connect(pub, autocommit=False) as conn:
        cursor = conn.cursor()
        cursor.execute("UPDATE items SET name = 'pub 1', hits = hits + 1 WHERE id = 1")
        cursor.execute("UPDATE items SET name = 'pub 2', hits = hits + 1 WHERE id = 2")
        conn.commit()

    deadlocks = int(value(sub, DEADLOCKS[dialect]))
    application = Application(sub)
    application.start()
    outcome = run(sub, "REPL_SYNC ('pub', 'shop')")[0]
    application.join(timeout=120)

    assert application.error is None, application.error
    assert application.committed  # the application was not the one killed
    if dialect == "postgresql":
        time.sleep(1.0)  # the statistics collector reports a backend's counts within a second (PGSTAT_MIN_INTERVAL)
    assert int(value(sub, DEADLOCKS[dialect])) > deadlocks  # it was a deadlock, not a wait
    # The apply wrote row 1 after the application's commit: its first try, which held row 1 first, was undone.
    assert value(sub, "SELECT name FROM items WHERE id = 1") == "pub 1"
    assert value(sub, "SELECT name FROM items WHERE id = 2") == "pub 2"
    assert value(sub, "SELECT hits FROM items WHERE id = 1") == 1  # the publisher's image, once
    assert outcome.details["applied"] == 1 and outcome.details["skipped"] == 0, outcome.details
    assert same(pub, sub, "items")["equal"]
    again = run(sub, "REPL_SYNC ('pub', 'shop')")[0]
    assert again.details["applied"] == 0  # nothing left, nothing applied twice

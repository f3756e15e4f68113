"""REPL_RELOAD_TABLE: one published table of one subscriber copied again while the publisher keeps committing. The
table's drift on the subscriber is gone, its other tables are untouched, its level is kept, and the next sync applies
every transaction committed during the reload once: the subscriber then matches the publisher."""

from __future__ import annotations

import threading

import pytest
from django.urls import reverse

from replication_admin.core.audit import Actor
from replication_admin.engine.statements import StatementError
from replication_admin.models import AuditEntry, JobRun, ReplSubscriber
from replication_admin.statements import execute
from replication_admin.transactional.lookups import server_named
from replication_admin.transactional.positions import subscriber_position
from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import refused, run, sql, value

pytestmark = pytest.mark.live_db

WRITES = 40  # publisher transactions committed while the reload runs


def subscribed(make_server, dialect: str):
    pub, sub = make_server("postgresql", "pub"), make_server(dialect, "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), hits integer)",
        "CREATE TABLE orders (id integer PRIMARY KEY, item integer, note varchar(40))")  # fmt: skip
    sql(pub, *[f"INSERT INTO items VALUES ({i}, 'item {i}', 0)" for i in range(1, 201)])
    sql(pub, *[f"INSERT INTO orders VALUES ({i}, {i}, 'order {i}')" for i in range(1, 11)])
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null); "
             "REPL_PUB_ADD ('shop', 'orders', 2, 0, null)")  # fmt: skip
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    return pub, sub


class Writer(threading.Thread):
    """The publisher's application, committing one transaction after another (each touches both tables)."""

    def __init__(self, pub, started: threading.Event) -> None:
        super().__init__(daemon=True)
        self.pub, self.started, self.error = pub, started, None

    def run(self) -> None:
        try:
            for n in range(WRITES):
                sql(self.pub, "BEGIN",
                    f"UPDATE items SET hits = hits + 1, name = 'hit {n}' WHERE id = {n % 7 + 1}",
                    f"INSERT INTO orders VALUES ({100 + n}, {n % 7 + 1}, 'during {n}')",
                    "COMMIT")  # fmt: skip
                if n == 2:
                    self.started.set()
        except BaseException as exc:  # said by the test
            self.error = exc
        finally:
            self.started.set()


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_one_table_is_reloaded_while_the_publisher_writes_and_the_stream_resumes_after_the_kept_level(
    make_server, jobs_sync, spark, dialect
):
    pub, sub = subscribed(make_server, dialect)
    # The subscriber's copy of items drifted (a row lost, one changed, a stray one); orders drifted too.
    sql(sub, "DELETE FROM items WHERE id = 2", "UPDATE items SET name = 'drifted' WHERE id = 150",
        "INSERT INTO items VALUES (999, 'stray', 0)", "UPDATE orders SET note = 'kept here' WHERE id = 1")  # fmt: skip
    sub_server = server_named("sub")
    before = subscriber_position(sub_server, "pub", "shop")

    started = threading.Event()
    writer = Writer(pub, started)
    writer.start()
    started.wait(60)
    outcome = run(sub, "REPL_RELOAD_TABLE ('pub', 'shop', 'items')")[0]
    writer.join(120)
    assert writer.error is None, writer.error

    assert outcome.details["table"] == "items" and outcome.details["rows"] >= 200, outcome.details
    assert subscriber_position(sub_server, "pub", "shop") == before  # the level is kept: nothing skipped
    assert value(sub, "SELECT count(*) FROM items WHERE id IN (2, 999)") == 1  # 2 is back, the stray one gone
    assert value(sub, "SELECT name FROM items WHERE id = 150") == "item 150"
    assert value(sub, "SELECT note FROM orders WHERE id = 1") == "kept here"  # the other table untouched

    synced = run(sub, "REPL_SYNC ('pub', 'shop')")[0]
    # Every transaction committed since the kept level, once (those the copy already held are written again, the
    # same images: idempotent).
    assert synced.details["applied"] == WRITES and synced.details["skipped"] == 0, synced.details
    assert same(pub, sub, "items")["equal"]
    assert value(sub, "SELECT sum(hits) FROM items") == WRITES
    assert value(sub, "SELECT count(*) FROM orders WHERE id >= 100") == WRITES
    assert value(sub, "SELECT note FROM orders WHERE id = 1") == "kept here"


def test_a_table_the_publication_lacks_is_refused_in_one_line_and_nothing_is_queued(make_server, jobs_sync, spark):
    _pub, sub = subscribed(make_server, "postgresql")
    jobs = JobRun.objects.count()
    message = refused(sub, """REPL_RELOAD_TABLE ('pub', 'shop', '"ab ""cd"')""")
    assert message == """'"ab ""cd"' is not a published table of pub/shop (its tables: 'items', 'orders')"""
    assert JobRun.objects.count() == jobs
    assert AuditEntry.objects.filter(action="job.trx_reload", outcome=AuditEntry.Outcome.ERROR).count() == 1
    for text, says in (
        ("REPL_RELOAD_TABLE ('pub', 'shop')", "repl_reload_table takes 3 argument(s) (server, account, table), got 2"),
        ("REPL_RELOAD_TABLE ('pub', 'shop', '')", "the table must be a non-empty string naming a published table"),
    ):
        with pytest.raises(StatementError) as wrong:
            execute(Actor.command(), text, context=sub)
        assert says in str(wrong.value)
    assert "nope" in refused(sub, "REPL_RELOAD_TABLE ('pub', 'nope', 'items')")
    assert JobRun.objects.count() == jobs


def test_a_subscription_never_copied_is_refused_a_reload(make_server, jobs_sync, spark):
    pub, sub = make_server("postgresql", "pub"), make_server("postgresql", "sub")
    sql(pub, "CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null)")
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop')")
    outcome = execute(Actor.command(), "REPL_RELOAD_TABLE ('pub', 'shop', 'items')", context=sub)[-1]
    assert not outcome.ok and "has no level for pub/shop yet; run REPL_INIT_COPY first" in outcome.message
    assert ReplSubscriber.objects.get(subscriber="sub").init_state == "none"


def test_a_viewer_may_not_reload_a_table_and_the_refusal_is_audited(make_server, jobs_sync, spark, viewer_client):
    _pub, _sub = subscribed(make_server, "postgresql")
    subscription = ReplSubscriber.objects.get(subscriber="sub")
    address = reverse("trx-subscriptions-reload", args=[subscription.subscriber, subscription.server, "shop"])
    jobs = JobRun.objects.count()
    assert viewer_client.post(address, {"table": "items"}).status_code == 403
    assert 'id="trx-reload"' not in viewer_client.get(subscription.get_absolute_url()).content.decode()
    assert JobRun.objects.count() == jobs
    assert AuditEntry.objects.filter(action="job.trx_reload", outcome=AuditEntry.Outcome.DENIED).exists()

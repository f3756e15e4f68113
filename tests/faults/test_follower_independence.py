"""The in-sync follower applies each subscription on its own: a subscriber that stops answering mid-apply (its link
stalled, not refused: the TCP proxy of tests/faults/proxy.py keeps the connection open and forwards nothing) holds
only its own subscription. The three others of the same publication (PostgreSQL, MariaDB, SQLite) keep reaching the
publisher's level, the follower's heartbeat goes on and names the stuck one; once the link forwards again the stalled
subscriber catches up, each transaction applied once. Stopped while a step is stuck, the follower ends anyway and
leaves nothing half applied.

A real `manage.py replfollow` process applies; nothing here measures time (the waits are guards against hanging)."""

from __future__ import annotations

import signal
import subprocess

import pytest
from django.utils import timezone

from replication_admin.core import connections, heartbeats
from replication_admin.core.audit import Actor
from replication_admin.models import ProcessHeartbeat, ReplSubscriber, Server
from replication_admin.servers.actions import do_register_server
from replication_admin.transactional.capture import publisher_count
from replication_admin.transactional.positions import subscriber_position
from tests.bidir.test_bidir_sync import same
from tests.conftest import server_data
from tests.faults.test_durability import follower, insert, keys, run
from tests.transactional.test_follower_down import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


@pytest.fixture
def publication(transactional_db, make_server, proxied_server, jobs_sync, spark):
    """A PostgreSQL publisher and four in-sync subscribers of its publication: MariaDB through a proxy (the one
    whose link stalls), PostgreSQL, MariaDB and SQLite. The stalled subscriber's database is also registered directly
    (not subscribed) to read it while its link stalls."""
    pub = make_server("postgresql", "ipub")
    stalled, proxy = proxied_server("mysql", "islow")
    others = [make_server("postgresql", "ipg"), make_server("mysql", "imy"), make_server("sqlite", "ilite")]
    direct = do_register_server(Actor.command(), server_data("mysql", "islow_direct", stalled.database))
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    insert(pub, 1)
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", pub)
    for sub in [stalled, *others]:
        run("REPL_SERVER ('ipub', 'ipub'); REPL_SUBSCRIBE ('ipub', 'acct'); REPL_INIT_COPY ('ipub', 'acct'); "
            "SYNC_REPL ()", sub)  # fmt: skip
    assert ReplSubscriber.objects.filter(server="ipub", follow=True, state=ReplSubscriber.IN_SYNC).count() == 4
    return pub, direct, others, proxy


def level(server: Server) -> int | None:
    """The count of publisher transactions the subscriber has applied, as its own database records it."""
    position = subscriber_position(server, "ipub", "acct")
    return None if position is None else position[1]


def up_to_date(pub: Server, sub: Server) -> bool:
    return keys(sub) == keys(pub) and level(sub) == publisher_count(pub, "acct")


def beat_of(proc: subprocess.Popen) -> ProcessHeartbeat | None:
    return ProcessHeartbeat.objects.filter(kind=heartbeats.Kind.FOLLOWER, pid=proc.pid).first()


def test_a_stalled_subscriber_holds_only_its_own_subscription_and_catches_up_once_its_link_forwards_again(
    publication, settings, tmp_path
):
    pub, direct, others, proxy = publication
    ids = set(ReplSubscriber.objects.filter(server="ipub").values_list("pk", flat=True))
    stalled_id = ReplSubscriber.objects.get(subscriber="islow").pk
    log = tmp_path / "replfollow.log"
    with follower(settings, tmp_path) as proc:
        insert(pub, 10)
        for sub in [direct, *others]:
            wait_for(f"{sub.name} applying the first transaction", lambda s=sub: up_to_date(pub, s), log)
        wait_for("the follower's heartbeat naming the subscriptions", lambda: (b := beat_of(proc)) is not None
                 and set(b.details["subscriptions"]) == ids, log)  # fmt: skip

        stalled_at = timezone.now()
        proxy.stall()  # islow's link: open, silent
        for key in range(11, 31):
            insert(pub, key)
        for sub in others:
            wait_for(f"{sub.name} reaching the publisher beside a stalled subscriber", lambda s=sub: up_to_date(pub, s),
                     log)  # fmt: skip
            assert same(pub, sub)["equal"]
        assert keys(direct) == [1, 10]  # the stalled one stayed where it was ...
        # ... and the loop goes on beating, naming the subscriptions it serves (the stalled one too, but while it is
        # retried after a failed step).
        beat = wait_for("a heartbeat renewed while the link stalls", lambda: (b := beat_of(proc)) is not None
                        and b.renewed_at > stalled_at and b, log)  # fmt: skip
        assert isinstance(beat, ProcessHeartbeat)
        assert heartbeats.is_alive(beat, timezone.now()) and set(beat.details["subscriptions"]) >= ids - {stalled_id}
        insert(pub, 31)  # still served: the others take this one too
        for sub in others:
            wait_for(f"{sub.name} applying a transaction written while the step is stuck",
                     lambda s=sub: up_to_date(pub, s), log)  # fmt: skip
        assert keys(direct) == [1, 10]

        proxy.resume()
        wait_for("the stalled subscriber catching up", lambda: up_to_date(pub, direct), log)
        wait_for("every subscription in sync", lambda: ReplSubscriber.objects.filter(
            server="ipub", state=ReplSubscriber.IN_SYNC).count() == 4, log)  # fmt: skip
        assert proc.poll() is None, log.read_text()

    # Each transaction applied once: the level moved by exactly the publisher's transactions, the rows are equal.
    count = publisher_count(pub, "acct")
    assert [level(s) for s in [direct, *others]] == [count] * 4
    for sub in [direct, *others]:
        assert keys(sub) == [1, *range(10, 32)]
        assert same(pub, sub)["equal"]


def test_a_follower_stopped_while_a_step_is_stuck_ends_and_leaves_nothing_half_applied(publication, settings, tmp_path):
    pub, direct, others, proxy = publication
    log = tmp_path / "replfollow.log"
    with follower(settings, tmp_path) as proc:
        insert(pub, 10)
        for sub in [direct, *others]:
            wait_for(f"{sub.name} applying the first transaction", lambda s=sub: up_to_date(pub, s), log)
        proxy.stall()
        for key in range(11, 21):
            insert(pub, key)
        for sub in others:
            wait_for(f"{sub.name} reaching the publisher", lambda s=sub: up_to_date(pub, s), log)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)  # a guard: a stuck step must not keep the follower from stopping
        except subprocess.TimeoutExpired:
            pytest.fail("replfollow was still running a minute after SIGTERM\n" + log.read_text())
        assert proc.returncode == 0, log.read_text()
        assert "applied" in log.read_text()
    proxy.resume()
    assert keys(direct) == [1, 10] and level(direct) == publisher_count(pub, "acct") - 10  # nothing of the cut step

    with follower(settings, tmp_path):
        wait_for("the subscriber catching up under a new follower", lambda: up_to_date(pub, direct), log)
    assert keys(direct) == [1, *range(10, 21)] and same(pub, direct)["equal"]
    assert all(same(pub, sub)["equal"] for sub in others)

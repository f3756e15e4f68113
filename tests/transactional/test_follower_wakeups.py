"""The in-sync follower (`manage.py replfollow`) is woken by its publishers instead of polling them: a PostgreSQL
trigger-capture publisher notifies the follower's listening session at commit. A listener that is lost is
replaced and the follower polls meanwhile; the follower's kept server connections are opened again after the
servers terminate them. Asserted on the rows and on the follower's own counts of what woke it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from replication_admin.core import connections
from replication_admin.models import ProcessHeartbeat, ReplSubscriber, Server
from replication_admin.transactional.wake import LISTEN_APPLICATION
from tests.conftest import ROOT, catalog_env
from tests.faults.test_self_healing import run

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

BOUND = 90  # seconds: a guard against hanging on a loaded machine, never a measured figure


def rows(server: Server) -> list[tuple]:
    with connections.connect(server) as conn:
        return [tuple(r) for r in conn.cursor().execute("SELECT id, name, n FROM items ORDER BY id").fetchall()]


def write(server: Server, statements: list[str]) -> None:
    """Each statement a transaction of its own."""
    with connections.connect(server) as conn:
        for statement in statements:
            conn.cursor().execute(statement)


def wait_for(what: str, done: Callable[[], bool], log_path) -> None:
    deadline = time.monotonic() + BOUND
    while not done():
        assert time.monotonic() < deadline, f"{what}\n" + log_path.read_text()
        time.sleep(0.1)


def wakes(pid: int) -> dict:
    beat = ProcessHeartbeat.objects.filter(pid=pid, kind=ProcessHeartbeat.Kind.FOLLOWER).first()
    return dict(beat.details) if beat is not None else {}


def terminate(server: Server, where: str) -> int:
    """End the server's sessions on the server's database that match `where` (not this one); how many."""
    with connections.connect(server) as conn:
        return len(
            conn.cursor()
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                f"AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND {where}"
            )
            .fetchall()
        )


@pytest.fixture
def replicated(transactional_db, make_server, jobs_sync, spark) -> tuple[Server, Server]:
    """A PostgreSQL trigger-capture publication of `items` and an in-sync PostgreSQL subscriber of it."""
    pub, sub = make_server("postgresql", "wkpub"), make_server("postgresql", "wksub")
    write(pub, ["CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), n integer NOT NULL DEFAULT 0)"])
    write(pub, [f"INSERT INTO items (id, name) VALUES ({i}, 'row {i}')" for i in range(1, 6)])
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", context=pub)
    run("REPL_SERVER ('wkpub', 'wkpub'); REPL_SUBSCRIBE ('wkpub', 'acct'); REPL_INIT_COPY ('wkpub', 'acct'); "
        "SYNC_REPL ()", context=sub)  # fmt: skip
    assert ReplSubscriber.objects.get(server="wkpub").state == ReplSubscriber.IN_SYNC
    return pub, sub


@contextlib.contextmanager
def follower(settings, tmp_path, interval: float) -> Iterator[subprocess.Popen]:
    env = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"])),
           "REPLADMIN_HEARTBEAT_STALE_SECONDS": "4"}  # fmt: skip
    with open(tmp_path / "replfollow.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "replfollow", "--interval", str(interval)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def listening(proc: subprocess.Popen) -> Callable[[], bool]:
    return lambda: "wkpub/acct" in wakes(proc.pid).get("listening", [])


def test_a_commit_on_a_trigger_capture_publisher_wakes_the_follower_by_its_notification(replicated, settings, tmp_path):
    pub, sub = replicated
    log_path = tmp_path / "replfollow.log"
    # The poll's interval is long: a round that found the change by polling would show in the timer count.
    with follower(settings, tmp_path, interval=30) as proc:
        wait_for("the follower never listened to wkpub/acct", listening(proc), log_path)
        for n in range(3):
            before = wakes(proc.pid)["wakes"]
            write(pub, [f"UPDATE items SET n = n + 1, name = 'woken {n}' WHERE id = 2"])
            wait_for("the change never reached the subscriber", lambda n=n: rows(sub)[1][1] == f"woken {n}", log_path)
            wait_for(
                "the follower's heartbeat never counted the round",
                lambda b=before: wakes(proc.pid)["wakes"]["news_after_notify"] > b["news_after_notify"],
                log_path,
            )
            after = wakes(proc.pid)["wakes"]
            assert after["news_after_timer"] == before["news_after_timer"], (before, after)
            assert after["lost"] == 0 and after["listens"] == 1
    assert rows(sub) == rows(pub)


def test_a_lost_listener_is_replaced_while_the_follower_polls_and_nothing_is_missed(replicated, settings, tmp_path):
    pub, sub = replicated
    log_path = tmp_path / "replfollow.log"
    with follower(settings, tmp_path, interval=0.2) as proc:
        wait_for("the follower never listened to wkpub/acct", listening(proc), log_path)
        assert terminate(pub, f"application_name = '{LISTEN_APPLICATION}'") == 1
        write(pub, [f"INSERT INTO items (id, name) VALUES ({i}, 'while lost')" for i in range(10, 30)])
        wait_for("the follower never noticed its listener was lost", lambda: wakes(proc.pid)["wakes"]["lost"] >= 1,
                 log_path)  # fmt: skip
        wait_for("the rows written meanwhile never arrived", lambda: rows(sub) == rows(pub), log_path)
        wait_for("the follower never listened again", lambda: wakes(proc.pid)["wakes"]["listens"] >= 2, log_path)
        write(pub, ["UPDATE items SET n = n + 1 WHERE id < 20", "DELETE FROM items WHERE id = 25"])
        wait_for("the rows written after it listened again never arrived", lambda: rows(sub) == rows(pub), log_path)
    assert len(rows(sub)) == 5 + 20 - 1 and sum(r[2] for r in rows(sub)) == 5 + 10


def test_kept_connections_are_opened_again_after_the_servers_terminate_them_and_nothing_is_applied_twice(
    replicated, settings, tmp_path
):
    pub, sub = replicated
    log_path = tmp_path / "replfollow.log"
    with follower(settings, tmp_path, interval=0.2) as proc:
        wait_for("the follower never listened to wkpub/acct", listening(proc), log_path)
        for round_ in range(3):
            write(pub, [f"UPDATE items SET n = n + 1 WHERE id = {i}" for i in range(1, 6)])
            wait_for("the changes never arrived", lambda: rows(sub) == rows(pub), log_path)
            # Every session the follower keeps on both servers (its pooled connections and its listener) ends.
            ended = terminate(pub, "true") + terminate(sub, "true")
            assert ended >= 2, "the follower kept no connection to end"
            write(pub, [f"INSERT INTO items (id, name) VALUES ({100 + round_ * 10 + i}, 'after {round_}')"
                        for i in range(10)])  # fmt: skip
            write(pub, [f"UPDATE items SET n = n + 10 WHERE id = {100 + round_ * 10}"])
            wait_for("the changes after the sessions ended never arrived", lambda: rows(sub) == rows(pub), log_path)
        assert wakes(proc.pid)["wakes"]["lost"] >= 1
    final = rows(sub)
    assert final == rows(pub)
    # Every update applied exactly once: 3 rounds of +1 on ids 1-5, +10 on one new row per round.
    assert sum(r[2] for r in final) == 3 * 5 + 3 * 10 and len(final) == 5 + 30
    sub_row = ReplSubscriber.objects.get(server="wkpub")
    sub_row.refresh_from_db()
    assert sub_row.state == ReplSubscriber.IN_SYNC, sub_row.last_error

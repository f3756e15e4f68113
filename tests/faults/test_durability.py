"""Acknowledged commit (REPL_WAIT and the publication's policy none / one / quorum / all), tested against
what docs/durability.md promises: a subscriber cut at the moment of a commit, the follower killed right
after one, the publisher lost after an acknowledged commit. A real `replfollow` process applies; the
subscriber that fails is registered through a TCP proxy."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.engine.statements import StatementError
from replication_admin.models import AuditEntry, ReplSubscriber, Server
from replication_admin.statements import execute
from tests.conftest import ROOT, catalog_env, drop_database

pytestmark = [pytest.mark.spark, pytest.mark.live_db]


def run(text: str, context: Server) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    assert all(o.ok for o in outcomes), outcomes[-1].message
    return outcomes


def wait(pub: Server, policy: str, timeout: float) -> dict:
    """REPL_PUB_ACK then REPL_WAIT for the publisher's level now: the outcome's details and message."""
    run(f"REPL_PUB_ACK ('acct', '{policy}')", pub)
    outcome = execute(Actor.command(), f"REPL_WAIT ('acct', NULL, {timeout})", context=pub)[-1]
    return {**outcome.details, "ok": outcome.ok, "message": outcome.message}


def insert(pub: Server, key: int) -> None:
    with connections.connect(pub) as conn:
        conn.cursor().execute("INSERT INTO items VALUES (?, ?)", key, f"row {key}")


def keys(server: Server) -> list[int]:
    with connections.connect(server) as conn:
        return [int(r[0]) for r in conn.cursor().execute("SELECT id FROM items ORDER BY id").fetchall()]


@contextlib.contextmanager
def follower(settings, tmp_path) -> Iterator[subprocess.Popen]:
    """`manage.py replfollow` on the test catalog; killed at the end, whatever happened."""
    env = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"]))}
    with open(tmp_path / "replfollow.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "replfollow", "--interval", "0.05"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture
def three(transactional_db, make_server, proxied_server, jobs_sync, spark):
    """A PostgreSQL publisher and three in-sync subscribers: MariaDB (through a proxy), PostgreSQL, SQLite."""
    pub = make_server("postgresql", "apub")
    proxied, proxy = proxied_server("mysql", "amy")
    subs = [proxied, make_server("postgresql", "apg"), make_server("sqlite", "alite")]
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
    insert(pub, 1)
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", pub)
    for sub in subs:
        run("REPL_SERVER ('apub', 'apub'); REPL_SUBSCRIBE ('apub', 'acct'); REPL_INIT_COPY ('apub', 'acct'); "
            "SYNC_REPL ()", sub)  # fmt: skip
    assert ReplSubscriber.objects.filter(server="apub", follow=True, state=ReplSubscriber.IN_SYNC).count() == 3
    return pub, subs, proxy


def test_the_policy_is_set_by_statement_and_bad_input_is_refused_in_one_line(three):
    pub, _subs, _proxy = three
    assert (
        "acknowledges commits with policy quorum (wait at most 5 s)"
        in run("REPL_PUB_ACK ('acct', 'quorum', 5)", pub)[0].message
    )
    for text, message in [
        ("REPL_PUB_ACK ('acct', 'most')", "the policy must be one of 'none', 'one', 'quorum', 'all'"),
        ("REPL_PUB_ACK ('acct', 'all', 0)", "the timeout must be NULL or a number of seconds"),
        ("REPL_WAIT ('acct', 1, 'soon')", "the timeout must be NULL or a number of seconds"),
    ]:
        with pytest.raises(StatementError, match=message):
            execute(Actor.command(), text, context=pub)
    for text, message in [
        ("REPL_WAIT ('acct', 99999)", "level 99999 is beyond apub/acct's level"),
        ("REPL_WAIT ('nope')", "nope"),
    ]:
        outcome = execute(Actor.command(), text, context=pub)[-1]
        assert not outcome.ok and message in outcome.message and "\n" not in outcome.message, outcome.message
    assert AuditEntry.objects.filter(action="trx.ack_policy", outcome="ok").count() == 1
    # Nobody applies (no follower runs): 'none' answers at once; 'one' waits, then names every subscriber.
    insert(pub, 2)
    at_once = wait(pub, "none", 5)
    assert (at_once["ok"], at_once["acked"], at_once["required"], at_once["acked_by"]) == (True, True, 0, [])
    missed = wait(pub, "one", 0.3)
    assert not missed["ok"] and missed["acked_by"] == [] and sorted(missed["missing"]) == ["alite", "amy", "apg"]
    assert missed["message"].startswith("timed out after") and "one needs 1 of 3, 0 had it" in missed["message"]


def test_a_subscriber_cut_at_the_moment_of_a_commit_fails_all_but_not_quorum_and_acks_once_back(
    three, settings, tmp_path
):
    pub, subs, proxy = three
    with follower(settings, tmp_path):
        insert(pub, 10)
        everyone = wait(pub, "all", 60)
        assert everyone["ok"] and everyone["acked_by"] == ["alite", "amy", "apg"], everyone["message"]
        assert all(keys(sub) == [1, 10] for sub in subs)  # acknowledged means there, on every subscriber

        proxy.outage(8.0)  # MariaDB cut and refused for 8 s, from the moment of the next commit
        insert(pub, 11)
        majority = wait(pub, "quorum", 60)
        assert majority["ok"] and majority["acked_by"] == ["alite", "apg"], majority["message"]
        missed = wait(pub, "all", 1.0)
        assert not missed["ok"] and list(missed["missing"]) == ["amy"], missed["message"]
        assert "level" in missed["message"] and "amy (at level" in missed["message"]

        back = wait(pub, "all", 60)  # the follower retries the lost subscriber once it answers again
        assert back["ok"] and back["acked_by"] == ["alite", "amy", "apg"], back["message"]
    assert all(keys(sub) == [1, 10, 11] for sub in subs)  # nothing lost, nothing applied twice


def test_a_follower_killed_after_a_commit_loses_nothing_and_an_acked_commit_outlives_the_publisher(
    three, settings, tmp_path
):
    pub, subs, _proxy = three
    with follower(settings, tmp_path) as first:
        insert(pub, 20)
        assert wait(pub, "all", 60)["ok"]
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies right after the next commit
        insert(pub, 21)
    missed = wait(pub, "one", 0.5)
    assert not missed["ok"] and sorted(missed["missing"]) == ["alite", "amy", "apg"]
    with follower(settings, tmp_path):
        acked = wait(pub, "all", 60)
        assert acked["ok"], acked["message"]
    assert all(keys(sub) == [1, 20, 21] for sub in subs)

    # The publisher is lost for good after an acknowledged commit: every acknowledging subscriber has it;
    # what was only committed (policy none, no follower running) is gone with the publisher.
    with follower(settings, tmp_path):
        insert(pub, 22)
        assert wait(pub, "quorum", 60)["ok"]
        time.sleep(0.2)
    insert(pub, 23)
    assert wait(pub, "none", 5)["ok"]
    drop_database("postgresql", pub.database)
    held = [keys(sub) for sub in subs]
    assert sum(22 in k for k in held) >= 2 and all(23 not in k for k in held), held

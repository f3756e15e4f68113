"""`manage.py replfollow --processes N` runs N follower processes that share the in-sync subscriptions out by lease,
keeps every subscription in sync, and stops with one SIGTERM (the leases given back)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from replication_admin.core import connections
from replication_admin.models import FollowLease, ReplSubscriber
from tests.conftest import ROOT, catalog_env
from tests.faults.test_self_healing import run

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

# How long a process may take to stop before the test calls it hung (a bound, not a timing: a stop takes
# about a second on a quiet machine and several on a loaded one).
STOP_BOUND = 60


def followed_publication(make_server, name: str, subscriber_names: list[str]):
    """A PostgreSQL publisher `name` of table items (10 rows) and MariaDB subscribers of it, copied and in sync."""
    pub = make_server("postgresql", name)
    subscribers = [make_server("mysql", sub_name) for sub_name in subscriber_names]
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
        for n in range(1, 11):
            conn.cursor().execute("INSERT INTO items VALUES (?, ?)", n, f"row {n}")
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", context=pub)
    for sub in subscribers:
        run(f"REPL_SERVER ('{name}', '{name}'); REPL_SUBSCRIBE ('{name}', 'acct'); "
            f"REPL_INIT_COPY ('{name}', 'acct'); SYNC_REPL ()", context=sub)  # fmt: skip
    return pub, subscribers


def count(server, table: str) -> int:
    with connections.connect(server) as conn:
        return conn.cursor().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_two_follower_processes_each_serve_their_half_of_the_subscriptions_and_one_sigterm_stops_both(
    transactional_db, make_server, jobs_sync, spark, settings, tmp_path
):
    pub, subscribers = followed_publication(make_server, "fpub", ["fsub1", "fsub2"])
    subs = list(ReplSubscriber.objects.filter(server="fpub").order_by("id"))
    assert [s.state for s in subs] == [ReplSubscriber.IN_SYNC] * 2 and all(s.follow for s in subs)

    env = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"]))}
    with open(tmp_path / "replfollow.log", "wb") as log:
        follower = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "replfollow", "--processes", "2", "--interval", "0.05"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # a guard against hanging, generous for a busy machine
        while len(psutil.Process(follower.pid).children()) < 2:
            assert follower.poll() is None and time.monotonic() < deadline, (tmp_path / "replfollow.log").read_text()
            time.sleep(0.1)
        children = psutil.Process(follower.pid).children()
        parts = sorted((argv := c.cmdline())[argv.index("--child") + 1] for c in children)
        assert parts == ["0/2", "1/2"]
        # Each follower holds the lease of one of the two subscriptions (a fair share: ceil(2 / 2)).
        while sorted(FollowLease.objects.values_list("pid", flat=True)) != sorted(c.pid for c in children):
            assert time.monotonic() < deadline, list(FollowLease.objects.values_list("subscription_id", "holder"))
            time.sleep(0.1)
        with connections.connect(pub) as conn:
            for n in range(11, 61):
                conn.cursor().execute("INSERT INTO items VALUES (?, ?)", n, f"live {n}")
        deadline = time.monotonic() + 120  # a guard against hanging, generous for a busy machine
        while [count(sub, "items") for sub in subscribers] != [60, 60]:
            assert time.monotonic() < deadline, (
                f"subscribers have {[count(sub, 'items') for sub in subscribers]} of 60 rows\n"
                + (tmp_path / "replfollow.log").read_text()
            )
            time.sleep(0.1)

        follower.send_signal(signal.SIGTERM)  # one signal to the command, as a service manager sends
        try:
            follower.wait(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"replfollow --processes 2 was still running {STOP_BOUND} s after SIGTERM")
        assert follower.returncode == 0
        time.sleep(0.5)
        assert not [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        out = (tmp_path / "replfollow.log").read_text()
        assert "follower 0/2: applied" in out and "follower 1/2: applied" in out, out
    finally:
        with contextlib.suppress(ProcessLookupError):  # the command's process group: nothing should be left
            os.killpg(follower.pid, signal.SIGKILL)
        follower.wait()
    for sub in subs:
        sub.refresh_from_db()
        assert sub.state == ReplSubscriber.IN_SYNC, sub.last_error
    assert not FollowLease.objects.exists()  # a clean stop gives the leases back


def test_the_follower_processes_stop_by_themselves_when_their_supervisor_is_killed(transactional_db, settings):
    env = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"]))}
    follower = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "replfollow", "--processes", "2"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # a guard against hanging, generous for a busy machine
        while len(psutil.Process(follower.pid).children()) < 2:
            assert follower.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        children = psutil.Process(follower.pid).children()
        follower.kill()  # the supervisor alone, without a signal passed on
        follower.wait()
        _, alive = psutil.wait_procs(children, timeout=STOP_BOUND)
        assert not alive, f"followers still running {STOP_BOUND} s after their supervisor was killed: {alive}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(follower.pid, signal.SIGKILL)
        follower.wait()

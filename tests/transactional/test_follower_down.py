"""An in-sync subscription whose follower (`manage.py replfollow`) is killed reads "follower down" in the status API,
the subscriptions page and the Health page, and is alerted; once a follower runs again it is ok and the alert is
resolved."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.cache import cache
from django.urls import reverse

from replication_admin.core import connections, heartbeats
from replication_admin.models import Alert, ProcessHeartbeat, ReplSubscriber
from tests.conftest import ROOT, catalog_env
from tests.faults.test_self_healing import run

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

TOKEN = "follower-down-token"
STALE = 3  # seconds without a heartbeat before a follower is down (REPLADMIN_HEARTBEAT_STALE_SECONDS)
TARGET = "fdsub <- fdpub/acct"


def wait_for(what: str, check: Callable[[], object], log: Path | None = None) -> object:
    """Poll `check` until it answers something true; a generous guard against hanging, not a timing assertion."""
    deadline = time.monotonic() + 120
    while not (answer := check()):
        assert time.monotonic() < deadline, f"{what} never happened\n" + (log.read_text() if log else "")
        time.sleep(0.2)
    return answer


def subscriber_row(client) -> dict:
    cache.clear()  # the live lag reads are cached for a few seconds
    body = client.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    [publication] = body["transactional_publications"]
    [row] = publication["subscribers"]
    return row


def count(server, table: str) -> int:
    with connections.connect(server) as conn:
        return conn.cursor().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def in_sync_subscription(make_server, also: str = "") -> tuple:
    """A PostgreSQL publisher fdpub with one row in `items`, published as acct, and a MariaDB subscriber fdsub
    copied and put in sync mode (`also`: statements run on the subscriber before SYNC_REPL); (pub, sub server,
    subscription)."""
    pub = make_server("postgresql", "fdpub")
    sub_server = make_server("mysql", "fdsub")
    with connections.connect(pub) as conn:
        conn.cursor().execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40))")
        conn.cursor().execute("INSERT INTO items VALUES (1, 'first')")
    run("REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'items', 2, 0, null)", context=pub)
    run("REPL_SERVER ('fdpub', 'fdpub'); REPL_SUBSCRIBE ('fdpub', 'acct'); REPL_INIT_COPY ('fdpub', 'acct'); "
        f"{also}SYNC_REPL ()", context=sub_server)  # fmt: skip
    return pub, sub_server, ReplSubscriber.objects.get(subscriber="fdsub")


@pytest.fixture
def follower(transactional_db, settings, tmp_path) -> Iterator[Callable[[], subprocess.Popen]]:
    """Factory: start `manage.py replfollow` on the test catalog (its own process group); all killed at the end."""
    env = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"])),
           "REPLADMIN_HEARTBEAT_STALE_SECONDS": str(STALE)}  # fmt: skip
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        with open(tmp_path / "replfollow.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "replfollow", "--interval", "0.05"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_killed_follower_shows_its_subscription_follower_down_and_alerted_until_a_follower_runs_again(
    make_server, jobs_sync, spark, settings, follower, client, viewer_client, tmp_path
):
    settings.STATUS_TOKENS = [TOKEN]
    settings.HEARTBEAT_STALE_SECONDS = STALE
    log = tmp_path / "replfollow.log"
    pub, sub_server, sub = in_sync_subscription(make_server)
    assert (sub.state, sub.follow) == (ReplSubscriber.IN_SYNC, True)
    # No follower has run yet: nothing applies the subscription, and nothing says "IN SYNC" without a word.
    assert subscriber_row(client)["state"] == "follower_down"

    first = follower()
    wait_for("a live follower", lambda: heartbeats.live_followers().holds(sub.pk), log)
    with connections.connect(pub) as conn:
        conn.cursor().execute("INSERT INTO items VALUES (2, 'followed')")
    wait_for("the follower applying a transaction", lambda: count(sub_server, "items") == 2, log)
    row = subscriber_row(client)
    assert (row["state"], row["sync_state"]) == ("ok", "IN SYNC"), row
    [beat] = ProcessHeartbeat.objects.filter(kind="follower", pid=first.pid)
    assert beat.details["subscriptions"] == [sub.pk] and beat.details["leases"]["held"] == 1

    os.killpg(first.pid, signal.SIGKILL)  # no clean exit: only the silence of its heartbeat tells
    first.wait()
    row = wait_for("follower down", lambda: (r := subscriber_row(client))["state"] == "follower_down" and r)
    assert isinstance(row, dict)
    assert (row["state_label"], row["sync_state"]) == ("follower down", "IN SYNC (follower down)")
    outcome = heartbeats.watch()
    assert outcome["raised"] == [TARGET, "follower"]  # the subscription, and the component
    alert = Alert.objects.get(kind=Alert.Kind.FOLLOWER_DOWN, target=TARGET)
    assert alert.resolved_at is None and "no live follower" in alert.message
    component = Alert.objects.get(kind=Alert.Kind.COMPONENT_DOWN, target="follower")
    assert "1 in-sync subscription(s) should be followed" in component.message and str(first.pid) in component.message
    assert heartbeats.watch()["raised"] == []  # raised once while the trouble lasts
    health = viewer_client.get(reverse("health")).content.decode()
    follower_row = health.split(f'data-pid="{first.pid}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-state="down"' in follower_row and "no heartbeat for" in follower_row
    assert "1 in-sync subscription no live follower serves" in health and TARGET.replace("<", "&lt;") in health
    listing = viewer_client.get(reverse("subscriptions")).content.decode()
    assert "IN SYNC (follower down)" in listing.split('data-subscription="fdsub fdpub/acct"', 1)[1].split("</tr>")[0]

    second = follower()
    wait_for("the follower back", lambda: subscriber_row(client)["state"] == "ok", log)
    # Resolved by the watchdog: here, or the one the follower runs itself (whichever looks first).
    down = Alert.objects.filter(kind__in=["follower_down", "component_down"], resolved_at__isnull=True)
    wait_for("the alerts resolved", lambda: heartbeats.watch() and not down.exists(), log)
    alert.refresh_from_db()
    assert alert.resolved_at is not None and f"pid {second.pid}" in alert.resolution
    health = viewer_client.get(reverse("health")).content.decode()
    assert f'data-pid="{first.pid}"' not in health  # replaced by the live follower on the same host
    assert 'data-state="ok"' in health.split(f'data-pid="{second.pid}"', 1)[1].split("</tr>", 1)[0]

    second.send_signal(signal.SIGTERM)  # a clean stop is down at once, without waiting for the silence
    second.wait(timeout=30)
    assert not heartbeats.live_followers().holds(sub.pk)
    assert ProcessHeartbeat.objects.get(kind="follower", pid=second.pid).stopped_at is not None

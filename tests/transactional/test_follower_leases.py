"""Two `manage.py replfollow` processes of two host identities on one catalog share the in-sync subscriptions out by
lease (each holds some, together all, each once); one killed (SIGKILL: no clean exit, its leases left to expire) has
its subscriptions taken over by the other, which keeps applying them: every row reaches every subscriber once
(count and hash equal to the publisher's), and the lease rows end all held by the survivor."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.utils import timezone

from replication_admin.core import connections, heartbeats
from replication_admin.models import FollowLease, ProcessHeartbeat, ReplSubscriber
from tests.conftest import ROOT, catalog_env
from tests.transactional.test_replfollow_processes import followed_publication

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

STALE = 6  # REPLADMIN_HEARTBEAT_STALE_SECONDS: how long a heartbeat, and so a follower's lease, lasts unrenewed
SUBSCRIBERS = 4


def wait_for(what: str, check: Callable[[], object], log: Path) -> object:
    """Poll `check` until it answers something true; a generous guard against hanging, not a timing assertion."""
    deadline = time.monotonic() + 180
    while not (answer := check()):
        assert time.monotonic() < deadline, f"{what} never happened\n" + log.read_text()
        time.sleep(0.2)
    return answer


def content(server) -> tuple[int, str]:
    """The row count and a hash of the rows of `items`, in key order."""
    with connections.connect(server) as conn:
        rows = conn.cursor().execute("SELECT id, name FROM items ORDER BY id").fetchall()
    return len(rows), hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()


def insert(pub, first: int, last: int) -> None:
    with connections.connect(pub) as conn:
        for n in range(first, last + 1):
            conn.cursor().execute("INSERT INTO items VALUES (?, ?)", n, f"live {n}")


def holders() -> dict[str, set[int]]:
    """Who holds which subscription's unexpired lease."""
    held: dict[str, set[int]] = {}
    for sub, holder in FollowLease.objects.filter(expires_at__gt=timezone.now()).values_list(
        "subscription_id", "holder"
    ):
        held.setdefault(holder, set()).add(sub)
    return held


def test_two_followers_share_the_subscriptions_by_lease_and_the_survivor_of_a_kill_takes_over_the_others(
    transactional_db, make_server, jobs_sync, spark, settings, tmp_path
):
    settings.HEARTBEAT_STALE_SECONDS = STALE
    pub, subscribers = followed_publication(make_server, "lpub", [f"lsub{n}" for n in range(SUBSCRIBERS)])
    subs = {s.pk for s in ReplSubscriber.objects.filter(server="lpub")}
    assert len(subs) == SUBSCRIBERS and not FollowLease.objects.exists()

    log = tmp_path / "replfollow.log"
    base = {**os.environ, **catalog_env(str(settings.DATABASES["default"]["NAME"])),
            "REPLADMIN_HEARTBEAT_STALE_SECONDS": str(STALE)}  # fmt: skip
    followers: dict[str, subprocess.Popen] = {}
    for host in ("lease-host-a", "lease-host-b"):  # two hosts as far as the catalog can tell
        with open(log, "ab") as out:
            followers[host] = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "replfollow", "--interval", "0.05"],
                cwd=ROOT, env={**base, "REPLADMIN_HOST": host}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
    try:
        # Each holds a fair share (ceil(4 / 2) = 2), together all, each subscription once.
        def split() -> dict[str, set[int]] | None:
            held = holders()
            by_host = {h.split("/")[0]: s for h, s in held.items()}
            if set(by_host) == set(followers) and all(len(s) == 2 for s in by_host.values()):
                return by_host
            return None

        shares = wait_for("the subscriptions split between the followers", split, log)
        assert isinstance(shares, dict)
        assert shares["lease-host-a"] | shares["lease-host-b"] == subs
        assert shares["lease-host-a"].isdisjoint(shares["lease-host-b"])
        # Their heartbeats say which subscriptions each serves (the Health page's "holds").
        wait_for("the heartbeats listing the shares", lambda: {
            b.host: set(b.details.get("subscriptions", [])) for b in heartbeats.live_followers().rows
        } == shares, log)  # fmt: skip

        insert(pub, 11, 40)
        wait_for("every subscriber at 40 rows", lambda: all(content(s)[0] == 40 for s in subscribers), log)

        victim = followers["lease-host-a"]
        os.killpg(victim.pid, signal.SIGKILL)  # no clean exit: its leases stay until they expire
        victim.wait()
        killed_at = time.monotonic()
        insert(pub, 41, 80)  # committed while its subscriptions have no follower
        survivor = wait_for("the survivor holding every lease", lambda: (
            (held := holders()) and len(held) == 1 and next(iter(held.values())) == subs and next(iter(held))
        ), log)  # fmt: skip
        taken_over = time.monotonic() - killed_at
        assert isinstance(survivor, str) and survivor.startswith("lease-host-b/")
        wait_for("every subscriber at 80 rows", lambda: all(content(s)[0] == 80 for s in subscribers), log)
        print(f"\nfollower killed -> its subscriptions held by the other: {taken_over:.1f} s (leases last {STALE} s)")

        # Every row once on every subscriber: the same count and hash as the publisher's.
        expected = content(pub)
        assert expected[0] == 80
        assert [content(s) for s in subscribers] == [expected] * SUBSCRIBERS
        for sub in ReplSubscriber.objects.filter(pk__in=subs):
            assert sub.state == ReplSubscriber.IN_SYNC, sub.last_error
        beat = ProcessHeartbeat.objects.get(kind="follower", host="lease-host-b", pid=followers["lease-host-b"].pid)
        wait_for("the survivor's heartbeat listing them all", lambda: set(
            ProcessHeartbeat.objects.get(pk=beat.pk).details.get("subscriptions", [])) == subs, log)  # fmt: skip
        assert heartbeats.live_followers().holds(min(subs)) and all(heartbeats.live_followers().holds(s) for s in subs)

        followers["lease-host-b"].send_signal(signal.SIGTERM)
        followers["lease-host-b"].wait(timeout=60)
        assert not FollowLease.objects.filter(holder=survivor).exists()  # a clean stop gives its leases back
    finally:
        for proc in followers.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

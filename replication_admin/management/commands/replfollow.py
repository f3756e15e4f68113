"""manage.py replfollow: keep in-sync subscriptions in sync (transactions arrive within a second).

Each subscription is applied on its own, up to REPLADMIN_FOLLOW_THREADS at once: a subscriber that stops answering
holds only its own subscription while the others go on (transactional/sync.py, FollowSteps).

The follower reacts to commits rather than to a clock (transactional/wake.py): a PostgreSQL publisher with trigger
capture notifies its listening session, an open WAL stream brings the changes themselves; --interval is the poll of
the publications that cannot wake it (MariaDB, SQLite, a lost listener) and backs off while nothing arrives.

Followers split the in-sync subscriptions between them by lease (core/follow_leases.py): each holds leases on a fair
share of them, ceil(subscriptions / live followers), renewed with its heartbeat, and follows only those. Start one on
each of several hosts (or --processes N on one): they share the subscriptions out, one that joins gets its share
within a few seconds, and the subscriptions of one that dies are taken over once its leases have expired
(REPLADMIN_HEARTBEAT_STALE_SECONDS, plus one renewal; at once when it ran on the same host and its pid is gone). A
follower still takes each subscription's item lock for every apply, as a sync job does (a sync job or another
follower holding it makes it leave that subscription alone that round): nothing is applied twice at once.

With --processes N the command supervises N follower processes on this host, each sharing by lease as followers on
other hosts do. A follower process that ends unexpectedly is started again; a follower whose supervisor is gone
stops by itself. One SIGTERM (or SIGINT) to the command stops every follower within seconds.

Each follower renews its heartbeat (REPL_PROCESS, core/heartbeats.py) every few seconds with the subscriptions it
holds; while none holds an in-sync subscription, that subscription reads "follower down" and is alerted. A clean
stop records the end and gives its leases back at once (a step stuck on a silent subscriber is not waited for more
than a few seconds: it ends with the process, its uncommitted transaction rolled back); a killed follower is down
once its heartbeat is older than REPLADMIN_HEARTBEAT_STALE_SECONDS, when its leases expire too.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import os
import re
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from replication_admin.transactional.sync import follow_loop

# Seconds the followers get after SIGTERM before they are killed; a start again after an unexpected end waits this.
STOP_GRACE = 8.0
RESTART_PAUSE = 1.0
# glibc's mallopt parameters: the follower's threads share two malloc arenas, and blocks of 128 KiB or more (a
# window's JSON, a stream's batch of images) are always mapped and given back when freed (glibc's starting threshold,
# kept instead of raised).
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8
MMAP_THRESHOLD = 128 * 1024


def bound_malloc() -> None:
    """Keep a long-running follower's resident size near what it holds. By default glibc gives each thread an arena of
    its own and raises its mapping threshold to the largest block freed so far, so the large short-lived blocks of
    windows applied one after another are carved out of the arenas and fragment them: the resident size then grows
    with the work done rather than with what is held (a 1,000,000-row backlog measured 291 MB at its peak by default,
    262 MB with these settings). Nothing happens on another C library."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_ARENA_MAX, 2)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


class Command(BaseCommand):
    help = (
        "Serve every transactional subscription in the IN SYNC state: woken by its publisher's notification or "
        "WAL stream (else looking every --interval seconds), apply new transactions at once; cut a subscriber "
        "whose backlog grows over the publication's threshold (it re-syncs with REPL_SYNC / SYNC_REPL). Each "
        "subscription is applied on its own thread (REPLADMIN_FOLLOW_THREADS at once), so a silent subscriber "
        "holds only itself. Followers on several hosts (or --processes N here) share the subscriptions out by lease."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--interval", type=float, default=0.1,
            help="seconds between two looks at publications that cannot wake the follower (default 0.1)",
        )  # fmt: skip
        parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: until SIGTERM)")
        parser.add_argument(
            "--processes", type=int, default=1, help="follower processes on this host, sharing the subscriptions "
            "out by lease with each other and with followers on other hosts (default 1)",
        )  # fmt: skip
        parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # "I/N": follower I of --processes N
        parser.add_argument("--supervisor", type=int, default=0, help=argparse.SUPPRESS)  # its pid

    def handle(self, *args, **opts):
        stopping = {"now": False}

        def stop_signal(*_):
            stopping["now"] = True

        signal.signal(signal.SIGTERM, stop_signal)
        signal.signal(signal.SIGINT, stop_signal)
        deadline = time.monotonic() + opts["seconds"] if opts["seconds"] else None
        # A follower of --processes stops when its supervisor is gone (killed without passing a signal on).
        supervisor = opts["supervisor"] or None

        def stop() -> bool:
            if supervisor is not None and os.getppid() != supervisor:
                return True
            return stopping["now"] or (deadline is not None and time.monotonic() >= deadline)

        if opts["processes"] < 1:
            raise CommandError("--processes must be at least 1")
        if opts["processes"] > 1 and not opts["child"]:
            self._supervise(opts["processes"], opts, stop)
            return
        child = self._child(opts["child"]) if opts["child"] else None
        bound_malloc()
        # One follower of --processes reaps (and watches the heartbeats) for this host; followers on other hosts too.
        applied = follow_loop(stop, interval=opts["interval"], reaps=child is None or child[0] == 0)
        label = f"follower {child[0]}/{child[1]}: " if child else ""
        self.stdout.write(f"{label}applied {applied} transaction(s)")

    @staticmethod
    def _child(text: str) -> tuple[int, int]:
        found = re.fullmatch(r"(\d+)/(\d+)", text)
        if not found or not 0 <= int(found.group(1)) < int(found.group(2)):
            raise CommandError(f"--child must be I/N with 0 <= I < N, got {text!r}")
        return int(found.group(1)), int(found.group(2))

    def _supervise(self, count: int, opts, stop) -> None:
        def start(index: int) -> subprocess.Popen:
            argv = [sys.executable, str(settings.BASE_DIR / "manage.py"), "replfollow", "--child", f"{index}/{count}",
                    "--interval", str(opts["interval"]), "--supervisor", str(os.getpid())]  # fmt: skip
            return subprocess.Popen(argv, cwd=settings.BASE_DIR)

        children = {index: start(index) for index in range(count)}
        self.stdout.write(f"following in {count} processes: {', '.join(str(p.pid) for p in children.values())}")
        while not stop():
            for index, proc in list(children.items()):
                if proc.poll() is not None and not stop():
                    self.stderr.write(f"follower {index}/{count} (pid {proc.pid}) ended with {proc.returncode}")
                    time.sleep(RESTART_PAUSE)
                    children[index] = start(index)
            time.sleep(0.2)
        for proc in children.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        ends = time.monotonic() + STOP_GRACE
        for proc in children.values():
            try:
                proc.wait(timeout=max(0.1, ends - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.stdout.write(f"stopped {count} follower processes")

"""manage.py replfollow: keep in-sync subscriptions in sync (transactions arrive within a second)."""

from __future__ import annotations

import signal
import time

from django.core.management.base import BaseCommand

from replication_admin.transactional.sync import follow_loop


class Command(BaseCommand):
    help = (
        "Serve every transactional subscription in the IN SYNC state: look at its publisher every "
        "--interval seconds and apply new transactions at once; cut a subscriber whose backlog grows over "
        "the publication's threshold (it re-syncs with REPL_SYNC / SYNC_REPL)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=0.1, help="seconds between two looks (default 0.1)")
        parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: until SIGTERM)")

    def handle(self, *args, **opts):
        stopping = {"now": False}

        def stop_signal(*_):
            stopping["now"] = True

        signal.signal(signal.SIGTERM, stop_signal)
        signal.signal(signal.SIGINT, stop_signal)
        deadline = time.monotonic() + opts["seconds"] if opts["seconds"] else None

        def stop() -> bool:
            return stopping["now"] or (deadline is not None and time.monotonic() >= deadline)

        applied = follow_loop(stop, interval=opts["interval"])
        self.stdout.write(f"applied {applied} transaction(s)")

"""What wakes the in-sync follower between rounds: a notification from a publisher whose capture triggers notify
(PostgreSQL: LISTEN on a psycopg connection of its own per publisher, pyodbc cannot listen), the socket of a WAL
publication's open stream (WalStream), or a step that ended. Without any of them (MariaDB, SQLite, a publication
logged before its triggers notified, a lost listener connection), the follower polls as before.

The promise a notification keeps, and its price: a follower about to wait takes each publication's wake lock
(engine.dialects.postgresql) and then looks for news once more; a transaction that logs into the publication
while the follower holds it notifies at commit. A transaction under way when the follower tried the lock makes the
try fail: that publication is polled this round. NOTIFY serialises notifying commits, so only transactions that
find a follower waiting idle pay for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from dataclasses import dataclass, field

import psycopg

from replication_admin.core import connections
from replication_admin.engine import transactional_sql as sql
from replication_admin.models import Server
from replication_admin.transactional.lookups import _d, schema_of

log = logging.getLogger(__name__)

# A listener connection that failed (the server away, the session terminated) is opened again after this long.
RELISTEN_SECONDS = 1.0
LISTEN_APPLICATION = "repladmin follower listener"


def _tx_table(server: Server, account: str) -> str:
    d = _d(server)
    return d.qualify(sql.log_names(d, account).tx, schema_of(server))


@dataclass
class _Listener:
    """One publisher's listening session: the channels it listens on, and those whose triggers notify."""

    conn: psycopg.Connection
    channels: dict[str, str] = field(default_factory=dict)  # account -> channel
    notifying: set[str] = field(default_factory=set)  # accounts whose every capture trigger notifies


@dataclass
class WakeCounts:
    """How the follower's waits ended (in its heartbeat: a test, or a person, can tell a notified round from a
    polled one)."""

    notified: int = 0  # waits ended by a publisher's notification
    streamed: int = 0  # waits ended by WAL arriving on an open stream
    stepped: int = 0  # waits ended by a step that ended
    timer: int = 0  # waits that ran out (the poll)
    news_after_notify: int = 0  # rounds that found news right after a notification woke the follower
    news_after_timer: int = 0  # rounds that found news after a wait that ran out
    listens: int = 0  # listener sessions opened (more than one per publisher: a session lost and opened again)
    lost: int = 0  # listener sessions lost


class Wakeups:
    """The follower's listeners (one per PostgreSQL publisher of a followed trigger-capture publication), the pipe a
    step that ends writes to, and the wait between rounds."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.read_end, False)
        os.set_blocking(self.write_end, False)
        # A step's thread may end after the follower closed the pipe; by then the kernel may have given the pipe's
        # descriptor numbers to another file (a catalog's SQLite file, say), and a blind write would land in it.
        # Ringing and closing take this lock, and nothing is written once the pipe is closed.
        self._pipe_lock = threading.Lock()
        self._pipe_closed = False
        self.listeners: dict[str, _Listener] = {}
        self.failed: dict[str, float] = {}  # server -> when its listener last failed
        self.armed: set[tuple[str, str]] = set()  # publications whose wake lock this follower holds now
        # Publications whose wake lock a writer held when the follower tried it: that writer commits without
        # notifying, so the follower looks again soon instead of waiting.
        self.writing: set[tuple[str, str]] = set()
        self.unlock_sql: dict[str, str] = {}  # server -> its dialect's statement that gives the wake locks back
        self.counts = WakeCounts()
        self.notified: set[tuple[str, str]] = set()  # publications that notified since take_notified()
        self.last_wake = "timer"

    # --- a step that ended --------------------------------------------------------------------------------
    def ring(self) -> None:
        """Called from a step's thread when it ends. A ring after close() writes nothing (see __init__)."""
        with self._pipe_lock:
            if self._pipe_closed:
                return
            # A full pipe already holds a wake-up: nothing is lost by not writing another.
            with contextlib.suppress(BlockingIOError):
                os.write(self.write_end, b"x")

    # --- before looking for news ----------------------------------------------------------------------------
    def arm(self, publications: set[tuple[str, str]], servers: dict[str, Server]) -> set[tuple[str, str]]:
        """Listen to each publication's publisher (trigger capture; `publications` as (server, account)) and take
        its wake lock; returns those that will notify every commit from now on (armed, and their triggers
        notify). Call before looking for news: a commit after this is notified, one before it is seen. A lock
        still held from the last round (no step handed out since) is kept: nothing committed meanwhile went
        without a notification."""
        self.writing.clear()
        wanted: dict[str, set[str]] = {}
        for name, account in publications:
            wanted.setdefault(name, set()).add(account)
        for name in [n for n in self.listeners if n not in wanted]:
            self._drop(name, lost=False)
        if self.armed - set(publications):  # a publication no longer followed: its lock goes back
            self.disarm()
        covered: set[tuple[str, str]] = set()
        for name, accounts in wanted.items():
            server = servers.get(name)
            if server is None or not _d(server).wakes_followers:
                continue
            listener = self.listeners.get(name)
            if listener is None and time.monotonic() - self.failed.get(name, -RELISTEN_SECONDS) < RELISTEN_SECONDS:
                continue
            try:
                if listener is None:
                    listener = self.listeners[name] = _Listener(self._open(server))
                    self.unlock_sql[name] = _d(server).wake_unlock_sql()
                    self.counts.listens += 1
                self._listen(server, listener, accounts)
                for account in accounts:
                    if (name, account) in self.armed and account in listener.notifying:
                        covered.add((name, account))
                order = sorted(a for a in accounts if (name, a) not in self.armed)
                if not order:
                    continue
                tables = [_tx_table(server, a) for a in order]
                got = listener.conn.execute(_d(server).wake_lock_sql(tables)).fetchone()
                for account, held in zip(order, got or (), strict=False):
                    if held:
                        self.armed.add((name, account))
                        if account in listener.notifying:
                            covered.add((name, account))
                    elif account in listener.notifying:
                        self.writing.add((name, account))
            except Exception as exc:
                log.info(
                    "listening to %s: %s; polling it meanwhile", name, str(exc).splitlines()[0] if str(exc) else exc
                )
                self._drop(name, lost=True)
        return covered

    def _open(self, server: Server) -> psycopg.Connection:
        address = connections.address_for(server)
        return psycopg.connect(
            host=address.host, port=address.port or 5432, dbname=address.database, user=address.user,
            password=address.password or None, autocommit=True, connect_timeout=address.connect_timeout,
            application_name=LISTEN_APPLICATION, keepalives=1, keepalives_idle=10, keepalives_interval=5,
            keepalives_count=3,
        )  # fmt: skip

    def _listen(self, server: Server, listener: _Listener, accounts: set[str]) -> None:
        d = _d(server)
        for account in sorted(accounts - set(listener.channels)):
            tx = _tx_table(server, account)
            channel = d.wake_channel(tx)
            listener.conn.execute(d.listen_sql(channel))
            listener.channels[account] = channel
            # Every capture trigger of the publication notifies (a log made before they did: not all of them).
            query, params = d.notifying_sql(channel, d.qualify(sql.log_names(d, account).log, schema_of(server)))
            row = listener.conn.execute(query, params).fetchone()
            if row and row[0]:
                listener.notifying.add(account)

    def disarm(self) -> None:
        """Give back the wake locks (after a wait): writers stop notifying while this follower is busy."""
        for name in sorted({n for n, _ in self.armed}):
            listener = self.listeners.get(name)
            if listener is None:
                continue
            try:
                listener.conn.execute(self.unlock_sql[name])
            except Exception:
                self._drop(name, lost=True)
        self.armed.clear()

    def _drop(self, name: str, lost: bool) -> None:
        listener = self.listeners.pop(name, None)
        if listener is not None:
            with contextlib.suppress(Exception):
                listener.conn.close()
        if lost:
            self.counts.lost += 1
            self.failed[name] = time.monotonic()
        self.armed = {k for k in self.armed if k[0] != name}

    # --- the wait -------------------------------------------------------------------------------------------
    def wait(self, timeout: float, streams: list[int]) -> str:
        """Wait up to `timeout` seconds for a notification, data on one of the `streams` sockets or a step's end;
        returns what ended the wait ("notified", "streamed", "stepped" or "timer")."""
        listening = {listener.conn.fileno(): name for name, listener in self.listeners.items()}
        # Notifications that came in with a statement's answer (the wake lock's) are read already: no wait then.
        if self._drain(list(listening.items())):
            timeout = 0.0
        try:
            ready, _, _ = select.select([self.read_end, *listening, *streams], [], [], max(0.0, timeout))
        except (OSError, ValueError):  # a socket closed under us: look again at once
            ready = []
            timeout = 0.0
        woke = "timer"
        if self.read_end in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self.read_end, 4096)
            woke = "stepped"
        if any(fd in ready for fd in streams):
            woke = "streamed"
        if self._drain([(fd, name) for fd, name in listening.items() if fd in ready or not timeout]):
            woke = "notified"
        setattr(self.counts, woke, getattr(self.counts, woke) + 1)
        self.last_wake = woke
        return woke

    def _drain(self, listening: list[tuple[int, str]]) -> bool:
        """Read the notifications waiting on these listeners; True when there was one. A listener whose session
        ended is dropped (opened again after RELISTEN_SECONDS)."""
        notified = False
        for _fd, name in listening:
            listener = self.listeners.get(name)
            if listener is None:
                continue
            try:
                channels = {n.channel for n in listener.conn.notifies(timeout=0)}
                if channels:
                    notified = True
                    self.notified |= {(name, a) for a, c in listener.channels.items() if c in channels}
                elif listener.conn.closed or listener.conn.pgconn.status != psycopg.pq.ConnStatus.OK:
                    raise psycopg.OperationalError("the listener's session ended")
            except Exception as exc:
                log.info("the listener of %s was lost (%s); polling it meanwhile", name, exc)
                self._drop(name, lost=True)
        return notified

    def take_notified(self) -> set[tuple[str, str]]:
        """The publications that notified since the last call: each committed something after the follower armed
        its wake lock, so its subscriptions have news without a probe."""
        notified, self.notified = self.notified, set()
        return notified

    def found_news(self, news: bool) -> None:
        """Count a round that handed out steps by what woke it."""
        if news and self.last_wake == "notified":
            self.counts.news_after_notify += 1
        elif news and self.last_wake == "timer":
            self.counts.news_after_timer += 1

    def close(self) -> None:
        for name in list(self.listeners):
            self._drop(name, lost=False)
        with self._pipe_lock:
            if self._pipe_closed:
                return
            self._pipe_closed = True
            for fd in (self.read_end, self.write_end):
                os.close(fd)

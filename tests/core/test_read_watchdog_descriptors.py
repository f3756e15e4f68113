"""The read watchdog (core/connections.py) looks at sockets by descriptor number; by the time it looks, the driver may
have closed a watched socket and the kernel given the number to a SQLite file. Closing any descriptor of that file —
a duplicate too — would drop every POSIX lock this process holds on it, the locks SQLite keeps its writers apart
with, and two processes would then write the catalog at once (the "file is not a database" seen after a follower
stopped with a step stuck). These tests give a watched socket's number to a SQLite file whose write lock this
process holds, run the watchdog, and ask another process for the lock."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys

import pytest

from replication_admin.core import connections

TRY_TO_WRITE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    db.execute("BEGIN IMMEDIATE")
except sqlite3.OperationalError as exc:
    print(exc)
else:
    print("got the write lock")
"""


@pytest.fixture
def watched_number(tmp_path):
    """A watched socket's number, now a descriptor of a SQLite file this process holds the write lock of."""
    path = tmp_path / "catalog.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE t (x integer)")
    a, b = socket.socketpair()
    inode = f"socket:[{os.fstat(a.fileno()).st_ino}]"
    number = a.fileno()
    saved = dict(connections._watched)
    connections._watched[inode] = connections._Watched(number, "test server", 1)
    a.detach()
    os.close(number)  # the driver closed its socket ...
    reused = os.open(path, os.O_RDWR)
    if reused != number:  # ... and the kernel gave the number to the catalog's file
        os.dup2(reused, number)
        os.close(reused)  # before the lock is taken: closing a descriptor of the file would drop it
    db.execute("BEGIN IMMEDIATE")  # this process's RESERVED lock: a POSIX lock on the file
    db.execute("INSERT INTO t VALUES (1)")
    try:
        yield path, number, inode
    finally:
        os.close(number)
        b.close()
        db.rollback()
        db.close()
        connections._watched.clear()
        connections._watched.update(saved)


def other_process_writes(path) -> str:
    return subprocess.run([sys.executable, "-c", TRY_TO_WRITE, str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def test_the_file_is_locked_for_other_writers_before_the_watchdog_looks(watched_number):
    path, _number, _inode = watched_number
    assert other_process_writes(path) == "database is locked"


def test_a_watchdog_round_over_a_reused_number_keeps_this_processs_locks(watched_number):
    path, number, inode = watched_number
    connections.check_stalled()
    assert inode not in connections._watched  # the socket is gone: no longer watched
    os.fstat(number)  # the file's descriptor is still open
    assert other_process_writes(path) == "database is locked"


def test_reading_a_reused_numbers_peer_neither_closes_it_nor_drops_the_lock(watched_number):
    path, number, inode = watched_number
    assert connections._with_socket(number, inode, connections._peer_port) is None
    os.fstat(number)
    assert other_process_writes(path) == "database is locked"


def test_a_live_socket_is_still_read_and_left_open():
    a, b = socket.socket(), socket.socket()
    b.bind(("127.0.0.1", 0))
    b.listen(1)
    a.connect(b.getsockname())
    try:
        inode = f"socket:[{os.fstat(a.fileno()).st_ino}]"
        assert connections._with_socket(a.fileno(), inode, connections._peer_port) == b.getsockname()[1]
        assert a.getpeername()[1] == b.getsockname()[1]  # still open and connected
    finally:
        a.close()
        b.close()

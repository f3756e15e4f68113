"""The follower's wake-up pipe: a step that ends after the follower stopped must write into no other file.

A step stuck on a subscriber that does not answer can end long after the follower closed its pipe; by then the
kernel hands the pipe's descriptor numbers to the next file opened (a catalog's SQLite file, in the case that
corrupted a catalog's header). These tests give the closed pipe's number to a file and ring.
"""

from __future__ import annotations

import os
import threading

from replication_admin.transactional.wake import Wakeups

HEADER = b"SQLite format 3\x00" + bytes(84)


def test_a_ring_after_the_pipe_closed_leaves_the_file_that_took_its_number_unchanged(tmp_path):
    wake = Wakeups()
    write_end = wake.write_end
    wake.close()
    path = tmp_path / "catalog.sqlite3"
    path.write_bytes(HEADER)
    fd = os.open(path, os.O_RDWR)
    try:
        os.dup2(fd, write_end)  # the file now answers to the pipe's old number, as the kernel may arrange
        wake.ring()
    finally:
        os.close(write_end)
        os.close(fd)
    assert path.read_bytes() == HEADER


def test_a_ring_before_the_pipe_closed_ends_the_wait_as_a_step(tmp_path):
    wake = Wakeups()
    try:
        wake.ring()
        assert wake.wait(5.0, []) == "stepped"
        assert wake.counts.stepped == 1
        # The ring was read: the next wait runs out.
        assert wake.wait(0.0, []) == "timer"
    finally:
        wake.close()


def test_closing_twice_and_rings_racing_the_close_write_nothing_stray(tmp_path):
    wake = Wakeups()
    write_end = wake.write_end
    rings = [threading.Thread(target=wake.ring) for _ in range(50)]
    for thread in rings:
        thread.start()
    wake.close()
    for thread in rings:
        thread.join()
    path = tmp_path / "after.bin"
    path.write_bytes(HEADER)
    fd = os.open(path, os.O_RDWR)
    try:
        os.dup2(fd, write_end)
        wake.close()  # a second close must not close the file that now has the pipe's number
        os.fstat(write_end)
        for _ in range(10):
            wake.ring()
    finally:
        os.close(write_end)
        os.close(fd)
    assert path.read_bytes() == HEADER

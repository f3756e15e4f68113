"""Bi-directional syncs run back to back while applications keep writing on every node: a PostgreSQL
publisher, MariaDB and SQLite subscribers, each with a writer doing ~20 changes a second on the same keys.

Every writer records, in the transaction of each change, the version it replaced and the version it made
(ROWGUIDs), and names its rows `<side>#<seq>`. Afterwards every version a writer made is either the current
row, replaced by a later local change, or kept in the conflict inbox; the inbox holds each losing version
once and none that is still a current row. Nodes are compared by content (every column of every row)."""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal

import pyodbc
import pytest

from replication_admin.bidir import sync as bidir_sync
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.models import ConflictBackup, JobRun
from replication_admin.statements import execute
from tests.bidir.test_bidir_sync import COLUMNS, assert_same_rows, rows, run
from tests.conftest import MY, PG
from tests.tables import create_table, fetch_all, insert_rows
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

# How long the writers write while syncs run back to back (REPLADMIN_STEADY_SECONDS for a longer bench).
DURATION = float(os.environ.get("REPLADMIN_STEADY_SECONDS", "60"))
RATE = 20  # changes per second per writer
KEYS = 60  # keys 1..KEYS, shared by every writer (overlapping); the table starts with the first 40
# Syncs that run while the writers write, however long each takes on a busy machine (the duration is a floor).
SYNCS_UNDER_WRITES = 3
SYNC = "REPL_UPDATE_SNAPSHOT ('pg1.items', 2)"
# The outcomes of the last run's syncs under writes, with how long each took (read by the bench).
UNDER_WRITES: list[tuple[float, object]] = []


@dataclass
class Writer:
    """One application writing on one node: updates mostly, some inserts and deletes, on shared keys."""

    side: str
    dialect: str
    database: str
    seed: int
    made: set[str] = field(default_factory=set)  # ROWGUIDs of the versions it made
    replaced: set[str] = field(default_factory=set)  # ROWGUIDs of the versions its changes replaced
    changes: int = 0
    refused: int = 0  # transactions the database refused (lock waits, deadlocks, busy): rolled back
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def connect(self):
        if self.dialect == "sqlite":
            conn = sqlite3.connect(self.database, timeout=30, isolation_level=None)
            return conn
        if self.dialect == "postgresql":
            text = (
                f"DRIVER={{PostgreSQL Unicode}};SERVER={PG['host']};PORT={PG['port']};DATABASE={self.database};"
                f"UID={PG['user']};PWD={PG['password']};"
            )
        else:
            text = (
                f"DRIVER={{MariaDB Unicode}};SERVER={MY['host']};PORT={MY['port']};DATABASE={self.database};"
                f"UID={MY['user']};PWD={MY['password']};"
            )
        return pyodbc.connect(text, autocommit=False, timeout=10)

    def sql(self, text: str) -> str:
        return text.replace('"', dialects.get(self.dialect).quote_char)

    keys = KEYS  # it changes keys 1..keys

    def one_change(self, conn, rng: random.Random) -> None:
        """One transaction: lock the key's row, change it (write), record the version replaced and made."""
        lite = self.dialect == "sqlite"
        cursor = conn.cursor()
        if lite:
            cursor.execute("BEGIN IMMEDIATE")
        key = rng.randint(1, self.keys)
        lock = "" if lite else " FOR UPDATE"
        found = cursor.execute(self.sql(f'SELECT "ROWGUID" FROM "items" WHERE id = ?{lock}'), [key]).fetchone()
        self.write(cursor, key, found is not None, rng)
        made = cursor.execute(self.sql('SELECT "ROWGUID" FROM "items" WHERE id = ?'), [key]).fetchone()
        conn.commit()
        if found is not None:
            self.replaced.add(found[0])
        if made is not None:
            self.made.add(made[0])
        self.changes += 1

    def write(self, cursor, key: int, exists: bool, rng: random.Random) -> None:
        name = f"{self.side}#{self.changes}"
        if not exists:
            cursor.execute(
                self.sql('INSERT INTO "items" (id, name, price) VALUES (?, ?, ?)'), [key, name, rng.randint(1, 999)]
            )
        elif rng.random() < 0.85:
            cursor.execute(
                self.sql('UPDATE "items" SET name = ?, price = ? WHERE id = ?'), [name, rng.randint(1, 999), key]
            )
        else:
            cursor.execute(self.sql('DELETE FROM "items" WHERE id = ?'), [key])

    def run(self) -> None:
        rng = random.Random(self.seed)
        conn = self.connect()
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    self.one_change(conn, rng)
                except (pyodbc.Error, sqlite3.Error):
                    self.refused += 1
                    try:
                        conn.rollback()
                    except (pyodbc.Error, sqlite3.Error):
                        conn.close()
                        conn = self.connect()
                self.stop.wait(max(0.0, 1 / RATE - (time.monotonic() - started)))
        finally:
            conn.close()

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"writer-{self.side}", daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), f"the {self.side} writer did not stop"


@pytest.fixture
def nodes(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pg1")
    sub_my = make_server("mysql", "my2")
    sub_lite = make_server("sqlite", "lite3")
    create_table(pub, "items", COLUMNS, ["id"])
    insert_rows(pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i)) for i in range(1, 41)])
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('my2', 'pg1.items', 2);"
        "REPL_INIT_SNAPSHOT ('my2', 'pg1.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('lite3', 'pg1.items', 2);"
        "REPL_INIT_SNAPSHOT ('lite3', 'pg1.items', 2)"
    )
    return pub, sub_my, sub_lite


def sync_outcome():
    return execute(Actor.command(), SYNC, wait=True)[-1]


def syncs_under_writes(writers: list[Writer], seconds: float) -> list:
    """Syncs back to back while the writers write, for `seconds` and at least SYNCS_UNDER_WRITES of them; each
    sync's outcome with how long it took goes into UNDER_WRITES too."""
    outcomes = []
    UNDER_WRITES.clear()
    for writer in writers:
        writer.start()
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline or len(outcomes) < SYNCS_UNDER_WRITES:
            started = time.monotonic()
            outcomes.append(sync_outcome())
            UNDER_WRITES.append((time.monotonic() - started, outcomes[-1]))
    finally:
        for writer in writers:
            writer.finish()
    return outcomes


def versions(server) -> set[str]:
    return {v[2] for v in rows(server).values()}


def assert_no_version_lost(writers: list[Writer], backups: list[ConflictBackup], current: set[str]) -> None:
    """Every version a writer made is a current row, replaced by a later change on its node, or kept in the
    inbox (the change, or a row version a backup holds)."""
    kept = {b.change_guid for b in backups}
    for b in backups:
        kept.update(v["ROWGUID"] for v in (b.publisher_row, b.incoming_row, b.losing_row) if v and v.get("ROWGUID"))
    made = set().union(*(w.made for w in writers))
    replaced = set().union(*(w.replaced for w in writers))
    lost = made - current - replaced - kept
    assert not lost, f"{len(lost)} version(s) vanished without a conflict backup: {sorted(lost)[:5]}"


def loser_id(backup: ConflictBackup) -> str:
    """The losing version: its ROWGUID, or for a losing delete (no row) the change that deleted."""
    loser = backup.losing_row or {}
    return loser.get("ROWGUID") or backup.change_guid


def test_every_sync_succeeds_under_steady_writes_on_every_node_and_no_version_is_lost(nodes):
    pub, sub_my, sub_lite = nodes
    writers = [
        Writer("pub", "postgresql", pub.database, 1),
        Writer("my", "mysql", sub_my.database, 2),
        Writer("lite", "sqlite", sub_lite.database, 3),
    ]
    outcomes = syncs_under_writes(writers, DURATION)
    failed = [o.message for o in outcomes if not o.ok]
    left = sum(v.get("left_for_next_sync", 0) for o in outcomes if o.ok for v in o.details["subscribers"].values())
    print(
        f"\n{len(outcomes)} syncs under writes, {len(failed)} failed; changes written: "
        + ", ".join(f"{w.side} {w.changes} ({w.refused} refused)" for w in writers)
        + f"; changes left for a later sync: {left}; conflicts: {ConflictBackup.objects.count()}"
    )
    assert not failed, failed
    moved = sum(v["pulled"] + v.get("pushed", 0) for o in outcomes for v in o.details["subscribers"].values())
    assert moved > 0, "the syncs under writes moved no change"
    assert all(w.changes >= RATE * DURATION / 4 for w in writers), [(w.side, w.changes) for w in writers]

    # The writers stopped: a final sync or two and every node holds the same rows.
    for _ in range(3):
        summary = sync_outcome()
        assert summary.ok, summary.message
        if all(v["pulled"] == 0 and v.get("pushed", 0) == 0 for v in summary.details["subscribers"].values()):
            break
    assert_same_rows(pub, sub_my, sub_lite)
    final = versions(pub)

    # The inbox: only applied decisions, each losing version once, none still a current row.
    backups = list(ConflictBackup.with_pending.all())
    assert not [b for b in backups if b.pending], "a backup of a decision that was never applied is left"
    assert len(backups) > 0, "the writers race on the same keys: there are conflicts"
    losers = [(tuple(sorted(b.primary_key.items())), loser_id(b)) for b in backups]
    assert len(losers) == len(set(losers)), "a losing version is in the inbox twice"
    assert not {loser for _, loser in losers} & final, "a backup holds a version that is still the current row"
    assert all(b.job is not None and b.job.state == JobRun.State.SUCCEEDED for b in backups)

    # No version vanished: each is current, replaced by a later local change, or kept in the inbox.
    assert_no_version_lost(writers, backups, final)


def conflicting_updates(pub, sub_my, keys) -> None:
    for key in keys:
        run_sql(pub, 'UPDATE "items" SET name = ? WHERE id = ?', [f"pub {key}", key])
        run_sql(sub_my, "UPDATE `items` SET name = ? WHERE id = ?", [f"my {key}", key])
    run_sql(sub_my, "UPDATE `items` SET name = ? WHERE id = ?", ["my only", 30])


def backup_keys() -> list[int]:
    return sorted(b.primary_key["id"] for b in ConflictBackup.objects.all())


def test_a_sync_whose_apply_fails_after_deciding_leaves_no_backup_and_a_rerun_keeps_each_once(nodes):
    pub, sub_my, sub_lite = nodes
    conflicting_updates(pub, sub_my, range(1, 6))
    # The publisher refuses every write: the sync reads and decides, then its apply fails.
    run_sql(
        pub,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'items is read-only for now'; END $$",
    )
    run_sql(pub, 'CREATE TRIGGER "a_refuse" BEFORE INSERT OR UPDATE OR DELETE ON "items" EXECUTE FUNCTION refuse()')
    failed = sync_outcome()
    assert not failed.ok and "read-only" in failed.message
    assert ConflictBackup.objects.count() == 0  # no phantom losers in the inbox
    assert fetch_all(sub_my, "SELECT COUNT(*) FROM `RLOG_items`") == [(6,)]  # nothing was consumed

    run_sql(pub, 'DROP TRIGGER "a_refuse" ON "items"')
    assert sync_outcome().ok
    assert backup_keys() == [1, 2, 3, 4, 5]
    assert ConflictBackup.with_pending.count() == 5
    assert sync_outcome().ok and backup_keys() == [1, 2, 3, 4, 5]
    assert_same_rows(pub, sub_my, sub_lite)
    assert rows(pub)[1][0] == "pub 1" and rows(pub)[30][0] == "my only"


def test_a_sync_stopped_after_its_apply_committed_shows_the_backups_at_the_next_sync_once(nodes, monkeypatch):
    pub, sub_my, sub_lite = nodes
    conflicting_updates(pub, sub_my, range(1, 4))

    def worker_stops(*args, **kwargs):
        raise RuntimeError("the worker stopped")

    # The apply commits on the publisher, then the sync stops before it shows the backups.
    monkeypatch.setattr(bidir_sync, "_settle", worker_stops)
    assert not sync_outcome().ok
    monkeypatch.undo()
    assert ConflictBackup.objects.count() == 0 and ConflictBackup.with_pending.count() == 3
    assert rows(pub)[30][0] == "my only"  # the apply did commit

    assert sync_outcome().ok
    assert backup_keys() == [1, 2, 3] and ConflictBackup.with_pending.count() == 3
    assert sync_outcome().ok and backup_keys() == [1, 2, 3]
    assert_same_rows(pub, sub_my, sub_lite)


# --- contention: writers keep changing the same few keys on the publisher and the subscribers ----------------

HOT_KEYS = 10  # keys 1..HOT_KEYS, all present from the start, updated by every writer
CONTENDED_SECONDS = float(os.environ.get("REPLADMIN_CONTENDED_SECONDS", "30"))


class UpdatingWriter(Writer):
    """An application that only updates the same few rows, one per transaction, as fast as RATE allows."""

    keys = HOT_KEYS

    def write(self, cursor, key: int, exists: bool, rng: random.Random) -> None:
        assert exists, f"hot key {key} is missing"
        cursor.execute(
            self.sql('UPDATE "items" SET name = ?, price = ? WHERE id = ?'),
            [f"{self.side}#{self.changes}", rng.randint(1, 999), key],
        )


def rows_hash(server) -> str:
    """A hash of every column of every row, in key order."""
    return hashlib.sha256(repr(sorted(rows(server).items())).encode()).hexdigest()


def test_every_sync_applies_nine_in_ten_of_the_changes_it_read_while_writers_keep_changing_the_same_keys(nodes):
    pub, sub_my, sub_lite = nodes
    writers = [
        UpdatingWriter("pub", "postgresql", pub.database, 11),
        UpdatingWriter("my", "mysql", sub_my.database, 12),
        UpdatingWriter("lite", "sqlite", sub_lite.database, 13),
    ]
    outcomes = syncs_under_writes(writers, CONTENDED_SECONDS)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes if not o.ok]
    assert all(w.changes >= RATE * CONTENDED_SECONDS / 4 for w in writers), [(w.side, w.changes) for w in writers]

    # Each sync applied (decided and wrote, or found applied) at least 9 in 10 of the changes it read,
    # by its own counts, although the publisher's rows kept moving while it decided.
    ratios = []
    for outcome in outcomes:
        pulls = outcome.details["subscribers"].values()
        read, applied = sum(p["read"] for p in pulls), sum(p["applied"] for p in pulls)
        assert read > 0, "every sync under writes finds changes in the subscribers' logs"
        ratios.append((applied, read))
    print(f"\napplied/read per sync under writes: {ratios}")
    assert all(applied >= 0.9 * read for applied, read in ratios), ratios
    under_writes = sum(p["conflicts"] for o in outcomes for p in o.details["subscribers"].values())
    assert under_writes > 0, "the writers race on the same keys: the syncs decided conflicts"

    # The writers stopped: a final sync or two and every copy holds the same rows.
    for _ in range(3):
        final = sync_outcome()
        assert final.ok, final.message
        outcomes.append(final)
        if all(v["read"] == 0 and v.get("pushed", 0) == 0 for v in final.details["subscribers"].values()):
            break
    assert rows_hash(sub_my) == rows_hash(pub) and rows_hash(sub_lite) == rows_hash(pub)
    assert all(rows(pub)[key][0].startswith(("pub#", "my#", "lite#")) for key in range(1, HOT_KEYS + 1))

    # Each conflict was decided once: one backup per change, as many as the syncs reported, none pending.
    backups = list(ConflictBackup.with_pending.all())
    assert not [b for b in backups if b.pending]
    changes = [(b.source, b.change_guid) for b in backups]
    assert len(changes) == len(set(changes)), "a change's conflict is recorded twice"
    reported = sum(p["conflicts"] for o in outcomes for p in o.details["subscribers"].values())
    assert reported == len(backups), (reported, len(backups))
    losers = [(b.primary_key["id"], loser_id(b)) for b in backups]
    assert len(losers) == len(set(losers)), "a losing version is in the inbox twice"

    # No write was overwritten silently: every version a writer made is current, replaced by a later
    # change on its node, or kept in the inbox.
    assert_no_version_lost(writers, backups, versions(pub))

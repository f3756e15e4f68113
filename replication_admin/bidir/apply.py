"""One apply transaction of a bi-directional sync or copy on a server, re-checked under row locks, and the
sides (server, table, layout) it moves rows between."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyodbc

from replication_admin.bidir.objects import (
    BidirError,
)
from replication_admin.core import connections
from replication_admin.core.transactions import (
    is_duplicate_key,
    run_each,
    with_retries,
)
from replication_admin.engine import bidir_sql as sql
from replication_admin.engine import dialects
from replication_admin.engine.compare import read_type
from replication_admin.engine.refresh_sql import insert_rows_sql, rows_per_statement
from replication_admin.engine.schema import TableInfo
from replication_admin.models import (
    Server,
)


@dataclass(frozen=True)
class Side:
    server: Server
    d: dialects.Dialect
    table: TableInfo
    layout: sql.Layout
    read_types: dict[str, str]

    @classmethod
    def of(cls, server: Server, table: TableInfo, layout: sql.Layout) -> Side:
        d = dialects.get(server.dialect)
        try:
            own = layout.renamed(table)
        except sql.BidirError as exc:
            raise BidirError(f"{server.name}: {exc}") from None
        types = {m.alias: read_type(d, m.logical) for m in own.moved}
        return cls(server, d, table, own, types)

    def qualify(self, name: str) -> str:
        return self.d.qualify(name, self.table.schema)

    def work(self, kind: str) -> str:
        return sql.work_table(self.d, kind, self.table.name)

    def recreate(self, name: str, ddl: str) -> None:
        run_each(self.server, [f"DROP TABLE IF EXISTS {self.qualify(name)}", ddl])

    def drop(self, *names: str) -> None:
        run_each(self.server, [f"DROP TABLE IF EXISTS {self.qualify(n)}" for n in names], ignore_errors=True)


class StaleDecisions(BidirError):
    """Rows kept appearing on a server while an apply wrote them, round after round."""


@dataclass(frozen=True)
class Applied:
    measured: tuple | None  # the row of `measure`, read inside the transaction
    left: tuple[str, ...]  # change ids left for the next sync: their row moved since it was decided on
    redecided: tuple[Any, ...] = ()  # what `redecide` answered, round by round, in the committed attempt


# Decides staged changes (by change id) again on their rows' current versions, inside the apply's
# transaction (`cursor`), and restages them; what it answers is handed back in `Applied.redecided`.
Redecide = Callable[[Any, list[str]], Any]

# Rounds of "a row appeared between the re-check and the write": each round re-checks, so this only ends a
# pathological stream of inserts on exactly the keys being applied.
APPLY_ROUNDS = 8

# Rounds of deciding again, within one apply, the changes whose row moved: the first round's rows are
# locked, so a later round only sees rows that appeared (a lock cannot hold a row that is not there yet)
# and were locked by the round before; what still moved after the last round waits for the next sync.
REDECIDE_ROUNDS = 3


def run_apply(
    server: Server,
    plan: sql.ApplyPlan,
    before: Sequence[str] = (),
    measure: str | None = None,
    staging: tuple[str, str] | None = None,
    redecide: Redecide | None = None,
) -> Applied:
    """One apply transaction, under the retry policy. `measure` is run after the locks, before `before`.

    Staged changes whose row changed or appeared since their decision was made (`plan.stale`) are decided
    again by `redecide` on the rows as they are now, under the locks (the rows cannot move again before
    the write), and restaged; without it, or when rows still moved after REDECIDE_ROUNDS, they are dropped
    from the staging table (`staging`: its name and schema) inside the transaction and reported in
    `left`: the apply goes on with the others, and those stay in their log for the next sync. A row
    inserted between the re-check and the write (a duplicate key) runs the whole transaction again,
    which then finds it in the re-check."""
    d = dialects.get(server.dialect)

    def work(cursor) -> Applied:
        measured = None
        if plan.lock:
            cursor.execute(plan.lock).fetchall()
        else:
            # A single writer's lock is taken by a write, before anything is read: a transaction that read
            # first cannot take it once another writer has committed ("database is locked" at once, round
            # after round while an application keeps writing).
            cursor.execute(plan.prelude)
        if measure:
            measured = tuple(cursor.execute(measure).fetchone())
        for statement in [*before, *([plan.prelude] if plan.lock else [])]:
            cursor.execute(statement)
        left: list[str] = []
        redecided: list[Any] = []
        if plan.stale:
            assert staging is not None, "a guarded apply names its staging table"
            for round_ in range(REDECIDE_ROUNDS + 1):
                stale = [r[0] for r in cursor.execute(plan.stale).fetchall()]
                if not stale:
                    break
                if redecide is None or round_ == REDECIDE_ROUNDS:
                    left = stale
                    for start in range(0, len(left), 500):
                        chunk = left[start : start + 500]
                        cursor.execute(sql.leave_staged_sql(d, staging[0], staging[1], len(chunk)), chunk)
                    break
                redecided.append(redecide(cursor, stale))
                if plan.lock:  # rows that appeared since the first lock are locked too
                    cursor.execute(plan.lock).fetchall()
        for statement in plan.statements:
            cursor.execute(statement)
        return Applied(measured, tuple(left), tuple(redecided))

    for _ in range(APPLY_ROUNDS):
        try:
            # Lost connections and deadlocks are retried inside, for the job's bounded time.
            return with_retries(server, work)
        except pyodbc.Error as exc:
            if not is_duplicate_key(exc):
                raise
    raise StaleDecisions(f"rows kept appearing on {server.name} while they were applied ({APPLY_ROUNDS} rounds)")


def _insert_rows(server: Server, name: str, schema: str, d, columns: list[str], rows: list[list]) -> None:
    if not rows:
        return
    per = rows_per_statement(len(columns))
    with connections.connect(server, autocommit=False) as conn:
        cursor = conn.cursor()
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            statement = insert_rows_sql(d, name, schema, columns, len(chunk))
            cursor.execute(statement, [v for row in chunk for v in row])
        conn.commit()


def _fetch(server: Server, query: str) -> list:
    with connections.connect(server, readonly=True) as conn:
        return conn.cursor().execute(query).fetchall()

"""One apply transaction of a bi-directional sync or copy on a server, re-checked under row locks, and the
sides (server, table, layout) it moves rows between."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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


class StaleDecisions(RuntimeError):
    """A row changed on the publisher between reading it and applying: read and decide again."""


def run_apply(server: Server, plan: sql.ApplyPlan, before: Sequence[str] = (), measure: str | None = None):
    """One apply transaction, under the retry policy. Returns the row of `measure` (run after `before`, inside
    the transaction). A row that changed or appeared since the decisions were made is StaleDecisions."""

    def work(cursor) -> tuple | None:
        try:
            measured = None
            if plan.lock:
                cursor.execute(plan.lock).fetchall()
            if measure:
                measured = tuple(cursor.execute(measure).fetchone())
            for statement in [*before, plan.prelude]:
                cursor.execute(statement)
            if plan.check and int(cursor.execute(plan.check).fetchone()[0]):
                raise StaleDecisions("rows changed on the publisher while the sync decided")
            for statement in plan.statements:
                cursor.execute(statement)
            return measured
        except pyodbc.Error as exc:
            if is_duplicate_key(exc):
                raise StaleDecisions(f"a row appeared on {server.name} meanwhile") from None
            raise

    return with_retries(server, work)


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

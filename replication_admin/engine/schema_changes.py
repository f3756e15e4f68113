"""Schema changes of a replicated table: what changed between two definitions, and the DDL that brings a
copy along (no I/O here).

A definition travels as *column rows*, the shape every dialect's catalog query gives:
``[name, declared type, nullable (0/1), primary key position, default expression or None, position]``,
read with the dialect that wrote it. `position` is what tells a rename from a drop and an add: PostgreSQL
keeps a column's attnum across RENAME COLUMN and never reuses it, so there it is exact; MariaDB and
SQLite only have the ordinal position, so one column gone and one come at the same position, of the
same family, is taken for a rename there (docs/schema-changes.md says what the product does about the
doubt).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from replication_admin.engine.compare import family_of
from replication_admin.engine.constraints import parse_default
from replication_admin.engine.dialects.base import Dialect
from replication_admin.engine.schema import Column, TableInfo

ADD, DROP, RENAME, RETYPE = "add", "drop", "rename", "retype"


def column_rows(table: TableInfo, d: Dialect) -> list[list[Any]]:
    """`table`'s definition as column rows in dialect `d` (ordinal positions)."""
    return [
        [
            c.name,
            c.declared or d.render_type(c.logical),
            1 if c.nullable else 0,
            c.pk_position,
            d.render_default(c.default, c.logical) if c.default is not None else None,
            i,
        ]
        for i, c in enumerate(table.columns, start=1)
    ]


def table_from_rows(d: Dialect, name: str, rows: Sequence[Sequence[Any]], schema: str = "") -> TableInfo:
    """The table column rows written in dialect `d` describe."""
    columns = []
    for row in rows:
        logical = d.parse_type(str(row[1] or ""))
        default, _problem = parse_default(row[4] if len(row) > 4 else None, logical, d)
        columns.append(
            Column(
                name=str(row[0]),
                declared=str(row[1] or ""),
                logical=logical,
                nullable=bool(int(row[2])),
                pk_position=int(row[3] or 0),
                default=default,
            )
        )
    return TableInfo(name=name, columns=tuple(columns), schema=schema)


def positions(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    return {str(r[0]): int(r[5]) if len(r) > 5 and r[5] is not None else i for i, r in enumerate(rows, start=1)}


def digest(rows: Sequence[Sequence[Any]]) -> str:
    """A short fingerprint of a definition (what the catalog compares)."""
    return hashlib.sha256(json.dumps([list(r) for r in rows], default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Change:
    kind: str  # ADD | DROP | RENAME | RETYPE
    column: str  # the column's name before the change (ADD: its name)
    after: Column | None = None  # the column as it is after (None for DROP)
    new_name: str = ""  # RENAME: the new name

    def __str__(self) -> str:
        if self.kind == ADD:
            assert self.after is not None
            return f"add column {self.column} {self.after.logical}"
        if self.kind == DROP:
            return f"drop column {self.column}"
        if self.kind == RENAME:
            return f"rename column {self.column} to {self.new_name}"
        assert self.after is not None
        return f"change the type of {self.column} to {self.after.logical}"

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "column": self.column, "new_name": self.new_name, "text": str(self)}


def between(d: Dialect, table: str, before: Sequence[Sequence[Any]], after: Sequence[Sequence[Any]]) -> list[Change]:
    """The changes between two definitions given as column rows written in dialect `d`."""
    return changes(
        table_from_rows(d, table, before), table_from_rows(d, table, after), positions(before), positions(after)
    )


def changes(
    before: TableInfo,
    after: TableInfo,
    before_positions: dict[str, int] | None = None,
    after_positions: dict[str, int] | None = None,
) -> list[Change]:
    """What turns `before` into `after`: renames first (a column gone and one come at the same position,
    one for one, of the same family), then drops, adds and type changes."""
    old = {c.name: c for c in before.columns}
    new = {c.name: c for c in after.columns}
    at_before = before_positions or {c.name: i for i, c in enumerate(before.columns, start=1)}
    at_after = after_positions or {c.name: i for i, c in enumerate(after.columns, start=1)}
    gone = [n for n in old if n not in new]
    came = [n for n in new if n not in old]
    out: list[Change] = []
    for name in list(gone):
        same_place = [n for n in came if at_after.get(n) == at_before.get(name)]
        if len(same_place) == 1 and family_of(new[same_place[0]].logical) == family_of(old[name].logical):
            other = same_place[0]
            out.append(Change(RENAME, name, new[other], other))
            if new[other].logical != old[name].logical:
                out.append(Change(RETYPE, other, new[other]))
            gone.remove(name)
            came.remove(other)
    out += [Change(DROP, n) for n in gone]
    out += [Change(ADD, n, new[n]) for n in came]
    out += [Change(RETYPE, n, new[n]) for n in new if n in old and new[n].logical != old[n].logical]
    return out


class SchemaChangeError(ValueError):
    """A change a copy cannot take (one line naming it)."""


def column_ddl(d: Dialect, column: Column) -> str:
    """A column as ADD COLUMN writes it. NOT NULL only with a default: the copy's existing rows need a value."""
    text = f"{d.quote(column.name)} {d.render_type(column.logical)}"
    if column.default is not None:
        text += f" DEFAULT {d.render_default(column.default, column.logical)}"
        if not column.nullable:
            text += " NOT NULL"
    return text


def copy_ddl(d: Dialect, copy: TableInfo, found: Sequence[Change]) -> list[str]:
    """The statements that bring the copy `copy` (as it is now, with its indexes) through `found`. What the
    copy already has is left alone, so running them again after a crash changes nothing more."""
    q = d.quote
    target = d.qualify(copy.name, copy.schema)
    have = {c.name.lower(): c for c in copy.columns}
    indexes = list(copy.indexes)
    out: list[str] = []
    for change in found:
        mine = have.get(change.column.lower())
        if change.kind == RENAME:
            if mine is None or change.new_name.lower() in have:
                continue
            out.append(d.rename_column_sql(target, mine.name, change.new_name))
            have[change.new_name.lower()] = replace(mine, name=change.new_name)
            del have[change.column.lower()]
        elif change.kind == DROP:
            if mine is None:
                continue
            if mine.pk_position:
                raise SchemaChangeError(
                    f"column {mine.name} is in the primary key of {copy.name}; it cannot be dropped"
                )
            for index in [i for i in indexes if any(c.lower() == mine.name.lower() for c in i.columns)]:
                out += d.drop_index_for_column_sql(copy.name, copy.schema, index.name)
                indexes.remove(index)
            out.append(f"ALTER TABLE {target} DROP COLUMN {q(mine.name)}")
            del have[change.column.lower()]
        elif change.kind == ADD:
            assert change.after is not None
            if mine is not None:
                continue
            out.append(f"ALTER TABLE {target} ADD COLUMN {column_ddl(d, change.after)}")
            have[change.column.lower()] = change.after
        elif change.kind == RETYPE:
            assert change.after is not None
            if mine is None or mine.logical == change.after.logical:
                continue
            out += d.retype_column_sql(target, mine.name, change.after)
            have[change.column.lower()] = replace(mine, logical=change.after.logical)
    return out

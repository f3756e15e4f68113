"""Schema changes of a replicated table: what changed between two definitions, and the DDL that brings a
copy along (no I/O here).

A definition travels as *column rows*, the shape every dialect's catalog query gives:
``[name, declared type, nullable (0/1), primary key position, default expression or None, position]``,
read with the dialect that wrote it. `position` is what tells a rename from a drop and an add: PostgreSQL
keeps a column's attnum across RENAME COLUMN and never reuses it, so there it is exact; MariaDB and
SQLite only have the ordinal position, so one column gone and one come at the same position, of the
same family, is taken for a rename there (docs/schema-changes.md says what the product does about the
doubt).

A definition may end with one object, ``{"constraints": {"unique": [[name, [columns]], ...], "foreign": [[name,
[columns], referenced table, [referenced columns], ON DELETE action], ...]}}``: the table's unique constraints
and unique indexes over plain columns, and its foreign keys. A definition without it (written before constraints
were followed) says nothing about them: their changes are unknown, not "all dropped" (`split`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from replication_admin.engine.compare import family_of
from replication_admin.engine.constraints import on_delete_word, parse_default
from replication_admin.engine.dialects.base import ColumnText, Dialect
from replication_admin.engine.objects import bounded_name
from replication_admin.engine.schema import Column, ForeignKey, Index, TableInfo

ADD, DROP, RENAME, RETYPE = "add", "drop", "rename", "retype"
ADD_UNIQUE, DROP_UNIQUE = "add_unique", "drop_unique"
ADD_FOREIGN_KEY, DROP_FOREIGN_KEY = "add_foreign_key", "drop_foreign_key"
CONSTRAINT_KINDS = (ADD_UNIQUE, DROP_UNIQUE, ADD_FOREIGN_KEY, DROP_FOREIGN_KEY)
SET_NOT_NULL, DROP_NOT_NULL = "set_not_null", "drop_not_null"
NULLABILITY_KINDS = (SET_NOT_NULL, DROP_NOT_NULL)
REFUSABLE_KINDS = CONSTRAINT_KINDS + NULLABILITY_KINDS  # what a copy's own rows can refuse
# What refuses nothing the publisher had: made before the rows of the batch its change is logged in.
RELAXING_KINDS = (DROP_UNIQUE, DROP_FOREIGN_KEY, DROP_NOT_NULL)
CONSTRAINTS = "constraints"


@dataclass(frozen=True)
class Constraints:
    """What a definition says of a table's unique constraints (as unique indexes) and foreign keys."""

    uniques: tuple[Index, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()


def constraints_of(table: TableInfo) -> Constraints:
    """`table`'s unique indexes over plain columns and its foreign keys (as with_constraints read them)."""
    uniques = tuple(sorted((i for i in table.indexes if i.unique), key=lambda i: i.name))
    return Constraints(uniques, tuple(sorted(table.foreign_keys, key=lambda f: f.name)))


def constraints_element(found: Constraints) -> dict[str, Any]:
    return {
        CONSTRAINTS: {
            "unique": [[u.name, list(u.columns)] for u in found.uniques],
            "foreign": [
                [f.name, list(f.columns), f.ref_table, list(f.ref_columns), f.on_delete] for f in found.foreign_keys
            ],
        }
    }


def split(rows: Sequence[Any]) -> tuple[list[Sequence[Any]], Constraints | None]:
    """A definition's column rows, and its constraints (None: the definition does not say)."""
    columns = [r for r in rows if not isinstance(r, dict)]
    element = next((r for r in rows if isinstance(r, dict) and CONSTRAINTS in r), None)
    if element is None:
        return columns, None
    body = element[CONSTRAINTS] or {}
    uniques = tuple(Index(str(u[0]), tuple(str(c) for c in u[1]), True) for u in body.get("unique") or [])
    foreign = tuple(
        ForeignKey(
            str(f[0]),
            tuple(str(c) for c in f[1]),
            str(f[2]),
            tuple(str(c) for c in f[3] or []),
            on_delete_word(f[4] if len(f) > 4 else ""),
        )
        for f in body.get("foreign") or []
    )
    return columns, Constraints(uniques, foreign)


def definition_rows(table: TableInfo, d: Dialect) -> list[Any]:
    """`table`'s definition with its constraints: column rows, then the constraints element."""
    return [*column_rows(table, d), constraints_element(constraints_of(table))]


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
    """The table column rows written in dialect `d` describe (a definition's constraints element is passed over)."""
    columns = []
    for row in split(rows)[0]:
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
    rows = split(rows)[0]
    return {str(r[0]): int(r[5]) if len(r) > 5 and r[5] is not None else i for i, r in enumerate(rows, start=1)}


def digest(rows: Sequence[Sequence[Any]]) -> str:
    """A short fingerprint of a definition (what the catalog compares)."""
    text = json.dumps([r if isinstance(r, dict) else list(r) for r in rows], default=str, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Change:
    kind: str  # ADD | DROP | RENAME | RETYPE | SET_NOT_NULL | DROP_NOT_NULL | a constraint's
    column: str  # the column's name before the change (ADD: its name)
    after: Column | None = None  # the column as it is after (None for DROP)
    new_name: str = ""  # RENAME: the new name
    unique: Index | None = None  # ADD_UNIQUE, DROP_UNIQUE (`column` is its name)
    foreign_key: ForeignKey | None = None  # ADD_FOREIGN_KEY, DROP_FOREIGN_KEY (`column` is its name)
    not_replicated: str = ""  # why the subscribers leave it out (a foreign key to a table outside the publication)

    def __str__(self) -> str:
        text = self._words()
        return f"{text} (not replicated: {self.not_replicated})" if self.not_replicated else text

    def _words(self) -> str:
        if self.unique is not None:
            verb = "add" if self.kind == ADD_UNIQUE else "drop"
            return f"{verb} unique {self.column} ({', '.join(self.unique.columns)})"
        if self.foreign_key is not None:
            fk = self.foreign_key
            verb = "add" if self.kind == ADD_FOREIGN_KEY else "drop"
            action = "" if fk.on_delete == "NO ACTION" else f" on delete {fk.on_delete.lower()}"
            refs = f" ({', '.join(fk.ref_columns)})" if fk.ref_columns else ""
            return f"{verb} foreign key {self.column} ({', '.join(fk.columns)}) references {fk.ref_table}{refs}{action}"
        if self.kind in NULLABILITY_KINDS:
            return f"{'set' if self.kind == SET_NOT_NULL else 'drop'} not null on {self.column}"
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


def between(
    d: Dialect,
    table: str,
    before: Sequence[Any],
    after: Sequence[Any],
    published: Collection[str] | None = None,
) -> list[Change]:
    """The changes between two definitions written in dialect `d`: the constraints dropped, the columns' changes,
    then the constraints added (constraints only where both definitions say what they are). With `published` (the
    publication's table names), a foreign key to a table outside it is marked not replicated."""
    found = changes(
        table_from_rows(d, table, before), table_from_rows(d, table, after), positions(before), positions(after)
    )
    old, new = split(before)[1], split(after)[1]
    if old is None or new is None:
        return found
    dropped, added = constraint_changes(old, new, found, published)
    return [*dropped, *found, *added]


def _lower(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(n.lower() for n in names)


def _fk_key(fk: ForeignKey, columns: Sequence[str]) -> tuple[Any, ...]:
    return (_lower(columns), fk.ref_table.lower(), _lower(fk.ref_columns), fk.on_delete)


def constraint_changes(
    before: Constraints, after: Constraints, columns: Sequence[Change], published: Collection[str] | None = None
) -> tuple[list[Change], list[Change]]:
    """The constraints dropped and added between `before` and `after`, told by their columns (a renamed
    constraint is the same one) after the column changes `columns`: a constraint over a renamed column is the same
    one, and one over a dropped column goes with the column (its drop is not a change of its own)."""
    renamed = {c.column.lower(): c.new_name for c in columns if c.kind == RENAME}
    gone = {c.column.lower() for c in columns if c.kind == DROP}

    def moved(names: Sequence[str]) -> tuple[str, ...]:
        return tuple(renamed.get(n.lower(), n) for n in names)

    outside = {t.lower() for t in published} if published is not None else None

    def why(fk: ForeignKey) -> str:
        if outside is None or fk.ref_table.lower() in outside:
            return ""
        return f"{fk.ref_table} is not in the publication"

    new_uniques = {_lower(u.columns) for u in after.uniques}
    old_uniques = {_lower(moved(u.columns)) for u in before.uniques}
    new_fks = {_fk_key(f, f.columns) for f in after.foreign_keys}
    old_fks = {_fk_key(f, moved(f.columns)) for f in before.foreign_keys}
    dropped = [
        Change(DROP_FOREIGN_KEY, f.name, foreign_key=f, not_replicated=why(f))
        for f in before.foreign_keys
        if _fk_key(f, moved(f.columns)) not in new_fks and not gone & set(_lower(f.columns))
    ]
    dropped += [
        Change(DROP_UNIQUE, u.name, unique=u)
        for u in before.uniques
        if _lower(moved(u.columns)) not in new_uniques and not gone & set(_lower(u.columns))
    ]
    added = [Change(ADD_UNIQUE, u.name, unique=u) for u in after.uniques if _lower(u.columns) not in old_uniques]
    added += [
        Change(ADD_FOREIGN_KEY, f.name, foreign_key=f, not_replicated=why(f))
        for f in after.foreign_keys
        if _fk_key(f, f.columns) not in old_fks
    ]
    return dropped, added


def changes(
    before: TableInfo,
    after: TableInfo,
    before_positions: dict[str, int] | None = None,
    after_positions: dict[str, int] | None = None,
) -> list[Change]:
    """What turns `before` into `after`: renames first (a column gone and one come at the same position,
    one for one, of the same family), then drops, adds, type changes and NOT NULLs set or dropped (a key column's
    NOT NULL goes with the key)."""
    old = {c.name: c for c in before.columns}
    new = {c.name: c for c in after.columns}
    at_before = before_positions or {c.name: i for i, c in enumerate(before.columns, start=1)}
    at_after = after_positions or {c.name: i for i, c in enumerate(after.columns, start=1)}
    gone = [n for n in old if n not in new]
    came = [n for n in new if n not in old]
    out: list[Change] = []
    nulls: list[Change] = []
    for name in list(gone):
        same_place = [n for n in came if at_after.get(n) == at_before.get(name)]
        if len(same_place) == 1 and family_of(new[same_place[0]].logical) == family_of(old[name].logical):
            other = same_place[0]
            out.append(Change(RENAME, name, new[other], other))
            if new[other].logical != old[name].logical:
                out.append(Change(RETYPE, other, new[other]))
            nulls += _nullability(old[name], new[other])
            gone.remove(name)
            came.remove(other)
    out += [Change(DROP, n) for n in gone]
    out += [Change(ADD, n, new[n]) for n in came]
    out += [Change(RETYPE, n, new[n]) for n in new if n in old and new[n].logical != old[n].logical]
    for n in new:
        if n in old:
            nulls += _nullability(old[n], new[n])
    return out + nulls


def _nullability(old: Column, new: Column) -> list[Change]:
    if old.nullable == new.nullable or old.pk_position or new.pk_position:
        return []
    return [Change(DROP_NOT_NULL if new.nullable else SET_NOT_NULL, new.name, new)]


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
    """The statements that bring the copy `copy` (as it is now, with its indexes and foreign keys) through
    `found`. What the copy already has is left alone, so running them again after a crash changes nothing more."""
    return [statement for _change, statements in copy_steps(d, copy, found) for statement in statements]


def left_out(d: Dialect, found: Sequence[Change]) -> list[str]:
    """What of `found` a copy in dialect `d` does not take, one line each."""
    out = []
    for change in found:
        if change.not_replicated:
            out.append(str(change))
        elif change.kind == ADD_FOREIGN_KEY and d.foreign_key_refused:
            out.append(f"{change}: left out, {d.foreign_key_refused}")
        elif change.kind == SET_NOT_NULL and d.set_not_null_refused:
            out.append(f"{change}: left out, {d.set_not_null_refused}")
    return out


def copy_steps(d: Dialect, copy: TableInfo, found: Sequence[Change]) -> list[tuple[Change, list[str]]]:
    """copy_ddl's statements, change by change (a change the copy has already, or leaves out, has none)."""
    q = d.quote
    target = d.qualify(copy.name, copy.schema)
    have = {c.name.lower(): c for c in copy.columns}
    indexes = list(copy.indexes)
    foreign = list(copy.foreign_keys)
    # Where a column is changed by editing its definition's text (SQLite), that text as each step leaves it.
    texts = d.column_texts(copy.name, copy.definition) if copy.definition else {}
    steps: list[tuple[Change, list[str]]] = []
    for change in found:
        out: list[str] = []
        steps.append((change, out))
        mine = have.get(change.column.lower())
        if change.kind in CONSTRAINT_KINDS:
            _constraint_ddl(d, copy, change, have, indexes, foreign, out)
        elif change.kind == RENAME:
            if mine is None or change.new_name.lower() in have:
                continue
            out.append(d.rename_column_sql(target, mine.name, change.new_name))
            have[change.new_name.lower()] = replace(mine, name=change.new_name)
            del have[change.column.lower()]
            if (text := texts.pop(mine.name.lower(), None)) is not None:
                texts[change.new_name.lower()] = text.renamed(q(change.new_name))
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
            texts.pop(mine.name.lower(), None)
        elif change.kind == ADD:
            assert change.after is not None
            if mine is not None:
                continue
            added = column_ddl(d, change.after)
            out.append(f"ALTER TABLE {target} ADD COLUMN {added}")
            have[change.column.lower()] = change.after
            if copy.definition:  # SQLite appends ", " and the definition as written to the table's text
                name = q(change.after.name)
                texts[change.column.lower()] = ColumnText(copy.name, ", ", name, added[len(name) :])
        elif change.kind == RETYPE:
            assert change.after is not None
            if mine is None or mine.logical == change.after.logical:
                continue
            out += d.retype_column_sql(target, mine.name, change.after)
            have[change.column.lower()] = replace(mine, logical=change.after.logical)
        elif change.kind in NULLABILITY_KINDS:
            assert change.after is not None
            nullable = change.kind == DROP_NOT_NULL
            if mine is None or mine.nullable == nullable or mine.pk_position:
                continue  # a column the copy leaves out, or a NOT NULL it has already
            if not nullable and d.set_not_null_refused:
                continue  # left out (left_out says so)
            # The copy's own type, the publisher's default: a dialect that restates the column keeps both.
            made = d.nullability_sql(
                target, replace(mine, nullable=nullable, default=change.after.default), texts.get(mine.name.lower())
            )
            if not made:
                raise SchemaChangeError(
                    f"{change} cannot be made on {copy.name}: the column's definition was not found in the "
                    "table's CREATE statement"
                )
            out += made
            have[change.column.lower()] = replace(mine, nullable=nullable)
    return steps


def _columns_of(copy: TableInfo, change: Change, names: Sequence[str], have: dict[str, Column]) -> list[Column]:
    missing = [n for n in names if n.lower() not in have]
    if missing:
        raise SchemaChangeError(f"{change} cannot be made on {copy.name}: it has no column {', '.join(missing)}")
    return [have[n.lower()] for n in names]


def _constraint_ddl(
    d: Dialect, copy: TableInfo, change: Change, have: dict[str, Column], indexes: list[Index],
    foreign: list[ForeignKey], out: list[str],
) -> None:  # fmt: skip
    """The statements of one constraint change on the copy (matched to the copy's by name, else by columns)."""
    target = d.qualify(copy.name, copy.schema)
    if change.not_replicated:
        return
    if change.unique is not None:
        wanted = _lower(change.unique.columns)
        uniques = [i for i in indexes if i.unique]
        if change.kind == DROP_UNIQUE:
            mine = next((i for i in uniques if i.name.lower() == change.column.lower()), None)
            mine = mine or next((i for i in uniques if _lower(i.columns) == wanted), None)
            if mine is not None:
                out += d.drop_unique_sql(target, copy.schema, mine.name)
                indexes.remove(mine)
            return
        if any(_lower(i.columns) == wanted for i in uniques):
            return
        columns = _columns_of(copy, change, change.unique.columns, have)
        name = bounded_name(change.column, d.max_identifier)
        out.append(
            d.add_unique_sql(
                target, copy.schema, name, d.index_columns_sql([(c.name, c.logical) for c in columns], True)
            )
        )
        indexes.append(Index(name, tuple(c.name for c in columns), True))
        return
    fk = change.foreign_key
    assert fk is not None
    same = [
        f for f in foreign if _lower(f.columns) == _lower(fk.columns) and f.ref_table.lower() == fk.ref_table.lower()
    ]
    if change.kind == DROP_FOREIGN_KEY:
        mine_fk = next((f for f in foreign if f.name.lower() == change.column.lower()), None) or next(iter(same), None)
        if mine_fk is not None:
            out.append(d.drop_foreign_key_sql(target, mine_fk.name))
            foreign.remove(mine_fk)
        return
    if d.foreign_key_refused or same:
        return
    columns = _columns_of(copy, change, fk.columns, have)
    name = bounded_name(change.column, d.max_identifier)
    out.append(
        d.add_foreign_key_sql(
            target,
            name,
            [d.quote(c.name) for c in columns],
            d.qualify(fk.ref_table, copy.schema),
            [d.quote(c) for c in fk.ref_columns],
            fk.on_delete,
        )
    )
    foreign.append(replace(fk, name=name, columns=tuple(c.name for c in columns)))

"""Descriptions of tables as introspected from a server (no I/O here)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from replication_admin.engine.types import LogicalType


@dataclass(frozen=True)
class Default:
    """A column default in a form every dialect can write: a number, a text, a boolean, or the time."""

    kind: str  # "number" | "text" | "boolean" | "now" | "today"
    value: str = ""  # the number's digits, the text, "true" / "false"


@dataclass(frozen=True)
class Index:
    """A secondary index or unique constraint over plain columns (expression and partial indexes are
    listed in TableInfo.untranslated instead)."""

    name: str
    columns: tuple[str, ...]
    unique: bool = False


@dataclass(frozen=True)
class ForeignKey:
    """A foreign key over plain columns: `columns` reference `ref_columns` of the table `ref_table` (same schema)."""

    name: str
    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]
    on_delete: str = "NO ACTION"  # NO ACTION | RESTRICT | CASCADE | SET NULL | SET DEFAULT


@dataclass(frozen=True)
class Column:
    name: str
    declared: str
    logical: LogicalType
    nullable: bool = True
    pk_position: int = 0  # 1-based position in the primary key, 0 when not part of it
    default: Default | None = None


@dataclass(frozen=True)
class TableInfo:
    name: str
    columns: tuple[Column, ...]
    schema: str = ""
    # Filled by introspection.with_constraints (creating a copy needs them; most readers do not).
    indexes: tuple[Index, ...] = ()
    untranslated: tuple[str, ...] = ()  # what a copy cannot carry, in words ("index x: an expression")
    foreign_keys: tuple[ForeignKey, ...] = ()  # filled by with_constraints too (not carried by a created copy)
    # The CREATE statement as the server keeps it, where a change is made by editing it (SQLite; with_constraints).
    definition: str = ""

    @functools.cached_property
    def primary_key(self) -> tuple[Column, ...]:
        return tuple(sorted((c for c in self.columns if c.pk_position), key=lambda c: c.pk_position))

    @property
    def non_key_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.pk_position)

    def column(self, name: str) -> Column | None:
        """Exact match first, then case-insensitive (MariaDB and SQLite fold case, PostgreSQL does not)."""
        for col in self.columns:
            if name == col.name:
                return col
        folded = [c for c in self.columns if c.name.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None

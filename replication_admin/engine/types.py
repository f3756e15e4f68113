"""Logical column types: the common language between dialects.

Every dialect parses its declared column types into a `LogicalType` and renders a `LogicalType` back
as DDL. The kinds follow the rows of the reference's data type mapping table (varchar, integer,
numeric(p, s), datetime, long varbinary, ...), plus `bigint`, `boolean`, `timestamptz`, `json` and
`uuid`, which every live dialect can hold and which a DBA expects to survive a round trip
(docs/types.md has the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = (
    "varchar",  # character data with a length (varchar(n) / varchar)
    "nvarchar",  # national character data with a length
    "long_varchar",  # unbounded text
    "long_nvarchar",
    "smallint",
    "integer",
    "bigint",
    "real",
    "double",
    "numeric",  # numeric / numeric(p, s)
    "boolean",
    "date",
    "time",
    "timestamp",  # datetime / timestamp, microsecond precision
    "timestamptz",  # timestamp with time zone: an instant (stored as UTC where there is no zone type)
    "varbinary",
    "long_varbinary",
    "json",  # a JSON document, carried as its text
    "uuid",
    "other",  # a type with no row in the mapping table (uuid, json, enum ...): moved as text
)

INTEGER_KINDS = frozenset({"smallint", "integer", "bigint"})
TEXT_KINDS = frozenset({"varchar", "nvarchar", "long_varchar", "long_nvarchar"})
BINARY_KINDS = frozenset({"varbinary", "long_varbinary"})


@dataclass(frozen=True)
class LogicalType:
    kind: str
    length: int | None = None  # varchar / varbinary length
    precision: int | None = None  # numeric precision
    scale: int | None = None  # numeric scale

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown logical type {self.kind!r}")

    def __str__(self) -> str:
        if self.kind == "numeric" and self.precision is not None:
            return f"numeric({self.precision}, {self.scale or 0})"
        if self.length is not None:
            return f"{self.kind}({self.length})"
        return self.kind


_DECLARED = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_ ]*)(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*(.*)$")


def split_declared(declared: str) -> tuple[str, int | None, int | None, str]:
    """'numeric(38, 10)' -> ('numeric', 38, 10, ''); 'int unsigned' -> ('int unsigned', None, None, '')."""
    match = _DECLARED.match(declared or "")
    if not match:
        return (declared or "").strip().lower(), None, None, ""
    base, first, second, rest = match.groups()
    return (
        base.strip().lower(),
        int(first) if first else None,
        int(second) if second else None,
        rest.strip().lower(),
    )

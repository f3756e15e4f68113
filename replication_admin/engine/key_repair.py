"""Repairing chosen keys of a compared pair (pure): the statements that read one key's row on either side and
make the destination's row of that key the source's, each key bound as parameters.

A compare reports keys as canonical text (engine.compare); `key_parameters` turns that text back into values
each side's key columns are matched with. The destination keeps the columns the compare did not pair (an
update writes the compared columns only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replication_admin.engine.compare import Side, SideColumn, family_of
from replication_admin.engine.refresh_sql import insert_rows_sql
from replication_admin.engine.values import bind_value


def _keys(side: Side) -> list[SideColumn]:
    return [c for c in side.columns if c.alias in side.key_aliases]


def _values(side: Side) -> list[SideColumn]:
    return [c for c in side.columns if c.alias in side.value_aliases]


def _table(side: Side) -> str:
    if side.query is not None:
        return f"({side.query}) q"
    return f"{side.dialect.qualify(side.table.name, side.table.schema)} q"


def _where(side: Side) -> str:
    d = side.dialect
    keys = " AND ".join(f"q.{d.quote(c.column.name)} = ?" for c in _keys(side))
    # A row out of the side's filter is not one of its rows (a filtered subscription's repair deletes it there).
    return f"{keys} AND ({side.where})" if side.where and side.query is None else keys


def row_sql(side: Side) -> str:
    """The compared columns of one key's row (keys first), read as the control plane reads them."""
    d = side.dialect
    items = [d.read_value_sql(f"q.{d.quote(c.column.name)}", family_of(c.column.logical)) for c in side.columns]
    return f"SELECT {', '.join(items)} FROM {_table(side)} WHERE {_where(side)}"


def count_sql(side: Side) -> str:
    return f"SELECT COUNT(*) FROM {_table(side)} WHERE {_where(side)}"


def key_parameters(side: Side, texts: Sequence[Any], stored: bool = False) -> list[Any]:
    """A key's text (in the plan's key order) as parameters for `side`'s key columns: canonical text from the
    compare, or with `stored` the text of the side's own stored value, bound as it is where dates and times are
    stored as text (the side matches its own text exactly). Binary keys are hex text."""
    params = []
    for c, text in zip(_keys(side), texts, strict=True):
        if text is not None and c.family == "binary":
            params.append(bytes.fromhex(str(text)))
        elif stored and side.dialect.text_timestamps and c.family in {"date", "time", "timestamp"}:
            params.append(text)
        else:
            params.append(bind_value(text, c.column.logical, side.dialect.name))
    return params


def update_sql(dest: Side) -> str | None:
    """UPDATE of the compared columns of one key's row (None when only the key is compared)."""
    d = dest.dialect
    values = _values(dest)
    if not values:
        return None
    assignments = ", ".join(f"{d.quote(c.column.name)} = ?" for c in values)
    where = " AND ".join(f"{d.quote(c.column.name)} = ?" for c in _keys(dest))
    return f"UPDATE {d.qualify(dest.table.name, dest.table.schema)} SET {assignments} WHERE {where}"


def insert_sql(dest: Side) -> str:
    return insert_rows_sql(dest.dialect, dest.table.name, dest.table.schema, [c.column.name for c in dest.columns], 1)


def delete_sql(dest: Side) -> str:
    d = dest.dialect
    where = " AND ".join(f"{d.quote(c.column.name)} = ?" for c in _keys(dest))
    return f"DELETE FROM {d.qualify(dest.table.name, dest.table.schema)} WHERE {where}"


def destination_row(dest: Side, source_row: Sequence[Any]) -> list[Any]:
    """A source row (as `row_sql` reads it, columns in the plan's order) bound for the destination's columns."""
    return [bind_value(v, c.column.logical, dest.dialect.name) for v, c in zip(source_row, dest.columns, strict=True)]


def key_of(dest: Side, row: Sequence[Any]) -> list[Any]:
    """The key of a `destination_row`."""
    return list(row[: len(_keys(dest))])


def update_parameters(dest: Side, row: Sequence[Any], key: Sequence[Any]) -> list[Any]:
    """`update_sql`'s parameters: the compared columns of a `destination_row`, then the key of the row to update."""
    return [*row[len(_keys(dest)) :], *key]

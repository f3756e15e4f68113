"""A validation's key slices: equal widths over the publisher's bounds, the first open below and the last open above
(so rows only a subscriber has beyond them are compared too), every integer key in exactly one slice, and bounds
written into the SQL as integers only."""

from __future__ import annotations

import pytest

from replication_admin.engine import dialects
from replication_admin.engine.compare import KeySlice, plan_compare, sliced
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType


def slice_of(key: int, slices: list[KeySlice]) -> list[int]:
    return [s.index for s in slices if (s.low is None or key >= s.low) and (s.high is None or key < s.high)]


@pytest.mark.parametrize(("smallest", "largest", "count"), [(1, 200, 4), (-50, 7, 3), (5, 5, 24), (1, 10, 24)])
def test_every_key_from_far_below_to_far_above_falls_in_exactly_one_slice(smallest, largest, count):
    slices = [KeySlice.of(i, count, smallest, largest) for i in range(count)]
    assert slices[0].low is None and slices[-1].high is None
    for key in range(smallest - 1000, largest + 1000, 7):
        assert len(slice_of(key, slices)) == 1, key


def test_slices_of_200_keys_in_4_are_50_wide_and_an_index_wraps_around():
    assert [(s.low, s.high) for s in (KeySlice.of(i, 4, 1, 200) for i in range(4))] == [
        (None, 51), (51, 101), (101, 151), (151, None),
    ]  # fmt: skip
    assert KeySlice.of(5, 4, 1, 200) == KeySlice.of(1, 4, 1, 200)
    assert KeySlice.of(2, 4, None, None) == KeySlice(0, 1, None, None)  # an empty table: compared whole
    assert KeySlice.of(2, 4, 1, 200).describe() == "slice 3 of 4 (101 ≤ key < 151)"


def test_a_slice_is_read_through_each_dialects_quoting_and_a_text_key_is_not_sliced():
    integer, text_type = LogicalType("integer"), LogicalType("varchar", 10)
    table = TableInfo("表", (Column('ab "cd', "integer", integer, pk_position=1), Column("v", "varchar", text_type)))
    plan = plan_compare(dialects.get("postgresql"), table, dialects.get("mysql"), table)
    part = sliced(plan, KeySlice.of(1, 3, 0, 299))
    assert part.left.select_sql().endswith('FROM "表" WHERE "ab ""cd" >= 100 AND "ab ""cd" < 200')
    assert part.right.select_sql().endswith('FROM `表` WHERE `ab "cd` >= 100 AND `ab "cd` < 200')
    text = TableInfo("t", (Column("code", "varchar(10)", text_type, pk_position=1),))
    text_plan = plan_compare(dialects.get("postgresql"), text, dialects.get("sqlite"), text)
    assert text_plan.left.slice_column is None
    assert sliced(text_plan, KeySlice.of(1, 3, 0, 299)) == text_plan

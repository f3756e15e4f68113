"""What changed between two definitions of a table, and the DDL that brings a copy along."""

from __future__ import annotations

import pytest

from replication_admin.engine import dialects, schema_changes
from replication_admin.engine.schema import Column, Index, TableInfo
from replication_admin.engine.types import LogicalType

PG = dialects.get("postgresql")

ROWS = [
    ["id", "integer", 0, 1, None, 1],
    ["name", "character varying(40)", 1, 0, None, 2],
    ["qty", "integer", 1, 0, "0", 3],
]


def table(rows: list) -> TableInfo:
    return schema_changes.table_from_rows(PG, "stock", rows)


def found(before: list, after: list) -> list[str]:
    return [
        str(c)
        for c in schema_changes.changes(
            table(before), table(after), schema_changes.positions(before), schema_changes.positions(after)
        )
    ]


def test_a_column_renamed_in_place_is_a_rename_and_not_a_drop_and_an_add():
    after = [ROWS[0], ROWS[1], ["amount", "integer", 1, 0, "0", 3]]
    assert found(ROWS, after) == ["rename column qty to amount"]


def test_a_column_dropped_and_another_added_elsewhere_stay_a_drop_and_an_add():
    # PostgreSQL never reuses an attnum: the added column comes at 4 even though qty (3) is gone.
    after = [ROWS[0], ROWS[1], ["amount", "integer", 1, 0, None, 4]]
    assert found(ROWS, after) == ["drop column qty", "add column amount integer"]


def test_a_widened_type_and_an_added_column_are_both_seen():
    after = [ROWS[0], ["name", "character varying(200)", 1, 0, None, 2], ROWS[2], ["note", "text", 1, 0, "'x'", 4]]
    assert found(ROWS, after) == ["add column note long_varchar", "change the type of name to varchar(200)"]


def test_a_definition_read_back_keeps_its_types_keys_and_defaults():
    info = table(ROWS)
    assert [c.logical for c in info.columns] == [
        LogicalType("integer"),
        LogicalType("varchar", 40),
        LogicalType("integer"),
    ]
    assert [c.pk_position for c in info.columns] == [1, 0, 0]
    assert info.columns[2].default is not None and info.columns[2].default.value == "0"
    assert schema_changes.digest(ROWS) != schema_changes.digest([*ROWS, ["note", "text", 1, 0, None, 4]])


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("mysql", ["ALTER TABLE `stock` RENAME COLUMN `qty` TO `amount`", "ALTER TABLE `stock` ADD COLUMN `note` varchar(20) DEFAULT 'x' NOT NULL", "ALTER TABLE `stock` MODIFY COLUMN `name` varchar(200)"]),
        ("postgresql", ['ALTER TABLE "stock" RENAME COLUMN "qty" TO "amount"', """ALTER TABLE "stock" ADD COLUMN "note" varchar(20) DEFAULT 'x' NOT NULL""", 'ALTER TABLE "stock" ALTER COLUMN "name" TYPE varchar(200) USING "name"::varchar(200)']),
        ("sqlite", ['ALTER TABLE "stock" RENAME COLUMN "qty" TO "amount"', """ALTER TABLE "stock" ADD COLUMN "note" VARCHAR(20) DEFAULT 'x' NOT NULL"""]),
    ],
)  # fmt: skip
def test_each_dialect_gets_its_own_ddl_and_what_the_copy_has_already_is_left_alone(dialect, expected):
    d = dialects.get(dialect)
    after = [
        ROWS[0],
        ["name", "character varying(200)", 1, 0, None, 2],
        ["amount", "integer", 1, 0, "0", 3],
        ["note", "character varying(20)", 0, 0, "'x'", 4],
    ]
    copy = TableInfo(
        name="stock",
        columns=tuple(Column(c.name, "", c.logical, c.nullable, c.pk_position) for c in table(ROWS).columns),
    )
    changes = schema_changes.changes(
        table(ROWS), table(after), schema_changes.positions(ROWS), schema_changes.positions(after)
    )
    assert schema_changes.copy_ddl(d, copy, changes) == expected
    done = TableInfo(name="stock", columns=tuple(Column(c.name, "", c.logical) for c in table(after).columns))
    assert schema_changes.copy_ddl(d, done, changes) == []


def test_sqlite_drops_the_indexes_over_a_column_before_the_column_and_a_key_column_is_refused():
    d = dialects.get("sqlite")
    copy = TableInfo(name="stock", columns=table(ROWS).columns, indexes=(Index("stock_qty", ("qty",)),))
    drop = schema_changes.changes(table(ROWS), table(ROWS[:2]))
    assert schema_changes.copy_ddl(d, copy, drop) == [
        'DROP INDEX IF EXISTS "stock_qty"',
        'ALTER TABLE "stock" DROP COLUMN "qty"',
    ]
    with pytest.raises(schema_changes.SchemaChangeError, match="primary key"):
        schema_changes.copy_ddl(d, copy, schema_changes.changes(table(ROWS), table(ROWS[1:])))

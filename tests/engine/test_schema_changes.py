"""What changed between two definitions of a table, and the DDL that brings a copy along."""

from __future__ import annotations

from dataclasses import replace

import pytest

from replication_admin.engine import constraints, dialects, schema_changes
from replication_admin.engine.dialects.sqlite import column_texts, without_not_null
from replication_admin.engine.schema import Column, ForeignKey, Index, TableInfo
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


# --- NOT NULL set and dropped ------------------------------------------------------------------------------------


def test_a_not_null_set_and_one_dropped_are_changes_and_a_key_columns_is_not():
    after = [["id", "integer", 0, 1, None, 1], ["name", "character varying(40)", 0, 0, None, 2],
             ["qty", "integer", 1, 0, "0", 3]]  # fmt: skip
    assert found(ROWS, after) == ["set not null on name"]
    assert found(after, ROWS) == ["drop not null on name"]
    renamed = [ROWS[0], ROWS[1], ["amount", "integer", 0, 0, "0", 3]]
    assert found(ROWS, renamed) == ["rename column qty to amount", "set not null on amount"]
    assert schema_changes.digest(ROWS) != schema_changes.digest(after)


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        ("postgresql", ['ALTER TABLE "stock" ALTER COLUMN "name" DROP NOT NULL', 'ALTER TABLE "stock" ALTER COLUMN "qty" SET NOT NULL']),
        # MODIFY restates the column: the copy's own type, the publisher's default.
        ("mysql", ["ALTER TABLE `stock` MODIFY COLUMN `name` varchar(40)", "ALTER TABLE `stock` MODIFY COLUMN `qty` int DEFAULT 0 NOT NULL"]),
        # The column's text in the table's CREATE statement edited (SQLite's way of removing a NOT NULL), then the
        # schema's version moved by a table made and dropped; a NOT NULL set is left out.
        ("sqlite", [
            "PRAGMA writable_schema = ON",
            "UPDATE sqlite_master SET sql = replace(sql, ', \"name\" VARCHAR(40) NOT NULL', ', \"name\" VARCHAR(40)') "
            "WHERE type = 'table' AND name = 'stock' AND instr(sql, ', \"name\" VARCHAR(40) NOT NULL') > 0",
            "PRAGMA writable_schema = RESET",
            "CREATE TABLE IF NOT EXISTS repladmin_schema_version (x)",
            "DROP TABLE repladmin_schema_version",
        ]),
    ],
)  # fmt: skip
def test_each_dialect_sets_and_drops_a_not_null_its_own_way_and_leaves_alone_what_the_copy_has(dialect, expected):
    d = dialects.get(dialect)
    before = [ROWS[0], ["name", "character varying(40)", 0, 0, None, 2], ROWS[2]]
    after = [ROWS[0], ROWS[1], ["qty", "integer", 0, 0, "0", 3]]
    changes = schema_changes.changes(table(before), table(after))
    assert [str(c) for c in changes] == ["drop not null on name", "set not null on qty"]
    definition = (
        'CREATE TABLE "stock" ("id" INTEGER NOT NULL, "name" VARCHAR(40) NOT NULL, "qty" INTEGER, PRIMARY KEY ("id"))'
    )
    copy = replace(table(before), definition=definition if dialect == "sqlite" else "")
    assert schema_changes.copy_ddl(d, copy, changes) == expected
    assert schema_changes.copy_ddl(d, table(after), changes) == []  # run again after a crash: nothing more
    left = schema_changes.left_out(d, changes)
    assert left == ([] if dialect != "sqlite" else [
        "set not null on qty: left out, SQLite cannot add a NOT NULL to an existing column (ALTER TABLE has no ALTER COLUMN)",
    ])  # fmt: skip


def test_a_sqlite_copy_whose_definition_does_not_hold_the_column_refuses_a_dropped_not_null_in_one_line():
    before = [ROWS[0], ["name", "character varying(40)", 0, 0, None, 2], ROWS[2]]
    changes = schema_changes.changes(table(before), table(ROWS))
    copy = replace(table(before), definition='CREATE TABLE "stock" ("id" INTEGER PRIMARY KEY, "other" TEXT)')
    with pytest.raises(schema_changes.SchemaChangeError, match=r"^drop not null on name cannot be made on stock: the"):
        schema_changes.copy_ddl(dialects.get("sqlite"), copy, changes)


def test_a_sqlite_column_renamed_or_added_in_the_same_batch_has_its_not_null_dropped_where_sqlite_wrote_it():
    sqlite = dialects.get("sqlite")
    before = [ROWS[0], ["name", "character varying(40)", 0, 0, None, 2], ROWS[2]]
    after = [ROWS[0], ["label", "character varying(40)", 1, 0, None, 2], ROWS[2]]
    changes = schema_changes.changes(table(before), table(after), schema_changes.positions(before),
                                     schema_changes.positions(after))  # fmt: skip
    assert [str(c) for c in changes] == ["rename column name to label", "drop not null on label"]
    definition = "CREATE TABLE stock (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL, qty INTEGER)"
    ddl = schema_changes.copy_ddl(sqlite, replace(table(before), definition=definition), changes)
    assert ddl[0] == 'ALTER TABLE "stock" RENAME COLUMN "name" TO "label"'
    assert "replace(sql, ', \"label\" VARCHAR(40) NOT NULL', ', \"label\" VARCHAR(40)')" in ddl[2]


@pytest.mark.parametrize(
    ("definition", "column", "text", "without"),
    [
        ('CREATE TABLE "t ""x" ("ab ""cd" VARCHAR(20) DEFAULT \'a, NOT NULL\' NOT NULL, "id" INT PRIMARY KEY)',
         'ab "cd', '("ab ""cd" VARCHAR(20) DEFAULT \'a, NOT NULL\' NOT NULL', " VARCHAR(20) DEFAULT 'a, NOT NULL'"),
        ("CREATE TABLE t (id INT, [表😀] DECIMAL_TEXT(10, 2) CONSTRAINT nn NOT NULL ON CONFLICT ABORT, CHECK (id > 0))",
         "表😀", ", [表😀] DECIMAL_TEXT(10, 2) CONSTRAINT nn NOT NULL ON CONFLICT ABORT", " DECIMAL_TEXT(10, 2)"),
        ("CREATE TABLE t (id INT, `q` INT CHECK (q IS NOT NULL), PRIMARY KEY (id))", "q",
         ", `q` INT CHECK (q IS NOT NULL)", None),
    ],
)  # fmt: skip
def test_a_sqlite_column_is_found_in_its_tables_text_and_loses_only_its_own_not_null(definition, column, text, without):
    texts = column_texts("t", definition)
    assert "check" not in texts and "primary" not in texts
    assert texts[column.lower()].text == text
    assert without_not_null(texts[column.lower()].rest) == without


# --- constraints: UNIQUE and FOREIGN KEY -------------------------------------------------------------------------


def defined(uniques=(), foreign=(), rows=ROWS) -> list:
    return [*rows, {"constraints": {"unique": [list(u) for u in uniques], "foreign": [list(f) for f in foreign]}}]


UNIQUE_NAME = ("stock_name_key", ["name"])
FK = ("stock_qty_fkey", ["qty"], "cats", ["id"], "a")


def words(before: list, after: list, published=None) -> list[str]:
    return [str(c) for c in schema_changes.between(PG, "stock", before, after, published)]


def test_an_added_and_a_dropped_unique_constraint_are_seen_by_their_columns():
    assert words(defined(), defined([UNIQUE_NAME])) == ["add unique stock_name_key (name)"]
    assert words(defined([UNIQUE_NAME]), defined()) == ["drop unique stock_name_key (name)"]
    # Renamed, it is the same constraint.
    assert words(defined([UNIQUE_NAME]), defined([("other_name", ["name"])])) == []


def test_a_definition_without_constraints_says_nothing_about_them():
    assert words(ROWS, defined([UNIQUE_NAME], [FK])) == []
    assert words(defined([UNIQUE_NAME], [FK]), ROWS) == []
    assert schema_changes.split(ROWS) == (ROWS, None)
    assert schema_changes.table_from_rows(PG, "stock", defined([UNIQUE_NAME])) == table(ROWS)
    assert schema_changes.positions(defined([UNIQUE_NAME])) == schema_changes.positions(ROWS)


def test_foreign_keys_added_and_dropped_and_one_to_a_table_outside_the_publication_is_not_replicated():
    assert words(defined(), defined([], [FK]), {"stock", "cats"}) == [
        "add foreign key stock_qty_fkey (qty) references cats (id)"
    ]
    assert words(defined([], [FK]), defined(), {"stock", "cats"}) == [
        "drop foreign key stock_qty_fkey (qty) references cats (id)"
    ]
    outside = schema_changes.between(PG, "stock", defined(), defined([], [FK]), {"stock"})
    assert [str(c) for c in outside] == [
        "add foreign key stock_qty_fkey (qty) references cats (id) (not replicated: cats is not in the publication)"
    ]
    copy = TableInfo(name="stock", columns=table(ROWS).columns)
    assert schema_changes.copy_ddl(PG, copy, outside) == []
    assert schema_changes.left_out(PG, outside) == [str(outside[0])]


def test_a_constraint_over_a_renamed_column_stays_and_one_over_a_dropped_column_goes_with_it():
    renamed = [ROWS[0], ROWS[1], ["amount", "integer", 1, 0, "0", 3]]
    assert words(defined([("u", ["qty"])]), defined([("u", ["amount"])], rows=renamed)) == [
        "rename column qty to amount"
    ]
    assert words(defined([("u", ["qty"])]), defined(rows=ROWS[:2])) == ["drop column qty"]


@pytest.mark.parametrize(
    ("dialect", "add", "drop"),
    [
        ("postgresql", ['ALTER TABLE "stock" ADD CONSTRAINT "stock_name_key" UNIQUE ("name")'],
         ['ALTER TABLE "stock" DROP CONSTRAINT IF EXISTS "stock_name_key"', 'DROP INDEX IF EXISTS "stock_name_key"']),
        ("mysql", ["ALTER TABLE `stock` ADD CONSTRAINT `stock_name_key` UNIQUE (`name`)"],
         ["ALTER TABLE `stock` DROP INDEX IF EXISTS `stock_name_key`"]),
        ("sqlite", ['CREATE UNIQUE INDEX IF NOT EXISTS "stock_name_key" ON "stock" ("name")'],
         ['DROP INDEX IF EXISTS "stock_name_key"']),
    ],
)  # fmt: skip
def test_each_dialect_adds_and_drops_a_unique_constraint_its_own_way_and_only_once(dialect, add, drop):
    d = dialects.get(dialect)
    bare = TableInfo(name="stock", columns=table(ROWS).columns)
    with_unique = TableInfo(name="stock", columns=table(ROWS).columns, indexes=(Index("x_name", ("name",), True),))
    adding = schema_changes.between(PG, "stock", defined(), defined([UNIQUE_NAME]))
    dropping = schema_changes.between(PG, "stock", defined([UNIQUE_NAME]), defined())
    assert schema_changes.copy_ddl(d, bare, adding) == add
    assert schema_changes.copy_ddl(d, with_unique, adding) == []  # the copy has one over the same columns
    named = TableInfo(name="stock", columns=table(ROWS).columns, indexes=(Index("stock_name_key", ("name",), True),))
    assert schema_changes.copy_ddl(d, named, dropping) == drop
    assert schema_changes.copy_ddl(d, bare, dropping) == []


@pytest.mark.parametrize(
    ("dialect", "add", "drop"),
    [
        ("postgresql", 'ALTER TABLE "stock" ADD CONSTRAINT "stock_qty_fkey" FOREIGN KEY ("qty") REFERENCES "cats" ("id") ON DELETE CASCADE',
         'ALTER TABLE "stock" DROP CONSTRAINT "stock_qty_fkey"'),
        ("mysql", "ALTER TABLE `stock` ADD CONSTRAINT `stock_qty_fkey` FOREIGN KEY (`qty`) REFERENCES `cats` (`id`) ON DELETE CASCADE",
         "ALTER TABLE `stock` DROP FOREIGN KEY IF EXISTS `stock_qty_fkey`"),
    ],
)  # fmt: skip
def test_each_dialect_adds_and_drops_a_foreign_key_and_sqlite_leaves_it_out_in_words(dialect, add, drop):
    d = dialects.get(dialect)
    fk = ("stock_qty_fkey", ["qty"], "cats", ["id"], "CASCADE")
    adding = schema_changes.between(PG, "stock", defined(), defined([], [fk]), {"stock", "cats"})
    dropping = schema_changes.between(PG, "stock", defined([], [fk]), defined(), {"stock", "cats"})
    bare = TableInfo(name="stock", columns=table(ROWS).columns)
    having = TableInfo(
        name="stock", columns=table(ROWS).columns,
        foreign_keys=(ForeignKey("stock_qty_fkey", ("qty",), "cats", ("id",), "CASCADE"),),
    )  # fmt: skip
    assert schema_changes.copy_ddl(d, bare, adding) == [add]
    assert schema_changes.copy_ddl(d, having, adding) == []
    assert schema_changes.copy_ddl(d, having, dropping) == [drop]
    assert schema_changes.copy_ddl(d, bare, dropping) == []
    sqlite = dialects.get("sqlite")
    assert schema_changes.copy_ddl(sqlite, bare, adding) == []
    assert schema_changes.left_out(sqlite, adding) == [
        "add foreign key stock_qty_fkey (qty) references cats (id) on delete cascade: left out, "
        "SQLite cannot add a foreign key to an existing table (ALTER TABLE has no ADD CONSTRAINT)"
    ]


def test_a_unique_over_a_column_the_copy_lacks_is_refused_in_one_line():
    copy = TableInfo(name="stock", columns=table(ROWS[:2]).columns)
    adding = schema_changes.between(PG, "stock", defined(), defined([("u", ["qty"])]))
    with pytest.raises(
        schema_changes.SchemaChangeError, match=r"add unique u \(qty\) cannot be made on stock: it has no column qty"
    ):
        schema_changes.copy_ddl(PG, copy, adding)


def test_foreign_keys_read_from_a_catalog_are_named_and_their_actions_in_words():
    rows = [("3", 1, "qty", "cats", None, "CASCADE"), ("fk_b", 1, "a", "t", "x", "n"), ("fk_b", 2, "b", "t", "y", "n")]
    assert constraints.foreign_keys_from_rows("stock", rows) == (
        ForeignKey("fk_b", ("a", "b"), "t", ("x", "y"), "SET NULL"),
        ForeignKey("stock_qty_fkey", ("qty",), "cats", (), "CASCADE"),
    )
    info = TableInfo(name="stock", columns=table(ROWS).columns, indexes=(Index("i", ("qty",)), Index("u", ("name",), True)),
                     foreign_keys=(ForeignKey("f", ("qty",), "cats", ("id",)),))  # fmt: skip
    rows_out = schema_changes.definition_rows(info, PG)
    assert rows_out[-1] == {
        "constraints": {"unique": [["u", ["name"]]], "foreign": [["f", ["qty"], "cats", ["id"], "NO ACTION"]]}
    }
    assert schema_changes.split(rows_out)[1] == schema_changes.constraints_of(info)

"""The SQL that empties a bi-directional subscriber's copy and its log before a (re-)copy."""

from __future__ import annotations

from replication_admin.engine import bidir_sql as sql
from replication_admin.engine import dialects
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType

ITEMS = TableInfo(
    name="items",
    columns=(
        Column("id", "integer", LogicalType("integer"), nullable=False, pk_position=1),
        Column("name", "varchar(40)", LogicalType("varchar", length=40)),
        Column("ROWGUID", "varchar(255)", LogicalType("varchar", length=255)),
    ),
)


def test_postgresql_truncates_the_copy_and_its_log_in_one_statement():
    plan = sql.init_empty_sql(dialects.get("postgresql"), ITEMS, "pg2")
    assert plan.statements == ('TRUNCATE TABLE "items", "RLOG_items"',)
    assert plan.finally_ == ()


def test_mariadb_truncates_under_table_locks_it_always_releases():
    plan = sql.init_empty_sql(dialects.get("mysql"), ITEMS, "my2")
    assert plan.statements == (
        "LOCK TABLES `items` WRITE, `RLOG_items` WRITE",
        "TRUNCATE TABLE `items`",
        "DELETE FROM `RLOG_items`",
    )
    assert plan.finally_ == ("UNLOCK TABLES",)


def test_sqlite_deletes_without_its_triggers_and_makes_the_subscribers_triggers_again():
    d = dialects.get("sqlite")
    plan = sql.init_empty_sql(d, ITEMS, "lite3")
    objects = sql.bidir_objects(d, ITEMS, "lite3", publisher=False)
    triggers = [s for s in objects.create if s.startswith("CREATE TRIGGER")]
    drops = [s for s in objects.drop if s.startswith("DROP TRIGGER")]
    assert len(triggers) == len(drops) == 3
    assert plan.statements == (*drops, 'DELETE FROM "items"', 'DELETE FROM "RLOG_items"', *triggers)
    assert not [s for s in plan.statements if s.startswith("DELETE") and "WHERE" in s]


def test_a_copy_other_tables_reference_is_emptied_by_delete_in_one_transaction():
    d = dialects.get("postgresql")
    assert d.incoming_keys_sql("items", "")[1] == ["public", "items"]
    assert dialects.get("sqlite").incoming_keys_sql("items", "") is None
    assert sql.init_delete_sql(d, ITEMS) == (
        'DELETE FROM "RLOG_items"',
        'DELETE FROM "items"',
        'DELETE FROM "RLOG_items"',
    )

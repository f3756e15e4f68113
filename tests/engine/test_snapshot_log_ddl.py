"""Snapshot log DDL per dialect (as text), and the refresh SQL built from quoted identifiers."""

from __future__ import annotations

from datetime import datetime

import pytest

from replication_admin.engine import dialects
from replication_admin.engine import refresh_sql as sql
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.snapshot_log import SnapshotLogError, rplog_ddl, rplog_name, snapshot_log
from replication_admin.engine.types import LogicalType

ORDERS = TableInfo(
    name="Orders",
    columns=(
        Column("OrderID", "integer", LogicalType("integer"), nullable=False, pk_position=1),
        Column("Freight", "numeric(10,2)", LogicalType("numeric", precision=10, scale=2)),
    ),
)
TWO_KEYS = TableInfo(
    name="Order Details",
    columns=(
        Column("OrderID", "integer", LogicalType("integer"), pk_position=1),
        Column("ProductID", "integer", LogicalType("integer"), pk_position=2),
        Column("Quantity", "smallint", LogicalType("smallint")),
    ),
)


@pytest.mark.parametrize(
    ("dialect", "triggers", "extra"),
    [
        ("sqlite", ("Orders_I_log", "Orders_U_log", "Orders_D_log"), {}),
        (
            "postgresql",
            ("Orders_I_log", "Orders_U_log", "Orders_D_log"),
            {"functions": ("Orders_I_log", "Orders_U_log", "Orders_D_log")},
        ),
        ("mysql", ("Orders_I_log", "Orders_U_log", "Orders_D_log"), {}),
        ("mssql", ("Orders_I_log", "Orders_U_log", "Orders_D_log"), {}),
        ("oracle", ("Orders_I_log", "Orders_U_log", "Orders_D_log"), {"functions": ("OPL_GETUTCDATE",)}),
        ("db2", ("Orders_I", "Orders_U", "Orders_D"), {"sequences": ("opl_seq_rowguid",)}),
        (
            "informix",
            ("Orders_I_log", "Orders_U_log", "Orders_D_log"),
            {"sequences": ("opl_seq_rowguid",), "procedures": ("Orders_R_proc", "Orders_U_proc")},
        ),
    ],
)
def test_each_dialect_creates_the_objects_the_reference_names(dialect, triggers, extra):
    d = dialects.get(dialect)
    objects = snapshot_log(d, ORDERS)
    assert objects.rlog_table == "RLOG_Orders"
    assert objects.triggers == triggers
    for kind, names in extra.items():
        assert getattr(objects, kind) == names
    text = "\n".join(objects.create)
    assert text.startswith(f"CREATE TABLE {d.quote('RLOG_Orders')} (")
    for column in ("RLOG_OrderID", "SNAPTIME", "DMLTYPE", "RLOG_ROWGUID"):
        assert d.quote(column) in text
    assert f"PRIMARY KEY ({d.quote('RLOG_OrderID')})" in text
    for name in triggers:
        assert f"CREATE TRIGGER {d.quote(name)}" in text
        assert any(d.quote(name) in stmt and stmt.startswith("DROP TRIGGER") for stmt in objects.drop)
    for op in ("'I'", "'U'", "'D'"):
        assert op in text
    for procedure in extra.get("procedures", ()):
        assert f"CREATE PROCEDURE {d.quote(procedure)}" in text
    assert objects.drop[-1].startswith("DROP TABLE") and "RLOG_Orders" in objects.drop[-1]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql", "mssql", "oracle", "db2", "informix"])
def test_a_primary_key_change_is_logged_as_delete_then_insert(dialect):
    objects = snapshot_log(dialects.get(dialect), TWO_KEYS)
    # The update logic: in the trigger, or in the function / procedure it calls.
    update = next(s for s in objects.create if "'U'" in s and "'D'" in s)
    assert update.index("'D'") < update.index("'I'") < update.rindex("'U'")
    d = dialects.get(dialect)
    compared = update if dialect != "informix" else update + "".join(objects.create)
    assert d.quote("ProductID") in compared  # both key columns are compared


def test_sqlite_and_mysql_snaptime_are_utc_with_microsecond_text_or_precision():
    lite = "\n".join(snapshot_log(dialects.get("sqlite"), ORDERS).create)
    assert "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'" in lite
    assert "UTC_TIMESTAMP(6)" in "\n".join(snapshot_log(dialects.get("mysql"), ORDERS).create)
    assert "now() AT TIME ZONE 'UTC'" in "\n".join(snapshot_log(dialects.get("postgresql"), ORDERS).create)


def test_hostile_names_stay_quoted_everywhere():
    hostile = TableInfo(
        name='ab "cd',
        columns=(Column('id "key"', "integer", LogicalType("integer"), pk_position=1),),
        schema="public",
    )
    pg = snapshot_log(dialects.get("postgresql"), hostile)
    assert '"RLOG_ab ""cd"' in pg.create[0] and '"RLOG_id ""key"""' in pg.create[0]
    body = "\n".join(pg.create)
    assert "$rlog$" in body  # dollar-quoted bodies with a tag that is not inside them
    my = snapshot_log(
        dialects.get("mysql"),
        TableInfo(name="a`b", columns=(Column("k`", "int", LogicalType("integer"), pk_position=1),)),
    )
    assert "`RLOG_a``b`" in my.create[0] and "`RLOG_k```" in my.create[0]


def test_a_dollar_tag_that_appears_in_a_name_is_not_used():
    tricky = TableInfo(name="x$rlog$y", columns=(Column("id", "integer", LogicalType("integer"), pk_position=1),))
    body = "\n".join(snapshot_log(dialects.get("postgresql"), tricky).create)
    assert "AS $rlog1$" in body


def test_tables_without_a_primary_key_or_with_too_long_names_are_refused():
    with pytest.raises(SnapshotLogError, match="no primary key"):
        snapshot_log(
            dialects.get("sqlite"), TableInfo(name="heap", columns=(Column("a", "int", LogicalType("integer")),))
        )
    long_table = TableInfo(name="t" * 60, columns=ORDERS.columns)
    with pytest.raises(SnapshotLogError, match="63-character limit"):
        snapshot_log(dialects.get("postgresql"), long_table)


def test_replay_log_names_follow_the_qualified_source_name_and_stay_short():
    assert rplog_name("demo", "Orders") == "RPLOG_demo_Orders"
    long = rplog_name("server", "x" * 80, limit=63)
    assert len(long) == 63 and long != rplog_name("server", "x" * 81, limit=63)
    ddl = rplog_ddl(dialects.get("mysql"), "RPLOG_demo_Orders")
    assert "PRIMARY KEY (`TARGET`, `RLOG_ROWGUID`)" in ddl


MOVED = (
    sql.Moved("k0", "OrderID", "OrderID", LogicalType("integer")),
    sql.Moved("v0", "Freight", "Freight", LogicalType("numeric", precision=10, scale=2)),
)


def test_the_log_window_joins_current_source_rows_and_filters_by_snaptime():
    d = dialects.get("postgresql")
    text = sql.log_window_select(
        d,
        TableInfo("Orders", ORDERS.columns, schema="s"),
        MOVED,
        's."Freight" > 1',
        datetime(2024, 5, 1, 12, 0, 0, 123),
    )
    assert 'FROM "s"."RLOG_Orders" r LEFT JOIN "s"."Orders" s ON s."OrderID" = r."RLOG_OrderID"' in text
    assert "WHERE r.\"SNAPTIME\" >= TIMESTAMP '2024-05-01 12:00:00.000123'" in text
    assert 'CASE WHEN s."OrderID" IS NULL THEN 0 WHEN (s."Freight" > 1) THEN 1 ELSE 0 END AS present' in text


@pytest.mark.parametrize(
    ("dialect", "delete", "record"),
    [
        ("postgresql", 'DELETE FROM "Orders" t USING "RSTG_Orders" s', "ON CONFLICT DO NOTHING"),
        ("mysql", "DELETE t FROM `Orders` t JOIN `RSTG_Orders` s", "INSERT IGNORE INTO `RPLOG_demo_Orders`"),
        (
            "sqlite",
            'DELETE FROM "Orders" WHERE ("OrderID") IN (SELECT k0 FROM "RSTG_Orders" WHERE batch = 3)',
            "INSERT OR IGNORE",
        ),
    ],
)
def test_a_batch_applies_deletes_inserts_and_replay_log_rows_together(dialect, delete, record):
    statements = sql.apply_increment_sql(
        dialects.get(dialect), "Orders", "", "RSTG_Orders", "RPLOG_demo_Orders", "Orders", MOVED, 3
    )
    assert len(statements) == 3
    assert statements[0].startswith(delete) and "batch = 3" in statements[0]
    assert "WHERE batch = 3 AND op = 'U'" in statements[1]
    assert record in statements[2] and "'Orders', rowguid, snaptime" in statements[2]
    assert sql.apply_increment_sql(dialects.get(dialect), "Orders", "", "RSTG_Orders", None, "Orders", MOVED, 0)[
        -1
    ].startswith("INSERT INTO")


def test_swaps_rename_in_place():
    assert sql.swap_sql(dialects.get("mysql"), "Orders", "", "RSTG_Orders", "RSWP_Orders")[0] == (
        "RENAME TABLE `Orders` TO `RSWP_Orders`, `RSTG_Orders` TO `Orders`"
    )
    pg = sql.swap_sql(dialects.get("postgresql"), "Orders", "public", "RSTG_Orders", "RSWP_Orders")
    assert pg == [
        'ALTER TABLE "public"."Orders" RENAME TO "RSWP_Orders"',
        'ALTER TABLE "public"."RSTG_Orders" RENAME TO "Orders"',
        'DROP TABLE "public"."RSWP_Orders"',
    ]

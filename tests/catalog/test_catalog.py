"""The catalog keeps Virtuoso's table names, column names and keys, and its constraints hold."""

from __future__ import annotations

from datetime import time
from pathlib import Path

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from replication_admin import models as m

# Virtuoso's system tables and their columns (reference: virtuoso-implementation-notes.md,
# virtuoso-replication.md "Replication system tables", SYS_REPL_ACCOUNTS / SYS_REPL_SUBSCRIBERS).
REFERENCE = {
    "SYS_SNAPSHOT": [
        "SN_NAME", "SN_QUERY", "SN_LAST_TS", "SN_IS_INCREMENTAL", "SN_SOURCE_TABLE", "SN_LAST_UPD_BM",
    ],
    "SYS_SNAPSHOT_LOG": ["SNL_SOURCE", "SNL_RLOG", "SNL_RPLOG"],
    "SYS_SNAPSHOT_PUB": ["SP_ITEM", "SP_TYPE", "SP_LAST_TS"],
    "SYS_SNAPSHOT_SUB": ["SS_SERVER", "SS_ITEM", "SS_TYPE", "SS_LAST_PULL_TS", "SS_LAST_PUSH_TS"],
    "SYS_SNAPSHOT_CR": ["CR_ID", "CR_TABLE_NAME", "CR_TYPE", "CR_PROC", "CR_ORDER"],
    "SYS_REPL_CR": ["CR_ID", "CR_TABLE_NAME", "CR_TYPE", "CR_PROC", "CR_ORDER"],
    "SYS_REPL_ACCOUNTS": [
        "SERVER", "ACCOUNT", "NTH", "LEVEL", "IS_MANDATORY", "IS_UPDATEABLE", "SYNC_USER",
        "P_MONTH", "P_DAY", "P_WDAY", "P_TIME",
    ],
    "SYS_REPL_SUBSCRIBERS": ["RS_SERVER", "RS_ACCOUNT", "RS_SUBSCRIBER", "RS_LEVEL", "RS_VALID"],
    "SYS_TP_ITEM": [
        "TI_SERVER", "TI_ACCT", "TI_TYPE", "TI_ITEM", "TI_OPTIONS", "TI_IS_COPY",
        "TI_DAV_USER", "TI_DAV_GROUP",
    ],
    "SYS_TP_GRANT": ["TPG_ACCT", "TPG_GRANTEE"],
    "SYS_SERVERS": ["SERVER", "DB_ADDRESS", "REPL_ADDRESS"],
    "SYS_SCHEDULED_EVENT": [
        "SE_NAME", "SE_START", "SE_SQL", "SE_LAST_COMPLETED", "SE_INTERVAL", "SE_LAST_ERROR",
        "SE_ENABLE_NOTIFY", "SE_NOTIFY", "SE_NOTIFICATION_SENT", "SE_DISABLED",
    ],
}  # fmt: skip

# Virtuoso's keys: the primary key column itself, or the unique constraint that stands for it.
KEYS = {
    "SYS_SNAPSHOT": ("SN_NAME",),
    "SYS_SNAPSHOT_LOG": ("SNL_SOURCE",),
    "SYS_SNAPSHOT_PUB": ("SP_ITEM", "SP_TYPE"),
    "SYS_SNAPSHOT_SUB": ("SS_SERVER", "SS_ITEM", "SS_TYPE"),
    "SYS_SNAPSHOT_CR": ("CR_ID",),
    "SYS_REPL_CR": ("CR_ID",),
    "SYS_REPL_ACCOUNTS": ("SERVER", "ACCOUNT"),
    "SYS_REPL_SUBSCRIBERS": ("RS_SERVER", "RS_ACCOUNT", "RS_SUBSCRIBER"),
    "SYS_TP_ITEM": ("TI_SERVER", "TI_ACCT", "TI_TYPE", "TI_ITEM"),
    "SYS_TP_GRANT": ("TPG_ACCT", "TPG_GRANTEE"),
    "SYS_SERVERS": ("SERVER",),
    "SYS_SCHEDULED_EVENT": ("SE_NAME",),
}


def _table_columns(table: str) -> list[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # Django's SQLite introspection trips over CHECK (... IN (1, 2)); ask SQLite directly.
            return [row[0] for row in cursor.execute("SELECT name FROM pragma_table_info(%s) ORDER BY cid", [table])]
        return [c.name for c in connection.introspection.get_table_description(cursor, table)]


def _keys(table: str) -> set[tuple[str, ...]]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            rows = cursor.execute("SELECT name, pk FROM pragma_table_info(%s) WHERE pk > 0 ORDER BY pk", [table])
            keys = {tuple(name for name, _ in rows.fetchall())}
            indexes = cursor.execute('SELECT name FROM pragma_index_list(%s) WHERE "unique" = 1', [table]).fetchall()
            for (index,) in indexes:
                cols = cursor.execute("SELECT name FROM pragma_index_info(%s) ORDER BY seqno", [index]).fetchall()
                keys.add(tuple(c for (c,) in cols))
            return keys
        constraints = connection.introspection.get_constraints(cursor, table)
    return {tuple(c["columns"]) for c in constraints.values() if c["primary_key"] or c["unique"]}


@pytest.mark.django_db
@pytest.mark.parametrize("table", sorted(REFERENCE))
def test_every_virtuoso_system_table_exists_with_its_columns_in_order(table):
    columns = _table_columns(table)
    reference = REFERENCE[table]
    assert [c for c in columns if c in reference] == reference, columns


@pytest.mark.django_db
@pytest.mark.parametrize("table", sorted(KEYS))
def test_virtuoso_keys_are_primary_keys_or_unique_constraints(table):
    assert KEYS[table] in _keys(table)


@pytest.mark.django_db
def test_extra_catalog_columns_are_prefixed_and_documented():
    text = (Path(__file__).parents[2] / "docs" / "catalog.md").read_text()
    for table, reference in REFERENCE.items():
        for column in _table_columns(table):
            if column not in reference and column != "id":
                assert f"`{column}`" in text, f"{table}.{column} is not documented in docs/catalog.md"


@pytest.mark.django_db
def test_the_registry_holds_virtuosos_defaults():
    assert m.RegistryEntry.get_int("snp_repl_tolerance_offset") == 15
    assert m.RegistryEntry.get_int("snp_repl_purge_offset") == 30
    assert m.RegistryEntry.get_value("repl_server_name") == "console"


@pytest.mark.django_db
def test_composite_keys_reject_duplicates():
    m.ReplSubscriber.objects.create(server="pub", account="acct", subscriber="sub1", level=0, valid=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        m.ReplSubscriber.objects.create(server="pub", account="acct", subscriber="sub1", level=5, valid=1)
    m.TpItem.objects.create(server="pub", acct="acct", type=2, item="DB.DBA.T")
    with pytest.raises(IntegrityError), transaction.atomic():
        m.TpItem.objects.create(server="pub", acct="acct", type=2, item="DB.DBA.T")
    m.SnapshotPublication.objects.create(item="Orders", type=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        m.SnapshotPublication.objects.create(item="Orders", type=2)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (m.ReplSubscriber, {"server": "p", "account": "a", "subscriber": "s", "valid": 2}),
        (m.SnapshotPublication, {"item": "x", "type": 3}),
        (m.SnapshotConflictResolver, {"table_name": "t", "type": "X", "proc": "p"}),
        (m.ReplAccount, {"server": "p", "account": "a", "p_month": 13}),
        (m.ReplAccount, {"server": "p", "account": "b", "p_wday": 0}),
        (m.ScheduledEvent, {"name": "e", "start": timezone.now(), "sql": "x", "interval": -1}),
        (m.Server, {"name": "s2", "dialect": "sqlite", "port": 70000}),
    ],
)
def test_check_constraints_refuse_values_outside_the_reference_domain(model, fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        model.objects.create(**fields)


@pytest.mark.django_db
@pytest.mark.parametrize("dialect", ["oracle", "firebird", ""])
def test_a_server_is_stored_only_with_a_live_dialect_of_the_registry(dialect):
    with pytest.raises(ValidationError, match=r"not a valid choice|cannot be blank"):
        m.Server.objects.create(name="s", dialect=dialect)
    with pytest.raises(ValidationError):
        m.Server(name="s", dialect=dialect).full_clean()
    assert not m.Server.objects.exists()


@pytest.mark.django_db
def test_an_incremental_snapshot_must_name_its_source_table():
    server = m.Server.objects.create(name="dst", dialect="sqlite", database="/tmp/x.db")
    with pytest.raises(IntegrityError), transaction.atomic():
        m.Snapshot.objects.create(name="s", query="select 1", is_incremental=1, dest_server=server, dest_table="s")
    m.Snapshot.objects.create(name="s", query="select 1", is_incremental=None, dest_server=server, dest_table="s")


@pytest.mark.django_db
def test_purger_settings_store_a_time_of_day():
    m.ReplAccount.objects.create(server="rep", account="pub", p_time=time(3, 30), p_wday=1)
    assert m.ReplAccount.objects.get(account="pub").p_time == time(3, 30)


def test_every_catalog_and_console_model_is_in_the_django_admin():
    for model in (
        m.Server, m.Snapshot, m.SnapshotLog, m.SnapshotPublication, m.SnapshotSubscription,
        m.SnapshotConflictResolver, m.TransactionalConflictResolver, m.ReplAccount, m.ReplSubscriber,
        m.TpItem, m.TpGrant, m.ScheduledEvent, m.RegistryEntry, m.JobRun, m.AuditEntry, m.ApiToken,
    ):  # fmt: skip
        assert admin.site.is_registered(model), model

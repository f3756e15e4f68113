"""Snapshot pages and the statement console."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, JobRun, ScheduledEvent, Snapshot, SnapshotLog
from tests.snapshots.test_snapshot_refresh import run
from tests.tables import create_table, fetch_all, insert_rows
from tests.users import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.live_db]


@pytest.fixture
def servers(make_server):
    source = make_server("sqlite", "shop")
    dest = make_server("postgresql", "wh")
    create_table(
        source,
        "orders",
        [("id", LogicalType("integer")), ("total", LogicalType("numeric", precision=10, scale=2))],
        ["id"],
    )
    insert_rows(source, "orders", ["id", "total"], [(i, f"{i}.50") for i in range(1, 21)])
    return source, dest


@pytest.mark.spark
def test_a_snapshot_created_from_the_form_is_filled_and_listed(editor_client, servers, spark, jobs_sync):
    response = editor_client.post(reverse("snapshots-new"), {
        "kind": "incremental", "source_server": "shop", "source_table": "orders", "condition": "id <= 10",
        "dest_server": "wh", "dest_table": "orders_copy",
    })  # fmt: skip
    job = JobRun.objects.get(kind="snapshot_refresh")
    assert response.status_code == 302 and response["Location"] == reverse("jobs-detail", args=[job.pk])
    assert job.state == "succeeded" and job.result["rows"] == 10
    assert fetch_all(servers[1], "SELECT count(*) FROM orders_copy") == [(10,)]
    listing = editor_client.get(reverse("snapshots")).content.decode()
    assert "wh.orders_copy" in listing and "succeeded" in listing


def test_the_form_names_what_is_wrong_and_creates_nothing(editor_client, servers):
    response = editor_client.post(reverse("snapshots-new"), {
        "kind": "incremental", "source_server": "shop", "source_table": "orders", "condition": "id <= 10; drop table orders",
        "dest_server": "wh", "dest_table": "orders_copy",
    })  # fmt: skip
    assert response.status_code == 200 and b"one boolean expression" in response.content
    response = editor_client.post(reverse("snapshots-new"), {
        "kind": "nonincremental", "source_server": "shop", "query": "delete from orders", "dest_server": "wh", "dest_table": "x",
    })  # fmt: skip
    assert b"must be a SELECT, found DELETE" in response.content
    assert not Snapshot.objects.exists() and fetch_all(servers[0], "SELECT count(*) FROM orders") == [(20,)]
    assert AuditEntry.objects.filter(action="snapshot.create", outcome="error").count() == 2


@pytest.mark.spark
def test_snapshot_detail_actions_refresh_schedule_compare_and_drop_with_delete(
    editor_client, servers, spark, jobs_sync
):
    source, dest = servers

    run("create snapshot log for orders; create snapshot wh.orders_copy from orders", source)
    name = "wh.orders_copy"
    insert_rows(source, "orders", ["id", "total"], [(100, "1.00")])
    response = editor_client.post(reverse("snapshots-refresh", args=[name]))
    refresh = JobRun.objects.filter(kind="snapshot_refresh").latest("id")
    assert response["Location"] == reverse("jobs-detail", args=[refresh.pk])
    assert refresh.result["mode"] == "incremental" and refresh.result["changes"] == 1

    editor_client.post(reverse("snapshots-schedule", args=[name]), {"every_minutes": "15"})
    assert ScheduledEvent.objects.get(name=f"snapshot {name}").interval == 15
    page = editor_client.get(reverse("snapshots-detail", args=[name])).content.decode()
    assert "UPDATE SNAPSHOT wh.orders_copy" in page and "15 minute(s)" in page

    editor_client.post(reverse("snapshots-compare", args=[name]))
    assert JobRun.objects.filter(kind="compare").latest("id").result["equal"] is True

    confirm = editor_client.get(reverse("snapshots-drop", args=[name]) + "?delete=1").content.decode()
    assert "Drop snapshot wh.orders_copy with delete?" in confirm
    editor_client.post(reverse("snapshots-drop", args=[name]), {"delete": "1"})
    assert not Snapshot.objects.exists() and not ScheduledEvent.objects.filter(name=f"snapshot {name}").exists()
    assert fetch_all(dest, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'orders_copy'") == [(0,)]


def test_snapshot_logs_are_created_purged_and_dropped_from_the_logs_page(editor_client, servers):
    page = editor_client.get(reverse("snapshots-logs", args=["shop"])).content.decode()
    assert "orders" in page and "Create log" in page
    editor_client.post(reverse("snapshots-log-action", args=["shop", "create"]), {"table": "orders"})
    assert SnapshotLog.objects.filter(table="orders").exists()
    page = editor_client.get(reverse("snapshots-logs", args=["shop"])).content.decode()
    assert "shop.RLOG_orders" in page and "RLOG_orders</td>" not in page  # the log table is not offered a log
    editor_client.post(reverse("snapshots-log-action", args=["shop", "purge"]), {"table": "orders"})
    editor_client.post(reverse("snapshots-log-action", args=["shop", "drop"]), {"table": "orders"})
    assert not SnapshotLog.objects.exists()
    actions = list(AuditEntry.objects.filter(target__startswith="shop.").values_list("action", flat=True))
    assert {"snapshot_log.create", "snapshot_log.purge", "snapshot_log.drop"} <= set(actions)


def test_viewers_cannot_create_logs_or_snapshots(viewer_client, servers):
    assert (
        viewer_client.post(reverse("snapshots-log-action", args=["shop", "create"]), {"table": "orders"}).status_code
        == 403
    )
    response = viewer_client.post(reverse("statements"), {"server": "shop", "text": "create snapshot log for orders"})
    assert response.status_code == 403 and b"may not run statements" in response.content
    assert not SnapshotLog.objects.exists()


def test_an_operator_runs_statements_but_not_those_that_create_or_drop(servers):
    client = Client()
    client.force_login(make_user("operator", "operate"))
    response = client.post(reverse("statements"), {"server": "shop", "text": "create snapshot log for orders"})
    assert response.status_code == 200 and b"may not snapshot_log.create" in response.content
    assert not SnapshotLog.objects.exists()


def test_the_statement_console_reports_parse_errors_with_their_position(editor_client, servers):
    response = editor_client.post(
        reverse("statements"),
        {"server": "shop", "text": "create snapshot log for orders;\ndrop snapshot log orders"},
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert "<html" not in body and "line 2, column 19: expected FOR" in body
    assert not SnapshotLog.objects.exists()  # nothing ran


def test_the_statement_compare_runs_statements_in_order_and_links_jobs(editor_client, servers, jobs_sync, spark):
    text = "create snapshot log for orders; create nonincremental snapshot wh.big as 'select id, total from orders where id > 9'"
    body = editor_client.post(
        reverse("statements"), {"server": "shop", "text": text}, HTTP_HX_REQUEST="true"
    ).content.decode()
    results = body.split('id="statement-history"')[0]  # the user's history comes with the results
    assert results.count("badge ok") == 2 and "created snapshot wh.big" in results
    job = JobRun.objects.get(kind="snapshot_refresh")
    assert reverse("jobs-detail", args=[job.pk]) in body
    assert fetch_all(servers[1], "SELECT count(*) FROM big") == [(11,)]


def test_the_ddl_page_shows_the_snapshot_log_for_every_dialect(viewer_client, servers):
    body = viewer_client.get(reverse("snapshots-log-ddl", args=["shop", "orders"])).content.decode()
    for label in ("SQLite", "PostgreSQL", "MariaDB / MySQL", "SQL Server", "Oracle", "IBM DB2", "Informix"):
        assert f"<h2>{label}</h2>" in body
    assert "OPL_GETUTCDATE" in body and "opl_seq_rowguid" in body and "orders_R_proc" in body


@pytest.mark.spark
def test_ticked_columns_become_the_snapshot_column_list(editor_client, servers, spark, jobs_sync):
    picker = editor_client.get(
        reverse("snapshots-columns"), {"source_server": "shop", "source_table": "orders"}
    ).content.decode()
    assert 'value="id" checked disabled' in picker and 'value="total"' in picker and "<html" not in picker
    create_table(
        servers[0],
        "wide",
        [("id", LogicalType("integer")), ("a", LogicalType("integer")), ("b", LogicalType("integer"))],
        ["id"],
    )
    editor_client.post(reverse("snapshots-new"), {
        "kind": "incremental", "source_server": "shop", "source_table": "wide", "column": ["b"],
        "dest_server": "wh", "dest_table": "narrow",
    })  # fmt: skip
    assert Snapshot.objects.get().source_columns == "b"
    assert fetch_all(
        servers[1],
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'narrow' ORDER BY ordinal_position",
    ) == [("id",), ("b",)]

"""The conflict inbox: filters, pagination, CSV export, the chart's data, the detail page and re-applying."""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.models import AuditEntry, ConflictBackup, JobRun, SnapshotPublication

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def conflict(created_at: datetime | None = None, **fields) -> ConflictBackup:
    values = {
        "item": "shop.items",
        "table_name": "items",
        "publisher": "shop",
        "source": "branch",
        "change_guid": f"branch@{uuid.uuid4()}",
        "origin": "branch",
        "primary_key": {"id": 1},
        "conflict_type": "U",
        "operation": "U",
        "decision": 3,
        "resolver": "default",
        "publisher_row": {"id": 1, "name": "pen", "price": "2.00", "ROWGUID": "shop@a"},
        "incoming_row": {"id": 1, "name": "pen", "price": "1.50", "ROWGUID": "branch@b"},
        "winning_row": {"id": 1, "name": "pen", "price": "2.00", "ROWGUID": "shop@a"},
        "losing_row": {"id": 1, "name": "pen", "price": "1.50", "ROWGUID": "branch@b"},
        **fields,
    }
    row = ConflictBackup.objects.create(**values)
    if created_at is not None:
        ConflictBackup.objects.filter(pk=row.pk).update(created_at=created_at)
        row.refresh_from_db()
    return row


def ids_on(body: str) -> list[int]:
    """The conflicts listed in the inbox's table, in order."""
    table = body.split('id="conflict-rows"', 1)[1].split("</table>", 1)[0]
    return [int(pk) for pk in re.findall(r'<a href="/conflicts/(\d+)/">', table)]


def test_every_inbox_url_sends_anonymous_users_to_the_login_page(client):
    row = conflict()
    for url in (
        reverse("conflicts"),
        reverse("conflicts-export"),
        reverse("conflicts-detail", args=[row.pk]),
        reverse("conflicts-reapply", args=[row.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next="), url
    response = client.post(reverse("conflicts-reapply", args=[row.pk]))
    assert response["Location"].startswith(reverse("login"))
    assert ConflictBackup.objects.get(pk=row.pk).reapplied_at is None


def test_the_empty_inbox_says_what_produces_conflicts_and_links_the_publications(viewer_client):
    body = viewer_client.get(reverse("conflicts")).content.decode()
    empty = body.split('id="conflicts-empty"', 1)[1].split("</div>", 1)[0]
    assert "No conflicts yet" in empty and "ROWGUID" in empty
    assert "insert" in empty and "update" in empty and "delete" in empty
    assert f'href="{reverse("publications")}"' in empty
    assert 'id="conflict-rows"' not in body and 'id="export-csv"' not in body


def test_filters_narrow_the_inbox_newest_first(viewer_client):
    SnapshotPublication.objects.create(item="shop.orders", table="orders")
    a = conflict(DAY, conflict_type="I", operation="I", decision=3)
    b = conflict(DAY + timedelta(hours=1), conflict_type="U", decision=1, resolver="items_cr_U_1")
    c = conflict(DAY + timedelta(days=2), conflict_type="D", operation="D", decision=5)
    d = conflict(DAY + timedelta(days=3), item="shop.orders", table_name="orders", conflict_type="U", decision=2)

    assert ids_on(viewer_client.get(reverse("conflicts")).content.decode()) == [d.pk, c.pk, b.pk, a.pk]
    cases = [
        ({"item": "shop.orders"}, [d.pk]),
        ({"item": "shop.items"}, [c.pk, b.pk, a.pk]),
        ({"table": "items"}, [c.pk, b.pk, a.pk]),
        ({"type": "U"}, [d.pk, b.pk]),
        ({"decision": "5"}, [c.pk]),
        ({"type": "U", "decision": "1"}, [b.pk]),
        ({"since": "2026-03-11"}, [d.pk, c.pk]),
        ({"until": "2026-03-10"}, [b.pk, a.pk]),
        ({"since": "2026-03-12", "until": "2026-03-12"}, [c.pk]),
    ]
    for params, expected in cases:
        body = viewer_client.get(reverse("conflicts"), params).content.decode()
        assert ids_on(body) == expected, params
    body = viewer_client.get(reverse("conflicts"), {"type": "I", "decision": "1"}).content.decode()
    assert "No conflicts match these filters" in body and "No conflicts yet" not in body
    options = viewer_client.get(reverse("conflicts")).content.decode().split('name="item"', 1)[1].split("</select>")[0]
    assert '<option value="shop.items">' in options and '<option value="shop.orders">' in options


def test_a_wrong_filter_value_is_named_and_the_other_filters_still_apply(viewer_client):
    keep = conflict(DAY, conflict_type="D", operation="D", decision=5)
    conflict(DAY, conflict_type="U")
    body = viewer_client.get(reverse("conflicts"), {"type": "D", "decision": "9"}).content.decode()
    assert "Decision: Select a valid choice" in body
    assert ids_on(body) == [keep.pk]
    body = viewer_client.get(reverse("conflicts"), {"since": "2026-03-12", "until": "2026-03-10"}).content.decode()
    assert "The end is before the start." in body


def test_htmx_requests_get_only_the_results_partial(viewer_client):
    row = conflict(DAY, conflict_type="I", operation="I")
    conflict(DAY, conflict_type="U")
    body = viewer_client.get(reverse("conflicts"), {"type": "I"}, HTTP_HX_REQUEST="true").content.decode()
    assert body.lstrip().startswith('<div id="conflict-results">')
    assert "<html" not in body and 'id="conflict-filters"' not in body and "SYS_SNAPSHOT_CR" not in body
    assert ids_on(body) == [row.pk]
    assert f'href="{reverse("conflicts-export")}?type=I"' in body  # the export follows the filter
    full = viewer_client.get(reverse("conflicts"), {"type": "I"}).content.decode()
    assert "<html" in full and 'hx-get="/conflicts/"' in full and 'action="/conflicts/"' in full


def test_pages_hold_fifty_conflicts_newest_first(viewer_client):
    base = timezone.now() - timedelta(days=1)
    rows = [conflict(base + timedelta(minutes=i)) for i in range(120)]
    newest_first = [r.pk for r in reversed(rows)]
    first = viewer_client.get(reverse("conflicts")).content.decode()
    assert ids_on(first) == newest_first[:50] and "page 1 of 3 (120 in all)" in first
    third = viewer_client.get(reverse("conflicts"), {"page": 3, "type": "U"}).content.decode()
    assert ids_on(third) == newest_first[100:] and "page 3 of 3" in third
    assert "type=U&page=2" in third  # the page links keep the filter


def test_ten_thousand_conflicts_list_filter_and_chart_in_a_few_queries(viewer_client, django_assert_max_num_queries):
    start = timezone.now() - timedelta(days=20)
    ConflictBackup.objects.bulk_create(
        [
            ConflictBackup(
                item="shop.items", table_name="items", publisher="shop", source="branch", change_guid=f"g{i}",
                origin="branch", primary_key={"id": i}, conflict_type="IUD"[i % 3], operation="IUD"[i % 3],
                decision=(3, 3, 5)[i % 3], resolver="default", winning_row={"id": i}, losing_row={"id": i},
            )
            for i in range(10_000)
        ],
        batch_size=2000,
    )  # fmt: skip
    ConflictBackup.objects.update(created_at=start)
    with django_assert_max_num_queries(13):
        body = viewer_client.get(reverse("conflicts"), {"type": "U"}).content.decode()
    assert len(ids_on(body)) == 50 and "(3333 in all)" in body
    with django_assert_max_num_queries(12):
        viewer_client.get(reverse("conflicts"), {"page": 67}, HTTP_HX_REQUEST="true")


def figure_of(body: str) -> dict:
    match = re.search(r'<script id="conflict-figure" type="application/json">(.*?)</script>', body, re.S)
    assert match, "the chart's data is missing"
    return json.loads(match.group(1))


def test_the_chart_counts_conflicts_per_day_and_type_of_the_filtered_rows(viewer_client):
    for _ in range(3):
        conflict(DAY, conflict_type="U")
    conflict(DAY, conflict_type="I", operation="I")
    conflict(DAY + timedelta(days=1), conflict_type="U")
    conflict(DAY + timedelta(days=1), conflict_type="D", operation="D", decision=5)
    conflict(DAY + timedelta(days=1), item="other.t", table_name="t", conflict_type="D", operation="D", decision=5)

    traces = {
        t["name"]: dict(zip(t["x"], t["y"], strict=True))
        for t in figure_of(viewer_client.get(reverse("conflicts")).content.decode())["data"]
    }
    assert traces == {
        "insert (I)": {"2026-03-10": 1},
        "update (U)": {"2026-03-10": 3, "2026-03-11": 1},
        "delete (D)": {"2026-03-11": 2},
    }
    body = viewer_client.get(reverse("conflicts"), {"item": "shop.items"}, HTTP_HX_REQUEST="true").content.decode()
    traces = {t["name"]: dict(zip(t["x"], t["y"], strict=True)) for t in figure_of(body)["data"]}
    assert traces["delete (D)"] == {"2026-03-11": 1}
    page = viewer_client.get(reverse("conflicts")).content.decode()
    assert "vendor/plotly-basic-3.7.0.min.js" in page and "js/conflict_chart.js" in page and "cdn" not in page.lower()


def test_the_csv_export_has_the_filtered_conflicts_with_their_rows(viewer_client):
    keep_old = conflict(DAY, conflict_type="U", primary_key={"id": 7}, resolver="items_cr_U_1", decision=1,
                        winning_row={"id": 7, "Name": "Grüße, \"quoted\""}, losing_row=None)  # fmt: skip
    keep_new = conflict(DAY + timedelta(days=1), conflict_type="U")
    conflict(DAY, conflict_type="I", operation="I")
    conflict(DAY, item="other.t", table_name="t", conflict_type="U")

    response = viewer_client.get(reverse("conflicts-export"), {"item": "shop.items", "type": "U"})
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    assert 'filename="conflicts.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == ["id", "created_at", "item", "table", "source", "origin", "type", "operation", "decision",
                       "resolver", "primary_key", "winning_row", "losing_row"]  # fmt: skip
    assert [int(r[0]) for r in rows[1:]] == [keep_new.pk, keep_old.pk]
    old = rows[2]
    assert old[1] == "2026-03-10T12:00:00+00:00" and old[2:10] == [
        "shop.items",
        "items",
        "branch",
        "branch",
        "U",
        "U",
        "1",
        "items_cr_U_1",
    ]
    assert json.loads(old[10]) == {"id": 7}
    assert json.loads(old[11]) == {"id": 7, "Name": 'Grüße, "quoted"'} and old[12] == ""
    everything = b"".join(viewer_client.get(reverse("conflicts-export")).streaming_content).decode()
    assert len(list(csv.reader(io.StringIO(everything)))) == 5


def diff_columns(body: str, table_id: str) -> list[str]:
    table = body.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr class="diff" data-column="([^"]+)">', table)


def all_columns(body: str, table_id: str) -> list[str]:
    table = body.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'data-column="([^"]+)"', table)


def test_the_detail_page_puts_winner_and_loser_side_by_side_and_marks_the_differences(viewer_client):
    row = conflict(
        winning_row={"id": 4, "name": "pen", "price": "2.00", "note": None, "ROWGUID": "shop@a"},
        losing_row={"id": 4, "name": "pen", "price": "1.50", "colour": "red", "note": None, "ROWGUID": "branch@b"},
        publisher_row={"id": 4, "name": "pen", "price": "2.00", "ROWGUID": "shop@a"},
        incoming_row={"id": 4, "name": "Pen", "price": "2.00", "ROWGUID": "branch@b"},
        primary_key={"id": 4}, resolver="items_cr_U_2", decision=3, note="price went up meanwhile",
    )  # fmt: skip
    body = viewer_client.get(reverse("conflicts-detail", args=[row.pk])).content.decode()
    assert all_columns(body, "winner-loser") == ["id", "name", "price", "note", "ROWGUID", "colour"]
    assert diff_columns(body, "winner-loser") == ["price", "ROWGUID", "colour"]
    assert diff_columns(body, "publisher-incoming") == ["name", "ROWGUID"]
    facts = body.split('id="conflict-facts"', 1)[1].split("</dl>", 1)[0]
    assert "3 · publisher wins" in facts and "items_cr_U_2" in facts and "price went up meanwhile" in facts
    assert "id=4" in facts and "branch" in facts
    assert "(absent)" in body  # colour is only in the losing version


def test_the_detail_page_links_the_sync_job_and_the_publication(viewer_client):
    job = JobRun.objects.create(kind="bidir_sync", target="REPL_UPDATE_SNAPSHOT shop.items", state="succeeded")
    publication = SnapshotPublication.objects.create(item="shop.items", table="items")
    row = conflict(job=job)
    body = viewer_client.get(reverse("conflicts-detail", args=[row.pk])).content.decode()
    assert f'href="{reverse("jobs-detail", args=[job.pk])}"' in body
    assert f'href="{reverse("publications-detail", args=[publication.pk])}"' in body


def test_viewers_see_conflicts_but_may_not_reapply_them(viewer_client):
    row = conflict()
    body = viewer_client.get(reverse("conflicts-detail", args=[row.pk])).content.decode()
    assert "Re-applying needs the operate permission" in body and 'id="reapply"' not in body
    response = viewer_client.post(reverse("conflicts-reapply", args=[row.pk]))
    assert response.status_code == 403
    entry = AuditEntry.objects.get(action="conflict.reapply")
    assert (
        entry.outcome == "denied"
        and entry.username == "viewer"
        and entry.detail == {"missing_permission": "replication_admin.operate"}
    )
    assert ConflictBackup.objects.get(pk=row.pk).reapplied_at is None


def test_reapplying_asks_first_and_is_offered_once(editor_client):
    row = conflict(primary_key={"id": 9})
    detail = editor_client.get(reverse("conflicts-detail", args=[row.pk])).content.decode()
    assert f'href="{reverse("conflicts-reapply", args=[row.pk])}"' in detail
    confirm = editor_client.get(reverse("conflicts-reapply", args=[row.pk])).content.decode()
    assert f"Re-apply the losing version of conflict #{row.pk}?" in confirm and "id=9" in confirm
    assert '<button class="btn danger" type="submit">Re-apply the losing version</button>' in confirm

    ConflictBackup.objects.filter(pk=row.pk).update(reapplied_at=DAY, reapplied_by="alice")
    detail = editor_client.get(reverse("conflicts-detail", args=[row.pk])).content.decode()
    panel = detail.split('id="reapply-panel"', 1)[1].split("</div>", 1)[0]
    assert "Re-applied by <strong>alice</strong>" in panel and "2026-03-10" in panel
    assert "disabled" in panel and 'id="reapply"' not in panel
    response = editor_client.get(reverse("conflicts-reapply", args=[row.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("conflicts-detail", args=[row.pk])
    listing = editor_client.get(reverse("conflicts")).content.decode()
    assert "re-applied" in listing.split('id="conflict-rows"', 1)[1]


def test_reapplying_an_already_reapplied_conflict_shows_the_reason_and_changes_nothing(editor_client):
    row = conflict()
    ConflictBackup.objects.filter(pk=row.pk).update(reapplied_at=DAY, reapplied_by="alice")
    response = editor_client.post(reverse("conflicts-reapply", args=[row.pk]), follow=True)
    assert "was already re-applied" in response.content.decode()
    assert ConflictBackup.objects.get(pk=row.pk).reapplied_by == "alice"

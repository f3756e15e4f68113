"""Conflict statistics per subscription and type over time (a page, a chart, /metrics), and the retention of
conflict backups: decided ones older than the retention are purged by the scheduler, held ones never."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.conflicts import actions as conflict_actions
from replication_admin.core.audit import Actor
from replication_admin.core.errors import ReplicationError
from replication_admin.models import AuditEntry, ConflictBackup, RegistryEntry
from replication_admin.tasks import scheduler_round
from tests.conflicts.test_conflict_views import conflict, ids_on

pytestmark = pytest.mark.django_db
TOKEN = "stats-token"


@pytest.fixture
def recorded():
    """shop.items: 3 update conflicts from branch today, 1 insert from branch 10 days ago, 2 updates from outlet
    40 days ago (one of them held, nobody has decided it); ORDERS.lines: 1 delete from branch 200 days ago."""
    now = timezone.now()
    for _ in range(3):
        conflict()
    conflict(now - timedelta(days=10), conflict_type="I", operation="I")
    conflict(now - timedelta(days=40), source="outlet")
    conflict(now - timedelta(days=40), source="outlet", decision=ConflictBackup.HELD)
    conflict(now - timedelta(days=200), item="ORDERS.lines", table_name="lines", conflict_type="D", operation="D")


def stats_rows(page: str) -> dict[tuple[str, str], list[int]]:
    """(subscription, type) → the counts of its row: today, 7 days, 30 days, kept, held."""
    rows = {}
    for sub, ctype, cells in re.findall(r'<tr data-subscription="([^"]+)" data-type="(\w)">(.*?)</tr>', page, re.S):
        rows[(sub, ctype)] = [int(n) for n in re.findall(r'<td class="num">(?:<span class="badge warn">)?(\d+)', cells)]
    return rows


def test_the_statistics_count_each_subscriptions_conflicts_by_type_today_this_week_this_month_and_kept(
    recorded, viewer_client
):
    page = viewer_client.get(reverse("conflicts-statistics")).content.decode()
    assert stats_rows(page) == {
        ("shop.items branch", "U"): [3, 3, 3, 3, 0],
        ("shop.items branch", "I"): [0, 0, 1, 1, 0],
        ("shop.items outlet", "U"): [0, 0, 0, 2, 1],
        ("ORDERS.lines branch", "D"): [0, 0, 0, 1, 0],
    }
    assert next(iter(stats_rows(page))) == ("shop.items branch", "U")  # the most this month first
    # the chart: one stacked trace per subscription with conflicts in the last 30 days
    found = re.search(r'id="conflict-stats-chart" class="chart page-chart" data-figure="([^"]+)"', page)
    assert found, "no chart"
    traces = {t["name"]: sum(t["y"]) for t in json.loads(html.unescape(found.group(1)))["data"]}
    assert traces == {"shop.items ← branch": 4}  # outlet's are 40 days old
    # the title says where the chart's days start, not a month it does not show
    ten_days_ago = (timezone.localdate() - timedelta(days=10)).strftime("%b %d")
    assert f"<h2>Per day and subscription, since {ten_days_ago}</h2>" in page
    assert 'id="retention-form"' not in page  # a viewer may not change the retention
    # each row leads to the inbox filtered to it
    assert "?item=shop.items&amp;source=outlet&amp;type=U" in page
    inbox = viewer_client.get(reverse("conflicts") + "?item=shop.items&source=outlet&type=U").content.decode()
    assert sorted(ids_on(inbox)) == sorted(ConflictBackup.objects.filter(source="outlet").values_list("pk", flat=True))


def test_metrics_count_the_conflicts_of_each_subscription_and_type(recorded, client, settings):
    settings.STATUS_TOKENS = [TOKEN]
    body = client.get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert 'repladmin_subscription_conflicts_total{item="shop.items",source="branch",type="update"} 3' in body
    assert 'repladmin_subscription_conflicts_total{item="shop.items",source="outlet",type="update"} 2' in body
    assert 'repladmin_subscription_conflicts_total{item="ORDERS.lines",source="branch",type="delete"} 1' in body


def test_the_scheduler_purges_decided_backups_past_the_retention_and_never_a_held_one(recorded):
    conflict_actions.do_set_conflict_retention(Actor.command(), 30)
    assert RegistryEntry.get_int("conflict_retention_days") == 30
    conflict_actions._last_purge["at"] = float("-inf")  # this process's last purge: long ago
    scheduler_round()
    kept = sorted((c.item, c.source, c.conflict_type, c.decision) for c in ConflictBackup.objects.all())
    assert kept == [
        ("shop.items", "branch", "I", 3),
        ("shop.items", "branch", "U", 3), ("shop.items", "branch", "U", 3), ("shop.items", "branch", "U", 3),
        ("shop.items", "outlet", "U", ConflictBackup.HELD),  # 40 days old, but it waits for a person
    ]  # fmt: skip
    purge = AuditEntry.objects.get(action="conflict.purge")
    assert purge.detail == {"days": 30, "purged": 2} and purge.via == Actor.scheduler().via
    scheduler_round()  # within the hour: no second purge, no second audit row
    assert AuditEntry.objects.filter(action="conflict.purge").count() == 1


def test_a_retention_of_zero_keeps_every_backup(recorded):
    conflict_actions.do_set_conflict_retention(Actor.command(), 0)
    assert conflict_actions.purge_expired_conflicts() == 0 and ConflictBackup.objects.count() == 7


def test_the_retention_is_set_by_an_editor_and_refused_in_one_line_out_of_range(recorded, editor_client,
                                                                                  viewer_client):  # fmt: skip
    page = editor_client.get(reverse("conflicts-statistics")).content.decode()
    assert 'id="retention-form"' in page and 'value="90"' in page  # the registry's default
    response = editor_client.post(reverse("conflicts-retention"), {"days": "14"}, follow=True)
    assert "Decided conflicts are kept 14 days" in response.content.decode()
    assert RegistryEntry.get_int("conflict_retention_days") == 14
    response = editor_client.post(reverse("conflicts-retention"), {"days": "-3"}, follow=True)
    assert "the retention must be 0 (keep every backup) to 36500 days, not -3" in response.content.decode()
    response = editor_client.post(reverse("conflicts-retention"), {"days": "a week"}, follow=True)
    assert "The retention is a number of days, not &#x27;a week&#x27;." in response.content.decode()
    assert RegistryEntry.get_int("conflict_retention_days") == 14
    assert viewer_client.post(reverse("conflicts-retention"), {"days": "1"}).status_code == 403
    assert RegistryEntry.get_int("conflict_retention_days") == 14
    with pytest.raises(ReplicationError):
        conflict_actions.do_set_conflict_retention(Actor.command(), 40_000)

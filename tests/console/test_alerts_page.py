"""The Alerts page lists every alert by state (open, acknowledged, resolved, all) with a count on each tab, filters by
kind and text, and lets an operator acknowledge an open one and come back to the same view; the dashboard counts
open alerts and today's and this week's conflicts, per publication."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.alerts import raise_alert, resolve_alerts
from replication_admin.models import Alert, AuditEntry, ConflictBackup

pytestmark = pytest.mark.django_db


@pytest.fixture
def alerts() -> dict[str, Alert]:
    halted = raise_alert(Alert.Kind.APPLY_HALTED, "pub/acc → s1", "apply halted at level 12: duplicate key")
    raise_alert(Alert.Kind.APPLY_HALTED, "pub/acc → s1", "apply halted at level 12: duplicate key")  # counts up
    follower = raise_alert(Alert.Kind.FOLLOWER_DOWN, "pub/acc → s2", "no live follower serves it")
    failed = raise_alert(Alert.Kind.JOB_FAILED, "snapshot demo.Orders", "server demo unreachable")
    resolve_alerts(Alert.Kind.JOB_FAILED, "snapshot demo.Orders", "job #9 succeeded")
    unreachable = raise_alert(Alert.Kind.SERVER_UNREACHABLE, "branch", "connection refused")
    Alert.objects.filter(pk=unreachable.pk).update(acknowledged_at=timezone.now(), acknowledged_by="alice")
    return {"halted": halted, "follower": follower, "failed": failed, "unreachable": unreachable}


def rows(response) -> dict[int, str]:
    return {alert.pk: state for alert, state in response.context["rows"]}


def test_the_page_shows_open_alerts_first_with_a_count_for_each_state(viewer_client, alerts):
    response = viewer_client.get(reverse("alerts"))
    assert response.status_code == 200
    assert rows(response) == {alerts["halted"].pk: "open", alerts["follower"].pk: "open"}
    assert dict(response.context["states"]) == {"open": 2, "acknowledged": 1, "resolved": 1, "all": 4}
    page = response.content.decode()
    assert "apply halted at level 12" in page and "connection refused" not in page
    assert '<td class="num">2</td>' in page  # the halted alert was raised twice


@pytest.mark.parametrize(
    ("state", "expected"),
    [("resolved", {"failed": "resolved"}), ("acknowledged", {"unreachable": "acknowledged"}),
     ("all", {"halted": "open", "follower": "open", "failed": "resolved", "unreachable": "acknowledged"})],
)  # fmt: skip
def test_each_state_tab_lists_its_alerts_with_how_they_closed(viewer_client, alerts, state, expected):
    response = viewer_client.get(reverse("alerts"), {"state": state})
    assert rows(response) == {alerts[name].pk: s for name, s in expected.items()}
    page = response.content.decode()
    if state == "resolved":
        assert "job #9 succeeded" in page
    if state == "acknowledged":
        assert "by alice" in page


def test_kind_and_text_filters_narrow_the_list_and_the_tab_counts(viewer_client, alerts):
    response = viewer_client.get(reverse("alerts"), {"state": "all", "kind": "follower_down"})
    assert rows(response) == {alerts["follower"].pk: "open"}
    assert dict(response.context["states"]) == {"open": 1, "acknowledged": 0, "resolved": 0, "all": 1}
    response = viewer_client.get(reverse("alerts"), {"state": "all", "q": "duplicate key"})
    assert rows(response) == {alerts["halted"].pk: "open"}
    # An unknown state or kind filters nothing away: the open alerts, all kinds.
    response = viewer_client.get(reverse("alerts"), {"state": "bogus", "kind": "'; DROP"})
    assert rows(response) == {alerts["halted"].pk: "open", alerts["follower"].pk: "open"}


def test_an_operator_acknowledges_from_the_page_and_comes_back_to_the_same_view(operator_client, alerts):
    view = reverse("alerts") + "?state=open&kind=apply_halted"
    assert "Acknowledge" in operator_client.get(view).content.decode()
    response = operator_client.post(reverse("alerts-acknowledge", args=[alerts["halted"].pk]), {"next": view})
    assert response.status_code == 302 and response["Location"] == view
    halted = Alert.objects.get(pk=alerts["halted"].pk)
    assert halted.acknowledged_at is not None and halted.acknowledged_by == "operator"
    assert AuditEntry.objects.filter(action="alert.acknowledge", username="operator", outcome="ok").count() == 1
    assert rows(operator_client.get(view)) == {}
    assert rows(operator_client.get(reverse("alerts"), {"state": "acknowledged"}))[halted.pk] == "acknowledged"


def test_a_next_address_on_another_host_sends_the_operator_to_the_dashboard(operator_client, alerts):
    response = operator_client.post(
        reverse("alerts-acknowledge", args=[alerts["follower"].pk]), {"next": "https://elsewhere.example/"}
    )
    assert response.status_code == 302 and response["Location"] == reverse("dashboard")


def test_a_viewer_sees_no_acknowledge_button_and_is_refused_and_audited(viewer_client, alerts):
    assert "Acknowledge</button>" not in viewer_client.get(reverse("alerts")).content.decode()
    response = viewer_client.post(reverse("alerts-acknowledge", args=[alerts["halted"].pk]), {"next": "/alerts/"})
    assert response.status_code == 403
    assert Alert.objects.get(pk=alerts["halted"].pk).acknowledged_at is None
    assert AuditEntry.objects.filter(action="alert.acknowledge", username="viewer", outcome="denied").count() == 1


def test_no_open_alerts_says_so_and_links_the_history(viewer_client):
    raise_alert(Alert.Kind.LAG, "pub/acc → s1", "lag 40 s over 30 s")
    resolve_alerts(Alert.Kind.LAG, "pub/acc → s1", "lag 2 s")
    page = viewer_client.get(reverse("alerts")).content.decode()
    assert 'id="no-open-alerts"' in page and "?state=all" in page


def conflict(item: str, hours_ago: float) -> None:
    n = ConflictBackup.objects.count()
    backup = ConflictBackup.objects.create(
        kind="snapshot", item=item, table_name=item.split(".")[-1], publisher="demo", source="branch",
        change_guid=f"{item}@{n}", origin="branch", primary_key={"id": 1}, conflict_type="U",
        operation="U", decision=3, resolver="default",
    )  # fmt: skip
    ConflictBackup.objects.filter(pk=backup.pk).update(created_at=timezone.now() - timedelta(hours=hours_ago))


def test_the_dashboard_counts_open_alerts_and_conflicts_today_this_week_and_per_publication(viewer_client, alerts):
    midnight_hours = (timezone.localtime() - timezone.localtime().replace(hour=0, minute=0, second=0)).seconds / 3600
    for _ in range(3):
        conflict("demo.Orders", 0)
    conflict("demo.Orders", midnight_hours + 30)  # this week, not today
    conflict("demo.Products", midnight_hours + 50)
    conflict("demo.Products", 24 * 9)  # older than the week
    response = viewer_client.get(reverse("dashboard"))
    recent = response.context["recent_conflicts"]
    assert (recent.today, recent.week) == (3, 5)
    assert recent.by_item == [("demo.Orders", 3, 4), ("demo.Products", 0, 1)]
    assert response.context["open_alert_count"] == 2
    page = response.content.decode()
    assert 'id="recent-conflicts"' in page and "5 in 7 days" in page
    assert f"?item=demo.Orders&amp;since={recent.week_since.isoformat()}" in page

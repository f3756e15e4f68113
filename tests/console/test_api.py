"""The read-only status API (/api/status) and Prometheus metrics (/metrics): token access instead of the session
login, JSON matching the catalog, a well-formed exposition with escaped labels, and a fixed number of queries."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from replication_admin.models import (
    ConflictBackup,
    JobRun,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Server,
    SkippedTransaction,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
)
from tests.users import make_user

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-status-token"
HOSTILE = 'a"b\\c\nd'


@pytest.fixture
def tokens(settings):
    settings.STATUS_TOKENS = ["another-token", TOKEN]
    return settings


def bearer(token: str = TOKEN) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def conflict(n: int, kind: str, conflict_type: str, decision: int, days_ago: float = 0) -> ConflictBackup:
    row = ConflictBackup.objects.create(
        kind=kind, item="demo.t", table_name="t", publisher="demo", source="branch", change_guid=f"branch@{n}",
        origin="branch", primary_key={"id": n}, conflict_type=conflict_type, operation=conflict_type,
        decision=decision, resolver="default",
    )  # fmt: skip
    if days_ago:
        ConflictBackup.objects.filter(pk=row.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    return row


def job(kind: str, state: str, hours_ago: float, total: float | None = None, **params) -> JobRun:
    finished = timezone.now() - timedelta(hours=hours_ago)
    return JobRun.objects.create(
        kind=kind, target=kind, params=params, state=state, started_at=finished - timedelta(seconds=total or 1),
        finished_at=finished, timings={"total": total} if total is not None else {},
    )  # fmt: skip


@pytest.fixture
def catalog(db) -> dict:
    """A transactional publication with four subscribers (ok, invalid, lagging, failing), two snapshots (one whose
    last refresh failed, one never refreshed), a bi-directional publication, a failing event, jobs and conflicts."""
    now = timezone.now()
    demo = Server.objects.create(name="demo", dialect="sqlite", database="/tmp/demo.sqlite3")
    ReplAccount.objects.create(server="pub", account="acc", level=120, count=120)
    subscriber = {"server": "pub", "account": "acc", "init_state": "done"}
    ReplSubscriber.objects.create(**subscriber, subscriber="s_ok", level=120, count=120, state=ReplSubscriber.IN_SYNC,
                                  last_sync_at=now)  # fmt: skip
    ReplSubscriber.objects.create(**subscriber, subscriber="s_invalid", level=100, count=100, valid=0)
    ReplSubscriber.objects.create(**subscriber, subscriber="s_lagging", level=110, count=110,
                                  state=ReplSubscriber.OFF, last_sync_at=now - timedelta(hours=1))  # fmt: skip
    ReplSubscriber.objects.create(**subscriber, subscriber="s_failing", level=120, count=120,
                                  state=ReplSubscriber.DISCONNECTED, last_error="connection refused")  # fmt: skip
    ReplSubscriber.objects.create(**subscriber, subscriber="s_gone", subscribed=False)
    for count in (111, 112):
        SkippedTransaction.objects.create(server="pub", account="acc", subscriber="s_lagging", level=count,
                                          count=count, error="duplicate key", repaired_at=now)  # fmt: skip

    Snapshot.objects.create(name="demo.t1", query="SELECT * FROM src1", dest_server=demo, dest_table="t1",
                            source_server=demo, source_table="src1", is_incremental=1)  # fmt: skip
    Snapshot.objects.create(name="demo.t2", query="SELECT * FROM src2", dest_server=demo, dest_table="t2")
    success = job("snapshot_refresh", JobRun.State.SUCCEEDED, 5, 2.5, snapshot="demo.t1")
    failure = job("snapshot_refresh", JobRun.State.FAILED, 1, 1.5, snapshot="demo.t1")
    job("snapshot_refresh", JobRun.State.FAILED, 72, 0.5, snapshot="gone")
    job("compare", JobRun.State.SUCCEEDED, 2, 4.0)
    job("compare", JobRun.State.RUNNING, 0)

    publication = SnapshotPublication.objects.create(item="demo.t", server=demo, table="t", last_sync_at=now)
    SnapshotSubscription.objects.create(server="branch", item="demo.t", init_state="done", last_sync_at=now)
    SnapshotSubscription.objects.create(server="branch2", item="demo.t", init_state="done", last_sync_at=now,
                                        last_error="push to branch2: no such table")  # fmt: skip
    SnapshotSubscription.objects.create(server="branch3", item="demo.t", init_state="none")

    ScheduledEvent.objects.create(name="typo", start=now, sql="UPDATE SNAPSHOOT x", interval=1, last_error="syntax")
    ScheduledEvent.objects.create(name="fine", start=now, sql="UPDATE SNAPSHOT demo.t1", interval=1)

    conflict(1, "snapshot", "U", 3)
    conflict(2, "snapshot", "U", 3)
    conflict(3, "transactional", "I", 1)
    conflict(4, "snapshot", "D", 5, days_ago=3)
    conflict(5, "transactional", "U", ConflictBackup.HELD, days_ago=2)  # held for a person
    return {"success": success, "failure": failure, "publication": publication}


# --- access ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["api-status", "metrics"])
def test_without_configured_tokens_the_endpoints_say_the_api_is_not_enabled(client, settings, catalog, name):
    settings.STATUS_TOKENS = []
    response = client.get(reverse(name), **bearer())
    assert response.status_code == 403
    assert "not enabled" in response.json()["error"]
    assert b"pub" not in response.content


@pytest.mark.parametrize("name", ["api-status", "metrics"])
@pytest.mark.parametrize(
    "headers",
    [{}, bearer("wrong"), bearer(""), bearer(TOKEN + "x"), {"HTTP_AUTHORIZATION": f"Basic {TOKEN}"}],
    ids=["missing", "wrong", "empty", "longer", "not-bearer"],
)
def test_a_missing_or_wrong_token_is_refused_and_nothing_leaks(client, tokens, catalog, name, headers):
    response = client.get(reverse(name), **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json() == {"error": "a valid token is required"}


@pytest.mark.parametrize("name", ["api-status", "metrics"])
def test_the_endpoints_do_not_use_the_session_login_a_signed_in_user_still_needs_a_token(tokens, name):
    """The token endpoints are deliberately outside the console's session login (no redirect to the login page)."""
    client = Client()
    assert client.get(reverse(name)).status_code == 401
    client.force_login(make_user("viewer"))
    assert client.get(reverse(name)).status_code == 401
    assert client.get(reverse(name), **bearer()).status_code == 200


@pytest.mark.parametrize("name", ["api-status", "metrics"])
@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_the_endpoints_only_answer_get(client, tokens, name, method):
    response = getattr(client, method)(reverse(name), **bearer())
    assert response.status_code == 405


def test_any_configured_token_is_accepted(client, tokens):
    assert client.get(reverse("api-status"), **bearer("another-token")).status_code == 200


def test_only_the_metrics_endpoint_takes_the_token_in_the_query_string(client, tokens):
    assert client.get(reverse("metrics"), {"token": TOKEN}).status_code == 200
    assert client.get(reverse("metrics"), {"token": "wrong"}).status_code == 401
    assert client.get(reverse("api-status"), {"token": TOKEN}).status_code == 401


# --- /api/status ----------------------------------------------------------------------------------------------


def status(client) -> dict:
    response = client.get(reverse("api-status"), **bearer())
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    return response.json()


def test_the_status_reports_transactional_subscribers_with_lag_gaps_and_states(client, tokens, catalog):
    body = status(client)
    [publication] = body["transactional_publications"]
    assert (publication["server"], publication["account"], publication["level"], publication["count"]) == (
        "pub", "acc", 120, 120,
    )  # fmt: skip
    subs = {s["subscriber"]: s for s in publication["subscribers"]}
    assert set(subs) == {"s_ok", "s_invalid", "s_lagging", "s_failing"}  # the unsubscribed row is left out
    assert {name: s["state"] for name, s in subs.items()} == {
        "s_ok": "ok", "s_invalid": "invalid", "s_lagging": "lagging", "s_failing": "failing",
    }  # fmt: skip
    assert {name: s["lag"] for name, s in subs.items()} == {"s_ok": 0, "s_invalid": 20, "s_lagging": 10, "s_failing": 0}
    assert subs["s_invalid"]["valid"] is False and subs["s_ok"]["valid"] is True
    assert subs["s_lagging"]["gaps"] == 2 and subs["s_ok"]["gaps"] == 0
    assert subs["s_lagging"]["unrepaired_gaps"] == 0  # repaired gaps: it reads lagging, not failing
    assert subs["s_ok"]["sync_state"] == "IN SYNC" and subs["s_failing"]["sync_state"] == "DISCONNECTED"
    assert subs["s_failing"]["last_error"] == "connection refused"
    assert publication["state"] == "failing"


def test_a_lagging_subscriber_beyond_half_the_backlog_limit_is_lagging_even_in_sync(client, tokens, catalog):
    ReplAccount.objects.filter(account="acc").update(max_backlog=10)
    ReplSubscriber.objects.filter(subscriber="s_ok").update(count=114, level=114)
    subs = {s["subscriber"]: s for s in status(client)["transactional_publications"][0]["subscribers"]}
    assert subs["s_ok"]["lag"] == 6 and subs["s_ok"]["state"] == "lagging"


def test_the_status_reports_snapshots_with_their_last_refresh(client, tokens, catalog):
    snapshots = {s["name"]: s for s in status(client)["snapshots"]}
    failed, never = snapshots["demo.t1"], snapshots["demo.t2"]
    assert failed["state"] == "failing" and failed["incremental"] is True
    assert (failed["source_server"], failed["source_table"]) == ("demo", "src1")
    assert failed["last_refresh"]["job"] == catalog["failure"].pk
    assert failed["last_refresh"]["state"] == "failed" and failed["last_refresh"]["duration_seconds"] == 1.5
    assert failed["last_refresh"]["finished_at"] == catalog["failure"].finished_at.isoformat()
    assert failed["last_success_at"] == catalog["success"].finished_at.isoformat()
    assert never["state"] == "never" and never["last_refresh"] is None and never["incremental"] is False


def test_the_status_reports_bidirectional_publications_with_their_subscribers(client, tokens, catalog):
    [publication] = status(client)["bidirectional_publications"]
    subs = {s["server"]: s for s in publication["subscribers"]}
    # The publisher demo is registered, but its SQLite file is not there: the copied subscription cannot be read
    # live and says so rather than "ok"; the failing and the never-copied ones keep their states.
    assert {name: s["state"] for name, s in subs.items()} == {
        "branch": "unreachable", "branch2": "failing", "branch3": "never",
    }  # fmt: skip
    assert subs["branch"]["reachable"] is False and subs["branch"]["pending_rows"] is None
    assert "server demo unreachable" in subs["branch"]["last_error"]
    assert subs["branch3"]["state_label"] == "not initialised"
    assert subs["branch2"]["last_error"] == "push to branch2: no such table"
    assert publication["item"] == "demo.t" and publication["state"] == "failing"


def test_the_status_counts_failed_jobs_and_conflicts_and_lists_failing_events(client, tokens, catalog):
    body = status(client)
    assert body["jobs"] == {"failed_last_24h": 1}
    assert body["conflicts"] == {"total": 5, "last_24h": 3, "held": 1}
    assert [(e["name"], e["last_error"], e["state"]) for e in body["scheduled_events_failing"]] == [
        ("typo", "syntax", "failing")
    ]
    assert body["state"] == "failing"
    assert body["generated_at"].endswith("+00:00")


def test_an_empty_catalog_is_ok(client, tokens):
    body = status(client)
    assert body["state"] == "ok"
    assert body["snapshots"] == body["transactional_publications"] == body["bidirectional_publications"] == []
    assert body["conflicts"] == {"total": 0, "last_24h": 0, "held": 0}


def test_reading_the_status_writes_nothing(client, tokens, catalog):
    with CaptureQueriesContext(connection) as queries:
        status(client)
        client.get(reverse("metrics"), **bearer())
    writes = [q["sql"] for q in queries if not q["sql"].lstrip().upper().startswith(("SELECT", "SAVEPOINT", "RELEASE"))]
    assert writes == []


def add_subscribers(n: int) -> None:
    ReplAccount.objects.get_or_create(server="big", account="acc", defaults={"level": 500, "count": 500})
    start = ReplSubscriber.objects.filter(server="big").count()
    ReplSubscriber.objects.bulk_create(
        ReplSubscriber(server="big", account="acc", subscriber=f"sub{i:03}", level=i, count=i, init_state="done")
        for i in range(start, start + n)
    )
    SkippedTransaction.objects.bulk_create(
        SkippedTransaction(server="big", account="acc", subscriber=f"sub{i:03}", level=1, count=1, error="x")
        for i in range(start, start + n)
    )


@pytest.mark.parametrize("name", ["api-status", "metrics"])
def test_the_number_of_queries_does_not_grow_with_fifty_subscribers(
    client, tokens, catalog, django_assert_max_num_queries, name
):
    add_subscribers(1)
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse(name), **bearer()).status_code == 200
    add_subscribers(49)
    # 16: the status API also finds the servers its live reads use, once per kind of item (3 queries), and which
    # publications capture from the WAL; the metrics read their own counts and then every item's lag and pending
    # changes as the status API does; both read the components (core/heartbeats.py: the live followers, every
    # process heartbeat, the subscriptions that want a follower: 3 queries); the state of each kind of item also
    # reads which tables it needs and the servers that hold them (core/presence.py), the snapshot logs, the
    # subscriptions' schedules and their gaps (5 queries); the Spark row reads the service's heartbeat (its
    # master, executors and cores): the beat of this service, else the latest one (2 queries); the metrics also
    # count the conflicts of each subscription and type (1 grouped query) and read the latest validation of each
    # table (1 query per kind of validated item: transactional, bi-directional, snapshot); the transactional and the
    # snapshot states read the open drift alerts (1 query each); the transactional states read the publications'
    # grants (1 query: a revoked grant shows at once)
    limit = {"api-status": 16 + 3 + 5 + 2 + 1 + 1 + 1, "metrics": 23 + 3 + 5 + 2 + 1 + 3 + 2 + 1}[name]
    with django_assert_max_num_queries(limit), CaptureQueriesContext(connection) as fifty:
        response = client.get(reverse(name), **bearer())
    assert response.status_code == 200
    assert len(fifty) == len(one)
    if name == "api-status":
        big = next(p for p in response.json()["transactional_publications"] if p["server"] == "big")
        assert len(big["subscribers"]) == 50


# --- /metrics -------------------------------------------------------------------------------------------------

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"(,|$)')
UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_labels(text: str) -> dict[str, str]:
    labels, pos = {}, 0
    while pos < len(text):
        match = LABEL.match(text, pos)
        assert match, f"bad labels at {text[pos:]!r}"
        labels[match[1]] = re.sub(r"\\.", lambda m: UNESCAPE[m[0]], match[2])
        pos = match.end()
    return labels


def parse_exposition(text: str) -> dict[str, dict]:
    """Families by name: {"help", "type", "samples": {(sample name, sorted label items): value}}. Checks that every
    line is a HELP, TYPE or `name{labels} value` line, that each family has HELP and TYPE before its samples, and
    that every value is a number."""
    assert text.endswith("\n")
    families: dict[str, dict] = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, keyword, name, rest = line.split(" ", 3)
            families.setdefault(name, {"samples": {}})[keyword.lower()] = rest
            continue
        assert not line.startswith("#") and line.strip(), f"unexpected line {line!r}"
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match[1], parse_labels(match[2] or ""), float(match[3])
        family = name if name in families else re.sub(r"_(sum|count)$", "", name)
        assert family in families, f"{name} has no HELP/TYPE before it"
        assert {"help", "type"} <= families[family].keys(), f"{family} lacks HELP or TYPE"
        if family != name:
            assert families[family]["type"] == "summary"
        families[family]["samples"][(name, tuple(sorted(labels.items())))] = value
    for name, family in families.items():
        assert family.get("help") and family.get("type") in {"gauge", "counter", "summary"}, name
    return families


def metrics(client) -> dict[str, dict]:
    response = client.get(reverse("metrics"), **bearer())
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse_exposition(response.content.decode())


def value(families: dict, name: str, family: str | None = None, **labels) -> float | None:
    return families[family or name]["samples"].get((name, tuple(sorted(labels.items()))))


def test_the_metrics_parse_and_report_the_transactional_levels_lag_and_validity(client, tokens, catalog):
    m = metrics(client)
    assert value(m, "repladmin_trx_publication_level", publisher="pub", account="acc") == 120
    sub = {"publisher": "pub", "account": "acc"}
    assert value(m, "repladmin_trx_subscriber_level", **sub, subscriber="s_lagging") == 110
    assert value(m, "repladmin_trx_subscriber_lag", **sub, subscriber="s_lagging") == 10
    assert value(m, "repladmin_trx_subscriber_lag", **sub, subscriber="s_invalid") == 20
    assert value(m, "repladmin_trx_subscriber_valid", **sub, subscriber="s_invalid") == 0
    assert value(m, "repladmin_trx_subscriber_valid", **sub, subscriber="s_ok") == 1
    assert value(m, "repladmin_skipped_transactions_total", **sub, subscriber="s_lagging") == 2
    assert value(m, "repladmin_skipped_transactions_total", **sub, subscriber="s_ok") == 0
    assert value(m, "repladmin_trx_subscriber_level", **sub, subscriber="s_gone") is None
    assert m["repladmin_skipped_transactions_total"]["type"] == "counter"
    assert m["repladmin_trx_subscriber_lag"]["type"] == "gauge"


def test_the_metrics_count_conflicts_and_jobs_and_sum_job_durations(client, tokens, catalog):
    m = metrics(client)
    assert m["repladmin_conflicts_total"]["type"] == "counter"
    assert value(m, "repladmin_conflicts_total", kind="snapshot", type="update", decision="publisher wins") == 2
    assert value(m, "repladmin_conflicts_total", kind="transactional", type="insert", decision="subscriber wins") == 1
    assert value(m, "repladmin_conflicts_total", kind="snapshot", type="delete", decision="ignored") == 1
    assert value(m, "repladmin_jobs_total", kind="snapshot_refresh", state="failed") == 2
    assert value(m, "repladmin_jobs_total", kind="snapshot_refresh", state="succeeded") == 1
    assert value(m, "repladmin_jobs_total", kind="compare", state="running") is None  # not final: not a counter
    assert value(m, "repladmin_jobs_in_progress", kind="compare", state="running") == 1
    assert m["repladmin_jobs_total"]["type"] == "counter" and m["repladmin_jobs_in_progress"]["type"] == "gauge"
    duration = "repladmin_job_duration_seconds"
    assert m[duration]["type"] == "summary"
    assert value(m, duration + "_sum", duration, kind="snapshot_refresh") == pytest.approx(4.5)
    assert value(m, duration + "_count", duration, kind="snapshot_refresh") == 3
    assert value(m, duration + "_sum", duration, kind="compare") == pytest.approx(4.0)
    assert value(m, duration + "_count", duration, kind="compare") == 1  # the running job has no total yet


def test_the_metrics_give_each_snapshot_its_last_successful_refresh_time(client, tokens, catalog):
    m = metrics(client)
    name = "repladmin_snapshot_last_success_timestamp_seconds"
    assert value(m, name, snapshot="demo.t1") == pytest.approx(catalog["success"].finished_at.timestamp())
    assert value(m, name, snapshot="demo.t2") is None  # never refreshed


def test_hostile_label_values_are_escaped(client, tokens):
    ReplAccount.objects.create(server="pub", account="acc", level=3, count=3)
    ReplSubscriber.objects.create(server="pub", account="acc", subscriber=HOSTILE, level=1, count=1, init_state="done")
    body = client.get(reverse("metrics"), **bearer()).content.decode()
    assert 'subscriber="a\\"b\\\\c\\nd"' in body
    m = parse_exposition(body)
    assert value(m, "repladmin_trx_subscriber_lag", publisher="pub", account="acc", subscriber=HOSTILE) == 2
    subs = status(client)["transactional_publications"][0]["subscribers"]
    assert subs[0]["subscriber"] == HOSTILE


def test_an_empty_catalog_still_gives_every_metric_family(client, tokens):
    m = metrics(client)
    assert {
        "repladmin_trx_publication_level", "repladmin_trx_subscriber_level", "repladmin_trx_subscriber_lag",
        "repladmin_trx_subscriber_valid", "repladmin_skipped_transactions_total", "repladmin_conflicts_total",
        "repladmin_jobs_total", "repladmin_jobs_in_progress", "repladmin_job_duration_seconds",
        "repladmin_snapshot_last_success_timestamp_seconds",
    } <= m.keys()  # fmt: skip

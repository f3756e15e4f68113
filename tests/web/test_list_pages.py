"""Every list table sorts (whitelisted keys, an arrow on the sorted column, a click toggles it), filters (`?q=` and
each list's own filters) and paginates with the other query parameters kept; and with 10,000 conflicts and 1,000
subscriptions of each kind every console page renders in under 200 ms of server time."""

from __future__ import annotations

import gc
import html
import re
import time
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from replication_admin.bidir.selectors import PUBLICATION_SORTS, SUBSCRIPTION_SORTS
from replication_admin.conflicts.views import CONFLICT_SORTS
from replication_admin.console.audit_log import AUDIT_SORTS
from replication_admin.console.jobs import JOB_SORTS
from replication_admin.console.scheduler import EVENT_SORTS
from replication_admin.models import (
    AuditEntry,
    ConflictBackup,
    JobRun,
    LevelSample,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Server,
    SkippedTransaction,
    Snapshot,
    SnapshotLog,
    SnapshotPublication,
    SnapshotSubscription,
    TpItem,
)
from replication_admin.servers.views import SERVER_SORTS
from replication_admin.snapshots.views import LOG_SORTS, SNAPSHOT_SORTS
from replication_admin.transactional.selectors import TRX_PUBLICATION_SORTS, TRX_SUBSCRIPTION_SORTS
from tests.web.conftest import make_user

pytestmark = pytest.mark.django_db

BUDGET_MS = 200
TOKEN = "list-pages-status-token"
N_SERVERS, N_SNAPSHOTS, N_LOGS, N_EVENTS, N_JOBS, N_AUDIT = 40, 300, 100, 400, 3000, 3000
N_PUBLICATIONS, SUBS_PER_PUBLICATION = 50, 20  # 1,000 bi-directional subscriptions
N_ACCOUNTS, SUBS_PER_ACCOUNT = 25, 40  # 1,000 transactional subscriptions
N_CONFLICTS = 10_000
LOG_TEXT = "INFO reading the snapshot log\n" * 80  # what a real job keeps in its log: the list never needs it


def _seed() -> None:
    """A console that has run for a while: servers, snapshots with their refresh jobs and schedules, bi-directional
    publications with 1,000 subscriptions, transactional publications with 1,000 subscribers, 10,000 conflicts."""
    now = timezone.now()
    servers = Server.objects.bulk_create(
        Server(name=f"srv{i:03d}", dialect=("sqlite", "postgresql", "mysql")[i % 3], host=f"db{i}.example",
               port=5432, database=f"/tmp/srv{i:03d}.sqlite3", user="repl", last_check_ok=(None, True, False)[i % 3],
               last_check_at=now - timedelta(minutes=i))
        for i in range(N_SERVERS)
    )  # fmt: skip
    Snapshot.objects.bulk_create(
        Snapshot(name=f"srv{i % N_SERVERS:03d}.copy{i:03d}", query=f"SELECT * FROM t{i}",
                 is_incremental=1 if i % 2 else None, source_table=f"t{i}" if i % 2 else None,
                 source_server=servers[(i + 1) % N_SERVERS], dest_server=servers[i % N_SERVERS],
                 dest_table=f"copy{i:03d}", last_ts=now - timedelta(hours=i))
        for i in range(N_SNAPSHOTS)
    )  # fmt: skip
    SnapshotLog.objects.bulk_create(
        SnapshotLog(source=f"srv{i % N_SERVERS:03d}.t{i:03d}", rlog=f"RLOG_t{i:03d}", rplog=f"RPLOG_t{i:03d}",
                    server=servers[i % N_SERVERS], table=f"t{i:03d}")
        for i in range(N_LOGS)
    )  # fmt: skip
    editor = User.objects.create_user("seed-editor")
    states = ("succeeded", "succeeded", "failed", "running", "cancelled")
    JobRun.objects.bulk_create(
        JobRun(kind="snapshot_refresh", target=f"copy{i % N_SNAPSHOTS:03d}",
               params={"snapshot": f"srv{i % N_SERVERS:03d}.copy{i % N_SNAPSHOTS:03d}"}, state=states[i % 5],
               progress_done=i, progress_total=N_JOBS, log=LOG_TEXT, result={"rows": i}, timings={"total": 1.5},
               started_at=now - timedelta(minutes=i, seconds=5), finished_at=now - timedelta(minutes=i),
               created_by=editor if i % 2 else None)
        for i in range(N_JOBS)
    )  # fmt: skip
    AuditEntry.objects.bulk_create(
        AuditEntry(username=f"user{i % 7}", action=("server.register", "snapshot.refresh", "bidir.sync")[i % 3],
                   target=f"target{i:04d}", outcome=("ok", "error", "denied")[i % 3], detail={"n": i})
        for i in range(N_AUDIT)
    )  # fmt: skip
    ScheduledEvent.objects.bulk_create(
        ScheduledEvent(name=f"snapshot srv{i % N_SERVERS:03d}.copy{i:03d}", start=now - timedelta(days=1),
                       sql=f"REPL_SNP ('copy{i:03d}')", interval=10 + i % 50, disabled=i % 9 == 0,
                       last_error="timeout" if i % 13 == 0 else None, server=f"srv{i % N_SERVERS:03d}")
        for i in range(N_EVENTS)
    )  # fmt: skip
    SnapshotPublication.objects.bulk_create(
        SnapshotPublication(item=f"srv{i % N_SERVERS:03d}.pub{i:02d}", server=servers[i % N_SERVERS], table=f"pub{i:02d}",
                            last_ts=now - timedelta(minutes=i), last_sync_at=now - timedelta(minutes=2 * i))
        for i in range(N_PUBLICATIONS)
    )  # fmt: skip
    SnapshotSubscription.objects.bulk_create(
        SnapshotSubscription(server=f"branch{j:02d}", item=f"srv{i % N_SERVERS:03d}.pub{i:02d}",
                             init_state=("done", "done", "copying", "none")[j % 4], init_rows_done=j * 10,
                             init_rows_total=500, last_sync_at=now - timedelta(minutes=i + j),
                             last_pull_ts=now - timedelta(minutes=j), last_push_ts=now - timedelta(minutes=i),
                             last_error="refused" if (i + j) % 17 == 0 else "")
        for i in range(N_PUBLICATIONS)
        for j in range(SUBS_PER_PUBLICATION)
    )  # fmt: skip
    ReplAccount.objects.bulk_create(
        ReplAccount(server=f"srv{i % N_SERVERS:03d}", account=f"acct{i:02d}", level=1000 + i, count=1000 + i,
                    log_file=f"acct{i:02d}.log", is_updateable=i % 2)
        for i in range(N_ACCOUNTS)
    )  # fmt: skip
    TpItem.objects.bulk_create(
        TpItem(server=f"srv{i % N_SERVERS:03d}", acct=f"acct{i:02d}", type=2, item=f"tbl{k}")
        for i in range(N_ACCOUNTS)
        for k in range(3)
    )  # fmt: skip
    ReplSubscriber.objects.bulk_create(
        ReplSubscriber(server=f"srv{i % N_SERVERS:03d}", account=f"acct{i:02d}", subscriber=f"sub{j:02d}",
                       level=1000 + i - j % 5, count=1000 + i - j % 5, valid=0 if j % 23 == 0 else 1,
                       state=j % 4, init_state="done" if j % 6 else "none",
                       last_sync_at=now - timedelta(minutes=j), created_at=now)
        for i in range(N_ACCOUNTS)
        for j in range(SUBS_PER_ACCOUNT)
    )  # fmt: skip
    SkippedTransaction.objects.bulk_create(
        SkippedTransaction(server=f"srv{i % N_SERVERS:03d}", account=f"acct{i:02d}", subscriber="sub01", level=k,
                           count=k, error="duplicate key")
        for i in range(N_ACCOUNTS)
        for k in range(3)
    )  # fmt: skip
    LevelSample.objects.bulk_create(
        LevelSample(server="srv000", account="acct00", subscriber=f"sub{j:02d}", at=now - timedelta(minutes=k),
                    level=1000 - k, publisher_level=1000, lag=k)
        for j in range(SUBS_PER_ACCOUNT)
        for k in range(50)
    )  # fmt: skip
    ConflictBackup.objects.bulk_create(
        (
            ConflictBackup(
                item=f"srv{i % N_SERVERS:03d}.pub{i % N_PUBLICATIONS:02d}", table_name=f"pub{i % N_PUBLICATIONS:02d}",
                publisher=f"srv{i % N_SERVERS:03d}", source=f"branch{i % SUBS_PER_PUBLICATION:02d}",
                change_guid=f"branch@{i}", origin=f"branch{i % SUBS_PER_PUBLICATION:02d}", primary_key={"id": i},
                conflict_type="IUD"[i % 3], operation="IUD"[i % 3], decision=(1, 2, 3, 5)[i % 4],
                resolver=f"cr_{i % 11}", publisher_row={"id": i, "name": "pen"}, incoming_row={"id": i, "name": "ink"},
                winning_row={"id": i, "name": "pen"}, losing_row={"id": i, "name": "ink"},
            )
            for i in range(N_CONFLICTS)
        ),
        batch_size=2000,
    )  # fmt: skip
    # Spread the conflicts over 30 days (created_at is auto_now_add), newest with the highest id.
    first = ConflictBackup.objects.order_by("id").values_list("id", flat=True).first()
    for day in range(30):
        ConflictBackup.objects.filter(id__gte=first + day * 334, id__lt=first + (day + 1) * 334).update(
            created_at=now - timedelta(days=30 - day)
        )


SEEDED = (ConflictBackup, LevelSample, SkippedTransaction, ReplSubscriber, TpItem, ReplAccount, SnapshotSubscription,
          SnapshotPublication, ScheduledEvent, AuditEntry, JobRun, SnapshotLog, Snapshot, Server)  # fmt: skip


@pytest.fixture(scope="module")
def big_console(django_db_setup, django_db_blocker):
    """The seeded catalog, made once for this module (committed, so every test sees it) and removed after."""
    with django_db_blocker.unblock():
        _seed()
    yield
    with django_db_blocker.unblock():
        for model in SEEDED:
            model.objects.all().delete()
        User.objects.filter(username="seed-editor").delete()


@pytest.fixture
def editor(big_console) -> Client:
    client = Client()
    client.force_login(make_user("list-editor", "edit", "operate"))
    return client


@pytest.fixture
def quiet_gc():
    """Time the views, not the garbage collector: a test run holds far more live objects than a server process, and
    a full collection over them lands in whichever request happens to trigger it."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def timed_get(client: Client, url: str, **headers) -> tuple[float, object]:
    """The best of five server times (ms) of a GET, with the last response: the best, because on a shared machine
    the others only add the time other processes took the CPU."""
    best, response = float("inf"), None
    for _ in range(5):
        start = time.perf_counter()
        response = client.get(url, **headers)
        best = min(best, (time.perf_counter() - start) * 1000)
    return best, response


def table_rows(body: str, table_id: str) -> list[str]:
    table = body.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return table.split("<tbody>", 1)[1].split("<tr")[1:]


def conflict_ids(body: str) -> list[int]:
    table = body.split('id="conflict-rows"', 1)[1].split("</table>", 1)[0]
    return [int(pk) for pk in re.findall(r'<a href="/conflicts/(\d+)/">', table)]


def hrefs(body: str, pattern: str) -> list[dict[str, list[str]]]:
    """The query parameters of every link whose text matches `pattern`."""
    return [
        parse_qs(urlsplit(html.unescape(href)).query)
        for href, text in re.findall(r'<a href="([^"]*)"[^>]*>(.*?)</a>', body, re.S)
        if re.search(pattern, text)
    ]


# --- speed: every page under 200 ms with the big catalog ---------------------------------------------------


def test_every_console_page_renders_in_under_200_ms_with_ten_thousand_conflicts_and_a_thousand_subscriptions(
    editor, settings, capsys, quiet_gc
):
    settings.STATUS_TOKENS = [TOKEN]
    publication = SnapshotPublication.objects.get(item="srv001.pub01")
    conflict = ConflictBackup.objects.order_by("-id").first()
    urls = [
        reverse("dashboard"),
        reverse("dashboard-charts"),
        reverse("servers"),
        reverse("servers") + "?sort=-checked&dialect=sqlite",
        reverse("snapshots"),
        reverse("snapshots") + "?sort=-last_ts&page=3",
        reverse("snapshots") + "?q=copy1&log_sort=-created",
        reverse("publications"),
        reverse("publications") + "?sort=-subscribers&trx_sort=-level",
        reverse("subscriptions"),
        reverse("subscriptions") + "?sort=-last_sync&page=20",
        reverse("subscriptions") + "?trx_sort=-level&trx_page=20",
        reverse("subscriptions") + "?q=branch07&trx_q=sub1",
        reverse("conflicts"),
        reverse("conflicts") + "?sort=-table",
        reverse("conflicts") + "?sort=source&type=U&page=40",
        reverse("conflicts") + "?q=pub07&decision=3",
        reverse("conflicts") + "?page=200",
        reverse("conflicts-detail", args=[conflict.pk]),
        reverse("jobs"),
        reverse("jobs") + "?sort=by&page=30",
        reverse("jobs") + "?state=failed&q=copy01",
        reverse("audit"),
        reverse("audit") + "?sort=target&outcome=denied&page=5",
        reverse("scheduler"),
        reverse("scheduler") + "?sort=-interval&state=failing",
        reverse("publications-detail", args=[publication.pk]),
        reverse("trx-publications-detail", args=["srv001", "acct01"]),
        reverse("trx-subscriptions-detail", args=["sub01", "srv001", "acct01"]),
        reverse("snapshots-detail", args=["srv001.copy001"]),
        reverse("servers-detail", args=["srv001"]),
        "/metrics?token=" + TOKEN,
    ]
    timings: dict[str, float] = {}
    for url in urls:
        timings[url], response = timed_get(editor, url)
        assert response.status_code == 200, url
    htmx = {"HTTP_HX_REQUEST": "true"}
    for url in (reverse("dashboard"), reverse("conflicts") + "?type=U&page=3", reverse("jobs") + "?sort=kind"):
        timings[url + " (htmx)"], response = timed_get(editor, url, **htmx)
        assert response.status_code == 200 and b"<html" not in response.content, url
    timings["/api/status"], response = timed_get(editor, reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    status = response.json()
    assert sum(len(p["subscribers"]) for p in status["bidirectional_publications"]) == 1000
    assert sum(len(p["subscribers"]) for p in status["transactional_publications"]) == 1000
    assert status["conflicts"]["total"] == N_CONFLICTS

    with capsys.disabled():
        slowest = sorted(timings.items(), key=lambda kv: -kv[1])
        print("\nserver time, best of 5 (ms):", *(f"  {ms:7.1f}  {url}" for url, ms in slowest), sep="\n")
    too_slow = {url: round(ms) for url, ms in timings.items() if ms >= BUDGET_MS}
    assert not too_slow, f"over {BUDGET_MS} ms: {too_slow}"


def test_the_pages_show_the_big_catalog_in_pages_with_its_counts(editor):
    body = editor.get(reverse("conflicts")).content.decode()
    assert len(conflict_ids(body)) == 50 and f"page 1 of 200 ({N_CONFLICTS} in all)" in body
    assert conflict_ids(body)[0] == ConflictBackup.objects.order_by("-created_at", "-id").first().pk
    body = editor.get(reverse("subscriptions")).content.decode()
    assert (
        len(table_rows(body, "snapshot-subscriptions")) == 50 and len(table_rows(body, "trx-subscription-rows")) == 50
    )
    assert body.count("(1000 in all)") == 2
    body = editor.get(reverse("jobs")).content.decode()
    assert f"({N_JOBS} in all)" in body and LOG_TEXT[:20] not in body
    response = editor.get(reverse("dashboard"))
    assert response.context["items_total"] == N_SNAPSHOTS + N_PUBLICATIONS + 2000
    assert f"of all {N_SNAPSHOTS + N_PUBLICATIONS + 2000} items" in response.content.decode()


# --- sorting -------------------------------------------------------------------------------------------------


# Each list table: its page, the context name of its Listing, its sort keys, and the model row of a listed row.
LISTS: list[tuple[str, str, dict, Callable]] = [
    ("servers", "servers", SERVER_SORTS, lambda row: row),
    ("snapshots", "snapshots", SNAPSHOT_SORTS, lambda row: row[0]),
    ("snapshots", "logs", LOG_SORTS, lambda row: row),
    ("publications", "publications", PUBLICATION_SORTS, lambda row: row[0]),
    ("publications", "trx_publications", TRX_PUBLICATION_SORTS, lambda row: row["account"]),
    ("subscriptions", "snapshot_subscriptions", SUBSCRIPTION_SORTS, lambda row: row[0]),
    ("subscriptions", "trx_subscriptions", TRX_SUBSCRIPTION_SORTS, lambda row: row["sub"]),
    ("conflicts", "conflicts", CONFLICT_SORTS, lambda row: row),
    ("jobs", "jobs", JOB_SORTS, lambda row: row),
    ("audit", "entries", AUDIT_SORTS, lambda row: row),
    ("scheduler", "events", EVENT_SORTS, lambda row: row),
]


def value_of(obj, field: str):
    """A row's value of a sort field ("created_by__username" follows the relation), None sorting first."""
    for part in field.removeprefix("-").split("__"):
        obj = getattr(obj, part, None)
    return obj


def sort_key(value) -> tuple:
    return (value is not None, value)


@pytest.mark.parametrize(("page", "name", "sorts", "model_row"), LISTS, ids=[f"{p}-{n}" for p, n, _, _ in LISTS])
def test_every_list_sorts_by_each_of_its_keys_both_ways(editor, page, name, sorts, model_row):
    for key, fields in sorts.items():
        field = fields if isinstance(fields, str) else fields[0]
        for sort in (key, f"-{key}"):
            listing = editor.get(reverse(page), {f"{editor_prefix(name)}sort": sort}).context[name]
            assert listing.sort == sort, (name, sort)
            values = [sort_key(value_of(model_row(row), field)) for row in listing.page.object_list]
            assert values, (name, sort)
            expected = sorted(values, reverse=sort.startswith("-") != field.startswith("-"))
            assert values == expected, (name, sort)


def editor_prefix(name: str) -> str:
    return {"logs": "log_", "trx_publications": "trx_", "trx_subscriptions": "trx_"}.get(name, "")


@pytest.mark.parametrize(("page", "name", "sorts", "model_row"), LISTS, ids=[f"{p}-{n}" for p, n, _, _ in LISTS])
def test_an_unknown_sort_key_is_ignored_and_the_default_order_kept(editor, page, name, sorts, model_row):
    param = f"{editor_prefix(name)}sort"
    default = editor.get(reverse(page)).context[name]
    default_rows = [model_row(r).pk for r in default.page.object_list]
    for bogus in ("nope", "-nope", "password_encrypted", "-__class__", "id;drop table x", "--name", ""):
        response = editor.get(reverse(page), {param: bogus})
        assert response.status_code == 200, bogus
        listing = response.context[name]
        assert listing.sort == default.sort and [model_row(r).pk for r in listing.page.object_list] == default_rows


def test_conflict_list_sorts_by_table_descending(editor):
    body = editor.get(reverse("conflicts"), {"sort": "-table"}).content.decode()
    expected = list(ConflictBackup.objects.order_by("-table_name", "-id").values_list("id", flat=True)[:50])
    assert conflict_ids(body) == expected
    assert re.search(r'<th class="sortable sorted-desc" aria-sort="descending"><a href="[^"]*sort=table"[^>]*>Table '
                     r'<span class="arrow">▼</span>', body)  # fmt: skip


def test_a_sortable_header_toggles_its_direction_keeps_the_filters_and_starts_again_at_page_one(editor):
    body = editor.get(reverse("conflicts"), {"type": "U", "page": 3, "sort": "table"}).content.decode()
    (table,) = hrefs(body, r"^Table")
    assert table == {"type": ["U"], "sort": ["-table"]}  # toggled, filter kept, page dropped
    (source,) = hrefs(body, r"^From")
    assert source == {"type": ["U"], "sort": ["source"]}
    assert 'aria-sort="ascending"' in body and "▲" in body
    # A date column sorts newest first on its first click.
    (created,) = hrefs(editor.get(reverse("jobs")).content.decode(), r"^Created")
    assert created == {"sort": ["-created"]}


def test_page_links_keep_the_sort_and_the_filters(editor):
    body = editor.get(reverse("conflicts"), {"sort": "-table", "type": "U", "page": 2}).content.decode()
    (following,) = hrefs(body, r"next")
    assert following == {"sort": ["-table"], "type": ["U"], "page": ["3"]}
    (previous,) = hrefs(body, r"previous")
    assert previous["page"] == ["1"] and previous["sort"] == ["-table"]
    page_two = conflict_ids(body)
    expected = ConflictBackup.objects.filter(conflict_type="U").order_by("-table_name", "-id")
    assert page_two == list(expected.values_list("id", flat=True)[50:100])


def test_two_tables_on_one_page_sort_and_page_apart(editor):
    body = editor.get(
        reverse("subscriptions"), {"trx_sort": "-level", "trx_page": 2, "sort": "server"}
    ).content.decode()
    trx = table_rows(body, "trx-subscription-rows")
    levels = [int(re.search(r'<td class="num">(\d+)</td>', row).group(1)) for row in trx]
    assert levels == sorted(levels, reverse=True) and len(levels) == 50
    snapshot = table_rows(body, "snapshot-subscriptions")
    assert snapshot[0].split("<td>", 1)[1].startswith("branch00")  # its own sort, first page
    (following,) = [h for h in hrefs(body, r"next") if h.get("trx_page") == ["3"]]
    assert following == {"trx_sort": ["-level"], "sort": ["server"], "trx_page": ["3"]}
    (level,) = hrefs(body, r"^Level")
    assert level == {"trx_sort": ["level"], "sort": ["server"]}  # the other table's page is kept, its own restarts


# --- filters ---------------------------------------------------------------------------------------------------


def test_the_text_filter_narrows_each_list(editor):
    cases = [
        ("servers", "servers", {"q": "srv01"}, Server.objects.filter(name__icontains="srv01").count()),
        ("snapshots", "snapshots", {"q": "copy01"}, Snapshot.objects.filter(name__icontains="copy01").count()),
        ("snapshots", "logs", {"log_q": "t00"}, 10),
        ("publications", "publications", {"q": "pub0"}, 10),
        ("publications", "trx_publications", {"trx_q": "acct1"}, 10),
        ("subscriptions", "snapshot_subscriptions", {"q": "branch07"}, N_PUBLICATIONS),
        ("subscriptions", "trx_subscriptions", {"trx_q": "acct03"}, SUBS_PER_ACCOUNT),
        ("conflicts", "conflicts", {"q": "pub07"}, N_CONFLICTS // N_PUBLICATIONS),
        ("jobs", "jobs", {"q": "copy007"}, N_JOBS // N_SNAPSHOTS),
        ("audit", "entries", {"q": "target000"}, 10),
        ("scheduler", "events", {"q": "copy00"}, 10),
    ]
    for page, name, params, count in cases:
        listing = editor.get(reverse(page), params).context[name]
        assert listing.page.paginator.count == count, (name, params)
        assert listing.q == next(iter(params.values()))


def test_the_text_filter_and_the_list_filters_combine_with_sorting(editor):
    body = editor.get(reverse("conflicts"), {"q": "pub07", "type": "U", "sort": "source"}).content.decode()
    expected = ConflictBackup.objects.filter(table_name="pub07", conflict_type="U").order_by("source", "id")
    assert f"({expected.count()} in all)" in body or expected.count() <= 50
    assert conflict_ids(body) == list(expected.values_list("id", flat=True)[:50])
    assert 'name="sort" value="source"' in body  # the filter form keeps the sort
    listing = editor.get(reverse("scheduler"), {"state": "failing", "sort": "-interval"}).context["events"]
    events = list(listing.page.object_list)
    assert events and all(e.last_error for e in events)
    assert [e.interval for e in events] == sorted((e.interval for e in events), reverse=True)
    listing = editor.get(reverse("servers"), {"dialect": "mysql", "q": "srv0"}).context["servers"]
    assert {s.dialect for s in listing.page.object_list} == {"mysql"}


def test_a_filter_that_matches_nothing_says_so_and_links_back_to_the_whole_list(editor):
    for page, params in [("servers", {"q": "zzz"}), ("snapshots", {"q": "zzz"}), ("publications", {"q": "zzz"}),
                         ("subscriptions", {"trx_q": "zzz"}), ("jobs", {"q": "zzz"}), ("audit", {"q": "zzz"}),
                         ("scheduler", {"q": "zzz"}), ("conflicts", {"q": "zzz"})]:  # fmt: skip
        body = editor.get(reverse(page), params).content.decode()
        assert "match" in body and f'<a href="{reverse(page)}' in body, page


# --- empty lists say what to do next -----------------------------------------------------------------------------


def test_empty_lists_explain_what_to_do_next_with_a_link_to_the_create_page(db):
    for model in SEEDED:  # the module's big catalog, if made already (rolled back with the test)
        model.objects.all().delete()
    client = Client()
    client.force_login(make_user("empty-editor", "edit", "operate"))
    creates = {
        "servers": [reverse("servers-add")],
        "snapshots": [reverse("snapshots-new")],
        "publications": [reverse("publications-new"), reverse("trx-publications-new")],
        "subscriptions": [reverse("publications"), reverse("trx-subscriptions-new")],
        "conflicts": [reverse("publications")],
        "jobs": [reverse("jobs-compare"), reverse("snapshots-new")],
        "audit": [reverse("servers-add")],
        "scheduler": [reverse("snapshots")],
    }
    for page, links in creates.items():
        body = client.get(reverse(page)).content.decode()
        empties = "".join(re.findall(r'<div class="empty"[^>]*>(.*?)</div>', body, re.S))
        assert empties, page
        for link in links:
            assert f'href="{link}"' in empties, (page, link)

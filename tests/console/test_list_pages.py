"""Every list table sorts (whitelisted keys, an arrow on the sorted column, a click toggles it), filters (`?q=` and
each list's own filters) and paginates with the other query parameters kept; and with 10,000 conflicts and 1,000
subscriptions of each kind every console page runs as many SQL queries as with a few (no query per row). The
pages' server times are measured by `make bench` (tests/bench/test_console_pages_bench.py)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from replication_admin.bidir.selectors import PUBLICATION_SORTS, SUBSCRIPTION_SORTS
from replication_admin.conflicts.views import CONFLICT_SORTS
from replication_admin.console.audit_log import AUDIT_SORTS
from replication_admin.console.jobs import JOB_SORTS
from replication_admin.console.scheduler import EVENT_SORTS
from replication_admin.models import ConflictBackup, Server, Snapshot
from replication_admin.servers.views import SERVER_SORTS
from replication_admin.snapshots.views import LOG_SORTS, SNAPSHOT_SORTS
from replication_admin.transactional.selectors import TRX_PUBLICATION_SORTS, TRX_SUBSCRIPTION_SORTS
from tests.console.big_catalog import BIG, LOG_TEXT, SEEDED, SMALL, TOKEN, clear, console_pages, seed
from tests.users import make_user

pytestmark = pytest.mark.django_db

N_SNAPSHOTS, N_JOBS, N_PUBLICATIONS, N_CONFLICTS = BIG.snapshots, BIG.jobs, BIG.publications, BIG.conflicts
SUBS_PER_ACCOUNT = BIG.subs_per_account


@pytest.fixture(scope="module")
def big_console(django_db_setup, django_db_blocker):
    """The big catalog, made once for this module (committed, so every test sees it) and removed after."""
    with django_db_blocker.unblock():
        seed(BIG)
    yield
    with django_db_blocker.unblock():
        clear()


@pytest.fixture
def editor(big_console) -> Client:
    client = Client()
    client.force_login(make_user("list-editor", "edit", "operate"))
    return client


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


# --- no query per row: every page runs as many queries with the big catalog as with a small one ---------------


class RolledBack(Exception):
    """Raised to undo a savepoint."""


def queries_per_page(client: Client) -> dict[str, int]:
    """The number of SQL queries each console page runs over the catalog in the database (its second GET: the first
    may fill what a page keeps between requests)."""
    counts = {}
    for page in console_pages():
        assert client.get(page.url, **page.headers).status_code == 200, page.name
        with CaptureQueriesContext(connection) as queries:
            response = client.get(page.url, **page.headers)
        assert response.status_code == 200, page.name
        counts[page.name] = len(queries)
    return counts


def test_every_console_page_runs_as_many_queries_with_ten_thousand_conflicts_and_a_thousand_subscriptions_as_with_a_few(
    editor, settings
):
    settings.STATUS_TOKENS = [TOKEN]
    try:
        with transaction.atomic():  # the small catalog in place of the big one, until the savepoint is undone
            clear()
            seed(SMALL)
            small = queries_per_page(editor)
            raise RolledBack
    except RolledBack:
        pass
    assert ConflictBackup.objects.count() == N_CONFLICTS
    big = queries_per_page(editor)
    grown = {name: (small[name], count) for name, count in big.items() if count != small[name]}
    assert not grown, f"queries (small catalog, big catalog) of the pages whose queries grow with the catalog: {grown}"

    status = editor.get(reverse("api-status"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    assert sum(len(p["subscribers"]) for p in status["bidirectional_publications"]) == 1000
    assert sum(len(p["subscribers"]) for p in status["transactional_publications"]) == 1000
    assert status["conflicts"]["total"] == N_CONFLICTS
    for page in console_pages():
        if page.name.endswith("(htmx)"):
            assert b"<html" not in editor.get(page.url, **page.headers).content, page.name


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
    ("scheduler", "events", EVENT_SORTS, lambda row: row["event"]),
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
    events = [row["event"] for row in listing.page.object_list]
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

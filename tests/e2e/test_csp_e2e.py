"""In headless Chromium under the console's strict Content-Security-Policy (no eval, no inline script): every page
without arguments, and the pages of a registered server and snapshot, load with no policy violation and no browser
error; the table pickers of the new-snapshot, compare and new-publication forms fill with the chosen server's tables
(htmx reads the server from the form's own select, not from a `js:` expression the policy would refuse)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from replication_admin.core.audit import Actor
from replication_admin.engine.types import LogicalType
from replication_admin.models import Snapshot
from replication_admin.servers.actions import do_register_server
from tests.conftest import server_data
from tests.e2e.test_console import PASSWORD, log_in
from tests.tables import create_table

pytestmark = [pytest.mark.browser]

INT = LogicalType("integer")
# Not pages a person reads: the admin site (Django's own), the machine endpoints, the login and logout forms.
NOT_PAGES = {"admin", "api-status", "metrics", "favicon", "login", "logout", "conflicts-export"}  # the last: a download


def pages_without_arguments() -> list[str]:
    """The names of the console's URL patterns that take no argument (the admin site's left out)."""
    names: list[str] = []

    def walk(patterns, namespace: str = "") -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace == "admin":
                    continue
                walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and pattern.name and not pattern.pattern.converters:
                names.append(pattern.name)

    walk(get_resolver().url_patterns)
    return sorted(set(names) - NOT_PAGES)


def watch_problems(page) -> list[str]:
    """Policy violations, browser errors, console errors and failed requests the page meets, one line each."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return problems


def register_shop(sqlite_path):
    shop = do_register_server(Actor.command(), server_data("sqlite", "shop", sqlite_path("shop")))
    branch = do_register_server(Actor.command(), server_data("sqlite", "branch", sqlite_path("branch")))
    for table in ("Orders", "Order Details", "表😀"):
        create_table(shop, table, [("id", INT)], ["id"])
    create_table(branch, "Shippers", [("id", INT)], ["id"])
    return shop, branch


def test_no_page_breaks_the_content_security_policy(live_server, page, shot, sqlite_path):
    User.objects.create_superuser("admin", password=PASSWORD)
    shop, branch = register_shop(sqlite_path)
    Snapshot.objects.create(name="branch.Orders", query='SELECT * FROM "Orders"', source_server=shop,
                            dest_server=branch, dest_table="Orders")  # fmt: skip
    names = pages_without_arguments()
    assert {"dashboard", "alerts", "snapshots-new", "jobs-compare", "publications-new", "topology"} <= set(names)
    urls = [reverse(name) for name in names]
    urls += [reverse("servers-detail", args=["shop"]), reverse("snapshots-detail", args=["branch.Orders"]),
             reverse("snapshots-logs", args=["shop"])]  # fmt: skip
    problems = watch_problems(page)
    log_in(page, live_server.url)
    visited = 0
    for url in urls:
        if page.request.get(live_server.url + url).status == 405:  # a POST-only view: nothing to read
            continue
        page.goto(live_server.url + url)
        page.wait_for_load_state("networkidle")
        visited += 1
        assert problems == [], f"{url}: {problems}"
    assert visited >= 20
    shot(page, "last-page")


def options(page, datalist: str, having: str = "") -> list[str]:
    """The values of a datalist once it has options (`having`: once it has that one). Waits by locator: a
    string predicate would be an eval, which the page's policy refuses."""
    wanted = f"#{datalist} option" + (f'[value="{having}"]' if having else "")
    page.locator(wanted).first.wait_for(state="attached")
    return page.locator(f"#{datalist} option").evaluate_all("os => os.map(o => o.value)")


def test_the_table_pickers_fill_with_the_chosen_servers_tables(live_server, page, shot, sqlite_path):
    User.objects.create_superuser("admin", password=PASSWORD)
    register_shop(sqlite_path)
    problems = watch_problems(page)
    log_in(page, live_server.url)

    page.goto(live_server.url + reverse("snapshots-new"))
    page.select_option("#id_source_server", "shop")
    assert sorted(options(page, "source-tables")) == sorted(["Orders", "Order Details", "表😀"])
    shot(page, "snapshot-picker")

    page.goto(live_server.url + reverse("jobs-compare"))
    page.select_option("#id_left_server", "shop")
    page.select_option("#id_right_server", "branch")
    assert "Order Details" in options(page, "left-tables", "Order Details")
    assert options(page, "right-tables", "Shippers") == ["Shippers"]
    shot(page, "compare-pickers")

    page.goto(live_server.url + reverse("publications-new"))
    page.select_option("#id_server", "branch")
    assert options(page, "publication-tables", "Shippers") == ["Shippers"]
    shot(page, "publication-picker")
    assert problems == []

"""Every destructive action asks first: a GET shows the confirmation page, which names the item and says what will
be removed or changed, and changes nothing; only the POST its button sends does it. The table below lists every
destructive URL; the tests after it fail when a URL whose name says it removes something is missing from it, or
when a page posts to one without going through its confirmation page."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from replication_admin.bidir import actions as bidir_actions
from replication_admin.core.audit import Actor
from replication_admin.core.crypto import encrypt
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    ApiToken,
    AuditEntry,
    ConflictBackup,
    JobRun,
    NotificationChannel,
    ReplAccount,
    ReplSubscriber,
    Server,
    SkippedTransaction,
    Snapshot,
    SnapshotConflictResolver,
    SnapshotLog,
    SnapshotPublication,
    SnapshotSubscription,
    TpGrant,
    TpItem,
    TransactionalConflictResolver,
)
from replication_admin.snapshots import actions as snap
from replication_admin.statements import execute
from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import positions as trx_positions
from tests.console.test_roles import url_names
from tests.tables import create_table, fetch_all, insert_rows
from tests.users import make_user

pytestmark = pytest.mark.django_db

SNAPSHOT = "branch.t_copy"
TRX_PUB = ["demo", "acct"]
TRX_SUB = ["branch", "demo", "acct"]
COLUMNS = [("id", LogicalType("integer")), ("v", LogicalType("varchar", length=5))]


@dataclass
class World:
    demo: Server
    branch: Server
    publication: SnapshotPublication
    subscription: SnapshotSubscription
    resolver: SnapshotConflictResolver
    conflict: ConflictBackup
    job: JobRun
    extra: dict = field(default_factory=dict)


def rows(server: Server, table: str) -> list:
    return fetch_all(server, f'SELECT * FROM "{table}" ORDER BY 1')


def table_exists(server: Server, table: str) -> bool:
    return bool(fetch_all(server, "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", [table]))


@pytest.fixture
def world(make_server) -> World:
    """Real SQLite servers demo, branch and spare. On demo: table t with a snapshot log (and logged changes) copied
    by the incremental snapshot branch.t_copy; table b published bi-directionally to branch, with a resolver and a
    recorded conflict; table u published transactionally as demo/acct, granted to and subscribed by branch, with
    logged transactions branch has applied. A queued job and an API token."""
    command = Actor.command()
    demo, branch = make_server("sqlite", "demo"), make_server("sqlite", "branch")
    make_server("sqlite", "spare")
    for table in ("t", "b", "u"):
        create_table(demo, table, COLUMNS, ["id"])
    create_table(branch, "t_copy", COLUMNS, ["id"])
    insert_rows(branch, "t_copy", ["id", "v"], [(1, "a"), (9, "only")])

    snap.do_create_snapshot_log(command, demo, "t")
    insert_rows(demo, "t", ["id", "v"], [(1, "a"), (2, "b")])
    Snapshot.objects.create(
        name=SNAPSHOT, query="SELECT id, v FROM t", is_incremental=1, source_server=demo, source_table="t",
        dest_server=branch, dest_table="t_copy", last_ts=timezone.now() + timedelta(days=1),
    )  # fmt: skip

    publication = bidir_actions.do_create_publication(command, demo, "b")
    subscription = bidir_actions.do_create_subscription(command, publication, branch)
    SnapshotSubscription.objects.filter(pk=subscription.pk).update(init_state="done")
    resolver = SnapshotConflictResolver.objects.create(
        table_name=publication.item, type="U", proc="b_cr_U_1", order=10, resolver_class="pub_wins"
    )
    insert_rows(demo, "b", ["id", "v"], [(1, "a")])
    guid = rows(demo, "b")[0][2]
    conflict = ConflictBackup.objects.create(
        item=publication.item, table_name="b", publisher="demo", source="branch", change_guid="branch@1",
        origin="branch", primary_key={"id": 1}, conflict_type="U", operation="U", decision=3, resolver="default",
        publisher_row={"id": 1, "v": "a", "ROWGUID": guid}, incoming_row={"id": 1, "v": "lost", "ROWGUID": guid},
        winning_row={"id": 1, "v": "a", "ROWGUID": guid}, losing_row={"id": 1, "v": "lost", "ROWGUID": guid},
    )  # fmt: skip

    outcomes = execute(command, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 'u', 2, 0, null)", demo)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes]
    insert_rows(demo, "u", ["id", "v"], [(1, "a"), (2, "b")])
    count = trx_capture.publisher_count(demo, "acct")
    TpGrant.objects.create(acct="acct", grantee="branch")
    ReplSubscriber.objects.create(
        server="demo", account="acct", subscriber="branch", init_state="done", count=count, level=count
    )
    # branch's copy of u lacks row 2: a skipped transaction's key, to repair.
    create_table(branch, "u", COLUMNS, ["id"])
    insert_rows(branch, "u", ["id", "v"], [(1, "a")])
    trx_positions.ensure_level_table(branch)
    SkippedTransaction.objects.create(
        server="demo", account="acct", subscriber="branch", level=count, count=count, error="refused",
        entries=[{"seq": 1, "table": "u", "op": "I", "new": {"id": 2, "v": "b"}, "old": None}],
        keys=[{"table": "u", "key": [2]}],
    )  # fmt: skip
    trx_resolver = TransactionalConflictResolver.objects.create(
        table_name="demo.u", type="U", proc="u_cr_U_1", order=10, resolver_class="pub_wins"
    )
    job = JobRun.objects.create(kind="compare", target="demo.t ↔ branch.t")
    # A finished compare of the snapshot listing two differing keys, to repair.
    compared = JobRun.objects.create(
        kind="compare", target="demo.t ↔ branch.t_copy", state=JobRun.State.SUCCEEDED, finished_at=timezone.now(),
        params={"snapshot": SNAPSHOT, "left_server": "demo", "right_server": "branch", "right_table": "t_copy"},
        result={"equal": False, "rows_total": 2, "rows": [
            {"kind": "missing_in_right", "key": {"id": "2"}, "left_key": ["2"], "right_key": None, "columns": ["v"],
             "left": {"v": "b"}, "right": None},
            {"kind": "missing_in_left", "key": {"id": "9"}, "left_key": None, "right_key": ["9"], "columns": ["v"],
             "left": None, "right": {"v": "only"}},
        ]},
    )  # fmt: skip
    token = ApiToken.objects.create(name="monitoring", prefix="ra_sample0", token_hash="0" * 64, scopes=["status"])
    channel = NotificationChannel.objects.create(
        name="on-call",
        url_encrypted=encrypt("json://127.0.0.1:9/hook"),
        hint="json://127.0.0.1:9/hook",
        events=["alerts"],
    )
    extra = {"trx_resolver": trx_resolver, "compared": compared, "token": token, "channel": channel}
    return World(demo, branch, publication, subscription, resolver, conflict, job, extra)


@pytest.fixture
def editor(world) -> Client:
    client = Client()
    client.force_login(make_user("editor", "edit", "operate"))
    return client


def rtlog_size(w: World) -> int:
    return fetch_all(w.demo, 'SELECT COUNT(*) FROM "RTTX_acct"')[0][0]


@dataclass(frozen=True)
class Case:
    """A destructive URL: its arguments and query, the words its confirmation page must show (the item's name and
    what goes), the form its button posts, and whether it has been done (False before the POST, True after)."""

    name: str
    args: list
    query: str
    shows: tuple[str, ...]
    done: Callable[[World], bool]
    data: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.name}{self.query}"


CASES = [
    Case("servers-delete", ["spare"], "", ("Remove server spare?", "registration"),
         lambda w: not Server.objects.filter(name="spare").exists()),
    Case("snapshots-drop", [SNAPSHOT], "", (f"Drop snapshot {SNAPSHOT}?", "SYS_SNAPSHOT"),
         lambda w: not Snapshot.objects.exists() and table_exists(w.branch, "t_copy"), {"delete": "0"}),
    Case("snapshots-drop", [SNAPSHOT], "?delete=1", (f"Drop snapshot {SNAPSHOT} with delete?", "t_copy is dropped"),
         lambda w: not Snapshot.objects.exists() and not table_exists(w.branch, "t_copy"), {"delete": "1"}),
    Case("snapshots-repair", [SNAPSHOT], "", (f"Repair snapshot {SNAPSHOT}?", "branch.t_copy", "are deleted"),
         lambda w: JobRun.objects.filter(kind="snapshot_repair", params__snapshot=SNAPSHOT).exists()),
    Case("snapshots-log-action", ["demo", "drop"], "?table=t", ("Drop the snapshot log of demo.t?", "RLOG_t"),
         lambda w: not SnapshotLog.objects.exists() and not table_exists(w.demo, "RLOG_t"), {"table": "t"}),
    Case("snapshots-log-action", ["demo", "purge"], "?table=t", ("Purge the snapshot log of demo.t?", "RLOG_t"),
         lambda w: rows(w.demo, "RLOG_t") == [], {"table": "t"}),
    Case("publications-drop", [], "", ("Drop publication demo.b?", "subscription"),
         lambda w: not SnapshotPublication.objects.exists() and not SnapshotSubscription.objects.exists()),
    Case("subscriptions-init", [], "", ("Copy demo.b to branch again?", "Every row of the table b on branch"),
         lambda w: JobRun.objects.filter(kind="bidir_init", params__subscription=w.subscription.pk).exists(),
         {"rows_per_commit": "100"}),
    Case("subscriptions-drop", [], "", ("Drop the subscription of branch to demo.b?", "stays"),
         lambda w: not SnapshotSubscription.objects.exists() and table_exists(w.branch, "b")),
    Case("subscriptions-drop", [], "?drop_table=on", ("Drop the subscription of branch to demo.b and its table?",
                                                      "is dropped on branch"),
         lambda w: not SnapshotSubscription.objects.exists() and not table_exists(w.branch, "b"), {"drop_table": "on"}),
    Case("publications-resolver-remove", [], "", ("Remove resolver b_cr_U_1?", "demo.b"),
         lambda w: not SnapshotConflictResolver.objects.exists()),
    Case("trx-resolver-remove", [], "", ("Remove resolver u_cr_U_1?", "demo.u"),
         lambda w: not TransactionalConflictResolver.objects.exists()),
    Case("conflicts-reapply", [], "", ("losing version of conflict #", "of b (id=1)", "demo"),
         lambda w: rows(w.demo, "b")[0][1] == "lost"),
    Case("trx-publications-remove-item", TRX_PUB, "?item={item}", ("Remove u from the publication acct on demo?",),
         lambda w: not TpItem.objects.exists(), {"item": "{item}"}),
    Case("trx-publications-revoke", TRX_PUB, "?grantee=branch", ("Revoke the grant of branch on acct", "SYS_TP_GRANT"),
         lambda w: not TpGrant.objects.exists(), {"grantee": "branch"}),
    Case("trx-publications-purge", TRX_PUB, "", ("Purge the log of acct on demo?", "deleted from its log"),
         lambda w: rtlog_size(w) == 0),
    Case("trx-publications-drop", TRX_PUB, "", ("Unpublish acct on demo?", "RTLOG_"),
         lambda w: not ReplAccount.objects.exists() and not table_exists(w.demo, "RTTX_acct")),
    Case("trx-subscriptions-init", TRX_SUB, "", ("Re-initialise branch from demo/acct?", "(u)", "are deleted"),
         lambda w: JobRun.objects.filter(kind="trx_init").exists()),
    Case("trx-subscriptions-repair", TRX_SUB, "", ("Repair the keys of branch's gaps from demo/acct?", "u [2]"),
         lambda w: (2, "b") in rows(w.branch, "u") and not SkippedTransaction.objects.filter(repaired_at=None)),
    Case("trx-subscriptions-drop", TRX_SUB, "", ("Unsubscribe branch from demo/acct?",),
         lambda w: not ReplSubscriber.objects.filter(subscribed=True).exists()),
    Case("jobs-cancel", [], "", ("Cancel job #", "compare: demo.t ↔ branch.t"),
         lambda w: JobRun.objects.get(pk=w.job.pk).state == JobRun.State.CANCELLED),
    Case("tokens-revoke", [], "", ("Revoke the API token monitoring?", "ra_sample0…", "refused"),
         lambda w: ApiToken.objects.get(pk=w.extra["token"].pk).revoked_at is not None),
    Case("alerts-channels-delete", [], "", ("Delete the notification channel on-call?", "json://127.0.0.1:9/hook"),
         lambda w: not NotificationChannel.objects.exists()),
    Case("jobs-compare-repair", [], "?row=0&row=1", ("Repair 2 key(s)?", "demo.t ↔ branch.t_copy", "id=2; id=9",
                                                      "is deleted"),
         lambda w: JobRun.objects.filter(kind="compare_repair", params__keys=[["2"], ["9"]]).exists()),
]  # fmt: skip

# URL names that sound destructive but are not, with the reason.
NOT_DESTRUCTIVE = {
    "trx-publications-purger": "saves when the purger runs; each run is REPL_PURGE, confirmed as trx-publications-purge",
}
# Destructive URLs whose names do not say so, and the snapshot log actions (one URL, the action is an argument).
DESTRUCTIVE_BY_MEANING = {
    "snapshots-log-action", "publications-drop", "subscriptions-init", "conflicts-reapply", "trx-subscriptions-init",
}  # fmt: skip
WORDS = ("drop", "delete", "remove", "purge", "revoke", "cancel", "repair")


def pk_args(case: Case, w: World) -> list:
    """The URL's arguments: the table's, or the primary key of the row the URL acts on."""
    if case.args:
        return case.args
    return {
        "publications-drop": [w.publication.pk],
        "subscriptions-init": [w.subscription.pk],
        "subscriptions-drop": [w.subscription.pk],
        "publications-resolver-remove": [w.resolver.pk],
        "trx-resolver-remove": [w.extra["trx_resolver"].pk],
        "conflicts-reapply": [w.conflict.pk],
        "jobs-cancel": [w.job.pk],
        "tokens-revoke": [w.extra["token"].pk],
        "alerts-channels-delete": [w.extra["channel"].pk],
        "jobs-compare-repair": [w.extra["compared"].pk],
    }[case.name]


def fill(text: str) -> str:
    item = TpItem.objects.first()
    return text.replace("{item}", str(item.pk if item else 0))


def changes_made() -> int:
    return AuditEntry.objects.filter(via="web").exclude(outcome="denied").count()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_get_shows_the_confirmation_page_naming_the_item_and_changes_nothing_then_the_post_does_it(
    world, editor, case
):
    address = reverse(case.name, args=pk_args(case, world))
    assert not case.done(world), "the fixture already looks done"

    page = editor.get(address + fill(case.query))
    assert page.status_code == 200, page.content[:300]
    assert page.templates[0].name == "replication_admin/confirm.html"
    body = page.content.decode()
    for words in case.shows:
        assert words in body.replace("&#x27;", "'").replace("&gt;", ">"), f"{words!r} not on the page"
    assert re.search(r'<form method="post"', body) and 'class="btn danger" type="submit"' in body
    assert not case.done(world) and changes_made() == 0, "the GET changed something"

    data = {k: fill(str(v)) for k, v in {**(page.context.get("hidden") or {}), **case.data}.items()}
    response = editor.post(address, data)
    assert response.status_code == 302, response.content[:300]
    assert case.done(world), f"POST {case.id} did not do it"
    assert changes_made() >= 1


def test_the_hidden_fields_of_each_confirmation_page_are_what_its_post_needs(world, editor):
    pages = {c.id: editor.get(reverse(c.name, args=pk_args(c, world)) + fill(c.query)).context for c in CASES}
    assert pages["snapshots-drop?delete=1"]["hidden"] == {"delete": "1"}
    assert pages["snapshots-log-action?table=t"]["hidden"] == {"table": "t"}
    assert pages["subscriptions-drop?drop_table=on"]["hidden"] == {"drop_table": "on"}
    assert pages["trx-publications-revoke?grantee=branch"]["hidden"] == {"grantee": "branch"}
    assert pages["trx-publications-remove-item?item={item}"]["hidden"] == {"item": TpItem.objects.get().pk}
    assert pages["jobs-compare-repair?row=0&row=1"]["hidden"] == {"rows": "0,1"}


def test_every_url_whose_name_says_it_removes_something_is_in_the_table():
    listed = {c.name for c in CASES}
    sounds_destructive = {name for name in url_names() if any(word in name for word in WORDS)}
    missing = sounds_destructive - listed - NOT_DESTRUCTIVE.keys()
    assert missing == set(), f"add these URLs to CASES (or NOT_DESTRUCTIVE, with the reason): {missing}"
    assert listed >= DESTRUCTIVE_BY_MEANING
    assert listed <= url_names()


POST_FORM = re.compile(r"<form\b[^>]*method=\"post\"[^>]*>", re.IGNORECASE)
URL_TAG = re.compile(r"{%\s*url\s+'([\w-]+)'")


def test_no_page_posts_to_a_destructive_url_without_its_confirmation_page():
    """Buttons of destructive actions are links (or GET forms) to the confirmation page, never posting forms; the
    only exceptions are the first initial copies, which fill empty copies (copying again is confirmed)."""
    destructive = {c.name for c in CASES}
    first_copy = {"subscriptions-init", "trx-subscriptions-init"}
    offenders = []
    for path in Path(settings.BASE_DIR, "templates").rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert "confirm(" not in text, f"{path.name}: a JavaScript confirm(); link to the confirmation page instead"
        url_vars = dict(re.findall(r"{%\s*url\s+'([\w-]+)'[^%]*as\s+(\w+)\s*%}", text))
        by_var = {var: name for name, var in url_vars.items()}
        for form in POST_FORM.finditer(text):
            tag = form.group(0)
            names = set(URL_TAG.findall(tag)) | {by_var[v] for v in re.findall(r"{{\s*(\w+)\s*}}", tag) if v in by_var}
            if "'create'" in tag:
                names.discard("snapshots-log-action")  # creating a snapshot log removes nothing
            for name in names & destructive - first_copy:
                offenders.append(f"{path.name}: {name}")
            if names & first_copy:
                before = text[: form.start()].rsplit("{%", 3)
                assert any('init_state == "none"' in part for part in before), f"{path.name}: a re-copy posts"
    assert offenders == []


def test_copying_again_is_confirmed_but_a_first_initial_copy_starts_at_once(world, editor):
    page = editor.get(reverse("publications-detail", args=[world.publication.pk])).content.decode()
    init = reverse("subscriptions-init", args=[world.subscription.pk])
    assert f'<form method="get" action="{init}" class="init-form">' in page and "Copy again…" in page
    SnapshotSubscription.objects.filter(pk=world.subscription.pk).update(init_state="none")
    page = editor.get(reverse("publications-detail", args=[world.publication.pk])).content.decode()
    assert f'<form method="post" action="{init}" class="init-form">' in page

    trx_init = reverse("trx-subscriptions-init", args=TRX_SUB)
    page = editor.get(reverse("trx-subscriptions-detail", args=TRX_SUB)).content.decode()
    assert f'href="{trx_init}" id="trx-reinit">Re-initialise…' in page
    ReplSubscriber.objects.update(init_state="none")
    page = editor.get(reverse("trx-subscriptions-detail", args=TRX_SUB)).content.decode()
    assert f'action="{trx_init}"' in page and ">Initial copy</button>" in page


def test_a_confirmation_page_for_something_that_is_not_there_sends_back_with_a_message(world, editor):
    logs = editor.get(reverse("snapshots-log-action", args=["demo", "drop"]) + "?table=nowhere", follow=True)
    assert "There is no snapshot log for demo.nowhere." in logs.content.decode()
    revoke = editor.get(reverse("trx-publications-revoke", args=TRX_PUB) + "?grantee=nobody", follow=True)
    assert "That grantee has no grant on the publication." in revoke.content.decode()
    assert editor.get(reverse("snapshots-log-action", args=["demo", "create"]) + "?table=u").status_code == 405
    JobRun.objects.filter(pk=world.job.pk).update(state=JobRun.State.SUCCEEDED, finished_at=timezone.now())
    finished = editor.get(reverse("jobs-cancel", args=[world.job.pk]), follow=True)
    assert "The job had already finished." in finished.content.decode()
    assert SnapshotLog.objects.exists() and TpGrant.objects.exists() and changes_made() == 0


def test_a_viewer_may_read_a_confirmation_page_but_its_post_is_refused_and_changes_nothing(world, viewer_client):
    address = reverse("snapshots-repair", args=[SNAPSHOT])
    assert viewer_client.get(address).status_code == 200
    assert viewer_client.post(address).status_code == 403
    assert not JobRun.objects.filter(kind="snapshot_repair").exists()
    assert AuditEntry.objects.get(outcome="denied").action == "job.snapshot_repair"

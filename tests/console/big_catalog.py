"""A console catalog that has run for a while, in two sizes, and the console pages to render over it.

`seed(BIG)` makes the big one: 40 servers, 300 snapshots with 3,000 refresh jobs and 400 schedules, 50
bi-directional publications with 1,000 subscriptions, 25 transactional publications with 1,000 subscribers and
10,000 conflicts. `seed(SMALL)` makes the same catalog with a few rows of each kind (and the same names for the rows
the detail pages show). `console_pages()` lists every console page (lists sorted, filtered and paged, detail pages,
htmx fragments, /metrics and /api/status) over whichever catalog is in the database.

Used by tests/console/test_list_pages.py (the queries a page runs do not grow with the catalog) and by the console
pages benchmark in tests/bench (server time per page with the big catalog).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

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

TOKEN = "list-pages-status-token"  # put it in settings.STATUS_TOKENS for /metrics and /api/status
LOG_TEXT = "INFO reading the snapshot log\n" * 80  # what a real job keeps in its log: the list never needs it
SEED_EDITOR = "seed-editor"


@dataclass(frozen=True)
class Sizes:
    servers: int
    snapshots: int
    logs: int
    events: int
    jobs: int
    audit: int
    publications: int
    subs_per_publication: int
    accounts: int
    subs_per_account: int
    samples_per_subscriber: int
    conflicts: int


BIG = Sizes(servers=40, snapshots=300, logs=100, events=400, jobs=3000, audit=3000, publications=50,
            subs_per_publication=20, accounts=25, subs_per_account=40, samples_per_subscriber=50,
            conflicts=10_000)  # fmt: skip
# A few rows of each kind: at least two per list (a query per row shows as a difference with BIG), and the rows
# the detail pages name (srv001, srv001.copy001, srv001.pub01, acct01, sub01) and two conflicts a day exist.
SMALL = Sizes(servers=3, snapshots=3, logs=3, events=3, jobs=5, audit=3, publications=3, subs_per_publication=3,
              accounts=3, subs_per_account=3, samples_per_subscriber=2, conflicts=60)  # fmt: skip

# Every model seed() fills, children first (the order to delete them in).
SEEDED = (ConflictBackup, LevelSample, SkippedTransaction, ReplSubscriber, TpItem, ReplAccount, SnapshotSubscription,
          SnapshotPublication, ScheduledEvent, AuditEntry, JobRun, SnapshotLog, Snapshot, Server)  # fmt: skip


def seed(size: Sizes = BIG) -> None:
    """Servers, snapshots with their refresh jobs and schedules, bi-directional publications with their
    subscriptions, transactional publications with their subscribers, conflicts spread over 30 days."""
    now = timezone.now()
    servers = Server.objects.bulk_create(
        Server(name=f"srv{i:03d}", dialect=("sqlite", "postgresql", "mysql")[i % 3], host=f"db{i}.example",
               port=5432, database=f"/tmp/srv{i:03d}.sqlite3", user="repl", last_check_ok=(None, True, False)[i % 3],
               last_check_at=now - timedelta(minutes=i))
        for i in range(size.servers)
    )  # fmt: skip
    Snapshot.objects.bulk_create(
        Snapshot(name=f"srv{i % size.servers:03d}.copy{i:03d}", query=f"SELECT * FROM t{i}",
                 is_incremental=1 if i % 2 else None, source_table=f"t{i}" if i % 2 else None,
                 source_server=servers[(i + 1) % size.servers], dest_server=servers[i % size.servers],
                 dest_table=f"copy{i:03d}", last_ts=now - timedelta(hours=i))
        for i in range(size.snapshots)
    )  # fmt: skip
    SnapshotLog.objects.bulk_create(
        SnapshotLog(source=f"srv{i % size.servers:03d}.t{i:03d}", rlog=f"RLOG_t{i:03d}", rplog=f"RPLOG_t{i:03d}",
                    server=servers[i % size.servers], table=f"t{i:03d}")
        for i in range(size.logs)
    )  # fmt: skip
    editor, _ = User.objects.get_or_create(username=SEED_EDITOR)
    states = ("succeeded", "succeeded", "failed", "running", "cancelled")
    JobRun.objects.bulk_create(
        JobRun(kind="snapshot_refresh", target=f"copy{i % size.snapshots:03d}",
               params={"snapshot": f"srv{i % size.servers:03d}.copy{i % size.snapshots:03d}"}, state=states[i % 5],
               progress_done=i, progress_total=size.jobs, log=LOG_TEXT, result={"rows": i}, timings={"total": 1.5},
               started_at=now - timedelta(minutes=i, seconds=5), finished_at=now - timedelta(minutes=i),
               created_by=editor if i % 2 else None)
        for i in range(size.jobs)
    )  # fmt: skip
    AuditEntry.objects.bulk_create(
        AuditEntry(username=f"user{i % 7}", action=("server.register", "snapshot.refresh", "bidir.sync")[i % 3],
                   target=f"target{i:04d}", outcome=("ok", "error", "denied")[i % 3], detail={"n": i})
        for i in range(size.audit)
    )  # fmt: skip
    ScheduledEvent.objects.bulk_create(
        ScheduledEvent(name=f"snapshot srv{i % size.servers:03d}.copy{i:03d}", start=now - timedelta(days=1),
                       sql=f"REPL_SNP ('copy{i:03d}')", interval=10 + i % 50, disabled=i % 9 == 0,
                       last_error="timeout" if i % 13 == 0 else None, server=f"srv{i % size.servers:03d}")
        for i in range(size.events)
    )  # fmt: skip
    SnapshotPublication.objects.bulk_create(
        SnapshotPublication(item=f"srv{i % size.servers:03d}.pub{i:02d}", server=servers[i % size.servers],
                            table=f"pub{i:02d}", last_ts=now - timedelta(minutes=i),
                            last_sync_at=now - timedelta(minutes=2 * i))
        for i in range(size.publications)
    )  # fmt: skip
    SnapshotSubscription.objects.bulk_create(
        SnapshotSubscription(server=f"branch{j:02d}", item=f"srv{i % size.servers:03d}.pub{i:02d}",
                             init_state=("done", "done", "copying", "none")[j % 4], init_rows_done=j * 10,
                             init_rows_total=500, last_sync_at=now - timedelta(minutes=i + j),
                             last_pull_ts=now - timedelta(minutes=j), last_push_ts=now - timedelta(minutes=i),
                             last_error="refused" if (i + j) % 17 == 0 else "")
        for i in range(size.publications)
        for j in range(size.subs_per_publication)
    )  # fmt: skip
    ReplAccount.objects.bulk_create(
        ReplAccount(server=f"srv{i % size.servers:03d}", account=f"acct{i:02d}", level=1000 + i, count=1000 + i,
                    log_file=f"acct{i:02d}.log", is_updateable=i % 2)
        for i in range(size.accounts)
    )  # fmt: skip
    TpItem.objects.bulk_create(
        TpItem(server=f"srv{i % size.servers:03d}", acct=f"acct{i:02d}", type=2, item=f"tbl{k}")
        for i in range(size.accounts)
        for k in range(3)
    )  # fmt: skip
    ReplSubscriber.objects.bulk_create(
        ReplSubscriber(server=f"srv{i % size.servers:03d}", account=f"acct{i:02d}", subscriber=f"sub{j:02d}",
                       level=1000 + i - j % 5, count=1000 + i - j % 5, valid=0 if j % 23 == 0 else 1,
                       state=j % 4, init_state="done" if j % 6 else "none",
                       last_sync_at=now - timedelta(minutes=j), created_at=now)
        for i in range(size.accounts)
        for j in range(size.subs_per_account)
    )  # fmt: skip
    SkippedTransaction.objects.bulk_create(
        SkippedTransaction(server=f"srv{i % size.servers:03d}", account=f"acct{i:02d}", subscriber="sub01", level=k,
                           count=k, error="duplicate key")
        for i in range(size.accounts)
        for k in range(3)
    )  # fmt: skip
    LevelSample.objects.bulk_create(
        LevelSample(server="srv000", account="acct00", subscriber=f"sub{j:02d}", at=now - timedelta(minutes=k),
                    level=1000 - k, publisher_level=1000, lag=k)
        for j in range(size.subs_per_account)
        for k in range(size.samples_per_subscriber)
    )  # fmt: skip
    ConflictBackup.objects.bulk_create(
        (
            ConflictBackup(
                item=f"srv{i % size.servers:03d}.pub{i % size.publications:02d}",
                table_name=f"pub{i % size.publications:02d}", publisher=f"srv{i % size.servers:03d}",
                source=f"branch{i % size.subs_per_publication:02d}", change_guid=f"branch@{i}",
                origin=f"branch{i % size.subs_per_publication:02d}", primary_key={"id": i},
                conflict_type="IUD"[i % 3], operation="IUD"[i % 3], decision=(1, 2, 3, 5)[i % 4],
                resolver=f"cr_{i % 11}", publisher_row={"id": i, "name": "pen"}, incoming_row={"id": i, "name": "ink"},
                winning_row={"id": i, "name": "pen"}, losing_row={"id": i, "name": "ink"},
            )
            for i in range(size.conflicts)
        ),
        batch_size=2000,
    )  # fmt: skip
    # Spread the conflicts over 30 days (created_at is auto_now_add), newest with the highest id.
    first = ConflictBackup.objects.order_by("id").values_list("id", flat=True).first()
    per_day = math.ceil(size.conflicts / 30)
    for day in range(30):
        ConflictBackup.objects.filter(id__gte=first + day * per_day, id__lt=first + (day + 1) * per_day).update(
            created_at=now - timedelta(days=30 - day)
        )


def clear() -> None:
    """Remove whatever seed() made."""
    for model in SEEDED:
        model.objects.all().delete()
    User.objects.filter(username=SEED_EDITOR).delete()


@dataclass(frozen=True)
class Page:
    """A GET of the console: its URL, its request headers, and its name, the same over either catalog size."""

    url: str
    headers: dict = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.url)


def console_pages() -> list[Page]:
    """Every console page over the seeded catalog (either size): each list sorted, filtered and paged, the detail
    pages, the htmx fragments, /metrics and /api/status (both need TOKEN in settings.STATUS_TOKENS)."""
    publication = SnapshotPublication.objects.get(item="srv001.pub01")
    conflict = ConflictBackup.objects.order_by("-id").first()
    htmx = {"HTTP_HX_REQUEST": "true"}
    pages = [
        Page(reverse("conflicts-detail", args=[conflict.pk]), name="conflict detail (the newest)"),
        Page(reverse("publications-detail", args=[publication.pk]), name="publication detail (srv001.pub01)"),
    ]
    urls = [
        reverse("dashboard"),
        reverse("dashboard-charts"),
        reverse("servers"),
        reverse("servers") + "?sort=-checked&dialect=sqlite",
        reverse("snapshots"),
        reverse("snapshots") + "?sort=-last_ts&page=3",
        reverse("snapshots") + "?q=copy00&log_sort=-created",
        reverse("publications"),
        reverse("publications") + "?sort=-subscribers&trx_sort=-level",
        reverse("subscriptions"),
        reverse("subscriptions") + "?sort=-last_sync&page=20",
        reverse("subscriptions") + "?trx_sort=-level&trx_page=20",
        reverse("subscriptions") + "?q=branch01&trx_q=sub0",
        reverse("conflicts"),
        reverse("conflicts") + "?sort=-table",
        reverse("conflicts") + "?sort=source&type=U&page=40",
        reverse("conflicts") + "?q=pub01&decision=2",
        reverse("conflicts") + "?page=200",
        reverse("jobs"),
        reverse("jobs") + "?sort=by&page=30",
        reverse("jobs") + "?state=failed&q=copy00",
        reverse("audit"),
        reverse("audit") + "?sort=target&outcome=denied&page=5",
        reverse("scheduler"),
        reverse("scheduler") + "?sort=-interval&state=failing",
        reverse("health"),
        reverse("trx-publications-detail", args=["srv001", "acct01"]),
        reverse("trx-subscriptions-detail", args=["sub01", "srv001", "acct01"]),
        reverse("snapshots-detail", args=["srv001.copy001"]),
        reverse("servers-detail", args=["srv001"]),
        "/metrics?token=" + TOKEN,
    ]
    htmx_urls = [reverse("dashboard"), reverse("conflicts") + "?type=U&page=3", reverse("jobs") + "?sort=kind"]
    return [
        *(Page(url) for url in urls),
        *pages,
        *(Page(url, htmx, f"{url} (htmx)") for url in htmx_urls),
        Page(reverse("api-status"), {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}),
    ]

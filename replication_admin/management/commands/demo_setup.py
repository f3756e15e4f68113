"""manage.py demo_setup: the Demo database, its servers, an admin login and a monitoring token, ready for the
console."""

from __future__ import annotations

import os
import secrets

import pyodbc
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django_q.models import Schedule

from replication_admin.bidir.actions import do_schedule_publication, find_publication
from replication_admin.console.actions import do_create_api_token, do_revoke_api_token
from replication_admin.core.audit import Actor
from replication_admin.demo import create_demo_database
from replication_admin.engine import dialects
from replication_admin.models import (
    ApiToken,
    ReplAccount,
    ReplSubscriber,
    Server,
    Snapshot,
    SnapshotLog,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.servers.actions import ServerData, do_check_server, do_register_server
from replication_admin.snapshots.actions import do_schedule_snapshot
from replication_admin.statements import execute
from replication_admin.transactional.actions import do_set_subscription_profile

# The PostgreSQL and MariaDB database the demo replicates into (another name keeps a test's demo apart).
DEMO_DATABASE = os.environ.get("REPLADMIN_DEMO_DATABASE", "replication_demo")
LOCAL_SERVERS = [
    (
        "pg_demo",
        "postgresql",
        5432,
        "DRIVER={PostgreSQL Unicode};SERVER=127.0.0.1;PORT=5432;DATABASE=postgres;UID=root;",
    ),
    ("mariadb_demo", "mysql", 3306, "DRIVER={MariaDB Unicode};SERVER=127.0.0.1;PORT=3306;UID=root;PWD=;"),
]
# The demo's login and token, for scripts/demo.sh to print last (outside git, like every file under var/).
LOGIN_FILE = settings.VAR_DIR / "demo-login.txt"
# The name of the API token the demo prints for the status API and metrics (made again at every run, the old one
# revoked).
MONITORING = "demo monitoring"
CONSOLE = "http://127.0.0.1:8000"


class Command(BaseCommand):
    help = "Generate the Demo database (SQLite), register it and the local PostgreSQL/MariaDB, create a login."

    def add_arguments(self, parser):
        parser.add_argument("--orders", type=int, default=3000)
        parser.add_argument("--admin", default="admin", help="user name of the demo administrator")

    def handle(self, *args, **opts):
        actor = Actor.command()
        path = settings.VAR_DIR / "demo.sqlite3"
        if not path.exists():
            counts = create_demo_database(str(path), orders=opts["orders"])
            self.stdout.write(f"created {path}: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
        self._register(actor, ServerData(name="demo", dialect="sqlite", database=str(path),
                                         description="Northwind-like Demo database"))  # fmt: skip
        for name, dialect, port, admin_dsn in LOCAL_SERVERS:
            try:
                with pyodbc.connect(admin_dsn, autocommit=True, timeout=3) as conn:
                    self._create_database(conn, dialect)
            except pyodbc.Error as exc:
                self.stdout.write(f"skipping {name}: the local {dialect} server is not reachable ({exc.args[-1]})")
                continue
            data = ServerData(
                name=name,
                dialect=dialect,
                host="127.0.0.1",
                port=port,
                database=DEMO_DATABASE,
                user="root",
                password="",
                description=f"local {dialect}, database {DEMO_DATABASE}",
            )
            self._register(actor, data)
        self._replication(actor)
        password = secrets.token_urlsafe(12)
        user, _ = User.objects.get_or_create(username=opts["admin"], defaults={"is_staff": True})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        secret = self.monitoring_token(actor)
        lines = [
            f"log in at {CONSOLE}/ as {user.username} / {password}",
            f'API token "{MONITORING}" (status, metrics): {secret}',
            f'  curl -H "Authorization: Bearer {secret}" {CONSOLE}/api/status',
            f'  curl -H "Authorization: Bearer {secret}" {CONSOLE}/metrics',
        ]
        for line in lines:
            self.stdout.write(self.style.SUCCESS(line) if not line.startswith(" ") else line)
        # scripts/demo.sh prints these again, in a box, once the console answers: the services' start-up lines
        # would otherwise scroll them away. Readable by this account only: it holds a password and a token.
        LOGIN_FILE.parent.mkdir(parents=True, exist_ok=True)
        LOGIN_FILE.touch(mode=0o600)
        LOGIN_FILE.chmod(0o600)
        LOGIN_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def monitoring_token(self, actor: Actor) -> str:
        """A new token of both scopes for the status API and metrics; the previous run's is revoked (only its hash
        was kept: it cannot be printed again)."""
        for old in ApiToken.objects.filter(name=MONITORING, revoked_at__isnull=True):
            do_revoke_api_token(actor, old)
        _, secret = do_create_api_token(actor, MONITORING, ApiToken.Scope.values)
        return secret

    def _replication(self, actor: Actor) -> None:
        """Snapshots of the Demo database on the other servers, refreshed every minute, and a stream of
        new orders on the Demo database to give them something to replicate."""
        target = next((n for n in ("pg_demo", "mariadb_demo") if Server.objects.filter(name=n).exists()), None)
        if target is None:
            replica = settings.VAR_DIR / "replica.sqlite3"
            replica.touch()
            self._register(actor, ServerData(name="replica", dialect="sqlite", database=str(replica)))
            target = "replica"
        statements = []
        if not SnapshotLog.objects.filter(server_id="demo", table="Orders").exists():
            statements.append("create snapshot log for demo.Orders")
        if not Snapshot.objects.filter(dest_server__name=target, dest_table="Orders").exists():
            statements.append(f"create snapshot {target}.Orders from demo.Orders")
        if not Snapshot.objects.filter(dest_server__name=target, dest_table="order_totals").exists():
            statements.append(
                f"create nonincremental snapshot {target}.order_totals as "
                '\'select OrderID, count(*) as lines, sum(Quantity) as units from demo."Order Details" '
                "group by OrderID'"
            )
        if statements:
            for outcome in execute(actor, ";\n".join(statements), wait=False):
                self.stdout.write(f"{'ok  ' if outcome.ok else 'FAIL'} {outcome.statement}: {outcome.message}")
        for snapshot in Snapshot.objects.filter(dest_server__name=target):
            do_schedule_snapshot(actor, snapshot, 1)
        self._bidirectional(actor, target)
        self._transactional(actor, target)
        Schedule.objects.get_or_create(
            func="replication_admin.tasks.demo_activity",
            defaults={"name": "demo activity", "schedule_type": Schedule.MINUTES, "minutes": 1, "repeats": -1},
        )
        self.stdout.write(f"snapshots of demo.Orders on {target} refresh every minute; new orders arrive every minute")

    def _bidirectional(self, actor: Actor, target: str) -> None:
        """demo.Products published bi-directionally to the snapshot target and to a SQLite "branch"
        office; both sides change prices every minute, and the cheaper price wins a conflict."""
        branch = settings.VAR_DIR / "branch.sqlite3"
        branch.touch()
        self._register(actor, ServerData(name="branch", dialect="sqlite", database=str(branch),
                                         description="a branch office's copy of the product list"))  # fmt: skip
        statements = []
        if not SnapshotPublication.objects.filter(item="demo.Products").exists():
            statements += [
                "REPL_CREATE_SNAPSHOT_PUB ('demo.Products', 2)",
                "REPL_ADD_SNAPSHOT_CR ('demo.Products', 'cheapest', 'U', 10, 'min', 'UnitPrice')",
            ]
        for server in (target, "branch"):
            if not SnapshotSubscription.objects.filter(item="demo.Products", server=server).exists():
                statements += [
                    f"REPL_CREATE_SNAPSHOT_SUB ('{server}', 'demo.Products', 2)",
                    f"REPL_INIT_SNAPSHOT ('{server}', 'demo.Products', 2, 20)",
                ]
        if statements:
            for outcome in execute(actor, ";\n".join(statements), wait=False):
                self.stdout.write(f"{'ok  ' if outcome.ok else 'FAIL'} {outcome.statement}: {outcome.message}")
        publication = find_publication("demo.Products")
        do_schedule_publication(actor, publication, 1)
        self.stdout.write(f"demo.Products syncs with {target} and branch every minute (cheapest price wins)")

    def _transactional(self, actor: Actor, target: str) -> None:
        """demo."Order Details" published transactionally; the snapshot target subscribes in sync mode (the demo's
        follower applies each new order line within a second). No schedule beside it: a followed subscription's
        scheduled sync would have nothing to do while the follower runs."""
        scripts = []
        if not ReplAccount.objects.filter(server="demo", account="orders").exists():
            # A tracer token every minute: the publication page charts the latency from demo to the subscriber.
            scripts.append(
                ("demo", "REPL_PUBLISH ('orders', 'orders.log'); REPL_PUB_ADD ('orders', 'Order Details', 2, 0, null);"
                         "REPL_TRACER_SCHEDULE ('orders', 1)")
            )  # fmt: skip
        if not ReplSubscriber.objects.filter(server="demo", account="orders", subscriber=target).exists():
            scripts.append(
                (
                    target,
                    "REPL_SERVER ('demo', 'demo'); REPL_SUBSCRIBE ('demo', 'orders');"
                    "REPL_INIT_COPY ('demo', 'orders'); SYNC_REPL ()",
                )
            )
        if not ReplSubscriber.objects.filter(server="demo", account="orders", subscriber="branch").exists():
            # The branch office keeps only the large order lines, and of them the quantity and the price: a row
            # filter and a column list, set before its initial copy.
            scripts.append(
                (
                    "branch",
                    "REPL_SERVER ('demo', 'demo'); REPL_SUBSCRIBE ('demo', 'orders');"
                    "REPL_ROW_FILTER ('demo', 'orders', 'Order Details', '\"Quantity\" >= 20', 'Quantity, UnitPrice');"
                    "REPL_INIT_COPY ('demo', 'orders'); SYNC_REPL ()",
                )
            )
        for server, script in scripts:
            for outcome in execute(actor, script, context=Server.objects.get(name=server), wait=False):
                self.stdout.write(f"{'ok  ' if outcome.ok else 'FAIL'} {outcome.statement}: {outcome.message}")
        sub = ReplSubscriber.objects.filter(server="demo", account="orders", subscriber=target).first()
        if sub is not None and sub.validate_every is None:
            # Validated every 2 minutes in 6 slices (the product's default: hourly in 24), so the demo's Validation
            # panel fills while one watches.
            do_set_subscription_profile(actor, sub, validate_every=120, validate_slices=6)
        self.stdout.write(
            f'demo."Order Details" replicates transactionally to {target}, in sync, validated, and its large lines '
            "to branch"
        )

    def _create_database(self, conn: pyodbc.Connection, dialect: str) -> None:
        d = dialects.get(dialect)
        exists = d.database_exists_sql(DEMO_DATABASE)
        if exists is None or not conn.execute(*exists).fetchone():
            conn.execute(d.create_database_sql(DEMO_DATABASE))

    def _register(self, actor: Actor, data: ServerData) -> None:
        server = Server.objects.filter(name=data.name).first() or do_register_server(actor, data)
        result = do_check_server(actor, server)
        self.stdout.write(f"server {server.name:14} {'ok  ' if result.ok else 'FAIL'} {result.message}")

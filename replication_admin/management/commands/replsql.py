"""manage.py replsql: run replication statements from an argument, a file or stdin."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from replication_admin.core.audit import Actor, record
from replication_admin.core.permissions import OPERATE
from replication_admin.core.spark import ping_service
from replication_admin.engine.statements import StatementError
from replication_admin.models import AuditEntry, Server
from replication_admin.statements import execute

SERVICE_PROBE_SECONDS = 0.5  # how long the TCP probe of the local Spark service may take
SERVICE_PING_SECONDS = 15  # how long the service then has to run one task (a warm one takes about a second)


def format_table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


class Command(BaseCommand):
    help = (
        "Run replication statements (CREATE SNAPSHOT LOG FOR t; CREATE SNAPSHOT d FROM s; UPDATE SNAPSHOT d; "
        "repl_* calls ...) against a context server. Statements come from the arguments, --file, or stdin."
    )

    def add_arguments(self, parser):
        parser.add_argument("statements", nargs="*", help="statement text; several are joined with ';'")
        parser.add_argument("--server", help="context server for names written without a server")
        parser.add_argument("--file", "-f", help="read statements from this file ('-' for stdin)")
        parser.add_argument("--queue", action="store_true", help="queue refresh jobs instead of waiting for them")
        parser.add_argument(
            "--user",
            help="run with this console user's permissions (its role), audited under its name; without it the "
            "statements run with the full rights of whoever can run manage.py",
        )

    def handle(self, *args, **opts):
        # Only the statements' own results: django-q2 says "Enqueued …" at INFO for every job a statement queues.
        logging.getLogger("django-q").setLevel(logging.WARNING)
        actor = self.actor(opts["user"])
        if opts["file"]:
            text = sys.stdin.read() if opts["file"] == "-" else Path(opts["file"]).read_text(encoding="utf-8")
        elif opts["statements"]:
            text = ";\n".join(opts["statements"])
        else:
            text = sys.stdin.read()
        context = None
        if opts["server"]:
            context = Server.objects.filter(name=opts["server"]).first()
            if context is None:
                raise CommandError(f"server {opts['server']!r} is not registered")
        try:
            with self.running_spark_service():
                outcomes = execute(actor, text, context=context, wait=not opts["queue"])
        except StatementError as exc:
            raise CommandError(f"{exc}\n{exc.excerpt}") from None
        rows = [
            [o.statement.replace("\n", " ")[:70], "ok" if o.ok else "ERROR", o.message, str(o.job_id or "")]
            for o in outcomes
        ]
        self.stdout.write(format_table(rows, ["statement", "result", "message", "job"]))
        failed = [o for o in outcomes if not o.ok]
        if failed:
            raise CommandError(f"a statement failed ({failed[0].message}); the ones after it were not run")

    @contextmanager
    def running_spark_service(self) -> Iterator[None]:
        """Without REPLADMIN_SPARK_REMOTE, the statements use the Spark service that answers at the configured
        address (REPLADMIN_SPARK_CONNECT_HOST / _PORT, where `manage.py spark_service` listens) instead of starting
        a JVM of their own for each run (seconds against tens of seconds), saying so on stderr. Nothing listening
        there, or something that is not the service: an embedded session, as before, when a statement needs
        Spark."""
        if settings.SPARK_REMOTE:
            yield
            return
        host, port = settings.SPARK_CONNECT_HOST, settings.SPARK_CONNECT_PORT
        remote = f"sc://{host}:{port}"
        try:
            socket.create_connection((host, port), timeout=SERVICE_PROBE_SECONDS).close()
        except OSError:
            yield
            return
        previous = settings.SPARK_REMOTE
        settings.SPARK_REMOTE = remote  # for this command only: put back when the statements have run
        try:
            problem = self._ping()
            if problem:  # something else listens there, or the service is not ready
                self.stderr.write(f"Spark: no service answers at {remote} ({problem}); a statement that needs "
                                  "Spark starts an embedded session")  # fmt: skip
                settings.SPARK_REMOTE = previous
            else:
                self.stderr.write(f"Spark: the service at {remote}")
            yield
        finally:
            settings.SPARK_REMOTE = previous

    @staticmethod
    def _ping() -> str:
        """Why the configured service does not answer ("" when it does), within SERVICE_PING_SECONDS: a listener
        that accepts and never answers must not hold the command."""
        outcome: list[str] = []

        def ping() -> None:
            try:
                ping_service()
                outcome.append("")
            except Exception as exc:
                outcome.append((str(exc).splitlines() or [type(exc).__name__])[0][:200])

        thread = threading.Thread(target=ping, name="spark-service-ping", daemon=True)
        thread.start()
        thread.join(SERVICE_PING_SECONDS)
        return outcome[0] if outcome else f"no answer within {SERVICE_PING_SECONDS} s"

    @staticmethod
    def actor(username: str | None) -> Actor:
        """The shell's own actor (every permission) without --user; with it, that user, who must be allowed to
        run statements at all (operate, as in the statement console; each statement checks its own permission)."""
        if username is None:
            return Actor.command()
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None or not user.is_active:
            raise CommandError(f"no active user named {username!r}")
        actor = Actor(user=user, via="command")
        if not actor.has_perm(OPERATE):
            record(actor, "statement", "replsql", AuditEntry.Outcome.DENIED, {"missing_permission": OPERATE})
            raise CommandError(
                f"{username} may not run statements: the permission {OPERATE} is missing "
                "(give it the operator or editor role)"
            )
        return actor

"""manage.py replsql: run replication statements from an argument, a file or stdin."""

from __future__ import annotations

import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from replication_admin.core.audit import Actor, record
from replication_admin.core.permissions import OPERATE
from replication_admin.engine.statements import StatementError
from replication_admin.models import AuditEntry, Server
from replication_admin.statements import execute


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
            outcomes = execute(actor, text, context=context, wait=not opts["queue"])
        except StatementError as exc:
            raise CommandError(f"{exc}\n{exc.excerpt}") from None
        rows = [
            [o.statement.replace("\n", " ")[:70], "ok" if o.ok else "ERROR", o.message, str(o.job_id or "")]
            for o in outcomes
        ]
        self.stdout.write(format_table(rows, ["statement", "result", "message", "job"]))
        failed = [o for o in outcomes if not o.ok]
        if failed:  # its message is in the table above: said once
            number = outcomes.index(failed[0]) + 1
            raise CommandError(f"a statement failed (number {number}, ERROR above); the ones after it were not run")

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

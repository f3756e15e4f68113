"""manage.py replsql: run replication statements from an argument, a file or stdin."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replication_admin.actions.audit import Actor
from replication_admin.actions.statements import execute
from replication_admin.engine.statements import StatementError
from replication_admin.models import Server


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

    def handle(self, *args, **opts):
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
            outcomes = execute(Actor.command(), text, context=context, wait=not opts["queue"])
        except StatementError as exc:
            raise CommandError(f"{exc}\n{exc.excerpt}") from None
        rows = [
            [o.statement.replace("\n", " ")[:70], "ok" if o.ok else "ERROR", o.message, str(o.job_id or "")]
            for o in outcomes
        ]
        self.stdout.write(format_table(rows, ["statement", "result", "message", "job"]))
        if any(not o.ok for o in outcomes):
            raise CommandError("a statement failed; the ones after it were not run")

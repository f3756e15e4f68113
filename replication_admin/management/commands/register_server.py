"""manage.py register_server NAME --dialect ... : register (or update) a server from the command line."""

from __future__ import annotations

import os
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from replication_admin.core.audit import Actor
from replication_admin.core.connections import test_connection
from replication_admin.models import Server, dialect_choices
from replication_admin.servers.actions import (
    ServerData,
    do_check_server,
    do_register_server,
    do_update_server,
    transient_server,
    validate,
)


class Command(BaseCommand):
    help = "Register a database server (the password is read from --password-env or stdin, never from argv)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--dialect", required=True, choices=[c for c, _ in dialect_choices()])
        parser.add_argument("--host", default="")
        parser.add_argument("--port", type=int)
        parser.add_argument("--database", default="", help="database name, or the SQLite file path")
        parser.add_argument("--schema", default="")
        parser.add_argument("--user", default="")
        parser.add_argument("--password-env", default="", help="name of an environment variable holding it")
        parser.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
        parser.add_argument("--dsn", default="", help="a named ODBC DSN instead of host/port")
        parser.add_argument("--description", default="")
        parser.add_argument("--update", action="store_true", help="change an existing registration")
        parser.add_argument(
            "--test", action="store_true", help="test the connection first: nothing is saved when the test fails"
        )

    def handle(self, *args, **opts):
        password: str | None = ""
        if opts["password_env"]:
            if opts["password_env"] not in os.environ:
                raise CommandError(f"environment variable {opts['password_env']} is not set")
            password = os.environ[opts["password_env"]]
        elif opts["password_stdin"]:
            password = sys.stdin.readline().rstrip("\n")
        elif opts["update"]:
            password = None  # keep the stored one
        data = ServerData(
            name=opts["name"],
            dialect=opts["dialect"],
            host=opts["host"],
            port=opts["port"],
            database=opts["database"],
            schema=opts["schema"],
            user=opts["user"],
            password=password,
            odbc_dsn=opts["dsn"],
            description=opts["description"],
        )
        actor = Actor.command()
        try:
            existing = Server.objects.filter(name=opts["name"]).first() if opts["update"] else None
            if opts["update"] and existing is None:
                raise CommandError(f"no server named {opts['name']!r} to update")
            if opts["test"]:
                # Tested before anything is saved: a server that cannot connect is not registered (or changed).
                probe = test_connection(transient_server(validate(data, existing=existing), existing=existing))
                if not probe.ok:
                    verb = "changed" if existing else "registered"
                    raise CommandError(f"server {data.name} not {verb}: connection test failed: {probe.message}")
            if existing is not None:
                server = do_update_server(actor, existing, data)
            else:
                server = do_register_server(actor, data)
        except ValidationError as exc:
            lines = [f"{'' if f == '__all__' else f + ': '}{' '.join(m)}" for f, m in exc.message_dict.items()]
            raise CommandError("invalid server:\n  " + "\n  ".join(lines)) from None
        self.stdout.write(f"registered {server.name} ({server.get_dialect_display()}) at {server.location}")
        if opts["test"]:
            result = do_check_server(actor, server)
            if not result.ok:
                raise CommandError(result.message)
            self.stdout.write(result.message)

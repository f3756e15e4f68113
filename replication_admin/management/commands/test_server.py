from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from replication_admin.core.audit import Actor
from replication_admin.models import Server
from replication_admin.servers.actions import do_check_server


class Command(BaseCommand):
    help = "Test the connection to registered servers (all when no name is given)."

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*")

    def handle(self, *args, **opts):
        servers = Server.objects.filter(name__in=opts["names"]) if opts["names"] else Server.objects.all()
        missing = set(opts["names"]) - {s.name for s in servers}
        if missing:
            raise CommandError(f"not registered: {', '.join(sorted(missing))}")
        failed = 0
        for server in servers:
            result = do_check_server(Actor.command(), server)
            failed += not result.ok
            self.stdout.write(f"{server.name:20} {'ok  ' if result.ok else 'FAIL'} {result.message}")
        if failed:
            raise CommandError(f"{failed} server(s) failed")

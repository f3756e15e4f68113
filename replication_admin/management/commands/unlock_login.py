"""manage.py unlock_login USER [--address ADDR]: lift a login lockout (audited)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from replication_admin.console.actions import do_unlock_login
from replication_admin.core.audit import Actor


class Command(BaseCommand):
    help = (
        "Let a user name locked out after too many failed logins log in again: from one address (--address), "
        "or from every address. django-axes' own axes_reset, axes_reset_username and axes_reset_ip do the same "
        "unaudited."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--address", default=None, help="only the lockout from this client address")

    def handle(self, *args, **opts):
        removed = do_unlock_login(Actor.command(), opts["username"], opts["address"])
        where = f" from {opts['address']}" if opts["address"] else ""
        if removed:
            self.stdout.write(f"unlocked {opts['username']}{where}")
        else:
            self.stdout.write(f"{opts['username']}{where} was not locked out")

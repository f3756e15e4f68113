from __future__ import annotations

from django.core.management.base import BaseCommand

from replication_admin.core.audit import Actor
from replication_admin.servers.actions import do_rotate_passwords


class Command(BaseCommand):
    help = "Re-encrypt stored server passwords under the first key of REPLADMIN_FERNET_KEYS."

    def handle(self, *args, **opts):
        count = do_rotate_passwords(Actor.command())
        self.stdout.write(f"re-encrypted {count} password(s)")

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from replication_admin.core.audit import Actor, record

# What each role may do; the groups and their permissions are made by migration 0007_roles.
ROLES = {
    "viewer": "reads the pages and changes nothing",
    "operator": "reads, and runs replication: refresh, sync, compare, initial copy, mark valid",
    "editor": "runs replication, and creates and drops servers, snapshots, publications, resolvers and statements",
}


class Command(BaseCommand):
    help = (
        "Give a console user one of the roles viewer, operator or editor (the auth group of that name), "
        "taking away the other two."
    )

    def add_arguments(self, parser):
        parser.add_argument("user", help="the user's login name")
        parser.add_argument("role", help="viewer, operator or editor")

    def handle(self, *args, **opts):
        username, role = opts["user"], opts["role"].strip().lower()
        if role not in ROLES:
            raise CommandError(f"unknown role {opts['role']!r}: choose one of {', '.join(ROLES)}")
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"no user named {username!r} (add the user in the admin first)")
        groups = {group.name: group for group in Group.objects.filter(name__in=ROLES)}
        if role not in groups:
            raise CommandError(f"the group {role!r} does not exist: run manage.py migrate to create the roles")

        with transaction.atomic():
            held = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
            removed = sorted(held - {role})
            user.groups.remove(*(groups[name] for name in removed))
            user.groups.add(groups[role])
            record(
                Actor.command(),
                "user.grant_role",
                username,
                detail={"role": role, "removed": removed, "already_held": role in held},
            )

        if role in held and not removed:
            self.stdout.write(f"{username} already has the role {role} ({ROLES[role]}); nothing changed")
        else:
            was = f" (removed from {', '.join(removed)})" if removed else ""
            self.stdout.write(f"{username} now has the role {role}: {ROLES[role]}{was}")
        if getattr(user, "is_superuser", False):
            self.stdout.write(f"note: {username} is a superuser and holds every permission whatever the role")

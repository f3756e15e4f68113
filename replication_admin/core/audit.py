from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest

from replication_admin.models import AuditEntry

# Where an audit row came from. People act through the console, the Django admin and the shell; the scheduler and
# the reaper act on their own, and their rows (three quarters of a busy log) are summarised, not listed, by default.
PEOPLE_VIAS = ("web", "admin", "command")
MACHINE_VIAS = ("scheduler", "reaper")


@dataclass(frozen=True)
class Actor:
    """Who is acting, and through what: a signed-in user on the web, a command, the scheduler."""

    user: User | None = None
    via: str = "web"
    remote_addr: str | None = None

    @property
    def username(self) -> str:
        if self.user is not None and self.user.is_authenticated:
            return self.user.get_username()
        if self.via == "command":
            try:
                return f"command:{getpass.getuser()}"
            except Exception:
                return "command"
        return self.via

    def has_perm(self, perm: str) -> bool:
        if self.via in {"command", "scheduler"} and self.user is None:
            return True  # shell access to the host already implies full control
        return bool(self.user is not None and self.user.has_perm(perm))

    @classmethod
    def from_request(cls, request: HttpRequest) -> Actor:
        user = request.user if not isinstance(request.user, AnonymousUser) else None
        forwarded = request.META.get("REMOTE_ADDR")
        return cls(user=user, via="web", remote_addr=forwarded)

    @classmethod
    def command(cls) -> Actor:
        return cls(user=None, via="command")

    @classmethod
    def scheduler(cls) -> Actor:
        return cls(user=None, via="scheduler")


def record(
    actor: Actor,
    action: str,
    target: str = "",
    outcome: str = AuditEntry.Outcome.OK,
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    user = actor.user if actor.user is not None and actor.user.is_authenticated else None
    return AuditEntry.objects.create(
        user=user,
        username=actor.username,
        action=action,
        target=target[:500],
        outcome=outcome,
        detail=detail or {},
        remote_addr=actor.remote_addr,
        via=actor.via,
    )


class PermissionDenied(Exception):
    """The actor lacks a permission; recorded in the audit log as denied."""


def require(actor: Actor, perm: str, action: str, target: str = "") -> None:
    if not actor.has_perm(perm):
        record(actor, action, target, AuditEntry.Outcome.DENIED, {"missing_permission": perm})
        raise PermissionDenied(f"{actor.username} may not {action} (needs {perm})")

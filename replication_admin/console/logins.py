"""Login throttling around django-axes: the client address it counts by, the lockout page, the audit of every
failed login and lockout, and the Logins page where an admin lifts a lockout."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from replication_admin.console.actions import do_unlock_login
from replication_admin.core.audit import Actor, PermissionDenied, record, require
from replication_admin.models import AuditEntry

UNLOCK = "auth.change_user"


def client_address(request: HttpRequest) -> str | None:
    """The address logins are counted by: the peer's, never a client-supplied forwarding header."""
    return request.META.get("REMOTE_ADDR")


def _username(request: HttpRequest | None, credentials: dict[str, Any] | None) -> str:
    if credentials and credentials.get("username"):
        return str(credentials["username"])
    return str(request.POST.get("username", "")) if request is not None else ""


def wait_left(username: str, address: str | None) -> timedelta:
    """How long the lockout of this user name from this address still lasts."""
    cool_off: timedelta = settings.AXES_COOLOFF_TIME
    last = (
        AccessAttempt.objects.filter(username=username, ip_address=address)
        .order_by("-attempt_time")
        .values_list("attempt_time", flat=True)
        .first()
    )
    if last is None:
        return cool_off
    return max(cool_off - (timezone.now() - last), timedelta(0))


def lockout_message(username: str, address: str | None) -> str:
    minutes = max(1, math.ceil(wait_left(username, address).total_seconds() / 60))
    return (
        f"too many failed logins for {username} from {address}; "
        f"try again in {minutes} minute{'s' if minutes != 1 else ''} or ask an admin"
    )


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    """The login page again, refusing with one line (HTTP 429); the password is never echoed."""
    username = _username(request, credentials)
    form = AuthenticationForm(request, initial={"username": username})
    form.errors["__all__"] = form.error_class([lockout_message(username, client_address(request))])
    return render(request, "registration/login.html", {"form": form, "locked_out": True}, status=429)


def audit_login_failed(sender, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs) -> None:
    """Every failed login, with the user name tried and the address; never the password."""
    address = client_address(request) if request is not None else None
    username = _username(request, credentials)
    record(
        Actor(user=None, via="web", remote_addr=address),
        "login.failed",
        username,
        AuditEntry.Outcome.REFUSED,
        {"username": username, "remote_addr": address, "locked_out": bool(getattr(request, "axes_locked_out", False))},
    )


def audit_locked_out(sender, request: HttpRequest | None, username: str, ip_address: str | None, **kwargs) -> None:
    """The moment of the lockout (axes signals again for each attempt while locked out: those are failed logins)."""
    failures = (
        AccessAttempt.objects.filter(username=username, ip_address=ip_address)
        .values_list("failures_since_start", flat=True)
        .first()
    )
    if failures is not None and failures > settings.AXES_FAILURE_LIMIT:
        return
    record(
        Actor(user=None, via="web", remote_addr=ip_address),
        "login.locked_out",
        username or "",
        AuditEntry.Outcome.REFUSED,
        {
            "username": username,
            "remote_addr": ip_address,
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "cool_off_minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
        },
    )


def _may_unlock(request: HttpRequest) -> bool:
    return request.user.has_perm(UNLOCK)


@require_GET
def login_list(request: HttpRequest) -> HttpResponse:
    if not _may_unlock(request):
        return HttpResponseForbidden("only admins (who may change users) see login lockouts")
    attempts = AccessAttempt.objects.order_by("-attempt_time")[:200]
    limit = settings.AXES_FAILURE_LIMIT
    rows = [
        {
            "attempt": a,
            "locked": a.failures_since_start >= limit and wait_left(a.username or "", a.ip_address).total_seconds() > 0,
        }
        for a in attempts
    ]
    return render(request, "replication_admin/console/logins.html", {"rows": rows, "limit": limit})


@require_POST
def login_unlock(request: HttpRequest) -> HttpResponse:
    username = request.POST.get("username", "").strip()
    address = request.POST.get("address", "").strip() or None
    actor = Actor.from_request(request)
    try:
        require(actor, UNLOCK, "login.unlock", username)
        if not username:
            messages.error(request, "name the user name to unlock")
            return redirect("logins")
        removed = do_unlock_login(actor, username, address)
    except PermissionDenied as exc:
        return HttpResponseForbidden(str(exc))
    where = f" from {address}" if address else ""
    messages.success(request, f"unlocked {username}{where}" if removed else f"{username}{where} was not locked out")
    return redirect("logins")

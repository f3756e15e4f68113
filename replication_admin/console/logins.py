"""Login throttling around django-axes: the client address it counts by, the lockout page, the audit of every
failed login and lockout, and the Logins page where an admin lifts a lockout."""

from __future__ import annotations

import ipaddress
import math
from datetime import timedelta
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from replication_admin.console.actions import do_unlock_login
from replication_admin.core.audit import Actor, record
from replication_admin.core.permissions import UNLOCK_LOGINS
from replication_admin.core.web import requires
from replication_admin.models import AuditEntry


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    if address is None:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in settings.LOGIN_TRUSTED_PROXIES)


def client_address(request: HttpRequest) -> str | None:
    """The address logins are counted by: the peer's; when the peer is a trusted proxy (LOGIN_TRUSTED_PROXIES),
    the nearest address in X-Forwarded-For that is not a trusted proxy itself, which is what the proxy appended
    (whatever the client claimed sits further left and is never read). A garbled header counts as the proxy."""
    peer = request.META.get("REMOTE_ADDR")
    if not _trusted(_address(peer or "")):
        return peer
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        address = _address(hop)
        if address is None:
            return peer
        if not _trusted(address):
            return str(address)
    return peer


def _failures(since, address: str | None, username: str | None = None) -> int:
    """Failed logins from `address` since `since` (of `username` only, when named)."""
    attempts = AccessAttempt.objects.filter(ip_address=address, attempt_time__gte=since)
    if username is not None:
        attempts = attempts.filter(username=username)
    return int(attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0)


def _since():
    return timezone.now() - settings.AXES_COOLOFF_TIME


def address_locked(address: str | None) -> bool:
    """Whether `address` is locked out for every user name (LOGIN_ADDRESS_FAILURE_LIMIT failures over all)."""
    return _failures(_since(), address) >= settings.LOGIN_ADDRESS_FAILURE_LIMIT


class LoginThrottle(AxesDatabaseHandler):
    """axes' database handler with a limit of its own for each lockout: AXES_FAILURE_LIMIT failures of one user
    name from one address lock out that name from that address only (a stranger elsewhere cannot lock a user
    out everywhere); LOGIN_ADDRESS_FAILURE_LIMIT failures from one address over every name lock out the address
    (one password sprayed over many names). axes compares one number with AXES_FAILURE_LIMIT: an address over
    its own limit reads as at least that."""

    def get_failures(self, request, credentials: dict | None = None) -> int:
        since = request.axes_attempt_time - settings.AXES_COOLOFF_TIME
        address = request.axes_ip_address
        pair = _failures(since, address, get_client_username(request, credentials) or "")
        if _failures(since, address) >= settings.LOGIN_ADDRESS_FAILURE_LIMIT:
            return max(pair, get_failure_limit(request, credentials))
        return pair

    def reset_user_attempts(self, request, credentials: dict | None = None) -> int:
        # A success clears its own user name from its address, never the address's count over other names
        # (a sprayer's own account would clear it).
        username = get_client_username(request, credentials)
        removed, _ = AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address).delete()
        return removed


def _username(request: HttpRequest | None, credentials: dict[str, Any] | None) -> str:
    if credentials and credentials.get("username"):
        return str(credentials["username"])
    return str(request.POST.get("username", "")) if request is not None else ""


def wait_left(username: str | None, address: str | None) -> timedelta:
    """How long the lockout of this user name (None: of every name) from this address still lasts."""
    cool_off: timedelta = settings.AXES_COOLOFF_TIME
    attempts = AccessAttempt.objects.filter(ip_address=address)
    if username is not None:
        attempts = attempts.filter(username=username)
    last = attempts.order_by("-attempt_time").values_list("attempt_time", flat=True).first()
    if last is None:
        return cool_off
    return max(cool_off - (timezone.now() - last), timedelta(0))


def lockout_message(username: str, address: str | None) -> str:
    whole = _failures(_since(), address, username) < settings.AXES_FAILURE_LIMIT and address_locked(address)
    minutes = max(1, math.ceil(wait_left(None if whole else username, address).total_seconds() / 60))
    who = f"from {address}" if whole else f"for {username} from {address}"
    return f"too many failed logins {who}; try again in {minutes} minute{'s' if minutes != 1 else ''} or ask an admin"


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
    """The moment of a lockout: of the user name from the address when its failures reach AXES_FAILURE_LIMIT, of
    the address when its failures over every name reach LOGIN_ADDRESS_FAILURE_LIMIT (axes signals again for each
    attempt while locked out: those are failed logins)."""
    since = _since()
    if _failures(since, ip_address) == settings.LOGIN_ADDRESS_FAILURE_LIMIT:
        scope, limit = "address", settings.LOGIN_ADDRESS_FAILURE_LIMIT
    elif _failures(since, ip_address, username or "") == settings.AXES_FAILURE_LIMIT:
        scope, limit = "user name from address", settings.AXES_FAILURE_LIMIT
    else:
        return
    record(
        Actor(user=None, via="web", remote_addr=ip_address),
        "login.locked_out",
        (ip_address or "") if scope == "address" else (username or ""),
        AuditEntry.Outcome.REFUSED,
        {
            "username": username,
            "remote_addr": ip_address,
            "scope": scope,
            "failure_limit": limit,
            "cool_off_minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
        },
    )


@require_GET
@requires(UNLOCK_LOGINS, "login.list", methods=("GET",), says="see login lockouts")
def login_list(request: HttpRequest) -> HttpResponse:
    attempts = AccessAttempt.objects.order_by("-attempt_time")[:200]
    limit = settings.AXES_FAILURE_LIMIT
    by_address = AccessAttempt.objects.filter(attempt_time__gte=_since()).values("ip_address")
    whole = {
        row["ip_address"]
        for row in by_address.annotate(n=Sum("failures_since_start"))
        if row["n"] >= settings.LOGIN_ADDRESS_FAILURE_LIMIT
    }  # addresses locked out for every user name
    rows = [
        {
            "attempt": a,
            "locked": a.ip_address in whole
            or (a.failures_since_start >= limit and wait_left(a.username or "", a.ip_address).total_seconds() > 0),
        }
        for a in attempts
    ]
    return render(request, "replication_admin/console/logins.html", {"rows": rows, "limit": limit})


@require_POST
@requires(UNLOCK_LOGINS, "login.unlock", lambda request: request.POST.get("username", "").strip())
def login_unlock(request: HttpRequest) -> HttpResponse:
    username = request.POST.get("username", "").strip()
    address = request.POST.get("address", "").strip() or None
    if not username:
        messages.error(request, "name the user name to unlock")
        return redirect("logins")
    removed = do_unlock_login(Actor.from_request(request), username, address)
    where = f" from {address}" if address else ""
    messages.success(request, f"unlocked {username}{where}" if removed else f"{username}{where} was not locked out")
    return redirect("logins")

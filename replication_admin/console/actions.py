"""Console actions: acknowledging alerts (the alert leaves the dashboard; the same trouble later opens a new
one), starting compares of two tables or of a snapshot with its source, lifting login lockouts, and making and
revoking the API tokens of the status API and metrics."""

from __future__ import annotations

from collections.abc import Iterable

from axes.utils import reset as axes_reset
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from replication_admin.console.runs import Compare, CompareParams
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.jobs import do_start_job
from replication_admin.models import Alert, ApiToken, AuditEntry, JobRun, Server, Snapshot

EDIT = "replication_admin.edit"


def do_acknowledge_alert(actor: Actor, alert: Alert) -> str:
    target = f"alert #{alert.pk} {alert.kind} {alert.target}"
    require(actor, "replication_admin.operate", "alert.acknowledge", target)
    with transaction.atomic():
        done = Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(
            acknowledged_at=timezone.now(), acknowledged_by=actor.username
        )
        record(actor, "alert.acknowledge", target)
    return f"acknowledged: {alert}" if done else f"{alert} was already acknowledged"


def do_start_compare(actor: Actor, left: Server, left_table: str, right: Server, right_table: str) -> JobRun:
    target = f"{left.name}.{left_table} ↔ {right.name}.{right_table}"
    params = CompareParams(
        left_server=left.name, left_table=left_table, right_server=right.name, right_table=right_table
    )
    return do_start_job(actor, Compare, target, params)


def do_compare_snapshot(actor: Actor, snapshot: Snapshot, sync: bool | None = None) -> JobRun:
    """Compare a snapshot's destination with its source query."""
    params = CompareParams(
        snapshot=snapshot.name,
        left_server=snapshot.source_server_id,
        right_server=snapshot.dest_server_id,
        right_table=snapshot.dest_table,
    )
    return do_start_job(actor, Compare, f"{snapshot.name} ↔ its source", params, sync=sync)


def do_unlock_login(actor: Actor, username: str, address: str | None = None) -> int:
    """Lift the login lockout of a user name (from one address, or from every address); audited. The number of
    lockout records removed (0: it was not locked out)."""
    target = f"{username} from {address}" if address else username
    require(actor, "auth.change_user", "login.unlock", target)
    with transaction.atomic():
        removed = axes_reset(ip=address, username=username)  # ip None: from every address
        record(actor, "login.unlock", target, detail={"username": username, "address": address, "removed": removed})
    return removed


def do_create_api_token(actor: Actor, name: str, scopes: Iterable[str]) -> tuple[ApiToken, str]:
    """A new token for the status API and metrics, and the token itself: the only time it is at hand (the catalog
    keeps its hash; the audit row names it by its prefix)."""
    name = name.strip()
    require(actor, EDIT, "api_token.create", name)
    wanted = set(scopes)
    chosen = [scope for scope in ApiToken.Scope.values if scope in wanted]
    if not name:
        raise ValidationError("Give the token a name that says who uses it.")
    if not chosen or len(chosen) != len(wanted):
        raise ValidationError(f"Choose its scopes among {', '.join(ApiToken.Scope.values)}.")
    secret = ApiToken.new_secret()
    with transaction.atomic(durable=True):
        token = ApiToken.objects.create(
            name=name, prefix=secret[: ApiToken.PREFIX_LENGTH], token_hash=ApiToken.digest(secret), scopes=chosen,
            created_by=actor.username,
        )  # fmt: skip
        record(actor, "api_token.create", str(token), detail={"token": token.pk, "prefix": token.prefix,
                                                               "scopes": chosen})  # fmt: skip
    return token, secret


def do_revoke_api_token(actor: Actor, token: ApiToken) -> bool:
    """Refuse the token from now on (kept in the list as revoked). False when it already was revoked."""
    require(actor, EDIT, "api_token.revoke", str(token))
    with transaction.atomic(durable=True):
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=actor.username
        )
        outcome = AuditEntry.Outcome.OK if revoked else AuditEntry.Outcome.ERROR
        record(actor, "api_token.revoke", str(token), outcome, {"token": token.pk, "prefix": token.prefix,
                                                                "already_revoked": not revoked})  # fmt: skip
    return bool(revoked)

"""Registering, changing, checking and removing servers."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models.deletion import ProtectedError
from django.utils import timezone

from replication_admin.core import connections, crypto, live
from replication_admin.core.alerts import raise_alert, resolve_alerts
from replication_admin.core.audit import Actor, record, require
from replication_admin.core.permissions import EDIT, OPERATE
from replication_admin.engine import dialects
from replication_admin.engine.dialects import AddressError
from replication_admin.models import AuditEntry, NotificationChannel, Server

SERVER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class ServerData:
    name: str
    dialect: str
    host: str = ""
    port: int | None = None
    database: str = ""
    schema: str = ""
    user: str = ""
    password: str | None = None  # None = keep the stored one (edits)
    odbc_dsn: str = ""
    description: str = ""


def validate(data: ServerData, existing: Server | None = None) -> ServerData:
    """Check the fields; return them normalised, or raise ValidationError naming each bad field."""
    errors: dict[str, str] = {}
    if not SERVER_NAME.match(data.name or ""):
        errors["name"] = (
            "A server name is 1-64 letters, digits or underscores and starts with a letter or underscore "
            "(it is used unquoted in replication statements)."
        )
    elif Server.objects.filter(name__iexact=data.name).exclude(pk__in=[existing.pk] if existing else []).exists():
        errors["name"] = f"A server named {data.name!r} is already registered."
    if data.dialect not in dialects.live_names():
        errors["dialect"] = f"Choose one of: {', '.join(dialects.live_names())}."
    normalised = data
    if "dialect" not in errors:
        dialect = dialects.get(data.dialect)
        if data.odbc_dsn:
            if not re.match(r"^[A-Za-z0-9_.\- ]{1,128}$", data.odbc_dsn):
                errors["odbc_dsn"] = "A DSN name is letters, digits, spaces, dots, dashes or underscores."
        elif dialects.get(data.dialect).file_based:
            try:
                path = dialect.check_file_path(data.database)
                path = connections.check_sqlite_file(path, must_exist=False)
                normalised = replace(normalised, database=path, host="", port=None, user="", schema="")
            except AddressError as exc:
                errors["database"] = str(exc)
        else:
            try:
                dialects.base.check_host(data.host)
            except AddressError as exc:
                errors["host"] = str(exc)
            try:
                port = dialects.base.check_port(dialect.default_port if data.port is None else data.port)
                normalised = replace(normalised, port=port)
            except AddressError as exc:
                errors["port"] = str(exc)
            if not data.database:
                errors["database"] = "A database name is required."
            if not data.user:
                errors["user"] = "A user name is required."
            if data.schema and not dialects.get(data.dialect).has_schemas:
                errors["schema"] = "Only PostgreSQL servers have a schema here."
        if not errors:
            # The addresses must be derivable; this catches characters a driver cannot take.
            try:
                address = dialects.Address(
                    dialect=data.dialect,
                    host=normalised.host,
                    port=normalised.port,
                    database=normalised.database,
                    schema=normalised.schema,
                    user=normalised.user,
                    password=data.password or "",
                    odbc_dsn=normalised.odbc_dsn,
                )
                dialect.odbc_connection_string(address)
                if not data.odbc_dsn:
                    dialect.jdbc_endpoint(address)
            except AddressError as exc:
                errors["__all__"] = str(exc)
    if errors:
        raise ValidationError(errors)
    return normalised


def _addresses(server: Server) -> None:
    if server.odbc_dsn:
        server.db_address = server.odbc_dsn
    elif dialects.get(server.dialect).file_based:
        server.db_address = server.database
    else:
        server.db_address = f"{server.dialect}://{server.user}@{server.host}:{server.port}/{server.database}"
    server.repl_address = f"{server.host}:{server.port}" if server.host else ""


def _apply(server: Server, data: ServerData) -> None:
    for field in ("name", "dialect", "host", "port", "database", "schema", "user", "odbc_dsn", "description"):
        setattr(server, field, getattr(data, field))
    if data.password is not None:
        server.password_encrypted = crypto.encrypt(data.password)
    _addresses(server)


def transient_server(data: ServerData, existing: Server | None = None) -> Server:
    """An unsaved Server for a connection test of form values (keeps the stored password on edits)."""
    server = Server(password_encrypted=existing.password_encrypted if existing else "")
    _apply(server, data)
    return server


def do_register_server(actor: Actor, data: ServerData) -> Server:
    require(actor, EDIT, "server.register", data.name)
    data = validate(data)
    with transaction.atomic():
        server = Server()
        _apply(server, data)
        try:
            server.save()
        except IntegrityError as exc:
            raise ValidationError({"name": f"A server named {data.name!r} is already registered."}) from exc
        record(
            actor,
            "server.register",
            server.name,
            detail={"dialect": server.dialect, "address": server.db_address},
        )
    return server


def do_update_server(actor: Actor, server: Server, data: ServerData) -> Server:
    require(actor, EDIT, "server.update", server.name)
    if data.name != server.name and (server.snapshots_from.exists() or server.snapshots_to.exists()):
        raise ValidationError({"name": "This server is used by snapshots; it cannot be renamed."})
    data = validate(data, existing=server)
    with transaction.atomic():
        before = {"address": server.db_address, "name": server.name}
        _apply(server, data)
        server.last_check_ok = None
        server.save()
        record(
            actor,
            "server.update",
            server.name,
            detail={
                "before": before,
                "address": server.db_address,
                "password_changed": data.password is not None,
            },
        )
    return server


def do_delete_server(actor: Actor, server: Server) -> None:
    require(actor, EDIT, "server.delete", server.name)
    name = server.name
    try:
        with transaction.atomic():
            server.delete()
            record(actor, "server.delete", name)
    except ProtectedError as exc:
        record(actor, "server.delete", name, AuditEntry.Outcome.ERROR, {"error": "in use"})
        raise ValidationError(
            f"Server {name!r} is used by {len(exc.protected_objects)} replication object(s); drop them first."
        ) from None


def record_check(server: Server, result: connections.CheckResult, by: str) -> None:
    """Remember a connection test's outcome on the server (last_check_*), and raise or resolve its
    server_unreachable alert (`by`: who tested, for the alert's resolution)."""
    Server.objects.filter(pk=server.pk).update(
        last_check_at=timezone.now(),
        last_check_ok=result.ok,
        last_check_error="" if result.ok else result.message,
        last_check_version=result.version,
    )
    if result.ok:
        resolve_alerts("server_unreachable", server.name, f"{by}: {result.message}")
    else:
        raise_alert("server_unreachable", server.name, f"{server.name} cannot be reached: {result.message}",
                    server.get_absolute_url())  # fmt: skip


def check_reachability(server: Server) -> connections.CheckResult:
    """A connection test that gives up quickly: a short network probe first (live.PROBE_TIMEOUT), then a login."""
    cause = live.probe(server)
    if cause:
        return connections.CheckResult(ok=False, message=cause, reason="unreachable")
    return connections.test_connection(server)


def check_all_servers(by: str = "periodic check") -> dict[str, bool]:
    """Test every registered server (each with a short timeout), record each outcome and raise or resolve its
    server_unreachable alert. Returns whether each answered."""
    outcomes = {}
    for server in Server.objects.all():
        result = check_reachability(server)
        record_check(server, result, by)
        outcomes[server.name] = result.ok
    return outcomes


def do_check_server(actor: Actor, server: Server) -> connections.CheckResult:
    """Test a registered server's connection and remember the outcome (shown on the server list)."""
    require(actor, OPERATE, "server.test", server.name)
    result = connections.test_connection(server)
    with transaction.atomic():
        record_check(server, result, f"tested by {actor.username or 'an operator'}")
        record(
            actor,
            "server.test",
            server.name,
            AuditEntry.Outcome.OK if result.ok else AuditEntry.Outcome.ERROR,
            {"message": result.message, "elapsed_ms": result.elapsed_ms},
        )
    server.refresh_from_db()
    return result


def do_rotate_passwords(actor: Actor) -> int:
    """Re-encrypt every stored password under the newest Fernet key."""
    require(actor, EDIT, "server.rotate_keys")
    count = 0
    with transaction.atomic():
        for server in Server.objects.select_for_update().exclude(password_encrypted=""):
            server.password_encrypted = crypto.rotate(server.password_encrypted)
            server.save(update_fields=["password_encrypted"])
            count += 1
        channels = 0  # the notification channels' URLs are kept under the same keys
        for channel in NotificationChannel.objects.select_for_update():
            channel.url_encrypted = crypto.rotate(channel.url_encrypted)
            channel.save(update_fields=["url_encrypted"])
            channels += 1
        record(actor, "server.rotate_keys", detail={"servers": count, "channels": channels})
    return count

"""Server registry against the live databases: register, test the connection, introspect, fail clearly."""

from __future__ import annotations

import io
import sqlite3

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection as django_connection

from replication_admin.core import connections, crypto
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, Server
from replication_admin.servers.actions import (
    ServerData,
    do_check_server,
    do_register_server,
    do_update_server,
)
from tests.conftest import MY, PG, require_service, server_data
from tests.tables import create_table

pytestmark = [pytest.mark.django_db, pytest.mark.live_db]

DIALECTS = ("sqlite", "postgresql", "mysql")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_registered_server_connects_and_its_tables_columns_and_keys_are_introspected(make_server, dialect):
    server = make_server(dialect, "intro")
    create_table(
        server,
        'ab "cd',
        [
            ("id key", LogicalType("integer")),
            ("part", LogicalType("varchar", length=10)),
            ("amount", LogicalType("numeric", precision=38, scale=10)),
            ("at", LogicalType("timestamp")),
        ],
        ["id key", "part"],
    )
    result = do_check_server(Actor.command(), server)
    assert result.ok, result.message
    assert server.last_check_ok is True and server.last_check_version

    assert connections.list_tables(server) == ['ab "cd']
    info = connections.describe_table(server, 'ab "cd')
    assert [c.name for c in info.columns] == ["id key", "part", "amount", "at"]
    assert [c.name for c in info.primary_key] == ["id key", "part"]
    assert info.column("amount").logical == LogicalType("numeric", precision=38, scale=10)
    assert info.column("at").logical.kind == "timestamp"
    assert info.column("part").logical == LogicalType("varchar", length=10)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_missing_table_is_reported_by_name(make_server, dialect):
    server = make_server(dialect, "empty")
    with pytest.raises(connections.TableNotFound, match="'nope' does not exist on server 'empty'"):
        connections.describe_table(server, "nope")


def test_passwords_are_stored_encrypted_and_decrypt_with_the_configured_key(db):
    server = do_register_server(
        Actor.command(),
        ServerData(name="secret", dialect="mysql", host="127.0.0.1", port=3306, database="test",
                   user="root", password="s3cr3t-Päss;word"),
    )  # fmt: skip
    with django_connection.cursor() as cursor:
        cursor.execute('SELECT "SRV_PASSWORD_ENC" FROM "SYS_SERVERS" WHERE "SERVER" = %s', ["secret"])
        stored = cursor.fetchone()[0]
    assert "s3cr3t" not in stored and stored.startswith("gAAAA")
    assert crypto.decrypt(stored) == "s3cr3t-Päss;word"
    assert connections.address_for(server).password == "s3cr3t-Päss;word"


def test_a_password_stored_under_another_key_gives_a_clear_error(db, settings):
    server = do_register_server(Actor.command(), server_data("mysql", "rekeyed", "test"))
    Server.objects.filter(pk=server.pk).update(password_encrypted=crypto.encrypt("x"))
    settings.FERNET_KEYS = [crypto.new_key()]
    server.refresh_from_db()
    result = connections.test_connection(server)
    assert not result.ok and result.reason == "configuration"
    assert "cannot be decrypted" in result.message


def test_rotating_keys_re_encrypts_every_password_under_the_new_key(db, settings):
    old_key = settings.FERNET_KEYS[0]
    server = do_register_server(Actor.command(), server_data("mysql", "rot", "test"))
    Server.objects.filter(pk=server.pk).update(password_encrypted=crypto.encrypt("pw"))
    new_key = crypto.new_key()
    settings.FERNET_KEYS = [new_key, old_key]
    call_command("rotate_server_keys", stdout=io.StringIO())
    settings.FERNET_KEYS = [new_key]
    server.refresh_from_db()
    assert crypto.decrypt(server.password_encrypted) == "pw"


@pytest.mark.parametrize(
    ("dialect", "change", "reason", "words"),
    [
        ("mysql", {"password": "wrong"}, "authentication", "wrong user name or password"),
        ("mysql", {"user": "nobody_here"}, "authentication", "wrong user name or password"),
        ("postgresql", {"user": "nobody_here"}, "authentication", "wrong user name or password"),
        ("postgresql", {"database": "no_such_db_x"}, "unknown_database", "database does not exist"),
        ("mysql", {"database": "no_such_db_x"}, "unknown_database", "database does not exist"),
        ("postgresql", {"host": "no-such-host.invalid"}, "unknown_host", "cannot be resolved"),
        ("mysql", {"host": "no-such-host.invalid"}, "unknown_host", "cannot be resolved"),
        ("postgresql", {"port": 1}, "unreachable", "nothing accepts connections"),
        ("mysql", {"port": 1}, "unreachable", "nothing accepts connections"),
    ],
)
def test_connection_failures_name_the_cause(db, dialect, change, reason, words):
    require_service(dialect)
    params = dict(PG if dialect == "postgresql" else MY)
    fields = {
        "name": "bad",
        "dialect": dialect,
        "host": params["host"],
        "port": params["port"],
        "database": "test",
        "user": params["user"],
        "password": params["password"],
        **change,
    }
    server = do_register_server(Actor.command(), ServerData(**fields))
    result = do_check_server(Actor.command(), server)
    assert not result.ok
    assert result.reason == reason, result.message
    assert words in result.message and "server bad (" in result.message
    server.refresh_from_db()
    assert server.last_check_ok is False and words in server.last_check_error
    assert AuditEntry.objects.filter(action="server.test", target="bad", outcome="error").exists()


def test_a_sqlite_server_whose_file_is_missing_fails_clearly(db, tmp_path):
    path = tmp_path / "gone.sqlite3"
    sqlite3.connect(path).close()
    server = do_register_server(Actor.command(), ServerData(name="gone", dialect="sqlite", database=str(path)))
    path.unlink()
    result = do_check_server(Actor.command(), server)
    assert not result.ok and "does not exist" in result.message
    assert not path.exists(), "testing the connection must not create the file"


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"name": "bad name"}, "name", "letters, digits or underscores"),
        ({"name": "1abc"}, "name", "starts with a letter"),
        ({"host": "evil.com/x?y"}, "host", "not a valid host"),
        ({"port": 0}, "port", "outside 1-65535"),
        ({"database": ""}, "database", "required"),
        ({"schema": "s"}, "schema", "Only PostgreSQL"),
        ({"user": "a;b"}, "__all__", "cannot take"),
    ],
)
def test_invalid_registrations_name_the_field_and_change_nothing(db, fields, field, words):
    base = {"name": "ok", "dialect": "mysql", "host": "127.0.0.1", "port": 3306, "database": "d", "user": "u"}
    if fields.get("user") == "a;b":
        base["dialect"] = "postgresql"
    with pytest.raises(ValidationError) as info:
        do_register_server(Actor.command(), ServerData(**{**base, **fields}))
    assert words in " ".join(info.value.message_dict[field])
    assert not Server.objects.exists()


def test_sqlite_files_outside_the_allowed_folders_are_refused(db):
    with pytest.raises(ValidationError, match="outside the folders"):
        do_register_server(Actor.command(), ServerData(name="etc", dialect="sqlite", database="/etc/passwd"))


def test_server_names_are_unique_ignoring_case(db):
    do_register_server(Actor.command(), server_data("mysql", "Main", "test"))
    with pytest.raises(ValidationError, match="already registered"):
        do_register_server(Actor.command(), server_data("mysql", "main", "test"))


def test_an_edit_without_a_password_keeps_the_stored_one(db):
    server = do_register_server(
        Actor.command(),
        ServerData(
            name="keep",
            dialect="mysql",
            host="127.0.0.1",
            port=3306,
            database="test",
            user="u",
            password="p1",
        ),
    )
    edit = ServerData(
        name="keep", dialect="mysql", host="localhost", port=3306, database="test", user="u", password=None
    )
    do_update_server(Actor.command(), server, edit)
    server.refresh_from_db()
    assert server.host == "localhost" and crypto.decrypt(server.password_encrypted) == "p1"
    assert server.repl_address == "localhost:3306"


def test_the_register_server_command_registers_tests_and_audits(db, sqlite_path, monkeypatch):
    require_service("postgresql")
    out = io.StringIO()
    monkeypatch.setenv("PG_PW", "")
    call_command(
        "register_server", "cmdpg", "--dialect", "postgresql", "--host", "127.0.0.1", "--database", "test",
        "--user", "root", "--password-env", "PG_PW", "--test", stdout=out,
    )  # fmt: skip
    assert "registered cmdpg" in out.getvalue() and "connected to PostgreSQL" in out.getvalue()
    server = Server.objects.get(name="cmdpg")
    assert server.port == 5432 and server.db_address == "postgresql://root@127.0.0.1:5432/test"
    entry = AuditEntry.objects.get(action="server.register", target="cmdpg")
    assert entry.via == "command" and entry.username.startswith("command")

    with pytest.raises(CommandError, match="host"):
        call_command("register_server", "cmd2", "--dialect", "mysql", "--host", "bad host", "--database", "x",
                     "--user", "u", stdout=io.StringIO())  # fmt: skip
    assert not Server.objects.filter(name="cmd2").exists()


def test_jdbc_endpoints_come_from_the_registered_fields(db):
    server = do_register_server(Actor.command(), server_data("mysql", "jd", "shop"))
    endpoint = connections.jdbc_endpoint(server)
    assert endpoint.url == "jdbc:mysql://127.0.0.1:3306/shop"
    assert endpoint.properties["user"] == "root"
    assert dialects.get("mysql").quote("x") == "`x`"


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_the_connection_test_names_the_version_the_server_reports_of_itself(make_server, dialect):
    server = make_server(dialect)
    own = {"postgresql": "SHOW server_version", "mysql": "SELECT VERSION()", "sqlite": "SELECT sqlite_version()"}
    with connections.connect(server, readonly=True) as conn:
        reported = conn.cursor().execute(own[dialect]).fetchone()[0]
    result = connections.test_connection(server)
    assert result.ok
    product, _, version = result.version.partition(" ")
    assert product == {"postgresql": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}[dialect]
    # "15.20 (Debian …)", "10.11.19-MariaDB-…": the server's own number comes first.
    assert reported.split(" ")[0].split("-")[0] == version, (reported, result.version)

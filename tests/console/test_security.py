"""Security by default: login throttling (audited, unlockable), the development env file only on request, the
Content-Security-Policy header, no password in the Django admin, register_server --test saving nothing that
fails, and resource-heavy functions refused in admin SQL fragments."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from replication_admin.core.audit import Actor
from replication_admin.engine.queries import QueryError, check_condition
from replication_admin.engine.schema import Column, TableInfo
from replication_admin.engine.types import LogicalType
from replication_admin.models import AuditEntry, Server
from replication_admin.servers.actions import ServerData, do_register_server

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "right-horse-battery-7"


def login(client: Client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR="10.1.2.3")


# --- 1. login throttling --------------------------------------------------------------------------------------


def test_wrong_passwords_lock_the_user_out_from_that_address_until_an_admin_unlocks(settings):
    User.objects.create_user("alice", password=PASSWORD)
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert login(client, "alice", "wrong").status_code == 200
    assert login(client, "alice", "wrong").status_code == 429  # the limit-th failure locks out
    refused = login(client, "alice", PASSWORD)
    assert refused.status_code == 429
    assert "too many failed logins for alice from 10.1.2.3; try again in 15 minutes or ask an admin" in (
        refused.content.decode()
    )
    assert "_auth_user_id" not in client.session
    failed = AuditEntry.objects.filter(action="login.failed")
    assert failed.count() == settings.AXES_FAILURE_LIMIT + 1
    assert {(e.target, e.remote_addr, e.outcome) for e in failed} == {("alice", "10.1.2.3", "refused")}
    locked = AuditEntry.objects.get(action="login.locked_out")
    assert (locked.target, locked.remote_addr, locked.detail["username"]) == ("alice", "10.1.2.3", "alice")
    assert not any("wrong" in str(e.detail) or PASSWORD in str(e.detail) for e in AuditEntry.objects.all())
    # Another address is counted on its own: alice is not locked out from there.
    other = client.post(reverse("login"), {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.9.9.9")
    assert other.status_code == 302
    Client().logout()

    out = io.StringIO()
    call_command("unlock_login", "alice", "--address", "10.1.2.3", stdout=out)
    assert out.getvalue().strip() == "unlocked alice from 10.1.2.3"
    assert AuditEntry.objects.get(action="login.unlock").via == "command"
    assert login(Client(), "alice", PASSWORD).status_code == 302


def test_an_admin_unlocks_from_the_logins_page_and_others_may_not(settings, editor_client):
    User.objects.create_user("bob", password=PASSWORD)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(Client(), "bob", "wrong")
    assert login(Client(), "bob", PASSWORD).status_code == 429
    assert editor_client.get(reverse("logins")).status_code == 403
    assert editor_client.post(reverse("logins-unlock"), {"username": "bob", "address": "10.1.2.3"}).status_code == 403
    assert AccessAttempt.objects.filter(username="bob").exists()
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password=PASSWORD))
    page = admin.get(reverse("logins")).content.decode()
    assert "bob" in page and "locked out" in page
    admin.post(reverse("logins-unlock"), {"username": "bob", "address": "10.1.2.3"})
    entry = AuditEntry.objects.get(action="login.unlock", outcome="ok")
    assert (entry.username, entry.target, entry.via) == ("root", "bob from 10.1.2.3", "web")
    assert login(Client(), "bob", PASSWORD).status_code == 302


def login_via_proxy(username: str, password: str, forwarded_for: str, client: Client | None = None):
    """A login through the documented proxy on this host: the peer is loopback, the client in X-Forwarded-For."""
    return (client or Client()).post(
        reverse("login"), {"username": username, "password": password},
        REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded_for,
    )  # fmt: skip


def test_behind_the_proxy_a_stranger_locks_admin_out_from_their_own_address_only(settings):
    settings.LOGIN_TRUSTED_PROXIES = ["127.0.0.1", "::1"]
    User.objects.create_superuser("admin", password=PASSWORD)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login_via_proxy("admin", "wrong", "203.0.113.7")
    refused = login_via_proxy("admin", PASSWORD, "203.0.113.7")
    assert refused.status_code == 429
    assert "too many failed logins for admin from 203.0.113.7" in refused.content.decode()
    # A forged left part of the header changes nothing: the proxy appended the real address last.
    assert login_via_proxy("admin", PASSWORD, "198.51.100.9, 203.0.113.7").status_code == 429
    assert login_via_proxy("admin", PASSWORD, "198.51.100.9").status_code == 302  # admin, from elsewhere
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.7"}
    locked = AuditEntry.objects.get(action="login.locked_out")
    assert (locked.target, locked.remote_addr, locked.detail["scope"]) == (
        "admin",
        "203.0.113.7",
        "user name from address",
    )


def test_a_forwarding_header_from_a_peer_that_is_not_a_trusted_proxy_is_ignored(settings):
    settings.LOGIN_TRUSTED_PROXIES = ["127.0.0.1"]
    User.objects.create_user("alice", password=PASSWORD)
    for n in range(settings.AXES_FAILURE_LIMIT):
        Client().post(reverse("login"), {"username": "alice", "password": "wrong"}, REMOTE_ADDR="10.1.2.3",
                      HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")  # fmt: skip
    assert login(Client(), "alice", PASSWORD).status_code == 429  # counted by the peer, 10.1.2.3
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.1.2.3"}


FAST_HASHING = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # many logins, each checked quickly


def test_one_password_sprayed_over_many_user_names_locks_the_address_out_for_every_name(settings):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 20
    settings.PASSWORD_HASHERS = FAST_HASHING
    User.objects.create_user("alice", password=PASSWORD)
    statuses = [login(Client(), f"user{n}", "Summer2026!").status_code for n in range(30)]
    assert statuses[: settings.LOGIN_ADDRESS_FAILURE_LIMIT - 1] == [200] * (settings.LOGIN_ADDRESS_FAILURE_LIMIT - 1)
    assert set(statuses[settings.LOGIN_ADDRESS_FAILURE_LIMIT - 1 :]) == {429}  # the 20th failure locks out
    refused = login(Client(), "alice", PASSWORD)  # even a right password, from that address
    assert refused.status_code == 429
    assert "too many failed logins from 10.1.2.3; try again in 15 minutes" in refused.content.decode()
    other = Client().post(reverse("login"), {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.9.9.9")
    assert other.status_code == 302  # the address is locked out, not the names
    [locked] = AuditEntry.objects.filter(action="login.locked_out")
    assert (locked.target, locked.detail["scope"], locked.detail["failure_limit"]) == ("10.1.2.3", "address", 20)


def test_a_success_from_the_spraying_address_does_not_clear_its_count_over_other_names(settings):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 20
    settings.PASSWORD_HASHERS = FAST_HASHING
    User.objects.create_user("mallory", password=PASSWORD)
    for n in range(settings.LOGIN_ADDRESS_FAILURE_LIMIT - 1):
        login(Client(), f"user{n}", "Summer2026!")
    assert login(Client(), "mallory", PASSWORD).status_code == 302  # their own account, still allowed
    assert login(Client(), "user99", "Summer2026!").status_code == 429  # the 20th failure still counts


# --- 2. the development env file --------------------------------------------------------------------------------


def _settings_in_subprocess(env_file: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLADMIN_")}
    env["DJANGO_SETTINGS_MODULE"] = "replication_admin.settings"
    env["REPLADMIN_VAR_DIR"] = str(ROOT / "var")  # where var/dev.env is
    if env_file:
        env["REPLADMIN_ENV_FILE"] = env_file
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_development_env_file_is_read_only_when_named():
    assert (ROOT / "var" / "dev.env").is_file()
    without = _settings_in_subprocess(None)
    assert without.returncode != 0
    assert "REPLADMIN_SECRET_KEY is not set" in without.stderr
    named = _settings_in_subprocess(str(ROOT / "var" / "dev.env"))
    assert named.returncode == 0, named.stderr
    assert named.stdout.strip() == "True"
    assert named.stderr.count("DEBUG is on") == 1


def test_debug_shows_a_banner_on_every_page(settings, editor_client):
    settings.DEBUG = True
    assert "Development settings (DEBUG is on)" in editor_client.get(reverse("dashboard")).content.decode()
    settings.DEBUG = False
    assert "DEBUG is on" not in editor_client.get(reverse("dashboard")).content.decode()


# --- 3. Content-Security-Policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["dashboard", "servers", "snapshots", "audit", "login"])
def test_pages_carry_the_content_security_policy(editor_client, url):
    response = editor_client.get(reverse(url))
    policy = response.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "unsafe-eval" not in policy and "script-src 'self' 'unsafe-inline'" not in policy
    body = response.content.decode()
    assert "<script>" not in body  # every script is a file


# --- 4. the Django admin never shows the encrypted password ----------------------------------------------------


def test_the_admin_server_page_never_shows_the_encrypted_password(sqlite_path):
    server = do_register_server(
        Actor.command(), ServerData(name="lite", dialect="sqlite", database=sqlite_path("lite"), password="s3cret!")
    )
    stored = Server.objects.get(pk=server.pk).password_encrypted
    assert stored
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password=PASSWORD))
    page = admin.get(reverse("admin:replication_admin_server_change", args=[server.pk])).content.decode()
    assert stored not in page and stored[:20] not in page and "password_encrypted" not in page
    assert "s3cret!" not in page


# --- 6. register_server --test ----------------------------------------------------------------------------------


@pytest.mark.live_db
def test_register_server_with_a_failing_test_saves_nothing(monkeypatch):
    monkeypatch.setenv("NOPE_PW", "wrong")
    with pytest.raises(CommandError) as info:
        call_command(
            "register_server", "broken", "--dialect", "postgresql", "--host", "127.0.0.1", "--port", "1",
            "--database", "x", "--user", "root", "--password-env", "NOPE_PW", "--test", stdout=io.StringIO(),
        )  # fmt: skip
    message = str(info.value)
    assert message.startswith("server broken not registered: connection test failed: ") and "\n" not in message
    assert not Server.objects.exists()
    assert not AuditEntry.objects.filter(action="server.register").exists()


def test_register_server_exits_non_zero_from_the_shell(tmp_path):
    env = dict(os.environ)
    env["REPLADMIN_DB_ENGINE"] = "sqlite"  # its own catalog, whatever the suite's
    env["REPLADMIN_DB_PATH"] = str(tmp_path / "catalog.sqlite3")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300)
    result = subprocess.run(
        [sys.executable, "manage.py", "register_server", "gone", "--dialect", "sqlite", "--database",
         str(tmp_path / "missing" / "gone.sqlite3"), "--test"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "server gone not" in result.stderr and "Traceback" not in result.stderr
    listed = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", "from replication_admin.models import Server; print(Server.objects.count())"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert listed.stdout.strip().splitlines()[-1] == "0"


# --- 7. resource-heavy functions ---------------------------------------------------------------------------------

TABLE = TableInfo(
    name="t",
    columns=(
        Column(name="a", declared="text", logical=LogicalType("varchar", length=10), nullable=True, pk_position=1),
    ),
)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mysql"])
@pytest.mark.parametrize(
    ("condition", "refusal"),
    [
        ("repeat(a, 1000000000) = 'x'", "calls repeat(), which can take unbounded time or memory"),
        ("pg_sleep(10) IS NULL", "calls pg_sleep(), which can take unbounded time or memory"),
        ("sleep(5) = 0", "calls sleep(), which can take unbounded time or memory"),
        ("benchmark(100000000, md5(a)) = 0", "calls benchmark(), which can take unbounded time or memory"),
        ("a IN (SELECT generate_series(1, 100000000))", "calls generate_series(), which can take unbounded time"),
        ("random() > 0.5", "which can take unbounded time or memory"),
        ("lpad(a, 100000000, 'x') = 'y'", "calls lpad() with length 100000000, over the limit of 1000"),
        ("rpad(a, length(a) * 1000000) = a", "calls rpad() with a computed length"),
    ],
)
def test_resource_heavy_functions_are_refused_in_conditions(dialect, condition, refusal):
    with pytest.raises(QueryError) as info:
        check_condition(condition, dialect, TABLE)
    assert refusal in str(info.value) and "\n" not in str(info.value)


def test_small_pads_stay_allowed():
    assert check_condition("lpad(a, 5, '0') = '00001'", "postgresql", TABLE) == "LPAD(\"a\", 5, '0') = '00001'"

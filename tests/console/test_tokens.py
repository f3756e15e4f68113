"""API tokens made in the console for the status API and metrics: stored as a hash only, shown once, scoped,
revocable, audited, made and revoked by editors only; the tokens of the environment keep working beside them."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from replication_admin.console.actions import do_create_api_token, do_revoke_api_token
from replication_admin.core.audit import Actor, PermissionDenied
from replication_admin.management.commands.demo_setup import Command as DemoSetup
from replication_admin.models import ApiToken, AuditEntry
from tests.stored import everything_stored
from tests.users import make_user

pytestmark = pytest.mark.django_db

BOTH = ["status", "metrics"]


@pytest.fixture(autouse=True)
def no_environment_tokens(settings):
    settings.STATUS_TOKENS = []


def bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def make(name: str = "prometheus", scopes: list[str] | None = None) -> str:
    return do_create_api_token(Actor.command(), name, scopes or BOTH)[1]


# --- making a token in the console ----------------------------------------------------------------------------


def test_an_editor_makes_a_token_that_is_shown_once_and_the_catalog_keeps_only_its_hash(editor_client):
    response = editor_client.post(reverse("tokens"), {"name": "prometheus on mon-1", "scopes": ["status", "metrics"]})
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"] and "no-store" in response["Cache-Control"]
    secret = response.context["secret"]
    page = response.content.decode()
    assert f'<code class="secret" id="new-token">{secret}</code>' in page
    assert "Copy it now: it is not shown again." in page
    assert f'curl -H "Authorization: Bearer {secret}" http://testserver/api/status' in page

    token = ApiToken.objects.get()
    assert secret.startswith("ra_") and len(secret) == 43
    assert (token.name, token.scopes, token.created_by) == ("prometheus on mon-1", BOTH, "editor")
    assert token.token_hash == hashlib.sha256(secret.encode()).hexdigest() and token.prefix == secret[:11]
    assert secret not in everything_stored()
    assert secret[11:] not in everything_stored()  # no part past the prefix either

    entry = AuditEntry.objects.get(action="api_token.create")
    assert (entry.username, entry.outcome, entry.target) == ("editor", "ok", f"prometheus on mon-1 ({secret[:11]}…)")
    assert entry.detail == {"token": token.pk, "prefix": secret[:11], "scopes": BOTH}

    again = editor_client.get(reverse("tokens")).content.decode()
    assert secret not in again and "prometheus on mon-1" in again and f"{secret[:11]}…" in again
    assert editor_client.get(reverse("api-status"), **bearer(secret)).status_code == 200


def test_a_token_without_a_name_or_a_scope_is_not_made(editor_client):
    response = editor_client.post(reverse("tokens"), {"name": "  ", "scopes": []})
    assert response.status_code == 200
    assert response.context["form"].errors.keys() == {"name", "scopes"}
    assert not response.context["secret"]
    assert not ApiToken.objects.exists() and not AuditEntry.objects.filter(outcome="ok").exists()
    response = editor_client.post(reverse("tokens"), {"name": "x", "scopes": ["admin"]})
    assert "admin is not one of the available choices" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_the_action_refuses_an_empty_name_and_unknown_or_missing_scopes():
    for name, scopes in [("", BOTH), ("x", []), ("x", ["status", "admin"])]:
        with pytest.raises(ValidationError):
            do_create_api_token(Actor.command(), name, scopes)
    assert not ApiToken.objects.exists() and not AuditEntry.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewers_and_operators_see_the_tokens_but_may_not_make_or_revoke_one_and_the_refusal_is_audited(role):
    secret = make("grafana", ["status"])
    token = ApiToken.objects.get()
    client = Client()
    client.force_login(make_user(role, *(["operate"] if role == "operator" else [])))

    page = client.get(reverse("tokens")).content.decode()
    assert f"<td>grafana</td><td><code>{secret[:11]}…</code></td><td>status</td>" in page
    assert 'id="token-form"' not in page and "Revoke…" not in page
    assert "needs the edit permission (the editor role)" in page

    assert client.post(reverse("tokens"), {"name": "mine", "scopes": ["metrics"]}).status_code == 403
    assert client.post(reverse("tokens-revoke", args=[token.pk])).status_code == 403
    assert list(ApiToken.objects.values_list("name", "revoked_at")) == [("grafana", None)]
    denied = AuditEntry.objects.filter(username=role, outcome="denied").order_by("id")
    assert [(e.action, e.target, e.detail["missing_permission"]) for e in denied] == [
        ("api_token.create", "mine", "replication_admin.edit"),
        ("api_token.revoke", f"API token #{token.pk}", "replication_admin.edit"),
    ]
    with pytest.raises(PermissionDenied):
        do_revoke_api_token(Actor(user=make_user(f"{role}2")), token)
    assert ApiToken.objects.get().active


# --- revoking ---------------------------------------------------------------------------------------------------


def test_revoking_asks_first_then_the_token_is_refused_with_401_and_shown_as_revoked(editor_client):
    secret = make("nagios", ["status"])
    token = ApiToken.objects.get()
    address = reverse("tokens-revoke", args=[token.pk])
    assert f'href="{address}">Revoke…' in editor_client.get(reverse("tokens")).content.decode()

    confirm = editor_client.get(address).content.decode()
    assert "Revoke the API token nagios?" in confirm and "is refused from then on (401)" in confirm
    assert ApiToken.objects.get().active
    assert editor_client.post(address).status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by == "editor"

    response = Client().get(reverse("api-status"), **bearer(secret))
    assert response.status_code == 401 and response.json() == {"error": "this token was revoked"}
    page = editor_client.get(reverse("tokens")).content.decode()
    assert "revoked" in page and "by editor" in page and f'href="{address}"' not in page
    entry = AuditEntry.objects.get(action="api_token.revoke")
    assert (entry.username, entry.outcome, entry.target) == ("editor", "ok", f"nagios ({secret[:11]}…)")

    again = editor_client.post(address, follow=True)
    assert "was already revoked" in again.content.decode()
    assert not do_revoke_api_token(Actor.command(), token)
    assert AuditEntry.objects.filter(action="api_token.revoke").latest("id").outcome == "error"


# --- the endpoints --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scopes", "status", "metrics"),
    [(["status"], 200, 403), (["metrics"], 403, 200), (BOTH, 200, 200)],
    ids=["status", "metrics", "both"],
)
def test_a_token_opens_only_the_endpoints_of_its_scopes(client, scopes, status, metrics):
    secret = make("scraper", scopes)
    assert client.get(reverse("api-status"), **bearer(secret)).status_code == status
    response = client.get(reverse("metrics"), **bearer(secret))
    assert response.status_code == metrics
    if metrics == 403:
        assert response.json() == {"error": "this token does not have the metrics scope"}
    assert client.get(reverse("metrics"), {"token": secret}).status_code == metrics
    assert client.get(reverse("api-status"), **bearer(secret + "x")).status_code == 401


def test_with_no_token_anywhere_the_endpoints_say_to_make_one_in_the_console(client):
    for name in ("api-status", "metrics"):
        response = client.get(reverse(name), **bearer("ra_guess"))
        assert response.status_code == 403
        assert "not enabled" in response.json()["error"] and "API tokens page (/tokens/)" in response.json()["error"]
    secret = make()
    do_revoke_api_token(Actor.command(), ApiToken.objects.get())
    assert client.get(reverse("api-status"), **bearer("ra_guess")).status_code == 403  # only a revoked token
    assert client.get(reverse("api-status"), **bearer(secret)).status_code == 401
    make("another")
    assert client.get(reverse("api-status"), **bearer("ra_guess")).status_code == 401


def test_environment_tokens_keep_opening_both_endpoints_beside_console_tokens(client, settings):
    settings.STATUS_TOKENS = ["from-the-environment"]
    secret = make("console", ["status"])
    for name in ("api-status", "metrics"):
        assert client.get(reverse(name), **bearer("from-the-environment")).status_code == 200
    assert client.get(reverse("api-status"), **bearer(secret)).status_code == 200
    assert client.get(reverse("metrics"), **bearer(secret)).status_code == 403
    assert ApiToken.objects.get().last_used_at is not None


def test_the_last_use_is_written_at_most_once_a_minute(client):
    secret = make()
    assert ApiToken.objects.get().last_used_at is None
    client.get(reverse("api-status"), **bearer(secret))
    first = ApiToken.objects.get().last_used_at
    assert first is not None

    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("metrics"), **bearer(secret)).status_code == 200
    assert not [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    assert ApiToken.objects.get().last_used_at == first

    ApiToken.objects.update(last_used_at=first - timedelta(minutes=2))
    client.get(reverse("metrics"), **bearer(secret))
    assert ApiToken.objects.get().last_used_at > first - timedelta(seconds=1)
    assert ApiToken.objects.get().last_used_at <= timezone.now()


# --- the demo --------------------------------------------------------------------------------------------------


def test_the_demo_setup_makes_a_monitoring_token_and_revokes_the_previous_one(client):
    first = DemoSetup(stdout=StringIO()).monitoring_token(Actor.command())
    assert first.startswith("ra_")
    assert client.get(reverse("api-status"), **bearer(first)).status_code == 200
    assert client.get(reverse("metrics"), **bearer(first)).status_code == 200

    second = DemoSetup(stdout=StringIO()).monitoring_token(Actor.command())
    assert second != first
    assert client.get(reverse("api-status"), **bearer(first)).status_code == 401
    assert client.get(reverse("api-status"), **bearer(second)).status_code == 200
    assert list(ApiToken.objects.order_by("id").values_list("name", "revoked_by")) == [
        ("demo monitoring", Actor.command().username),
        ("demo monitoring", ""),
    ]
    assert first not in everything_stored() and second not in everything_stored()

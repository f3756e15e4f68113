"""The API tokens page: the tokens of the status API and metrics (name, prefix, scopes, when made and last used,
revoked or not); editors make one (shown once, on the page that answers the form) and revoke one (after a
confirmation page). Everyone signed in reads the list."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from replication_admin.console.actions import do_create_api_token, do_revoke_api_token
from replication_admin.console.forms import ApiTokenForm
from replication_admin.core.audit import Actor
from replication_admin.core.permissions import EDIT
from replication_admin.core.web import requires
from replication_admin.models import ApiToken


@never_cache  # the answer to the form carries the token itself: no copy of it may stay in a cache
@require_http_methods(["GET", "POST"])
@requires(EDIT, "api_token.create", lambda request: request.POST.get("name", "").strip())
def token_list(request: HttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST or None)
    created: tuple[ApiToken, str] | None = None
    if request.method == "POST" and form.is_valid():
        try:
            created = do_create_api_token(
                Actor.from_request(request), form.cleaned_data["name"], form.cleaned_data["scopes"]
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            form = ApiTokenForm()
    return render(request, "replication_admin/console/tokens.html", {
        "tokens": ApiToken.objects.all(),
        "form": form,
        "created": created[0] if created else None,
        "secret": created[1] if created else "",
        "status_url": request.build_absolute_uri(reverse("api-status")),
        "metrics_url": request.build_absolute_uri(reverse("metrics")),
    })  # fmt: skip


@require_http_methods(["GET", "POST"])
@requires(EDIT, "api_token.revoke", lambda request, pk: f"API token #{pk}")
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk)
    if not token.active:
        messages.warning(request, f"The token {token} was already revoked.")
        return redirect("tokens")
    if request.method == "GET":
        body = (
            f"Whatever sends the token {token.prefix}… ({', '.join(token.scope_labels)}) is refused from then on "
            "(401). A revoked token cannot be used again: make a new one for whoever still needs access."
        )
        return render(request, "replication_admin/confirm.html", {
            "title": f"Revoke the API token {token.name}?",
            "body": body,
            "action": "Revoke token",
            "cancel_url": reverse("tokens"),
            "hidden": {},
        })  # fmt: skip
    revoked = do_revoke_api_token(Actor.from_request(request), token)
    if revoked:
        messages.success(request, f"Revoked the token {token}.")
    else:
        messages.warning(request, f"The token {token} was already revoked.")
    return redirect("tokens")

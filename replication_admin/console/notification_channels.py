"""The notification channels page (under Alerts): where alerts and conflict notices go besides e-mail (Apprise URLs:
a JSON webhook, Slack, Teams …), who is e-mailed about conflicts the default rule decided, and the last messages
sent, waiting or failed. Editors add, switch, test and delete channels; everyone signed in reads the page."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from replication_admin.console.actions import (
    do_create_notification_channel,
    do_delete_notification_channel,
    do_set_conflict_notify_email,
    do_set_notification_channel,
    do_test_notification_channel,
)
from replication_admin.console.forms import ChannelSettingsForm, ConflictNotifyEmailForm, NotificationChannelForm
from replication_admin.core import notifications
from replication_admin.core.audit import Actor
from replication_admin.core.permissions import EDIT
from replication_admin.core.web import requires
from replication_admin.models import Notification, NotificationChannel, RegistryEntry

RECENT = 30  # messages listed


def _posted_action(request: HttpRequest) -> str:
    return "conflict.notify_email" if request.POST.get("form") == "notify_email" else "notify_channel.create"


def _posted(request: HttpRequest) -> str:
    return request.POST.get("name", "").strip() or request.POST.get("address", "").strip()


@require_http_methods(["GET", "POST"])
@requires(EDIT, _posted_action, _posted)
def channel_list(request: HttpRequest) -> HttpResponse:
    posted = request.POST.get("form") if request.method == "POST" else None
    form = NotificationChannelForm(request.POST if posted == "create" else None)
    default_form = ConflictNotifyEmailForm(
        request.POST if posted == "notify_email" else None,
        initial={"address": RegistryEntry.get_value(notifications.DEFAULT_EMAIL_KEY)},
    )
    actor = Actor.from_request(request)
    if posted == "create" and form.is_valid():
        data = form.cleaned_data
        try:
            channel = do_create_notification_channel(actor, data["name"], data["url"], data["events"])
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Added the channel {channel.name} ({channel.hint}). Send it a test.")
            return redirect("alerts-channels")
    if posted == "notify_email" and default_form.is_valid():
        try:
            said = do_set_conflict_notify_email(actor, default_form.cleaned_data["address"])
        except ValidationError as exc:
            default_form.add_error("address", exc)
        else:
            messages.success(request, said)
            return redirect("alerts-channels")
    channels = list(NotificationChannel.objects.all())
    return render(request, "replication_admin/console/notification_channels.html", {
        "channels": [(c, ChannelSettingsForm(initial={"enabled": c.enabled, "events": c.events}, prefix=f"c{c.pk}"))
                     for c in channels],
        "form": form,
        "default_form": default_form,
        "recent": Notification.objects.select_related("channel")[:RECENT],
        "waiting": Notification.objects.filter(state=Notification.State.PENDING).count(),
    })  # fmt: skip


def _channel_name(request: HttpRequest, pk: int) -> str:
    channel = NotificationChannel.objects.filter(pk=pk).first()
    return channel.name if channel else f"channel #{pk}"


@require_POST
@requires(EDIT, "notify_channel.change", _channel_name)
def channel_change(request: HttpRequest, pk: int) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, pk=pk)
    form = ChannelSettingsForm(request.POST, prefix=f"c{pk}")
    if not form.is_valid():
        messages.error(request, f"The channel {channel.name} must hear alerts, conflicts or both.")
        return redirect("alerts-channels")
    try:
        said = do_set_notification_channel(
            Actor.from_request(request),
            channel,
            enabled=form.cleaned_data["enabled"],
            chosen=form.cleaned_data["events"],
        )
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        messages.success(request, said)
    return redirect("alerts-channels")


@require_POST
@requires(EDIT, "notify_channel.test", _channel_name)
def channel_test(request: HttpRequest, pk: int) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, pk=pk)
    error = do_test_notification_channel(Actor.from_request(request), channel)
    if error is None:
        messages.success(request, f"The channel {channel.name} took the test message.")
    else:
        messages.error(request, f"The channel {channel.name} did not take the test message: {error}")
    return redirect("alerts-channels")


@require_http_methods(["GET", "POST"])
@requires(EDIT, "notify_channel.delete", _channel_name)
def channel_delete(request: HttpRequest, pk: int) -> HttpResponse:
    channel = get_object_or_404(NotificationChannel, pk=pk)
    if request.method == "GET":
        return render(request, "replication_admin/confirm.html", {
            "title": f"Delete the notification channel {channel.name}?",
            "body": f"Nothing more is sent to {channel.hint}, and the messages still waiting for it are dropped.",
            "action": "Delete channel",
            "cancel_url": reverse("alerts-channels"),
            "hidden": {},
        })  # fmt: skip
    messages.success(request, do_delete_notification_channel(Actor.from_request(request), channel))
    return redirect("alerts-channels")

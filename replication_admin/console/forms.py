"""Forms of the console's own pages: the job list's filter, the statement console, a new API token."""

from __future__ import annotations

from typing import cast

from django import forms

from replication_admin.models import ApiToken, JobRun, NotificationChannel, Server


class JobFilterForm(forms.Form):
    state = forms.ChoiceField(choices=[("", "any state"), *JobRun.State.choices], required=False)
    kind = forms.ChoiceField(choices=[], required=False)
    item = forms.ChoiceField(choices=[], required=False, help_text="The object the job works on")

    def __init__(self, *args, kinds: dict[str, str], items: list[str], **kwargs) -> None:
        """`kinds`: {kind: label} of the kinds offered; `items`: the objects jobs worked on."""
        super().__init__(*args, **kwargs)
        kind_field = cast(forms.ChoiceField, self.fields["kind"])
        kind_field.choices = [("", "any kind"), *sorted(kinds.items(), key=lambda pair: pair[1])]
        cast(forms.ChoiceField, self.fields["item"]).choices = [("", "any item"), *((i, i) for i in items)]


class StatementForm(forms.Form):
    server = forms.ModelChoiceField(
        queryset=Server.objects.all(), to_field_name="name", required=False, label="Context server",
        help_text="For table names written without a server",
    )  # fmt: skip
    text = forms.CharField(
        max_length=100_000, widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}), label="Statements"
    )


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text='Who or what uses it, e.g. "prometheus on mon-1"')
    scopes = forms.MultipleChoiceField(
        choices=ApiToken.Scope.choices, widget=forms.CheckboxSelectMultiple, initial=[ApiToken.Scope.STATUS],
        help_text="What it may read",
    )  # fmt: skip


class NotificationChannelForm(forms.Form):
    name = forms.CharField(max_length=100, help_text='Who hears it, e.g. "on-call Slack"')
    url = forms.CharField(
        max_length=2000, label="URL", widget=forms.TextInput(attrs={"size": 60, "autocomplete": "off"}),
        help_text="An Apprise URL: json://host/path (a JSON webhook), slack://…, msteams://…, mailto://…; encrypted",
    )  # fmt: skip
    events = forms.MultipleChoiceField(
        choices=NotificationChannel.Event.choices, widget=forms.CheckboxSelectMultiple,
        initial=[NotificationChannel.Event.ALERTS], label="Hears", help_text="What is sent to it",
    )  # fmt: skip


class ChannelSettingsForm(forms.Form):
    enabled = forms.BooleanField(required=False, label="On")
    events = forms.MultipleChoiceField(
        choices=NotificationChannel.Event.choices, widget=forms.CheckboxSelectMultiple, label="Hears"
    )


class ConflictNotifyEmailForm(forms.Form):
    address = forms.CharField(
        max_length=254, required=False, label="Default-rule conflicts to",
        help_text="E-mailed about conflicts no resolver decided (resolvers name their own owner); empty: nobody",
    )  # fmt: skip

"""Forms of the bi-directional snapshot pages and the conflict inbox: they validate, actions change state."""

from __future__ import annotations

from typing import cast

from django import forms

from replication_admin.models import Server, SnapshotPublication, SnapshotSubscription


class PublicationForm(forms.Form):
    server = forms.ModelChoiceField(
        queryset=Server.objects.all(), to_field_name="name", label="Publisher", empty_label="choose a server",
        help_text="The server that owns the table; every change goes through it",
    )  # fmt: skip
    table = forms.CharField(
        max_length=255, help_text="Needs a primary key; a ROWGUID column and a snapshot log are added"
    )


class SubscribeForm(forms.Form):
    server = forms.ModelChoiceField(
        queryset=Server.objects.none(), to_field_name="name", label="Subscriber", empty_label="choose a server",
        help_text="The table is created there with the publisher's columns",
    )  # fmt: skip

    def __init__(self, *args, publication: SnapshotPublication, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        taken = SnapshotSubscription.objects.filter(item=publication.item, type=publication.type).values("server")
        server = cast(forms.ModelChoiceField, self.fields["server"])
        server.queryset = Server.objects.exclude(name=publication.server_id).exclude(name__in=taken)


class InitCopyForm(forms.Form):
    rows_per_commit = forms.IntegerField(
        min_value=1, max_value=10_000_000, initial=100, label="Rows per commit",
        help_text="REPL_INIT_SNAPSHOT commits after this many rows",
    )  # fmt: skip


class DropSubscriptionForm(forms.Form):
    drop_table = forms.BooleanField(required=False, label="Also drop the subscriber's table")

"""Forms validate; actions change state."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from replication_admin.models import Server, dialect_choices
from replication_admin.servers.actions import ServerData, validate


class ServerForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="Used in statements, e.g. pg_main.Orders")
    dialect = forms.ChoiceField(choices=dialect_choices)
    host = forms.CharField(max_length=253, required=False)
    port = forms.IntegerField(required=False, min_value=1, max_value=65535)
    database = forms.CharField(
        label="Database or file path",
        max_length=1024,
        required=False,
        help_text="Database name; for SQLite the absolute path of the file",
    )
    schema = forms.CharField(max_length=128, required=False, help_text="PostgreSQL only; default public")
    user = forms.CharField(max_length=128, required=False)
    password = forms.CharField(
        max_length=512,
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Stored encrypted. Leave empty to keep the current password.",
    )
    clear_password = forms.BooleanField(required=False, label="Remove the stored password")
    odbc_dsn = forms.CharField(label="ODBC DSN", max_length=128, required=False, help_text="Instead of host/port")
    description = forms.CharField(max_length=300, required=False)

    def __init__(self, *args, instance: Server | None = None, **kwargs) -> None:
        self.instance = instance
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                f: getattr(instance, f)
                for f in (
                    "name",
                    "dialect",
                    "host",
                    "port",
                    "database",
                    "schema",
                    "user",
                    "odbc_dsn",
                    "description",
                )
            }
        super().__init__(*args, **kwargs)
        if instance is None:
            del self.fields["clear_password"]
            self.fields["password"].help_text = "Stored encrypted with the console's key."

    def server_data(self) -> ServerData:
        d = self.cleaned_data
        password: str | None = d.get("password") or None
        if self.instance is None:
            password = d.get("password") or ""
        elif d.get("clear_password"):
            password = ""
        return ServerData(
            name=d["name"].strip(),
            dialect=d["dialect"],
            host=(d.get("host") or "").strip(),
            port=d.get("port"),
            database=(d.get("database") or "").strip(),
            schema=(d.get("schema") or "").strip(),
            user=(d.get("user") or "").strip(),
            password=password,
            odbc_dsn=(d.get("odbc_dsn") or "").strip(),
            description=(d.get("description") or "").strip(),
        )

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            self.validated = validate(self.server_data(), existing=self.instance)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(None if field == "__all__" else field, messages)
        return cleaned

"""Forms validate; actions change state."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from replication_admin.models import JobRun, Server
from replication_admin.servers.actions import ServerData, validate


class ServerForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="Used in statements, e.g. pg_main.Orders")
    dialect = forms.ChoiceField(choices=Server.DIALECTS)
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


class CompareForm(forms.Form):
    left_server = forms.ModelChoiceField(queryset=Server.objects.all(), to_field_name="name")
    left_table = forms.CharField(max_length=255)
    right_server = forms.ModelChoiceField(queryset=Server.objects.all(), to_field_name="name")
    right_table = forms.CharField(max_length=255)


class JobFilterForm(forms.Form):
    state = forms.ChoiceField(choices=[("", "any state"), *JobRun.State.choices], required=False)
    kind = forms.CharField(required=False)


class SnapshotForm(forms.Form):
    KINDS = [
        ("incremental", "Incremental — replays the source table's snapshot log"),
        ("nonincremental", "Non-incremental — re-runs a query and replaces the destination's content"),
    ]
    kind = forms.ChoiceField(choices=KINDS, initial="incremental", widget=forms.RadioSelect)
    source_server = forms.ModelChoiceField(queryset=Server.objects.all(), to_field_name="name")
    source_table = forms.CharField(max_length=255, required=False, help_text="Incremental: the table to copy")
    columns = forms.CharField(
        max_length=4000,
        required=False,
        help_text='Incremental: columns to copy besides the key, e.g. Freight, "Ship Name"',
    )
    condition = forms.CharField(
        max_length=4000, required=False, help_text="Incremental: which rows, e.g. OrderID < 10500 (no subqueries)"
    )
    query = forms.CharField(
        max_length=20000, required=False, widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Non-incremental: one read-only SELECT on the source server",
    )  # fmt: skip
    dest_server = forms.ModelChoiceField(
        queryset=Server.objects.all(), to_field_name="name", label="Destination server"
    )
    dest_table = forms.CharField(max_length=255, label="Destination table", help_text="Created when missing")

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("kind") == "incremental" and not cleaned.get("source_table"):
            self.add_error("source_table", "An incremental snapshot copies a table: name it.")
        if cleaned.get("kind") == "nonincremental" and not cleaned.get("query"):
            self.add_error("query", "A non-incremental snapshot copies the rows of a query: write it.")
        return cleaned


class ScheduleForm(forms.Form):
    every_minutes = forms.IntegerField(required=False, min_value=1, max_value=525600, label="Refresh every (minutes)")


class StatementForm(forms.Form):
    server = forms.ModelChoiceField(
        queryset=Server.objects.all(), to_field_name="name", required=False, label="Context server",
        help_text="For table names written without a server",
    )  # fmt: skip
    text = forms.CharField(
        max_length=100_000, widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}), label="Statements"
    )

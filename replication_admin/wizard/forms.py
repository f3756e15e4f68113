"""Forms of the setup wizard's steps: each validates its own fields; replication_admin.wizard checks the choices
against the servers."""

from __future__ import annotations

from typing import cast

from django import forms

from replication_admin.engine.resolvers import resolver_classes
from replication_admin.engine.schema import TableInfo
from replication_admin.models import Server
from replication_admin.servers.forms import ServerForm
from replication_admin.wizard.plan import CR_TYPES, MODES, SNAPSHOT_MODES, SYNC_MODES

# Tables the replication itself keeps; never offered for publishing.


class ServerStepForm(forms.Form):
    """Pick a registered server or describe a new one (the new fields are a ServerForm with prefix "new")."""

    use = forms.ChoiceField(
        choices=[("existing", "A registered server"), ("new", "Register a new server")],
        widget=forms.RadioSelect,
        initial="existing",
    )
    existing = forms.ModelChoiceField(
        queryset=Server.objects.order_by("name"), to_field_name="name", required=False, empty_label="choose a server"
    )

    def clean(self):
        cleaned = super().clean()
        assert cleaned is not None  # Form.clean returns cleaned_data
        if cleaned.get("use") == "existing" and not cleaned.get("existing"):
            self.add_error("existing", "Choose a registered server, or register a new one.")
        return cleaned


def new_server_form(data=None, initial: dict | None = None) -> ServerForm:
    # Not required in the browser's eyes: the fields are ignored while a registered server is chosen.
    form = ServerForm(data, prefix="new", initial=initial or None, use_required_attribute=False)
    form.fields["password"].help_text = "Kept encrypted until the last step registers the server."
    return form


class ModeForm(forms.Form):
    mode = forms.ChoiceField(
        choices=[(key, label) for key, label, _ in MODES], widget=forms.RadioSelect, label="Replication mode"
    )


class TablesForm(forms.Form):
    tables = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one table."},
        label="Tables on the publisher",
    )
    dest_table = forms.CharField(
        max_length=255, required=False, label="Destination table", help_text="On the subscriber; empty: the same name"
    )
    columns = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Columns",
        help_text="Key columns are always copied; none ticked: every column",
    )
    condition = forms.CharField(
        max_length=4000, required=False, help_text="Which rows, e.g. price > 1 (one boolean expression, no subqueries)"
    )
    filter_columns = forms.CharField(
        max_length=4000, required=False, label="Columns besides the key",
        help_text='Transactional, one table: the columns the copy takes, e.g. name, "unit price" (empty: every column)',
    )  # fmt: skip
    account = forms.CharField(
        max_length=128,
        required=False,
        label="Publication name",
        help_text="The account, e.g. shop; empty: named after the first table",
    )
    rows_per_commit = forms.IntegerField(
        min_value=1, max_value=10_000_000, initial=1000, required=False, label="Rows per commit (initial copy)"
    )

    def __init__(self, *args, mode: str, tables: list[str], info: TableInfo | None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mode = mode
        tables_field = cast(forms.ChoiceField, self.fields["tables"])
        tables_field.choices = [(t, t) for t in tables]
        if mode in SNAPSHOT_MODES:  # one table: radio buttons posting one value
            self.fields["tables"] = forms.ChoiceField(
                choices=tables_field.choices, widget=forms.RadioSelect, label="Table on the publisher",
                help_text="A snapshot copies one table", error_messages={"required": "Choose a table."},
            )  # fmt: skip
        cast(forms.ChoiceField, self.fields["columns"]).choices = [
            (c.name, c.name) for c in (info.columns if info else ()) if not c.pk_position
        ]
        self.key_columns = [c.name for c in info.columns if c.pk_position] if info else []

    def clean_tables(self) -> list[str]:
        value = self.cleaned_data["tables"]
        return [value] if isinstance(value, str) else list(value)


def resolver_choices() -> list[tuple[str, str]]:
    """The registered classes the wizard can set up (not the ones whose expression the admin writes)."""
    return [("", "no resolver: the default rule")] + [(c.name, c.label) for c in resolver_classes() if not c.written]


class ResolversForm(forms.Form):
    def __init__(self, *args, columns: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        choices = resolver_choices()
        compared = ", ".join(c.name for c in resolver_classes() if c.needs_column and not c.written)
        for cr_type, label in CR_TYPES:
            self.fields[f"cls_{cr_type}"] = forms.ChoiceField(
                choices=choices, required=False, label=f"{label.capitalize()} conflicts"
            )
            self.fields[f"column_{cr_type}"] = forms.ChoiceField(
                choices=[("", "—")] + [(c, c) for c in columns], required=False, label=f"column ({compared})"
            )

    def resolvers(self) -> dict[str, dict]:
        d = self.cleaned_data
        return {
            cr_type: {"cls": d.get(f"cls_{cr_type}", ""), "column": d.get(f"column_{cr_type}", "")}
            for cr_type, _ in CR_TYPES
            if d.get(f"cls_{cr_type}")
        }


class ScheduleStepForm(forms.Form):
    schedule_minutes = forms.IntegerField(
        min_value=0, max_value=525_600, initial=0, label="Every N minutes",
        help_text="0: no schedule (refresh or sync by hand, or with the statement console)",
    )  # fmt: skip

    def __init__(self, *args, transactional: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.transactional = transactional
        if transactional:
            self.fields["sync_mode"] = forms.ChoiceField(
                choices=SYNC_MODES, widget=forms.RadioSelect, initial="in_sync", label="How the subscriber keeps up"
            )
            minutes = self.fields["schedule_minutes"]
            minutes.required = False
            minutes.help_text = "For a scheduled sync: its interval in minutes"

    def clean(self):
        cleaned = super().clean()
        assert cleaned is not None  # Form.clean returns cleaned_data
        if self.transactional:
            minutes = cleaned.get("schedule_minutes")
            if cleaned.get("sync_mode") == "scheduled":
                if not minutes:  # 0, or left empty
                    self.add_error("schedule_minutes", "A scheduled sync needs its interval: 1 minute or more.")
            else:
                cleaned["schedule_minutes"] = 0
        return cleaned

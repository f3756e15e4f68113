"""Forms of the snapshot pages."""

from __future__ import annotations

from django import forms

from replication_admin.models import Server


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
        assert cleaned is not None  # Form.clean returns cleaned_data
        if cleaned.get("kind") == "incremental" and not cleaned.get("source_table"):
            self.add_error("source_table", "An incremental snapshot copies a table: name it.")
        if cleaned.get("kind") == "nonincremental" and not cleaned.get("query"):
            self.add_error("query", "A non-incremental snapshot copies the rows of a query: write it.")
        return cleaned

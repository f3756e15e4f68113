"""Forms of the conflict inbox and the resolver editors."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time, timedelta

from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from replication_admin.models import ConflictBackup
from replication_admin.models.catalog import CR_TYPES


class ConflictFilterForm(forms.Form):
    item = forms.ChoiceField(choices=[], required=False, label="Publication")
    table = forms.CharField(max_length=320, required=False)
    type = forms.ChoiceField(choices=[("", "any type"), *CR_TYPES], required=False)
    decision = forms.TypedChoiceField(
        choices=[("", "any decision"), *ConflictBackup.DECISIONS], coerce=int, empty_value=None, required=False
    )
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args, items: Iterable[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["item"].choices = [("", "any publication"), *((i, i) for i in items)]

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            self.add_error("until", "The end is before the start.")
        return cleaned

    def filter(self, queryset: QuerySet[ConflictBackup]) -> QuerySet[ConflictBackup]:
        """The conflicts the valid fields select (an invalid field filters nothing and shows its error)."""
        self.is_valid()
        d = self.cleaned_data
        if d.get("item"):
            queryset = queryset.filter(item=d["item"])
        if d.get("table"):
            queryset = queryset.filter(table_name=d["table"].strip())
        if d.get("type"):
            queryset = queryset.filter(conflict_type=d["type"])
        if d.get("decision") is not None:
            queryset = queryset.filter(decision=d["decision"])
        if d.get("since"):
            queryset = queryset.filter(created_at__gte=_start_of(d["since"]))
        if d.get("until"):
            queryset = queryset.filter(created_at__lt=_start_of(d["until"] + timedelta(days=1)))
        return queryset


def _start_of(day: date) -> datetime:
    """Midnight of a day in the console's time zone (a range on created_at keeps its index usable)."""
    return timezone.make_aware(datetime.combine(day, time.min))

"""Forms of the conflict inbox and the resolver editors."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from typing import Any, cast

from django import forms
from django.db.models import Q, QuerySet
from django.utils import timezone

from replication_admin.conflicts.selectors import WAITING_FOR_A_PERSON
from replication_admin.engine.resolvers import RESOLVER_CLASSES, join_words, resolver_classes
from replication_admin.models import ConflictBackup
from replication_admin.models.catalog import CR_TYPES

HELD = WAITING_FOR_A_PERSON
# Where a conflict stands in the inbox: handled (re-applied, dismissed), waiting for a person (held), or open.
STATUSES = {
    "open": ("open", Q(reapplied_at__isnull=True, dismissed_at__isnull=True) & ~HELD),
    "held": ("held for a person", HELD),
    "reapplied": ("re-applied", Q(reapplied_at__isnull=False)),
    "dismissed": ("dismissed", Q(dismissed_at__isnull=False)),
}


class ConflictFilterForm(forms.Form):
    item = forms.ChoiceField(choices=[], required=False, label="Publication")
    table = forms.CharField(max_length=320, required=False)
    source = forms.CharField(max_length=128, required=False, label="Subscriber")  # where the change came from
    type = forms.ChoiceField(choices=[("", "any type"), *CR_TYPES], required=False)
    decision = forms.TypedChoiceField(
        choices=[("", "any decision"), *ConflictBackup.DECISIONS], coerce=int, empty_value=None, required=False
    )
    status = forms.ChoiceField(choices=[("", "any status"), *((k, label) for k, (label, _) in STATUSES.items())],
                               required=False)  # fmt: skip
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args, items: Iterable[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["item"]).choices = [("", "any publication"), *((i, i) for i in items)]

    def clean(self):
        cleaned = super().clean()
        assert cleaned is not None  # Form.clean returns cleaned_data
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
        if d.get("source"):
            queryset = queryset.filter(source=d["source"].strip())
        if d.get("type"):
            queryset = queryset.filter(conflict_type=d["type"])
        if d.get("decision") is not None:
            queryset = queryset.filter(decision=d["decision"])
        if d.get("status"):
            queryset = queryset.filter(STATUSES[d["status"]][1])
        if d.get("since"):
            queryset = queryset.filter(created_at__gte=_start_of(d["since"]))
        if d.get("until"):
            queryset = queryset.filter(created_at__lt=_start_of(d["until"] + timedelta(days=1)))
        return queryset


def _start_of(day: date) -> datetime:
    """Midnight of a day in the console's time zone (a range on created_at keeps its index usable)."""
    return timezone.make_aware(datetime.combine(day, time.min))


def resolver_class_choices(transactional: bool = False) -> list[tuple[str, str]]:
    """The registered classes a bi-directional snapshot (or a transactional publication) can use, as
    (name, "name — what it does")."""
    return [(c.name, f"{c.name} — {c.description}") for c in resolver_classes(transactional=transactional)]


def needs_column(cls: str | None) -> bool:
    spec = RESOLVER_CLASSES.get(cls or "")
    return spec is not None and spec.needs_column


def is_written(cls: str | None) -> bool:
    """True for the class whose expression the admin writes (custom)."""
    spec = RESOLVER_CLASSES.get(cls or "")
    return spec is not None and spec.written


def parse_assignments(text: str) -> dict[str, str]:
    """`column = expression` per line (a column name may be double-quoted) -> {column: expression}."""
    assignments: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith('"'):
            end = line.find('"', 1)
            while end != -1 and line[end + 1 : end + 2] == '"':
                end = line.find('"', end + 2)
            if end == -1:
                raise forms.ValidationError(f"line {number}: the quoted column name is not closed")
            column, rest = line[1:end].replace('""', '"'), line[end + 1 :].lstrip()
            if not rest.startswith("="):
                raise forms.ValidationError(f"line {number}: write it as column = expression")
            expression = rest[1:].strip()
        else:
            column, sep, expression = line.partition("=")
            column, expression = column.strip(), expression.strip()
            if not sep or not column:
                raise forms.ValidationError(f"line {number}: write it as column = expression")
        if not expression:
            raise forms.ValidationError(f"line {number}: the expression for {column} is missing")
        if column in assignments:
            raise forms.ValidationError(f"line {number}: {column} is assigned twice")
        assignments[column] = expression
    return assignments


def format_assignments(assignments: dict | None) -> str:
    def name(column: str) -> str:
        return f'"{column.replace(chr(34), chr(34) * 2)}"' if any(c in column for c in ' ="') else column

    return "\n".join(f"{name(c)} = {e}" for c, e in (assignments or {}).items())


class _AssignmentsMixin:
    column_names: list[str]
    cleaned_data: dict[str, Any]  # set by the form it is mixed into

    def clean_assignments(self) -> dict[str, str]:
        parsed = parse_assignments(self.cleaned_data.get("assignments") or "")
        unknown = [c for c in parsed if self.column_names and c not in self.column_names]
        if unknown:
            raise forms.ValidationError(f"not a column of the table: {', '.join(unknown)}")
        return parsed


_EXPRESSION_HELP = (
    "Spark SQL returning a code (0, 1, 2, 3, 4 or 5), over pub.<column>, new.<column> and old.ROWGUID, "
    "e.g. CASE WHEN new.price < pub.price THEN 1 ELSE 3 END"
)


_ASSIGNMENTS_HELP = "For code 2: one column = expression per line, e.g. price = least(pub.price, new.price)"


class ResolverForm(_AssignmentsMixin, forms.Form):
    type = forms.ChoiceField(choices=CR_TYPES, label="Conflict type")
    resolver_class = forms.ChoiceField(choices=[], label="Class", initial="pub_wins")
    column = forms.ChoiceField(choices=[], required=False)
    expression = forms.CharField(
        max_length=4000, required=False, help_text=_EXPRESSION_HELP,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
    )  # fmt: skip
    assignments = forms.CharField(
        max_length=8000, required=False, help_text=_ASSIGNMENTS_HELP,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
    )  # fmt: skip
    notify = forms.EmailField(required=False, label="Notify", help_text="E-mail address told about each conflict")
    order = forms.IntegerField(required=False, min_value=0, help_text="Empty: after the others of its type")

    def __init__(self, *args, column_names: Iterable[str] = (), transactional: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["resolver_class"]).choices = resolver_class_choices(transactional)
        compared = [c.name for c in resolver_classes(transactional=transactional) if c.needs_column]
        self.fields["column"].help_text = f"{join_words(compared, 'and')} compare this column" if compared else ""
        self.column_names = list(column_names)
        if self.column_names:
            cast(forms.ChoiceField, self.fields["column"]).choices = [("", "—"), *((c, c) for c in self.column_names)]
        else:  # the table could not be described: take the name as written
            self.fields["column"] = forms.CharField(
                max_length=255, required=False, help_text=self.fields["column"].help_text
            )

    def clean(self):
        cleaned = super().clean()
        assert cleaned is not None  # Form.clean returns cleaned_data
        cls = cleaned.get("resolver_class")
        if needs_column(cls) and not cleaned.get("column"):
            self.add_error("column", f"{cls} compares a column: choose it.")
        if is_written(cls) and not (cleaned.get("expression") or "").strip():
            self.add_error("expression", f"A {cls} resolver needs an expression returning its decision.")
        return cleaned


class ResolverEditForm(_AssignmentsMixin, forms.Form):
    expression = forms.CharField(
        max_length=4000, required=False, help_text=_EXPRESSION_HELP,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
    )  # fmt: skip
    assignments = forms.CharField(
        max_length=8000, required=False, help_text=_ASSIGNMENTS_HELP,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
    )  # fmt: skip
    notify = forms.EmailField(required=False, label="Notify")

    def __init__(self, *args, column_names: Iterable[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.column_names = list(column_names)


class DryRunForm(forms.Form):
    """What to try: the recorded conflicts against the chain as saved, or with one expression proposed."""

    type = forms.ChoiceField(choices=[("", "—"), *CR_TYPES], required=False)
    expression = forms.CharField(max_length=4000, required=False)
    assignments = forms.CharField(max_length=8000, required=False)

    def clean_assignments(self) -> dict[str, str]:
        return parse_assignments(self.cleaned_data.get("assignments") or "")

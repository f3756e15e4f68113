"""Forms of the transactional replication pages: they validate, actions change state."""

from __future__ import annotations

from datetime import time

from django import forms
from django.core.validators import RegexValidator

from replication_admin.engine.levels import DEFAULT_PURGE_MINUTES
from replication_admin.models import ReplAccount, Server
from replication_admin.transactional.profile import KNOBS

NO_SLASH = RegexValidator(r"^[^/]+$", "A name may not contain '/'.")
WEEKDAYS = [(1, "Monday"), (2, "Tuesday"), (3, "Wednesday"), (4, "Thursday"), (5, "Friday"), (6, "Saturday"),
            (7, "Sunday")]  # fmt: skip
MONTHS = [(1, "January"), (2, "February"), (3, "March"), (4, "April"), (5, "May"), (6, "June"), (7, "July"),
          (8, "August"), (9, "September"), (10, "October"), (11, "November"), (12, "December")]  # fmt: skip
PURGE_KINDS = [
    ("every", "every few minutes"),
    ("off", "never (no purger)"),
    ("daily", "daily"),
    ("weekly", "weekly"),
    ("monthly", "monthly"),
    ("yearly", "yearly"),
]


class _Prefixed(forms.Form):
    """Ids id_trx_<field>: these forms share their pages with the bi-directional ones."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("auto_id", "id_trx_%s")
        super().__init__(*args, **kwargs)


def _servers(label: str, help_text: str = "") -> forms.ModelChoiceField:
    return forms.ModelChoiceField(
        queryset=Server.objects.all(), to_field_name="name", label=label, empty_label="choose a server",
        help_text=help_text,
    )  # fmt: skip


class PublishForm(_Prefixed):
    """REPL_PUBLISH: the publisher, the publication (account) name, its log and who may change copies."""

    server = _servers("Publisher", "The log tables (RTSEQ_, RTTX_, RTLOG_) are created in its database")
    account = forms.CharField(
        max_length=128, validators=[NO_SLASH], label="Publication", help_text="The account name, e.g. tbl"
    )
    log_file = forms.CharField(max_length=255, required=False, label="Log file", help_text="Empty: <publication>.log")
    updateable = forms.BooleanField(
        required=False, label="Updateable", help_text="Subscribers may change their copies (IS_UPDATEABLE)"
    )
    sync_user = forms.CharField(
        max_length=128, required=False, label="Sync user", help_text="The user subscribers replay changes as"
    )
    capture = forms.ChoiceField(
        choices=[
            ("auto", "Automatic: the WAL where PostgreSQL allows it, else triggers"),
            ("wal", "The write-ahead log (PostgreSQL, wal_level = logical)"),
            ("triggers", "Triggers"),
        ],
        initial="auto",
        required=False,
        label="Capture",
        help_text="Decoding the WAL costs writers nothing; triggers work everywhere",
    )

    def clean_account(self) -> str:
        return self.cleaned_data["account"].strip()


class AddTableForm(forms.Form):
    """REPL_PUB_ADD for a table (TI_TYPE 2)."""

    item = forms.CharField(max_length=320, label="Table", help_text="e.g. items or DB.DBA.items; needs a primary key")
    is_copy = forms.BooleanField(required=False, label="TI_IS_COPY", help_text="Mode 1 (copy mode) instead of 0")

    def clean_item(self) -> str:
        return self.cleaned_data["item"].strip()


class RemoveItemForm(forms.Form):
    item = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


class GrantForm(forms.Form):
    grantee = forms.CharField(max_length=128, label="Grantee", help_text="A subscriber server or a user name")

    def clean_grantee(self) -> str:
        return self.cleaned_data["grantee"].strip()


class NewLogForm(forms.Form):
    log_file = forms.CharField(max_length=255, label="New log file")

    def clean_log_file(self) -> str:
        return self.cleaned_data["log_file"].strip()


class AckPolicyForm(forms.Form):
    """What REPL_WAIT waits for after a commit on this publication (REPL_PUB_ACK)."""

    ack_policy = forms.ChoiceField(choices=ReplAccount.AckPolicy.choices, label="Acknowledged by")
    ack_timeout = forms.FloatField(min_value=0.1, max_value=3600, label="Wait at most (seconds)")


class LagAlertForm(forms.Form):
    """When a subscriber of this publication is lagging and alerts: by count (ACC_ALERT_LAG) and by the age of its
    oldest unapplied transaction (ACC_ALERT_LAG_SECONDS; empty: REPLADMIN_LAG_ALERT_SECONDS)."""

    alert_lag = forms.IntegerField(min_value=0, required=False, label="More transactions behind than")
    alert_lag_seconds = forms.IntegerField(min_value=1, max_value=30 * 86400, required=False,
                                           label="Oldest unapplied transaction older than (seconds)")  # fmt: skip


class SubscriptionProfileForm(forms.Form):
    """A subscription's own tuning (transactional/profile.py's settings); an empty field takes the publication's or
    the registry's value."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, knob in KNOBS.items():
            self.fields[name] = forms.IntegerField(
                min_value=knob.low, max_value=knob.high, required=False, label=knob.label
            )


class OnConflictForm(forms.Form):
    """An updateable publication's answer to a subscriber's conflicting change (REPL_PUB_ON_CONFLICT)."""

    on_conflict = forms.ChoiceField(choices=ReplAccount.OnConflict.choices, label="On a conflict")


class SchemaPolicyForm(forms.Form):
    """What becomes of an ALTER TABLE on a published table (REPL_PUB_SCHEMA_CHANGES)."""

    schema_policy = forms.ChoiceField(choices=ReplAccount.SchemaPolicy.choices, label="Schema changes are")


class PurgerForm(forms.Form):
    """When repl_purge runs: P_MONTH, P_DAY, P_WDAY and P_TIME as the reference reads them (a month makes it
    yearly, else a day monthly, else a weekday weekly, else daily; no time means no purger)."""

    kind = forms.ChoiceField(choices=PURGE_KINDS, label="Purge", initial="off")
    p_month = forms.TypedChoiceField(
        choices=[("", "—"), *MONTHS], coerce=int, empty_value=None, required=False, label="Month (P_MONTH)"
    )
    p_day = forms.IntegerField(min_value=1, max_value=31, required=False, label="Day (P_DAY)")
    p_wday = forms.TypedChoiceField(
        choices=[("", "—"), *WEEKDAYS], coerce=int, empty_value=None, required=False, label="Weekday (P_WDAY)"
    )
    p_time = forms.TimeField(
        required=False, label="Time (P_TIME)", widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M")
    )
    purge_every = forms.IntegerField(min_value=1, max_value=1440, required=False, label="Every (minutes)")

    NEEDS = {"daily": (), "weekly": ("p_wday",), "monthly": ("p_day",), "yearly": ("p_month",), "off": (), "every": ()}
    KEEPS = {"daily": (), "weekly": ("p_wday",), "monthly": ("p_day",), "yearly": ("p_month", "p_day"), "off": (),
             "every": ()}  # fmt: skip

    @classmethod
    def initial_for(
        cls,
        p_month: int | None,
        p_day: int | None,
        p_wday: int | None,
        p_time: time | None,
        purge_every: int | None = None,
    ) -> dict:
        if p_time is None and purge_every:
            kind = "every"
        elif p_time is None:
            kind = "off"
        elif p_month is not None:
            kind = "yearly"
        elif p_day is not None:
            kind = "monthly"
        elif p_wday is not None:
            kind = "weekly"
        else:
            kind = "daily"
        return {
            "kind": kind,
            "p_month": p_month,
            "p_day": p_day,
            "p_wday": p_wday,
            "p_time": p_time,
            "purge_every": purge_every or DEFAULT_PURGE_MINUTES,
        }

    def clean(self):
        cleaned = super().clean()
        assert cleaned is not None  # Form.clean returns cleaned_data
        kind = cleaned.get("kind")
        if kind is None:
            return cleaned
        if kind == "every":
            if cleaned.get("purge_every") is None:
                self.add_error("purge_every", "Purging every few minutes needs how many.")
            cleaned["p_time"] = None
        elif kind != "off" and cleaned.get("p_time") is None:
            self.add_error("p_time", "The purger needs the time it runs at.")
        for name in self.NEEDS[kind]:
            if cleaned.get(name) is None:
                self.add_error(name, f"A {kind} purger needs this.")
        for name in ("p_month", "p_day", "p_wday"):
            if name not in self.KEEPS[kind]:
                cleaned[name] = None
        if kind != "every":
            cleaned["purge_every"] = None
        if kind == "off":
            cleaned["p_time"] = None
        return cleaned


class SubScheduleForm(forms.Form):
    minutes = forms.IntegerField(
        min_value=0, max_value=525_600, label="Sync every", help_text="minutes; 0 removes the schedule"
    )


class SubscribeForm(_Prefixed):
    """REPL_SERVER on the subscriber (the publisher's name as its DSN), then REPL_SUBSCRIBE."""

    subscriber = _servers("Subscriber", "The published tables are created there by the initial copy")
    publisher = _servers("Publisher")
    account = forms.CharField(max_length=128, validators=[NO_SLASH], label="Publication")

    def clean_account(self) -> str:
        return self.cleaned_data["account"].strip()


class TracerScheduleForm(forms.Form):
    """How often the scheduler posts a tracer token into the publication's log (REPL_TRACER_SCHEDULE)."""

    every_minutes = forms.IntegerField(min_value=0, max_value=10080, label="Every (minutes, 0: none)")

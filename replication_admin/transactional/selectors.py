"""Read queries of transactional replication for pages: the sections of the publications and subscriptions
lists, a subscription's status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count
from django.http import HttpRequest
from django.utils import timezone

from replication_admin.core.alerts import open_alerts
from replication_admin.core.web import line_chart, listing, local_stamp
from replication_admin.engine import dialects
from replication_admin.engine.row_filter import FilterSpec
from replication_admin.engine.schedule import next_run
from replication_admin.models import (
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Server,
    TpItem,
    Validation,
)
from replication_admin.transactional import actions as trx_actions
from replication_admin.transactional import lookups as trx_lookups
from replication_admin.transactional import row_filters
from replication_admin.transactional.capture import WalBacklog as WalBacklog  # re-exported
from replication_admin.transactional.capture import visible_count, wal_backlog
from replication_admin.transactional.forms import (
    MONTHS,
    WEEKDAYS,
    PublishForm,
    SubscribeForm,
)
from replication_admin.transactional.initial_copy import published_table
from replication_admin.transactional.lag import Lag as Lag  # re-exported
from replication_admin.transactional.lag import lag_limit_seconds as lag_limit_seconds  # re-exported
from replication_admin.transactional.lag import live_lags as live_lags  # re-exported
from replication_admin.transactional.lag import size_text as size_text  # re-exported
from replication_admin.transactional.lag import slot_problem as slot_problem  # re-exported
from replication_admin.transactional.lag import slots as slots  # re-exported
from replication_admin.transactional.lag import wal_publications
from replication_admin.transactional.lookups import TrxError as TrxError  # re-exported
from replication_admin.transactional.lookups import item_table as item_table  # re-exported
from replication_admin.transactional.positions import TIME_REASON as TIME_REASON  # re-exported
from replication_admin.transactional.positions import subscriber_position
from replication_admin.transactional.profile import validate_every as validate_every  # re-exported
from replication_admin.transactional.profile import validate_slices as validate_slices  # re-exported
from replication_admin.transactional.runs import subscription_subject as subscription_subject  # re-exported
from replication_admin.transactional.states import gap_counts as gap_counts  # re-exported
from replication_admin.transactional.states import subscriber_states as subscriber_states  # re-exported
from replication_admin.transactional.states import trx_status_rows as trx_status_rows  # re-exported


def capture_summary(account: ReplAccount) -> str:
    """How the publisher captures the publication's changes, and what that means for its writers."""
    server = Server.objects.filter(name=account.server).first()
    if server is None:
        return "unknown: the publisher is not registered"
    d = dialects.get(server.dialect)
    if account.capture == ReplAccount.Capture.WAL:
        return (
            "the write-ahead log: a logical replication slot keeps every committed change until a reader has "
            "stored it in the log, so writers pay no capture cost at all"
        )
    note = account.capture_note
    why = f"; not the WAL: {note}" if note and note != "chosen at publication" else ""
    if d.numbers_when_read and d.versioned_log:
        return (
            "triggers; readers number committed transactions, so the publication's writers never wait for each "
            "other (the log is versioned: the server stores each entry's transaction id; a publication made by an "
            "earlier version numbers at the first change, its writers one at a time, until published again)"
        )
    if d.numbers_when_read:
        return (
            "triggers; readers number committed transactions, so the publication's writers never wait for each "
            f"other (bulk inserts and deletes are logged once per statement){why}"
        )
    if d.numbers_at_first_change:
        return (
            f"triggers; a writer holds the publication's counter from its first change until it commits, so "
            f"its writers commit one at a time ({d.label} triggers can read no transaction id)"
        )
    return f"triggers; {d.label} has one writer at a time, and each read numbers what was written since the last"


def event_next_run(event: ScheduledEvent | None) -> datetime | None:
    if event is None:
        return None
    return next_run(event.times(), timezone.now())


def purger_summary(account: ReplAccount) -> str:
    """P_MONTH / P_DAY / P_WDAY / P_TIME for people, e.g. 'weekly on Sunday at 03:00'."""
    if account.p_time is None:
        if account.purge_every:
            return f"every {account.purge_every} minute(s), what every valid subscriber has applied"
        return "off"
    at = account.p_time.strftime("%H:%M")
    if account.p_month is not None:
        return f"yearly on {account.p_day or 1} {dict(MONTHS)[account.p_month]} at {at}"
    if account.p_day is not None:
        return f"monthly on day {account.p_day} at {at}"
    if account.p_wday is not None:
        return f"weekly on {dict(WEEKDAYS)[account.p_wday]} at {at}"
    return f"daily at {at}"


TRX_PUBLICATION_SORTS = {
    "publisher": ("server", "account"),
    "account": ("account", "server"),
    "level": ("level", "server", "account"),
    "updateable": ("is_updateable", "server", "account"),
    "log": ("log_file", "server", "account"),
}


TRX_SUBSCRIPTION_SORTS = {
    "subscriber": ("subscriber", "server", "account"),
    "publication": ("server", "account", "subscriber"),
    "state": ("init_state", "state", "subscriber"),
    "level": ("level", "subscriber"),
    "valid": ("valid", "subscriber"),
    "last_sync": ("last_sync_at", "subscriber"),
}


def _of_accounts(queryset, accounts: Iterable, server: str = "server", account: str = "account"):
    """The rows of `queryset` that may belong to these publications (exact pairs are matched by the caller)."""
    return queryset.filter(**{f"{server}__in": {a.server for a in accounts},
                              f"{account}__in": {a.account for a in accounts}})  # fmt: skip


def publication_list_context(request: HttpRequest) -> dict:
    """The transactional section of the publications page (its own sort, filter and page: `trx_` parameters)."""
    accounts = listing(request, ReplAccount.objects.all(), sorts=TRX_PUBLICATION_SORTS, default="publisher",
                       search=("server", "account", "log_file"), prefix="trx_")  # fmt: skip
    shown = list(accounts.page)
    items = {
        (r["server"], r["acct"]): r["n"]
        for r in _of_accounts(TpItem.objects, shown, account="acct").values("server", "acct").annotate(n=Count("id"))
        .order_by()
    }  # fmt: skip
    subscribers = {
        (r["server"], r["account"]): r["n"]
        for r in _of_accounts(ReplSubscriber.objects.filter(subscribed=True), shown).values("server", "account")
        .annotate(n=Count("id")).order_by()
    }  # fmt: skip
    shown_keys = [(a.server, a.account) for a in shown]
    states = {(r["server"], r["account"]): r for r in trx_status_rows(accounts_shown=shown_keys)} if shown else {}
    accounts.page.object_list = [
        {"account": a, "items": items.get((a.server, a.account), 0),
         "subscribers": subscribers.get((a.server, a.account), 0), "purger": purger_summary(a),
         "status": states.get((a.server, a.account))}
        for a in shown
    ]  # fmt: skip
    return {"trx_publications": accounts, "trx_form": PublishForm()}


def subscription_list_context(request: HttpRequest) -> dict:
    """The transactional section of the subscriptions page (its own sort, filter and page: `trx_` parameters)."""
    subs = listing(request, ReplSubscriber.objects.filter(subscribed=True), sorts=TRX_SUBSCRIPTION_SORTS,
                   default="subscriber", search=("subscriber", "server", "account"), prefix="trx_")  # fmt: skip
    shown = list(subs.page)
    names = {trx_actions.schedule_event_name(s.subscriber, s): s.pk for s in shown}
    events = {names[e.name]: e for e in ScheduledEvent.objects.filter(name__in=names)}
    states = subscriber_states(s.pk for s in shown)
    rows = [{"sub": sub, "status": states.get(sub.pk), "event": events.get(sub.pk),
             "next_run": event_next_run(events.get(sub.pk))} for sub in shown]  # fmt: skip
    subs.page.object_list = rows
    return {
        "trx_subscriptions": subs,
        "trx_subscribe_form": SubscribeForm(),
        "accounts": ReplAccount.objects.only("server", "account"),
    }


def published_table_name(item: TpItem) -> str:
    """The table a published table item names, as its server spells it (its resolvers' TABLE_NAME is
    '<server>.<this>'); as written in the item when the server cannot be reached."""
    try:
        return trx_actions.published_table(Server.objects.get(name=item.server), item_table(item.item)).name
    except Exception:  # unreachable or dropped: the name as the item writes it
        return item_table(item.item)


def table_item(server: str, table: str) -> TpItem | None:
    """The published table item of `server` whose table is `table` (case-insensitively)."""
    for item in TpItem.objects.filter(server=server, type=2):
        if item_table(item.item).lower() == table.lower():
            return item
    return None


# --- what a validation of a subscription reads (compare/validation.py) ---------------------------------------


def validated_tables(sub: ReplSubscriber) -> list[str]:
    """The published tables of the subscription's publication, as their items name them (none: not published)."""
    account = ReplAccount.objects.filter(server=sub.server, account=sub.account).first()
    return [item_table(i.item) for i in trx_lookups.table_items(account)] if account is not None else []


def validated_table(sub: ReplSubscriber, table: str) -> str:
    """The published table `table` names, or TrxError naming the publication's tables."""
    return published_table(trx_lookups.publication(sub.server, sub.account), table)


def publisher_count(sub: ReplSubscriber) -> int:
    """Transactions the publisher has committed for the publication, those its WAL slot still holds included."""
    publisher = trx_lookups.server_named(sub.server)
    if (sub.server, sub.account) in wal_publications():
        return wal_backlog(publisher, sub.account).count
    return visible_count(publisher, sub.account, wal=False)


def applied_count(sub: ReplSubscriber) -> int | None:
    """Transactions the subscriber has applied, as its own database records it (None: no level yet)."""
    position = subscriber_position(trx_lookups.server_named(sub.subscriber), sub.server, sub.account)
    return None if position is None else position[1]


VALIDATIONS_SHOWN = 200  # validations the drift chart draws (of every table of the subscription), newest


@dataclass(frozen=True)
class ValidationPanel:
    """The subscription page's validation panel: the latest validation of each table, the drift trend, when the next
    scheduled one is due."""

    latest: list[Validation]
    figure: dict
    every: int
    slices: int
    open_drift: int  # tables whose drift alert is open


def validation_panel(sub: ReplSubscriber) -> ValidationPanel:
    rows = list(Validation.objects.filter(subscription=sub).order_by("-at", "-pk")[:VALIDATIONS_SHOWN])
    latest: dict[str, Validation] = {}
    for row in rows:
        latest.setdefault(row.table, row)
    traces = []
    for table in sorted(latest):
        points = sorted((r for r in rows if r.table == table), key=lambda r: (r.at, r.pk))
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": table, "x": [local_stamp(r.at) for r in points],
            "y": [r.drift for r in points], "text": [f"{r.slice_text}: {r.verdict}" for r in points],
        })  # fmt: skip
    target = f"{sub.label}: "
    open_drift = open_alerts().filter(kind="validation_drift", target__startswith=target).count()
    return ValidationPanel(
        latest=[latest[t] for t in sorted(latest)], figure=line_chart(traces, "keys that differ"),
        every=validate_every(sub), slices=validate_slices(sub), open_drift=open_drift,
    )  # fmt: skip


@dataclass(frozen=True)
class RowFilterRow:
    """One published table of a subscription and what of it the copy holds (the subscription page's row filters),
    and whose filter says so ("own", "publication" or "" for every row and column)."""

    table: str
    spec: FilterSpec
    origin: str = ""


def row_filters_of(sub: ReplSubscriber, tables: list[str]) -> list[RowFilterRow]:
    """Each of the publication's `tables` with the row filter and column list in force for the subscription (none:
    every row and column), then any table filtered that the publication no longer has."""
    stored = sub.row_filters or {}
    names = tables + [name for name in stored if name not in tables]
    return [RowFilterRow(name, FilterSpec.for_table(stored, name), _origin(stored, name)) for name in names]


def _origin(stored: dict, table: str) -> str:
    if table not in stored:
        return ""
    return "own" if row_filters.is_own(stored, table) else "publication"


@dataclass(frozen=True)
class ItemFilterRow:
    """One table of a publication, its filter (the default of every subscriber) and the subscribers whose own
    filter replaces it (the publication page's row filters)."""

    table: str
    spec: FilterSpec
    own: list[str]


def item_filters_of(items: list[TpItem], subs: list[ReplSubscriber]) -> list[ItemFilterRow]:
    """The publication's table `items` with their filters, from rows the page has read already."""
    subscribed = [s for s in subs if s.subscribed]
    out = []
    for item in items:
        if item.type != 2:
            continue
        table = trx_lookups.item_table(item.item)
        own = [s.subscriber for s in subscribed if row_filters.is_own(s.row_filters, table)]
        out.append(ItemFilterRow(table, FilterSpec.from_json(item.row_filter), own))
    return out

"""The state of every transactional subscription and publication, decided once (engine/health.py) from live facts:
the lag read on the servers (what the publisher's log and its WAL slot hold beyond the subscriber's level, and the
age of the oldest such transaction), a halt at a failing transaction, skipped transactions not yet repaired, the
follower that holds it, the tables it needs (gone: broken) and the servers' reachability. The status API, /metrics,
the dashboard, the alerts and the transactional pages all show these rows, with the same words."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from replication_admin.core import heartbeats
from replication_admin.core.alerts import open_alerts
from replication_admin.core.presence import Presence
from replication_admin.core.times import iso
from replication_admin.engine import health
from replication_admin.models import (
    RegistryEntry,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    SkippedTransaction,
    TpItem,
    subscription_label,
)
from replication_admin.transactional import profile
from replication_admin.transactional.actions import schedule_event_name
from replication_admin.transactional.lag import live_lags
from replication_admin.transactional.lookups import grant_refusal, grants_of, item_table

TRX_SUB_FIELDS = ("server", "account", "subscriber", "level", "count", "valid", "state", "init_state",
                  "last_sync_at", "last_error", "halt_count", "halt_error", "id", "follow", "grantee",
                  *profile.FIELDS)  # fmt: skip


def gap_counts() -> dict[tuple[str, str, str], int]:
    return {key: total for key, (total, _) in gap_figures().items()}


def gap_figures() -> dict[tuple[str, str, str], tuple[int, int]]:
    """Skipped transactions per subscription: all of them, and those whose keys are not repaired yet."""
    counts = (
        SkippedTransaction.objects.values("server", "account", "subscriber")
        .annotate(n=Count("id"), unrepaired=Count("id", filter=Q(repaired_at__isnull=True)))
        .order_by()
    )
    return {(r["server"], r["account"], r["subscriber"]): (r["n"], r["unrepaired"]) for r in counts}


def published_tables() -> dict[tuple[str, str], list[str]]:
    """The tables each transactional publication publishes, by (publisher, account)."""
    tables: dict[tuple[str, str], list[str]] = defaultdict(list)
    for item in TpItem.objects.filter(type=2).values("server", "acct", "item"):
        tables[(item["server"], item["acct"])].append(item_table(item["item"]))
    return tables


def trx_broken(presence: Presence, tables: list[str], publisher: str, subscriber: str, init_state: str) -> str:
    """Why a transactional subscription cannot go on because a table is gone ("" when none is)."""
    for table in tables:
        if reason := presence.gone(publisher, table, "published"):
            return reason
        if init_state == "done" and (reason := presence.gone(subscriber, table, "subscriber's copy of the")):
            return reason
    return ""


def drift_messages(subs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], str]:
    """(publisher, account, subscriber) -> the message of an open drift alert of one of its tables (one query)."""
    drift: dict[tuple[str, str, str], str] = {}
    labels = {subscription_label(s["subscriber"], s["server"], s["account"]): (s["server"], s["account"],
              s["subscriber"]) for s in subs}  # fmt: skip
    if not labels:
        return drift
    for target, message in open_alerts().filter(kind="validation_drift").values_list("target", "message"):
        key = labels.get(target.partition(": ")[0])
        if key is not None:
            drift.setdefault(key, f"validation: {message}")
    return drift


def trx_status_rows(
    now: datetime | None = None,
    subscriptions: Iterable[int] | None = None,
    accounts_shown: Iterable[tuple[str, str]] | None = None,
) -> list[dict]:
    """Every transactional publication with its subscribers (with `subscriptions`, only the publications of those
    subscription ids and only those subscribers; with `accounts_shown`, only those (server, account) publications),
    each with the state engine/health.py decides from live facts: the status API, /metrics, the dashboard, the
    alerts and the transactional pages all show these rows."""
    now = now or timezone.now()
    default_backlog = RegistryEntry.get_int("repl_max_backlog")
    accounts = {(a.server, a.account): a for a in ReplAccount.objects.all()}
    gaps = gap_figures()
    subscribers: dict[tuple[str, str], list[dict]] = defaultdict(list)
    chosen = ReplSubscriber.objects.filter(subscribed=True)
    if subscriptions is not None:
        chosen = chosen.filter(pk__in=list(subscriptions))
    shown = set(accounts_shown) if accounts_shown is not None else None
    if shown is not None:
        accounts = {key: a for key, a in accounts.items() if key in shown}
        chosen = chosen.filter(pk__in=[s.pk for s in chosen if (s.server, s.account) in shown])
    subs = list(chosen.order_by("server", "account", "subscriber").values(*TRX_SUB_FIELDS))
    schedules = schedule_intervals(subs, accounts)
    lags = live_lags(subs, now, {key: a.count for key, a in accounts.items()})
    followers = heartbeats.live_followers(now=now)
    published = published_tables()
    drift = drift_messages(subs)
    grants = grants_of(s["account"] for s in subs)
    presence = Presence({s["server"] for s in subs} | {s["subscriber"] for s in subs} | {k[0] for k in accounts})
    for sub in subs:
        server, name, subscriber = sub["server"], sub["account"], sub["subscriber"]
        account = accounts.get((server, name))
        live = lags[(server, name, subscriber)]
        lag = live.transactions
        alive = heartbeats.follower_alive(sub["id"], sub["follow"], sub["state"], followers)
        broken = trx_broken(presence, published.get((server, name), []), server, subscriber, sub["init_state"])
        # A revoked grant shows at once, whether or not a sync or the follower has met it yet.
        refused = grant_refusal(sub, grants.get(name, set()))
        # A subscription synced by a schedule is behind by up to its interval between runs, which is normal.
        every = schedules.get(sub["id"]) if sub["state"] != health.TRX_IN_SYNC else None
        limit = profile.lag_limit_seconds(sub, account) + (every or 0) * 60
        unrepaired = gaps.get((server, name, subscriber), (0, 0))[1]
        state = health.trx_subscriber_state(
            valid=sub["valid"], sync_state=sub["state"], last_error=sub["last_error"],
            init_done=sub["init_state"] == "done" and live.initialised, lag=lag, last_sync_at=sub["last_sync_at"],
            now=now, max_backlog=profile.max_backlog(sub, account, lambda _key: default_backlog),
            reachable=live.reachable, broken=broken, halted=sub["halt_count"] is not None,
            gaps=unrepaired,  # a gap not repaired yet: not ok
            copying=sub["init_state"] in ("staging", "copying"),
            follower_alive=alive, lag_seconds=live.seconds, lag_limit_seconds=limit,
            drifted=(server, name, subscriber) in drift, refused=refused,
        )  # fmt: skip
        sync_state = health.TRX_STATE_LABELS.get(sub["state"], str(sub["state"]))
        if alive is False:
            sync_state += " (follower down)"  # nothing applies it while no follower serves it
        elif refused and sub["state"] == health.TRX_IN_SYNC:
            sync_state += " (not fed: no grant)"  # until the follower's next step finds it refused
        subscribers[(server, name)].append({
            "subscriber": subscriber, "level": sub["level"], "count": sub["count"], "lag": lag,
            "lag_transactions": lag,
            "lag_seconds": 0.0 if lag == 0 else None if live.seconds is None else round(live.seconds, 3),
            "lag_text": live.unknown or f"{lag} transactions" + (f" ({live.note})" if live.note else ""),
            "lag_note": live.note, "pending_rows": lag, "reachable": live.reachable,
            "valid": bool(sub["valid"]), "sync_state": sync_state,
            "init_state": sub["init_state"], "last_sync_at": iso(sub["last_sync_at"]),
            "last_success": iso(sub["last_sync_at"]),
            "last_error": broken or refused or sub["halt_error"] or gaps_text(unrepaired)
            or drift.get((server, name, subscriber)) or sub["last_error"] or live.problem,
            "gaps": gaps.get((server, name, subscriber), (0, 0))[0],
            "unrepaired_gaps": unrepaired, "lag_limit_seconds": limit, "alert_lag": profile.alert_lag(sub, account),
            "mode": mode_of(sub["follow"], sub["state"], every), "id": sub["id"],
            "state": state, "state_label": health.LABELS[state],
        })  # fmt: skip
    rows = []
    # Subscribers of an uncatalogued publication too; asked for some subscriptions, only their publications.
    keys = subscribers.keys() if subscriptions is not None else accounts.keys() | subscribers.keys()
    if shown is not None:
        keys = {key for key in keys if key in shown}
    for server, name in sorted(keys):
        account, sub_rows = accounts.get((server, name)), subscribers.get((server, name), [])
        gone = next(
            filter(None, (presence.gone(server, t, "published") for t in published.get((server, name), []))), ""
        )
        state = health.worst([*(s["state"] for s in sub_rows), health.BROKEN if gone else health.OK])
        sub_lags = [s["lag_transactions"] for s in sub_rows]
        most = None if None in sub_lags else max(sub_lags, default=0)
        ages = [s["lag_seconds"] for s in sub_rows if s["lag_seconds"] is not None]
        rows.append({
            "server": server, "account": name, "level": account.level if account else None,
            "count": account.count if account else None, "subscribers": sub_rows, "state": state,
            "state_label": health.LABELS[state], "lag_transactions": most,
            "lag_seconds": max(ages, default=None), "pending_rows": most,
            "reachable": all(s["reachable"] for s in sub_rows),
            "last_success": max((s["last_success"] for s in sub_rows if s["last_success"]), default=None),
            "last_error": gone or next((s["last_error"] for s in sub_rows if s["last_error"]), ""),
        })  # fmt: skip
    return rows


def schedule_intervals(
    subs: list[Mapping[str, Any]], accounts: Mapping[tuple[str, str], ReplAccount]
) -> dict[int, int]:
    """The interval in minutes of each subscription's enabled sync schedule, by subscription id (one query)."""
    names = {
        schedule_event_name(s["subscriber"], accounts[(s["server"], s["account"])]): s["id"]
        for s in subs
        if (s["server"], s["account"]) in accounts
    }
    events = ScheduledEvent.objects.filter(name__in=list(names), disabled=0).values_list("name", "interval")
    return {names[name]: int(interval) for name, interval in events if interval}


def mode_of(follow: bool, sync_state: int, every: int | None) -> str:
    """How a subscription is kept up to date, for people: followed in sync, by a schedule, or by hand."""
    if follow or sync_state == health.TRX_IN_SYNC:
        return "in-sync mode"
    return f"scheduled (every {every} min)" if every else "manual"


def gaps_text(unrepaired: int) -> str:
    """Why skipped transactions keep a subscription from being ok ("" when none waits for a repair)."""
    if not unrepaired:
        return ""
    s = "" if unrepaired == 1 else "s"
    return f"{unrepaired} skipped transaction{s} not repaired: repair their keys on the subscription's page"


def subscriber_states(ids: Iterable[int], now: datetime | None = None) -> dict[int, dict]:
    """The status row of each of these subscriptions (as trx_status_rows gives it), by id: what a page shows."""
    ids = list(ids)
    if not ids:
        return {}
    return {sub["id"]: sub for pub in trx_status_rows(now, subscriptions=ids) for sub in pub["subscribers"]}

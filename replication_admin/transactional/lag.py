"""A transactional subscriber's lag as the servers say it now (not the catalog's counts, which only a sync moves):
the publisher's count (RTSEQ) minus the subscriber's (RTLEVEL in its own database), and the age of the oldest
transaction it has not applied (RTTX.AT). Bounded reads (one row each, or one row per publication a subscriber
database follows), cached for a few seconds (core.live).

A publication that captures from the WAL counts what its slot still holds too (transactional.capture.wal_backlog:
the committed transactions of the publication no reader has stored yet, and the commit time of the oldest), so the
lag includes what the publisher committed but nobody has read; the slot's WAL figures come with it (slots()).

A subscriber that cannot be reached counts from the level the console last recorded for it (its level only moves
through the console's applies) and is reported unreachable; a publisher that cannot be reached makes the lag
unknown, with the reason, never 0."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import pyodbc
from django.conf import settings

from replication_admin.core import connections, live
from replication_admin.core.introspection import lookup_table
from replication_admin.core.times import aware
from replication_admin.engine import transactional_sql as sql
from replication_admin.models import ReplAccount, Server
from replication_admin.transactional.capture import WalBacklog, visible_count, wal_backlog
from replication_admin.transactional.lookups import _d, schema_of


@dataclass(frozen=True)
class Lag:
    transactions: int | None  # None: unknown (see `unknown`)
    seconds: float | None  # age of the oldest unapplied transaction; None when nothing waits or it is not known
    initialised: bool  # the subscriber's database records a level for the publication
    publisher_reachable: bool
    subscriber_reachable: bool
    unknown: str = ""  # "unknown (server pg1 unreachable: …)" when the lag cannot be known
    problem: str = ""  # why a server could not be read, one line ("" when both were)
    live_count: bool = True  # the subscriber's count was read on the subscriber (not the catalog's)
    note: str = ""  # how the publisher's count was found when not exactly (a WAL slot counted in part)

    @property
    def reachable(self) -> bool:
        return self.publisher_reachable and self.subscriber_reachable


def _subscriber_counts(server: Server) -> dict[tuple[str, str], int]:
    d, schema = _d(server), schema_of(server)
    try:
        with connections.connect(server, readonly=True) as conn:
            rows = conn.cursor().execute(sql.levels_read_sql(d, schema)).fetchall()
    except pyodbc.Error:
        if lookup_table(server, sql.LEVEL_TABLE) is None:
            return {}  # never initialised from any publisher
        raise
    return {(str(r[0]), str(r[1])): int(r[2]) for r in rows}


def _first_unapplied_at(server: Server, account: str, count: int) -> datetime | None:
    d, schema = _d(server), schema_of(server)
    with connections.connect(server, readonly=True) as conn:
        row = conn.cursor().execute(sql.first_after_at_sql(d, account, schema), [count]).fetchone()
    return aware(row[0]) if row and row[0] is not None else None


NOT_REGISTERED = "not registered"


def lag_limit_seconds(account: ReplAccount | None) -> float:
    """How old a subscription's oldest unapplied transaction may get before it is lagging and alerts: the
    publication's ACC_ALERT_LAG_SECONDS, else REPLADMIN_LAG_ALERT_SECONDS."""
    if account is not None and account.alert_lag_seconds:
        return float(account.alert_lag_seconds)
    return float(settings.LAG_ALERT_SECONDS)


def wal_publications() -> set[tuple[str, str]]:
    """The (server, account) of every publication that captures from the WAL (one catalog query)."""
    return set(ReplAccount.objects.filter(capture=ReplAccount.Capture.WAL).values_list("server", "account"))


def slots(publications: Iterable[tuple[str, str]] | None = None) -> dict[tuple[str, str], live.Live]:
    """The live slot reads (a Live of a WalBacklog) of the WAL publications among (server, account) (None: of
    every WAL publication), cached as live_lags' are (one read serves both)."""
    every = wal_publications()
    wal = sorted(every if publications is None else every & set(publications))
    servers = {s.name: s for s in Server.objects.filter(name__in={name for name, _ in wal})}
    reach = live.reachability(servers.values())
    result = {}
    for name, account in wal:
        server = servers.get(name)
        if server is None:
            result[(name, account)] = live.Live(value=NOT_REGISTERED, error=f"server {name} is not registered")
        else:
            result[(name, account)] = live.read(
                server, reach, ("trx-wal", account), partial(wal_backlog, server, account)
            )
    return result


def size_text(size: int) -> str:
    """Bytes for people (binary units, as PostgreSQL's pg_size_pretty)."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - the loop returns


def slot_problem(backlog: WalBacklog, limit_bytes: int) -> str:
    """Why a WAL publication's slot needs a person ("" when it does not): it keeps more WAL than `limit_bytes`, the
    server may remove WAL it still needs (wal_status unreserved: max_slot_wal_keep_size is reached) or has (lost),
    or it is gone."""
    if not backlog.wal_status:
        return f"the replication slot {backlog.slot} is gone: publish again and re-initialise the subscribers"
    if backlog.wal_status == "lost":
        return (f"the replication slot {backlog.slot} lost WAL it needed (max_slot_wal_keep_size): changes were "
                "lost; publish again and re-initialise the subscribers")  # fmt: skip
    kept = backlog.retained_bytes or 0
    if backlog.wal_status == "unreserved":
        return (f"the replication slot {backlog.slot} keeps {size_text(kept)} of WAL and is past "
                "max_slot_wal_keep_size: the server removes that WAL at its next checkpoint; sync now")  # fmt: skip
    if kept > limit_bytes:
        return (f"the replication slot {backlog.slot} keeps {size_text(kept)} of WAL on its publisher (alert above "
                f"{size_text(limit_bytes)}): its subscribers have not synced; sync them or unpublish")  # fmt: skip
    return ""


def live_lags(
    subs: Iterable[Mapping[str, Any]], now: datetime, catalog_counts: Mapping[tuple[str, str], int] | None = None
) -> dict[tuple[str, str, str], Lag]:
    """The live lag of each subscription (dicts with server, account, subscriber, count, init_state), keyed by
    (server, account, subscriber). One catalog query; at most one cached read per publication, per subscriber
    database and per distinct subscriber count behind. A server the console has not registered (a catalog written
    by hand or by an older console) cannot be read: its side comes from the catalog (`catalog_counts` for the
    publications), noted in `problem`, and is not counted as unreachable."""
    catalog_counts = catalog_counts or {}
    subs = list(subs)
    names = {s["server"] for s in subs} | {s["subscriber"] for s in subs}
    servers = {s.name: s for s in Server.objects.filter(name__in=names)}
    reach = live.reachability(servers.values())
    # Read here, not in the bounded reads (they run on threads of their own and read the servers only).
    wal = wal_publications()

    def read(name: str, key: tuple, compute, changed_at: datetime | None = None) -> live.Live:
        server = servers.get(name)
        if server is None:
            return live.Live(value=NOT_REGISTERED, error=f"server {name} is not registered")
        return live.read(server, reach, key, lambda: compute(server), changed_at)

    # A subscriber's levels read before its last sync ended are stale: read again, or a lag check right after a
    # sync would reopen the lag alert that sync resolved.
    synced: dict[str, datetime] = {}
    for s in subs:
        at = s.get("last_sync_at")
        if at is not None and (s["subscriber"] not in synced or at > synced[s["subscriber"]]):
            synced[s["subscriber"]] = at

    pub_counts = {
        (s["server"], s["account"]):
        read(s["server"], ("trx-wal", s["account"]), lambda srv, a=s["account"]: wal_backlog(srv, a))
        if (s["server"], s["account"]) in wal else
        read(s["server"], ("trx-count", s["account"]), lambda srv, a=s["account"]: visible_count(srv, a, wal=False))
        for s in subs
    }  # fmt: skip
    sub_levels = {
        name: read(name, ("trx-levels",), _subscriber_counts, synced.get(name))
        for name in {s["subscriber"] for s in subs}
    }
    result = {}
    for s in subs:
        pub, levels = pub_counts[(s["server"], s["account"])], sub_levels[s["subscriber"]]
        problem = pub.error or levels.error
        sub_reachable = levels.ok or levels.value == NOT_REGISTERED
        if pub.value == NOT_REGISTERED and (s["server"], s["account"]) in catalog_counts:
            pub = live.Live(value=catalog_counts[(s["server"], s["account"])])
        if levels.ok:
            count = levels.value.get((s["server"], s["account"]))
            initialised, live_count = count is not None, True
        else:  # the level the console last recorded, when it copied and applied
            initialised, live_count = s["init_state"] == "done", False
            count = s["count"] if initialised else None
        slot = pub.value if pub.ok and isinstance(pub.value, WalBacklog) else None
        if slot is not None:
            pub = live.Live(value=slot.count)
        if not pub.ok:
            lag = Lag(None, None, initialised, False, sub_reachable, unknown=f"unknown ({pub.error})", problem=problem,
                      live_count=live_count)  # fmt: skip
        else:
            behind = max(0, pub.value - (count or 0))
            seconds = None
            if behind and slot is not None and (count or 0) >= slot.stored:  # all it lacks is still in the slot
                if slot.oldest_pending_at is not None:
                    seconds = max(0.0, (now - slot.oldest_pending_at).total_seconds())
            elif behind:
                at = read(s["server"], ("trx-age", s["account"], count or 0),
                          lambda srv, a=s["account"], c=count or 0: _first_unapplied_at(srv, a, c))  # fmt: skip
                if at.ok and at.value is not None:
                    seconds = max(0.0, (now - at.value).total_seconds())
            lag = Lag(behind, seconds, initialised, True, sub_reachable, problem=problem, live_count=live_count,
                      note=slot.note if slot is not None else "")  # fmt: skip
        result[(s["server"], s["account"], s["subscriber"])] = lag
    return result

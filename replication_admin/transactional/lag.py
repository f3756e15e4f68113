"""A transactional subscriber's lag as the servers say it now (not the catalog's counts, which only a sync moves):
the publisher's count (RTSEQ) minus the subscriber's (RTLEVEL in its own database), and the age of the oldest
transaction it has not applied (RTTX.AT). Bounded reads (one row each, or one row per publication a subscriber
database follows), cached for a few seconds (core.live).

A subscriber that cannot be reached counts from the level the console last recorded for it (its level only moves
through the console's applies) and is reported unreachable; a publisher that cannot be reached makes the lag
unknown, with the reason, never 0."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyodbc

from replication_admin.core import connections, live
from replication_admin.core.introspection import lookup_table
from replication_admin.core.times import aware
from replication_admin.engine import transactional_sql as sql
from replication_admin.models import Server
from replication_admin.transactional.capture import visible_count
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

    def read(name: str, key: tuple, compute) -> live.Live:
        server = servers.get(name)
        if server is None:
            return live.Live(value=NOT_REGISTERED, error=f"server {name} is not registered")
        return live.read(server, reach, key, lambda: compute(server))

    pub_counts = {
        (s["server"], s["account"]): read(s["server"], ("trx-count", s["account"]),
                                          lambda srv, a=s["account"]: visible_count(srv, a))
        for s in subs
    }  # fmt: skip
    sub_levels = {s["subscriber"]: read(s["subscriber"], ("trx-levels",), _subscriber_counts) for s in subs}
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
        if not pub.ok:
            lag = Lag(None, None, initialised, False, sub_reachable, unknown=f"unknown ({pub.error})", problem=problem,
                      live_count=live_count)  # fmt: skip
        else:
            behind = max(0, pub.value - (count or 0))
            seconds = None
            if behind:
                at = read(s["server"], ("trx-age", s["account"], count or 0),
                          lambda srv, a=s["account"], c=count or 0: _first_unapplied_at(srv, a, c))  # fmt: skip
                if at.ok and at.value is not None:
                    seconds = max(0.0, (now - at.value).total_seconds())
            lag = Lag(behind, seconds, initialised, True, sub_reachable, problem=problem, live_count=live_count)
        result[(s["server"], s["account"], s["subscriber"])] = lag
    return result

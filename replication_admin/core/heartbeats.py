"""Process heartbeats: the processes the product depends on say, every few seconds, that they live and what they hold.

Each worker host (qcluster), follower (replfollow) and scheduler renews its REPL_PROCESS row (kind, host, pid) every
BEAT_EVERY seconds: one UPDATE, an INSERT on its first beat. One not renewed for HEARTBEAT_STALE_SECONDS (the
scheduler: SCHEDULER_STALE_SECONDS, as it may tick once a minute) or stopped cleanly is down. A follower lists the
in-sync subscriptions it serves (those it holds a lease on, core/follow_leases.py; and which of them wait on a silent
subscriber: `slow`), so an in-sync subscription no live follower holds reads "follower down" everywhere
(engine/health.py decides; this module gives the fact). `watch()` raises and resolves the follower-down and
component-down alerts in a fixed number of queries; it runs in every worker host and in the follower that reaps, so
either notices the other gone. Rows dead for PRUNE_AFTER are deleted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from replication_admin.core.alerts import raise_alert
from replication_admin.core.leases import HOST
from replication_admin.core.times import duration_text
from replication_admin.models import Alert, ProcessHeartbeat, ReplSubscriber

log = logging.getLogger(__name__)

Kind = ProcessHeartbeat.Kind
KIND_LABELS: dict[str, str] = {
    Kind.WORKER: "worker host", Kind.FOLLOWER: "follower", Kind.SCHEDULER: "scheduler", Kind.SPARK: "Spark service",
}  # fmt: skip
# The scheduler may tick only once a minute (the django-q2 schedule of a cluster without this product's qcluster).
SCHEDULER_STALE_SECONDS = 90
PRUNE_AFTER = timedelta(days=1)
WATCH_EVERY = 10.0

_started: dict[tuple[str, int], datetime] = {}  # (kind, pid) -> when this process first beat as kind


def stale_seconds(kind: str) -> float:
    """How long a heartbeat of `kind` may go unrenewed before its process counts as down."""
    stale = float(settings.HEARTBEAT_STALE_SECONDS)
    return max(stale, SCHEDULER_STALE_SECONDS) if kind == Kind.SCHEDULER else stale


def beat_every() -> float:
    """Seconds between two beats: a few per stale period, never more often than twice a second."""
    return max(0.5, min(3.0, float(settings.HEARTBEAT_STALE_SECONDS) / 4))


def beat(kind: str, details: dict[str, Any]) -> None:
    """Renew this process's heartbeat of `kind` with what it holds now (one UPDATE; an INSERT the first time)."""
    now, pid = timezone.now(), os.getpid()
    mine = ProcessHeartbeat.objects.filter(kind=kind, host=HOST, pid=pid)
    if (kind, pid) in _started and mine.update(renewed_at=now, details=details, stopped_at=None):
        return
    # First beat of this process (a row of an earlier process with the same pid is taken over), or the row was pruned.
    started = _started.setdefault((kind, pid), now)
    ProcessHeartbeat.objects.update_or_create(
        kind=kind, host=HOST, pid=pid,
        defaults={"started_at": started, "renewed_at": now, "details": details, "stopped_at": None},
    )  # fmt: skip


def stopped(kind: str) -> None:
    """Mark this process's heartbeat of `kind` as ended cleanly (it is down from now on, without waiting)."""
    try:
        ProcessHeartbeat.objects.filter(kind=kind, host=HOST, pid=os.getpid()).update(stopped_at=timezone.now())
    except Exception:  # the catalog is away: the heartbeat goes stale instead
        log.warning("could not record the end of this %s", KIND_LABELS.get(kind, kind), exc_info=True)
    _started.pop((kind, os.getpid()), None)


def is_alive(row: ProcessHeartbeat, now: datetime) -> bool:
    return row.stopped_at is None and (now - row.renewed_at).total_seconds() <= stale_seconds(row.kind)


def alive(kind: str, now: datetime | None = None) -> list[ProcessHeartbeat]:
    """The live processes of `kind`: renewed within its stale period and not stopped."""
    now = now or timezone.now()
    since = now - timedelta(seconds=stale_seconds(kind))
    return list(ProcessHeartbeat.objects.filter(kind=kind, renewed_at__gte=since, stopped_at__isnull=True))


def part_of(row: ProcessHeartbeat) -> tuple[int, int] | None:
    """The static part (i, n) of the in-sync subscriptions a follower of an earlier version served (those whose
    id % n == i); None for a follower that shares them out by lease (it lists what it holds)."""
    part = (row.details or {}).get("part")
    if isinstance(part, list | tuple) and len(part) == 2 and all(isinstance(p, int) for p in part) and part[1] > 0:
        return int(part[0]), int(part[1])
    return None


@dataclass(frozen=True)
class Followers:
    """The live followers, and which in-sync subscriptions they serve."""

    rows: tuple[ProcessHeartbeat, ...] = ()

    def holder(self, subscription_id: int) -> ProcessHeartbeat | None:
        """The live follower that serves the subscription (None: no live follower does): the one whose heartbeat
        lists it (a follower lists the subscriptions it holds a lease on, core/follow_leases.py), or a follower of an
        earlier version that served a static part (i, n) of them."""
        for row in self.rows:
            if subscription_id in (row.details or {}).get("subscriptions", []):
                return row
            part = part_of(row)
            if part is not None and subscription_id % part[1] == part[0]:
                return row
        return None

    def holds(self, subscription_id: int) -> bool:
        return self.holder(subscription_id) is not None


def live_followers(rows: Iterable[ProcessHeartbeat] | None = None, now: datetime | None = None) -> Followers:
    """The live followers (one query, or from `rows` already read)."""
    now = now or timezone.now()
    if rows is None:
        return Followers(tuple(alive(Kind.FOLLOWER, now)))
    return Followers(tuple(r for r in rows if r.kind == Kind.FOLLOWER and is_alive(r, now)))


def wanting_follower() -> QuerySet[ReplSubscriber]:
    """The subscriptions that should be followed now: subscribed, followed, valid and IN SYNC."""
    return ReplSubscriber.objects.filter(subscribed=True, follow=True, valid=1, state=ReplSubscriber.IN_SYNC)


def follower_alive(sub_id: int, follow: bool, sync_state: int, followers: Followers) -> bool | None:
    """The follower fact engine/health.py takes: None when the subscription should not be followed now."""
    if not follow or sync_state != ReplSubscriber.IN_SYNC:
        return None
    return followers.holds(sub_id)


class Pulse:
    """A loop's heartbeat: `pulse(details)` beats at most every beat_every() seconds (a clock read otherwise), and
    with `watches`, runs the watchdog every WATCH_EVERY seconds. A failed beat is logged and tried next time."""

    def __init__(self, kind: str, watches: bool = False) -> None:
        self.kind, self.watches = kind, watches
        self.last = self.watched = float("-inf")

    def __call__(self, details: dict[str, Any] | Callable[[], dict[str, Any]]) -> None:
        now = time.monotonic()
        if now - self.last >= beat_every():
            self.last = now
            try:
                beat(self.kind, details() if callable(details) else details)
            except Exception:
                log.warning("%s heartbeat failed", KIND_LABELS.get(self.kind, self.kind), exc_info=True)
                if not connection.in_atomic_block:
                    close_old_connections()  # a catalog connection cut meanwhile is opened anew next time
        if self.watches and now - self.watched >= WATCH_EVERY:
            self.watched = now
            safely_watch()


@contextlib.contextmanager
def beating(kind: str, watches: bool = False) -> Iterator[Pulse]:
    """A Pulse for a loop; its process's heartbeat is marked stopped when the loop ends."""
    try:
        yield Pulse(kind, watches)
    finally:
        stopped(kind)


# --- the watchdog ------------------------------------------------------------------------------------------


def _last_seen(rows: list[ProcessHeartbeat], now: datetime) -> str:
    if not rows:
        return "none has sent a heartbeat in the last day"
    last = max(rows, key=lambda r: r.renewed_at)
    if last.stopped_at is not None:
        ago = duration_text((now - last.stopped_at).total_seconds())
        return f"the last one (pid {last.pid} on {last.host}) stopped {ago} ago"
    ago = duration_text((now - last.renewed_at).total_seconds())
    return f"the last one (pid {last.pid} on {last.host}) sent its last heartbeat {ago} ago"


def kinds_down(rows: list[ProcessHeartbeat], wanting: int, now: datetime) -> dict[str, str]:
    """The process kinds down now, each with why: a kind that ran in the last day with no live process left, and a
    follower while `wanting` subscriptions should be followed."""
    down: dict[str, str] = {}
    for kind in (Kind.WORKER, Kind.SCHEDULER, Kind.FOLLOWER, Kind.SPARK):
        of_kind = [r for r in rows if r.kind == kind]
        if any(is_alive(r, now) for r in of_kind):
            continue
        label = KIND_LABELS[kind]
        if kind == Kind.FOLLOWER:
            if wanting:
                down[kind] = (f"no live follower (replfollow) while {wanting} in-sync subscription(s) should be "
                              f"followed: {_last_seen(of_kind, now)}")  # fmt: skip
        elif of_kind:
            what = {Kind.SCHEDULER: "no scheduled event is handed out", Kind.SPARK: "no Spark job runs"}.get(
                kind, "no job runs"
            )
            down[kind] = f"no live {label}, so {what}: {_last_seen(of_kind, now)}"
    return down


def watch(now: datetime | None = None) -> dict[str, list[str]]:
    """Raise FOLLOWER_DOWN for each in-sync subscription no live follower serves and COMPONENT_DOWN for each process
    kind gone, resolve those whose cause cleared, and prune heartbeats dead for a day. A fixed number of queries,
    plus one per alert that opens or resolves. Returns the targets raised and resolved."""
    now = now or timezone.now()
    ProcessHeartbeat.objects.filter(renewed_at__lt=now - PRUNE_AFTER).delete()
    rows = list(ProcessHeartbeat.objects.all())
    followers = live_followers(rows, now)
    wanting = list(wanting_follower().only("id", "server", "account", "subscriber"))
    down_subs = {s.label: s for s in wanting if not followers.holds(s.pk)}
    followers_seen = [r for r in rows if r.kind == Kind.FOLLOWER]
    down_kinds = {KIND_LABELS[k]: why for k, why in kinds_down(rows, len(wanting), now).items()}
    # Acknowledged ones too: a person who acknowledged the trouble is not told again until it has cleared.
    unresolved = Alert.objects.filter(kind__in=[Alert.Kind.FOLLOWER_DOWN, Alert.Kind.COMPONENT_DOWN],
                                      resolved_at__isnull=True)  # fmt: skip
    known = {(a.kind, a.target): a for a in unresolved}
    raised, resolved, still = [], [], []
    for target, sub in down_subs.items():
        if (alert := known.get((Alert.Kind.FOLLOWER_DOWN, target))) is not None:
            still.append(alert.pk)
            continue
        message = (f"{target} should be followed in sync, but no live follower (replfollow) serves it, so nothing "
                   f"applies its transactions: {_last_seen(followers_seen, now)}")  # fmt: skip
        raise_alert(Alert.Kind.FOLLOWER_DOWN, target, message, sub.get_absolute_url())
        raised.append(target)
    for label, why in down_kinds.items():
        if (alert := known.get((Alert.Kind.COMPONENT_DOWN, label))) is not None:
            still.append(alert.pk)
            continue
        raise_alert(Alert.Kind.COMPONENT_DOWN, label, why, reverse("health"))
        raised.append(label)
    for (kind, target), alert in known.items():
        reason = ""
        if kind == Alert.Kind.FOLLOWER_DOWN and target not in down_subs:
            reason = "it is no longer followed in sync"
            held = next((s for s in wanting if s.label == target), None)
            if held is not None and (row := followers.holder(held.pk)) is not None:
                reason = f"follower pid {row.pid} on {row.host} serves it"
        elif kind == Alert.Kind.COMPONENT_DOWN and target not in down_kinds and target in KIND_LABELS.values():
            reason = f"a {target} is alive again, or none is needed"
        if reason and Alert.objects.filter(pk=alert.pk, resolved_at__isnull=True).update(
            resolved_at=now, resolution=reason
        ):
            log.info("alert %s resolved: %s: %s", kind, target, reason)
            resolved.append(target)
    if still:
        Alert.objects.filter(pk__in=still).update(last_seen_at=now)
    return {"raised": raised, "resolved": resolved}


def safely_watch() -> dict[str, list[str]] | None:
    try:
        return watch()
    except Exception:  # the next pass tries again; the watchdog never takes its process down
        log.exception("watchdog pass failed")
        if not connection.in_atomic_block:
            close_old_connections()
        return None


def stopped_or_stale(row: ProcessHeartbeat, now: datetime) -> str:
    """Why a process counts as down ("" while it lives)."""
    if row.stopped_at is not None:
        return f"stopped {duration_text((now - row.stopped_at).total_seconds())} ago (a clean exit)"
    age = (now - row.renewed_at).total_seconds()
    if age > stale_seconds(row.kind):
        return f"no heartbeat for {duration_text(age)} (down after {stale_seconds(row.kind):g} s)"
    return ""


def recent(kind: str | None = None) -> Q:
    """Heartbeats still kept (dead for less than PRUNE_AFTER)."""
    q = Q(renewed_at__gte=timezone.now() - PRUNE_AFTER)
    return q & Q(kind=kind) if kind else q

"""Which follower serves which subscription: leases (REPL_FOLLOW_LEASE), so followers on several hosts split the
followed subscriptions between them and take over those of a follower that died.

Each follower (`manage.py replfollow`, transactional/sync.py follow_loop) renews its leases with its heartbeat
(every heartbeats.beat_every() seconds) and follows only the subscriptions it holds an unexpired lease on. A lease
lasts HEARTBEAT_STALE_SECONDS, as long as the heartbeat it is renewed with: a follower that dies is down and its
leases have expired at the same moment, and the others take its subscriptions at their next renewal (at once when
it ran on the taker's own host and its pid is gone). At each renewal a follower:

- renews its own leases and gives back those of subscriptions no longer followed;
- takes free subscriptions (no lease, an expired one, one of a dead process of its host) up to its fair share,
  ceil(subscriptions / live followers), the live followers being those with a live heartbeat;
- gives back its leases over the share while another live follower holds fewer than the share (a follower that
  joined), the highest ids first, so the newcomer takes them at its next renewal;
- takes a subscription left free over two of its renewals whatever its share (no subscription stays unserved
  while the live followers' count is off, e.g. a follower alive by its heartbeat that cannot take leases).

A lease says who follows a subscription, not who may apply: every apply still takes the subscription's item lock,
so a follower that lost a lease (a long stall) while its step runs never applies at the same time as the next
holder. A renewal is a fixed number of queries (about five, plus one per kind of change); a round of the follower
reads its subscriptions with one query joined to its leases.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from replication_admin.core.heartbeats import Kind, alive, beat_every
from replication_admin.core.leases import HOST, process_gone
from replication_admin.models import FollowLease, ReplSubscriber

log = logging.getLogger(__name__)


def lease_seconds() -> float:
    """How long a follower's lease lasts unrenewed: as long as its heartbeat counts as alive."""
    return float(settings.HEARTBEAT_STALE_SECONDS)


@dataclass
class LeaseCounts:
    """What the last renewal saw (in the follower's heartbeat)."""

    held: int = 0
    share: int = 0
    total: int = 0
    live: int = 0
    taken: int = 0  # leases taken over the follower's life
    given: int = 0  # leases given back over the follower's life
    renewals: int = 0
    renewed_at: str = ""


@dataclass
class FollowLeases:
    """One follower's leases. `pool()`: the subscriptions to share out (followed, whatever their moment)."""

    pool: Callable[[], QuerySet[ReplSubscriber]]
    host: str = ""  # this follower's host identity (core/leases.py HOST)
    pid: int = 0
    holder: str = ""
    counts: LeaseCounts = field(default_factory=LeaseCounts)
    held: frozenset[int] = frozenset()
    next_renewal: float = float("-inf")
    free_seen: set[int] = field(default_factory=set)  # free at the last renewal (taken at the next one if still)

    def __post_init__(self) -> None:
        self.host, self.pid = self.host or HOST, self.pid or os.getpid()
        self.holder = self.holder or f"{self.host}/{self.pid}/{uuid.uuid4().hex[:8]}"

    def mine(self, now: datetime | None = None) -> QuerySet[FollowLease]:
        """This follower's unexpired leases."""
        return FollowLease.objects.filter(holder=self.holder, expires_at__gt=now or timezone.now())

    def follows(self, subs: QuerySet[ReplSubscriber]) -> QuerySet[ReplSubscriber]:
        """`subs` narrowed to those this follower holds an unexpired lease on (one query when evaluated)."""
        return subs.filter(follow_lease__holder=self.holder, follow_lease__expires_at__gt=timezone.now())

    def due(self) -> bool:
        return time.monotonic() >= self.next_renewal

    def refresh(self, force: bool = False) -> bool:
        """Renew (and rebalance) when a beat has passed since the last renewal; True when it renewed. A failure
        raises (the caller's round fails and looks again; the leases held meanwhile expire on their own)."""
        if not force and not self.due():
            return False
        self.next_renewal = time.monotonic() + beat_every()
        self.renew()
        return True

    def renew(self) -> None:
        now = timezone.now()
        until = now + timedelta(seconds=lease_seconds())
        me = (self.host, self.pid)
        FollowLease.objects.filter(holder=self.holder).update(expires_at=until)
        pool = set(self.pool().values_list("pk", flat=True))
        rows = list(FollowLease.objects.values_list("subscription_id", "holder", "host", "pid", "expires_at"))
        followers = {(b.host, b.pid) for b in alive(Kind.FOLLOWER, now)} | {me}
        share = math.ceil(len(pool) / len(followers)) if pool else 0

        held = {sub for sub, holder, *_ in rows if holder == self.holder}
        gone = held - pool  # no longer followed: the lease goes back
        held &= pool
        others = Counter((host, pid) for sub, holder, host, pid, expires in rows
                         if holder != self.holder and expires > now and sub in pool)  # fmt: skip
        room = any(others.get(f, 0) < share for f in followers - {me})
        give = set(sorted(held, reverse=True)[: len(held) - share]) if room and len(held) > share else set()

        leased = {sub for sub, *_ in rows}
        unleased = [s for s in pool if s not in leased]
        expired: dict[int, str] = {}  # subscription -> the holder whose lease may be taken
        gone_pids: dict[int, bool] = {}  # pids of this host's other followers: has the process ended?
        dead: set[str] = set()  # holders that ran on this host and whose process has ended
        for sub, holder, host, pid, expires in rows:
            if sub in pool and holder != self.holder:
                local = host == self.host == HOST and pid != self.pid
                if local and pid not in gone_pids:
                    gone_pids[pid] = process_gone(pid)
                if local and gone_pids[pid]:
                    dead.add(holder)
                    expired[sub] = holder
                elif expires <= now:
                    expired[sub] = holder
        free = unleased + list(expired)
        random.shuffle(free)  # followers starting together try different ones first
        want = max(0, share - len(held))
        take = free[:want] + [s for s in free[want:] if s in self.free_seen]
        self.free_seen = set(free) - set(take)

        if gone or give:
            FollowLease.objects.filter(holder=self.holder, subscription_id__in=[*gone, *give]).delete()
        taken = self._take(
            [s for s in take if s not in expired], {s: expired[s] for s in take if s in expired}, dead, now, until
        )
        # Leases of subscriptions no longer followed, expired: nobody gives them back.
        stale = [sub for sub, _, _, _, expires in rows if sub not in pool and expires <= now]
        if stale:
            FollowLease.objects.filter(subscription_id__in=stale, expires_at__lte=now).delete()
        self.held = frozenset((held - give) | taken)
        counts = self.counts
        counts.held, counts.share, counts.total, counts.live = len(self.held), share, len(pool), len(followers)
        counts.taken += len(taken)
        counts.given += len(give)
        counts.renewals += 1
        counts.renewed_at = now.isoformat()

    def _take(
        self, unleased: list[int], expired: dict[int, str], dead: set[str], now: datetime, until: datetime
    ) -> set[int]:
        """Take these subscriptions' leases: `unleased` ones by an insert, `expired` ones (subscription -> holder)
        by a compare-and-set on the holder and the expiry (`dead` holders: on the holder alone); another follower
        taking or renewing one first keeps it. Returns the ids taken."""
        if not unleased and not expired:
            return set()
        if unleased:
            FollowLease.objects.bulk_create(
                [FollowLease(subscription_id=s, holder=self.holder, host=self.host, pid=self.pid, taken_at=now,
                             expires_at=until) for s in unleased],
                ignore_conflicts=True,
            )  # fmt: skip
        for holder in sorted(set(expired.values())):
            subs = [s for s, h in expired.items() if h == holder]
            # Still that holder's expired lease: a holder that renewed it meanwhile, or a taker first, keeps it.
            rows = FollowLease.objects.filter(subscription_id__in=subs, holder=holder)
            rows = rows if holder in dead else rows.filter(expires_at__lte=now)
            rows.update(holder=self.holder, host=self.host, pid=self.pid, taken_at=now, expires_at=until)
        got = set(
            FollowLease.objects.filter(holder=self.holder, subscription_id__in=[*unleased, *expired]).values_list(
                "subscription_id", flat=True
            )
        )
        if got:
            log.info("follower %s took the leases of %d subscription(s)", self.holder, len(got))
        return got

    def release(self) -> None:
        """Give back every lease (a clean stop: the others take the subscriptions at their next renewal)."""
        try:
            FollowLease.objects.filter(holder=self.holder).delete()
        except Exception:  # the catalog is away: the leases expire instead
            log.warning("could not give back the follower's leases", exc_info=True)
        self.held = frozenset()

    def details(self) -> dict[str, object]:
        """For the follower's heartbeat."""
        return {"holder": self.holder, **self.counts.__dict__}

"""Followers share the followed subscriptions out by lease (core/follow_leases.py): each takes a fair share, a
follower that joins gets its share from the others, one that stops renewing has its subscriptions taken over once
its leases have expired, and a clean stop gives them back at once. Here the followers are FollowLeases of three
host identities in one process, with their heartbeats written as their loops would; tests/transactional/
test_follower_leases.py runs real replfollow processes."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from replication_admin.core import heartbeats
from replication_admin.core.follow_leases import FollowLeases
from replication_admin.models import FollowLease, ProcessHeartbeat, ReplSubscriber
from replication_admin.transactional.sync import followable, followed

SUBSCRIPTIONS = 10


def make_subscriptions(count: int = SUBSCRIPTIONS) -> list[int]:
    return [
        ReplSubscriber.objects.create(server="lpub", account="acct", subscriber=f"lsub{n}", follow=True,
                                      state=ReplSubscriber.IN_SYNC).pk
        for n in range(count)
    ]  # fmt: skip


def follower(host: str, pid: int) -> FollowLeases:
    """A follower on `host`, alive by its heartbeat (as its loop's first beat writes it)."""
    heartbeats_row(host, pid)
    return FollowLeases(followable, host=host, pid=pid)


def heartbeats_row(host: str, pid: int, age: float = 0.0) -> None:
    at = timezone.now() - timedelta(seconds=age)
    ProcessHeartbeat.objects.update_or_create(
        kind=heartbeats.Kind.FOLLOWER, host=host, pid=pid,
        defaults={"started_at": at, "renewed_at": at, "details": {}, "stopped_at": None},
    )  # fmt: skip


def held_by(leases: FollowLeases) -> set[int]:
    return set(FollowLease.objects.filter(holder=leases.holder).values_list("subscription_id", flat=True))


def test_followers_take_a_fair_share_each_and_together_hold_every_subscription_once(db):
    subs = make_subscriptions()
    a, b, c = follower("host-a", 101), follower("host-b", 102), follower("host-c", 103)
    for _ in range(3):  # three renewals each: the shares settle
        for leases in (a, b, c):
            leases.renew()
    shares = [held_by(x) for x in (a, b, c)]
    assert max(len(s) for s in shares) == 4 and min(len(s) for s in shares) >= 2  # ceil(10 / 3) = 4 at most each
    assert set().union(*shares) == set(subs) and sum(len(s) for s in shares) == SUBSCRIPTIONS
    assert FollowLease.objects.count() == SUBSCRIPTIONS  # one lease per subscription
    assert {s.pk for s in followed(a)} == shares[0] == set(a.held)  # a follows only what it holds


def test_a_follower_that_joins_gets_its_share_from_the_others(db):
    subs = make_subscriptions()
    a = follower("host-a", 101)
    a.renew()
    assert held_by(a) == set(subs)  # alone, it holds them all
    b = follower("host-b", 102)
    b.renew()  # nothing free yet
    a.renew()  # a sees b under its share: gives back the ones over its own
    b.renew()
    assert len(held_by(a)) == 5 and len(held_by(b)) == 5 and held_by(a) | held_by(b) == set(subs)


def test_a_follower_that_stops_renewing_has_its_subscriptions_taken_over_once_its_leases_expired(db, settings):
    settings.HEARTBEAT_STALE_SECONDS = 15
    subs = make_subscriptions()
    a, b = follower("host-a", 101), follower("host-b", 102)
    for _ in range(2):
        a.renew()
        b.renew()
    lost = held_by(a)
    assert len(lost) == 5
    b.renew()  # a's leases have not expired: b keeps to its share
    assert held_by(b) == set(subs) - lost
    # a dies: its heartbeat and its leases were last renewed 16 s ago, longer than they last.
    heartbeats_row("host-a", 101, age=16)
    FollowLease.objects.filter(holder=a.holder).update(expires_at=timezone.now() - timedelta(seconds=1))
    b.renew()
    assert held_by(b) == set(subs) and b.counts.live == 1 and b.counts.share == SUBSCRIPTIONS
    a.renew()  # a back from a stall: its leases are gone, it renews nothing it lost
    assert held_by(b) == set(subs) - held_by(a) and held_by(a).isdisjoint(held_by(b))


def test_a_clean_stop_gives_the_leases_back_and_the_other_follower_takes_them_at_its_next_renewal(db):
    subs = make_subscriptions()
    a, b = follower("host-a", 101), follower("host-b", 102)
    for _ in range(2):
        a.renew()
        b.renew()
    a.release()
    ProcessHeartbeat.objects.filter(host="host-a").update(stopped_at=timezone.now())
    assert held_by(a) == set()
    b.renew()
    assert held_by(b) == set(subs)


def test_a_subscription_left_free_over_two_renewals_is_taken_whatever_the_share(db):
    subs = make_subscriptions()
    a = follower("host-a", 101)
    follower("host-b", 102)  # alive by its heartbeat, but it never takes a lease
    a.renew()
    assert len(held_by(a)) == 5
    a.renew()  # the five left free at the last renewal are still free: a serves them too
    assert held_by(a) == set(subs)


def test_leases_of_subscriptions_no_longer_followed_are_given_back(db):
    subs = make_subscriptions(4)
    a = follower("host-a", 101)
    a.renew()
    ReplSubscriber.objects.filter(pk=subs[0]).update(state=ReplSubscriber.OFF)
    ReplSubscriber.objects.filter(pk=subs[1]).delete()
    a.renew()
    assert held_by(a) == set(subs[2:]) and a.counts.total == 2


def test_the_health_facts_say_which_follower_holds_each_subscription(db):
    subs = make_subscriptions(2)
    ProcessHeartbeat.objects.create(
        kind=heartbeats.Kind.FOLLOWER, host="host-a", pid=101, started_at=timezone.now(), renewed_at=timezone.now(),
        details={"subscriptions": [subs[0]], "leases": {"held": 1}},
    )  # fmt: skip
    followers = heartbeats.live_followers()
    assert followers.holds(subs[0]) and not followers.holds(subs[1])  # the second: "follower down"

"""Acknowledged commit: after its commit an application waits (REPL_WAIT) until the in-sync subscribers its
publication's policy requires have applied the commit's level, and learns which had not when the time is up.

The voters are the publication's valid in-sync subscriptions (SYNC_REPL / follow mode): they are the ones
a follower keeps applying. A subscriber has applied a level when its RTLEVEL row says so: the row moves in
the same subscriber transaction as the apply, so an acknowledgement survives any crash of the subscriber,
the follower or the console. The catalog's copy of the level (written just after each apply) is polled;
the subscriber itself is asked before a wait is reported as timed out. docs/durability.md says what each
policy promises.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pyodbc

from replication_admin.core import connections
from replication_admin.engine import levels
from replication_admin.models import ReplAccount, ReplSubscriber
from replication_admin.transactional.capture import publisher_count
from replication_admin.transactional.lookups import TrxError, server_named
from replication_admin.transactional.positions import applies_async, durable_position

POLICIES = tuple(ReplAccount.AckPolicy.values)
MAX_WAIT = 3600.0  # seconds a single wait may take
POLL = 0.02  # seconds between two reads of the catalog's levels


def required_acks(policy: str, voters: int) -> int:
    """How many of `voters` in-sync subscribers must have applied a level under `policy`."""
    return {"none": 0, "one": min(1, voters), "quorum": voters // 2 + 1 if voters else 0, "all": voters}[policy]


@dataclass
class AckResult:
    publication: str
    policy: str
    level: int
    count: int
    voters: list[str]
    required: int
    acked_by: list[str] = field(default_factory=list)
    missing: dict[str, int] = field(default_factory=dict)  # subscriber -> the level it had applied
    waited: float = 0.0

    @property
    def acked(self) -> bool:
        return self.policy == "none" or (bool(self.voters) and len(self.acked_by) >= self.required)

    def message(self) -> str:
        if self.policy == "none":
            return f"level {self.level} committed on the publisher (policy none: no subscriber is waited for)"
        if not self.voters:
            return (
                f"not acknowledged: {self.publication} has no in-sync subscriber to apply level {self.level} "
                f"(policy {self.policy}; SYNC_REPL puts a subscription in sync)"
            )
        need = f"{self.policy} needs {self.required} of {len(self.voters)}"
        if self.acked:
            return f"level {self.level} acknowledged by {', '.join(self.acked_by)} ({need})"
        behind = ", ".join(f"{name} (at level {at})" for name, at in sorted(self.missing.items()))
        return (
            f"timed out after {self.waited:.1f} s: level {self.level} not applied by {behind}; {need}, "
            f"{len(self.acked_by)} had it"
        )

    def as_dict(self) -> dict:
        return {
            "acked": self.acked, "policy": self.policy, "level": self.level, "required": self.required,
            "voters": self.voters, "acked_by": self.acked_by, "missing": self.missing,
            "waited": round(self.waited, 3),
        }  # fmt: skip


def _voters(account: ReplAccount) -> list[ReplSubscriber]:
    return list(
        ReplSubscriber.objects.filter(
            server=account.server, account=account.account, valid=1, subscribed=True, follow=True
        ).order_by("subscriber")
    )


def voter_names(account: ReplAccount) -> list[str]:
    """The subscribers whose applies REPL_WAIT counts, for the publication page."""
    return [v.subscriber for v in _voters(account)]


def _applied_on_subscriber(sub: ReplSubscriber, pub_level: int, pub_count: int) -> int | None:
    """The count the subscriber's own RTLEVEL row says it applied and no crash of it can take back
    (positions.durable_position; None: unreachable or no level)."""
    try:
        position = durable_position(server_named(sub.subscriber), sub.server, sub.account)
    except (connections.ConnectionFailed, TrxError, pyodbc.Error):
        return None
    if position is None:
        return None
    return levels.count_of(position[0], pub_level, pub_count)


def wait_for_ack(
    account: ReplAccount, level: int | None = None, timeout: float | None = None, poll: float = POLL
) -> AckResult:
    """Wait until the policy's subscribers applied `level` (None: the publisher's level now, which holds
    every commit made before the call), at most `timeout` seconds (None: the publication's ack_timeout)."""
    pub_server = server_named(account.server)
    pub_count = publisher_count(pub_server, account.account)
    pub_level = levels.level_of(pub_count)
    if level is not None and not levels.level_ok(level, pub_level):
        raise TrxError(
            f"level {level} is beyond {account.server}/{account.account}'s level {pub_level}: nothing to wait for"
        )
    count = pub_count if level is None else levels.count_of(level, pub_level, pub_count)
    wait = min(account.ack_timeout if timeout is None else timeout, MAX_WAIT)
    voters = _voters(account)
    result = AckResult(
        publication=f"{account.server}/{account.account}", policy=account.ack_policy,
        level=levels.level_of(count), count=count, voters=[v.subscriber for v in voters],
        required=required_acks(account.ack_policy, len(voters)),
    )  # fmt: skip
    started = time.monotonic()
    applied: dict[str, int] = {}
    by_name = {v.subscriber: v for v in voters}
    durable: dict[str, int] = {}  # what the subscribers whose applies do not wait for their flush made durable
    asynchronous: dict[str, bool] = {}

    def acked(name: str) -> bool:
        """The catalog's count (written after each apply) has the level, and so does the durable one where the
        subscriber's applies commit without waiting for their flush: asked once the catalog has it."""
        if applied.get(name, 0) < count:
            return False
        if name not in asynchronous:
            asynchronous[name] = applies_async(server_named(name))
        if durable.get(name, -1) >= count or not asynchronous[name]:
            return True
        own = _applied_on_subscriber(by_name[name], pub_level, pub_count)
        durable[name] = -1 if own is None else own
        return durable[name] >= count

    while True:
        applied = dict(ReplSubscriber.objects.filter(pk__in=[v.pk for v in voters]).values_list("subscriber", "count"))
        result.acked_by = [name for name in result.voters if acked(name)]
        result.waited = time.monotonic() - started
        if result.acked or not voters or result.waited >= wait:
            break
        time.sleep(poll)
    if not result.acked and voters:
        # The catalog is written just after each apply: ask the subscribers themselves before saying no.
        for sub in voters:
            if sub.subscriber not in result.acked_by:
                own = _applied_on_subscriber(sub, pub_level, pub_count)
                if own is not None and own >= count:
                    result.acked_by.append(sub.subscriber)
                else:
                    applied[sub.subscriber] = max(applied.get(sub.subscriber, 0), own or 0)
        result.acked_by.sort(key=result.voters.index)
    result.missing = {
        name: levels.level_of(applied.get(name, 0)) for name in result.voters if name not in result.acked_by
    }
    return result

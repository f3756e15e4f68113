"""REPL_SYNC of a transactional subscription and the in-sync follower.

The log of a publication lives in the publisher's database (capture.py). A sync reads the
transactions after the subscriber's count and applies them on the subscriber in order. Each
subscriber transaction applies whole publisher transactions only (a batch of them) and moves the
subscriber's level in RTLEVEL, in the same transaction, from the count it started at: a second apply
of the same batch finds the level moved and changes nothing, so every transaction is applied once.

Errors: deadlocks, lock timeouts and lost connections are retried; any other error (a constraint, a privilege,
a value too long, a missing table) makes the batch be applied one transaction at a time, the ones before the
failing transaction are applied, and then, as the subscription's on_error says:
- halt (the default): the subscription stops AT the failing transaction (its level unchanged); the halt (the
  transaction, the cause, the keys it touches) is recorded on the subscription and an alert raised. It is
  tried again with backoff (the follower once retry_at has passed, `retry_due_halts` for the others, a sync
  job at once) and heals by itself once the cause is gone; or a person skips that one transaction.
- skip: the transaction is skipped (the level moved past it) and recorded in REPL_SKIPPED_TX with its keys, an
  alert raised; the subscription is not ok until the gap's keys are repaired from the publisher's rows.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar, TypeVar

import pyodbc
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from replication_admin.core import connections, heartbeats, reaper
from replication_admin.core.alerts import safely_raise
from replication_admin.core.audit import Actor
from replication_admin.core.follow_leases import FollowLeases
from replication_admin.core.jobs import RUNNERS, JobResult, do_start_job, run_counts
from replication_admin.core.locks import LockBusy, item_lock, wait_behind
from replication_admin.core.transactions import (
    error_message,
    is_retryable,
    run_in_transaction,
)
from replication_admin.engine import levels
from replication_admin.engine import transactional_sql as sql
from replication_admin.models import (
    Alert,
    JobRun,
    RegistryEntry,
    ReplAccount,
    ReplSubscriber,
    Server,
)
from replication_admin.transactional import profile
from replication_admin.transactional import schema as trx_schema
from replication_admin.transactional.apply import (
    ApplyTimedOut,
    LevelMoved,
    Target,
    apply_batch,
    skip_transaction,
    transaction_keys,
)
from replication_admin.transactional.capture import (
    ReadAhead,
    SharedWindows,
    WalStream,
    oldest_count,
    publisher_count,
    read_for_apply,
    visible_count,
)
from replication_admin.transactional.lag import wal_publications
from replication_admin.transactional.lookups import (
    BacklogExceeded,
    GrantRevoked,
    InvalidSubscriber,
    TrxError,
    _d,
    grant_refusal,
    grantees_of,
    lock_name,
    publication,
    published_tables,
    schema_of,
    server_named,
)
from replication_admin.transactional.positions import (
    applies_async,
    clear_halt,
    durable_position,
    record_position,
    set_state,
    subscriber_position,
)
from replication_admin.transactional.push import Reinitialise, held_keys, push
from replication_admin.transactional.wake import Wakeups

log = logging.getLogger(__name__)
K = TypeVar("K")
V = TypeVar("V")

# The follower's pause between probes (seconds) for a while after it applied something (FOLLOW_BUSY_SECONDS);
# then it doubles up to the loop's interval while nothing arrives.
FOLLOW_MIN_POLL = 0.002
FOLLOW_BUSY_SECONDS = 1.0
# An in-sync subscription the follower lost to an error (a subscriber or publisher down, a network cut) is
# tried again this many seconds after its last failure; one cut for its backlog waits for a sync instead.
FOLLOW_RETRY_SECONDS = 5.0
FEED_CUT = "the feed is cut until it syncs again"
# How long, once told to stop, the follower waits for the steps it handed out; one still stuck then (a subscriber that
# stopped answering) is left to its thread, which ends with the process: its open transaction is rolled back.
FOLLOW_STOP_WAIT = 5.0
# A step running longer than this is named in the follower's heartbeat (details "slow").
FOLLOW_SLOW_STEP = 10.0
# While its steps run and no other subscription has news, the follower looks again when a step ends, or after this.
FOLLOW_STEP_WAIT = 0.02
# While every followed publication wakes the follower (a notification, an open WAL stream), it still looks this
# often: the poll is then only a fallback (and the loop's other duties: schema changes, the reaper, the heartbeat).
FOLLOW_IDLE_WAIT = 1.0
# How long a backlog over the threshold may stay without shrinking before the follower cuts the feed.
CUT_GRACE_SECONDS = 30.0
# A halted subscription is tried again after 5 s, doubling up to 5 minutes (with jitter).
HALT_RETRY_FIRST = 5.0
HALT_RETRY_MOST = profile.HALT_RETRY_MOST  # a subscription's profile may set its own (RS_RETRY_MOST)


class ApplyHalted(TrxError):
    """A transaction the subscriber cannot apply halted its subscription there (the message: where and why)."""

    def __init__(self, message: str, count: int) -> None:
        super().__init__(message)
        self.count = count  # the subscriber's count: the transactions before the failing one are applied


def halt_backoff(attempts: int, most: float | None = None) -> float:
    """Seconds until the `attempts`-th failed try of a halted transaction is tried again (at most `most`, the
    subscription's retry window, else HALT_RETRY_MOST)."""
    wait = min(most or HALT_RETRY_MOST, HALT_RETRY_FIRST * 2 ** max(0, attempts - 1))
    return wait * random.uniform(0.8, 1.2)  # noqa: S311 - jitter spreads retries, no secret


def _keys_text(keys: list[dict], most: int = 10) -> str:
    shown = ", ".join(f"{k['table']} {k['key']}" for k in keys[:most])
    return shown + (f" and {len(keys) - most} more" if len(keys) > most else "") if keys else "no row keys"


def _record_halt(sub: ReplSubscriber, txn: sql.Transaction, error: str, keys: list[dict]) -> str:
    """Store the halt on the subscription, with its next try, and raise the alert; the one-line cause."""
    line = (
        f"{sub.subscriber} halted at level {txn.level} of {sub.server}/{sub.account} (transaction {txn.count}): "
        + " ".join(error.split())
    )[:2000]
    fresh = ReplSubscriber.objects.filter(pk=sub.pk).values_list("halt_count", "halt_attempts").first()
    attempts = (fresh[1] if fresh and fresh[0] == txn.count else 0) + 1
    now = timezone.now()
    updates = {
        "halt_count": txn.count, "halt_level": txn.level, "halt_error": line, "halt_keys": keys,
        "halt_attempts": attempts, "retry_at": now + dt.timedelta(seconds=halt_backoff(attempts, sub.retry_most)),
    }  # fmt: skip
    if not (fresh and fresh[0] == txn.count):
        updates["halted_at"] = now
    ReplSubscriber.objects.filter(pk=sub.pk).update(**updates)
    for name, value in updates.items():
        setattr(sub, name, value)
    safely_raise(Alert.Kind.APPLY_HALTED, sub.label, f"{line}; keys: {_keys_text(keys)}", sub.get_absolute_url())
    log.warning("%s (attempt %s)", line, attempts)
    return line


# --- items ------------------------------------------------------------------------------------------------


# --- the publisher's log ------------------------------------------------------------------------------------


# --- the subscriber's level ----------------------------------------------------------------------------------


# --- applying transactions on a subscriber ------------------------------------------------------------------


# --- sync --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncOutcome(JobResult):
    """A sync: transactions applied and skipped, the levels reached on both sides, the subscriber's own
    transactions pushed (updateable). A sync job's result is this (transactional.runs.SyncResult), with the
    copy a re-initialisation made."""

    applied: int = 0  # transactions applied
    skipped: int = 0
    level: int = 0
    count: int = 0
    publisher_level: int = 0
    publisher_count: int = 0
    batches: int = 0
    pushed: int = 0  # the subscriber's own transactions sent to the publisher (updateable)
    reinitialise: bool = False  # a change conflicted and the publication re-initialises the subscriber
    discarded: int = 0  # the subscriber's unpushed changes kept as conflict backups then
    waiting: str = ""  # why the subscriber stopped short of the publisher (a schema change to approve)

    unit: ClassVar[str] = "transactions"

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.applied + self.skipped, written=self.applied, pushed=self.pushed,
                          skipped=self.skipped)  # fmt: skip

    def plus(self, earlier: SyncOutcome) -> SyncOutcome:
        """This outcome with the transactions an earlier attempt of the same sync applied, skipped, in batches."""
        return replace(
            self,
            applied=self.applied + earlier.applied,
            skipped=self.skipped + earlier.skipped,
            batches=self.batches + earlier.batches,
        )


def check_request(
    sub: ReplSubscriber, level: int, pub_level: int, pub_count: int, oldest: int | None, store_level: bool = True
) -> None:
    """The publisher's side of a sync request: store RS_LEVEL and RS_VALID as the reference says, and
    refuse an invalid subscriber until an admin marks it valid again. Without `store_level` the level is stored
    only with a change of validity (a follower writes it with its progress, FollowMemo)."""
    was_valid = bool(sub.valid)
    ok = levels.level_ok(level, pub_level)
    reason = ""
    if not ok:
        reason = f"its level {level} is not at or below the publisher's level {pub_level}"
    elif levels.count_of(level, pub_level, pub_count) < (pub_count + 1 if oldest is None else oldest) - 1:
        ok = False
        reason = f"the transactions after its level {level} have been purged from the log"
    valid = 1 if (ok and was_valid) else 0
    if (sub.level, sub.valid) != (level, valid) and (store_level or sub.valid != valid):
        ReplSubscriber.objects.filter(pk=sub.pk).update(level=level, valid=valid)
        sub.level, sub.valid = level, valid
    if not was_valid:
        raise InvalidSubscriber(
            f"{sub.subscriber} is marked invalid for {sub.server}/{sub.account}; re-initialise it "
            "(REPL_INIT_COPY) and mark it valid before it syncs again"
        )
    if not ok:
        message = f"{sub.subscriber} is no longer valid for {sub.server}/{sub.account}: {reason}"
        safely_raise("subscriber_invalid", sub.label, message, sub.get_absolute_url())
        raise InvalidSubscriber(message)


def sync_once(
    sub: ReplSubscriber,
    max_transactions: int | None = None,
    progress: Callable[[SyncOutcome], None] | None = None,
    max_backlog: int | None = None,
    cut: Callable[[int], bool] | None = None,
    following: bool = False,
    account: ReplAccount | None = None,
    batch: int | None = None,
    windows: SharedWindows | None = None,
    memo: FollowMemo | None = None,
    timeout: int | None = None,
    grantees: set[str] | None = None,
) -> SyncOutcome:
    """Bring a subscriber up to the publisher's current level (or `max_transactions` further). Over
    `max_backlog` transactions behind, the feed is cut (when `cut`, given the backlog, says so). `account`,
    `batch` and `timeout`: the publication's row, repl_apply_batch and the subscription's apply timeout as the caller
    read them for this sync; `windows`: the log
    windows a follower's subscriptions of one publication share. `memo`: a follower's memory of its servers, the
    subscriber's position, the publisher's count and the catalog's progress (FollowMemo), instead of reading them
    again. `grantees`: the publication's grants as the caller read them (else read here); a subscription they no
    longer let in is refused (GrantRevoked) before anything is read or applied."""
    if refused := grant_refusal(sub, grantees_of(sub.account) if grantees is None else grantees):
        raise GrantRevoked(refused)
    lookup = memo.server if memo is not None else server_named
    pub_server = lookup(sub.server)
    sub_server = lookup(sub.subscriber)
    timeout = profile.apply_timeout(sub) if timeout is None else timeout
    acct = account or publication(sub.server, sub.account)
    remembered = memo.position(sub) if memo is not None else None
    position = remembered
    if position is None:
        position = subscriber_position(sub_server, sub.server, sub.account)
        if memo is not None and position is not None:
            memo.read(sub, position[1])
    if position is None:
        raise TrxError(f"{sub.subscriber} has no level for {sub.server}/{sub.account} yet; run REPL_INIT_COPY first")
    level, _own_count = position
    trx_schema.detect(acct, throttle=following)  # a follower looks every few seconds, a sync every time
    direct = (
        WalDirect.offer(sub, acct, pub_server, sub_server, position, batch, timeout)
        if max_transactions is None
        else None
    )
    known = memo.publisher_count(sub) if memo is not None and direct is None else None
    wal = acct.capture == ReplAccount.Capture.WAL
    pub_count = publisher_count(pub_server, sub.account, direct, wal=wal) if known is None else known
    if direct is not None and direct.reached != _own_count:
        level, _own_count = levels.level_of(direct.reached), direct.reached
        record_position(sub, direct.reached, pub_count, account=acct)
    if direct is not None and direct.halted is not None:
        raise direct.halted
    pub_level = levels.level_of(pub_count)
    oldest = memo.oldest(pub_server, sub.account) if memo is not None else oldest_count(pub_server, sub.account)
    count = levels.count_of(level, pub_level, pub_count)
    if remembered is not None and (
        not levels.level_ok(level, pub_level)
        or count != _own_count
        or count < (pub_count + 1 if oldest is None else oldest) - 1
    ):
        # A remembered position never decides that a subscriber is invalid or purged past, nor renumbers it: it may
        # be stale (another apply moved the level since); the step ends and the next one reads the subscriber's.
        raise LevelMoved(f"{sub.subscriber}'s remembered level {level} is not current; reading it again")
    check_request(sub, level, pub_level, pub_count, oldest, store_level=memo is None)
    if count != _own_count:
        # Seen from this publisher's log the level means another count (the log was renumbered).
        run_in_transaction(
            sub_server,
            [
                (
                    sql.level_advance_sql(_d(sub_server), schema_of(sub_server)),
                    [level, count, sub.server, sub.account, _own_count],
                )
            ],
        )
    outcome = SyncOutcome(level=level, count=count, publisher_level=pub_level, publisher_count=pub_count)
    if direct is not None:
        outcome = replace(outcome, applied=direct.tally.applied, skipped=direct.tally.skipped, batches=direct.batches)
    if sub.halt_count is not None and count >= sub.halt_count:
        clear_halt(sub, f"{sub.subscriber} is past the halted transaction (level {levels.level_of(count)})")
    if max_backlog is not None and pub_count - count > max_backlog and (cut is None or cut(pub_count - count)):
        raise BacklogExceeded(
            f"{sub.subscriber} is {pub_count - count} transactions behind {sub.server}/{sub.account} "
            f"(more than {max_backlog}); {FEED_CUT}"
        )
    if acct.is_updateable:
        try:
            outcome = replace(outcome, pushed=push(sub, acct))
        except Reinitialise as exc:
            # Nothing more is applied: the copy about to be made replaces the subscriber's tables.
            ReplSubscriber.objects.filter(pk=sub.pk).update(init_state="queued", last_error=str(exc)[:4000])
            log.warning("%s", exc)
            return replace(outcome, reinitialise=True, discarded=exc.discarded)
        if outcome.pushed:
            # What the push committed on the publisher (a decision that changed the subscriber's version is
            # logged there with the publisher as its origin) comes back to the originator in this sync.
            pub_count = publisher_count(pub_server, sub.account)
            outcome = replace(outcome, publisher_count=pub_count, publisher_level=levels.level_of(pub_count))

    def described() -> Target:
        return Target(
            sub_server, sub.server, sub.account, source_dialect=pub_server.dialect, replay_user=sub.replay_user,
            held=set(held_keys(sub.server, sub.subscriber)) if acct.is_updateable else set(),
            push_account=sql.push_account(sub.account) if acct.is_updateable else "",
        )  # fmt: skip

    # A follower keeps the subscriber's table descriptions between steps (not an updateable one's: its held keys move).
    target = memo.target(sub, described) if memo is not None and not acct.is_updateable else described()
    target.timeout = timeout
    target.use_filters(sub.row_filters)
    batch = batch or profile.apply_batch(sub)
    goal = pub_count if max_transactions is None else min(pub_count, count + max_transactions)
    bounds = (settings.TRX_BATCH_ROWS, settings.TRX_BATCH_BYTES)
    # The next window is read while this one applies (a follower's shared windows are read as its steps go).
    ahead = ReadAhead(pub_server, sub.account, *bounds) if windows is None and settings.TRX_READ_AHEAD else None
    try:
        while count < goal:
            upto = min(goal, count + batch)
            if windows is not None:
                txns = windows.read(pub_server, sub.account, count, upto, *bounds, log=acct.pk)
            elif ahead is not None:
                txns = ahead.read(count, upto)
            else:
                txns = read_for_apply(pub_server, sub.account, count, upto, *bounds)
            if (not txns or txns[0].count != count + 1) and remembered is not None:
                raise LevelMoved(f"{sub.subscriber}'s remembered level {level} is not current; reading it again")
            if not txns or txns[0].count != count + 1:
                raise TrxError(
                    f"{sub.server}/{sub.account} has no transaction after level {levels.level_of(count)} "
                    f"(the log has been purged past it); re-initialise {sub.subscriber}"
                )
            txns, waiting = _until_held(acct, txns)
            outcome = replace(outcome, waiting=waiting)
            if ahead is not None and txns and not waiting and txns[-1].count < goal:
                ahead.ahead(txns[-1].count, min(goal, txns[-1].count + batch))
            if txns:
                tally = _Tally()
                try:
                    count = _apply_or_halt(sub, acct, target, txns, count, tally)
                except ApplyHalted as exc:
                    if exc.count != count or memo is not None:  # a follower's progress may be pending: the halt says it
                        record_position(sub, exc.count, pub_count, account=acct)
                    raise
                if sub.halt_count is not None and count >= sub.halt_count:
                    clear_halt(sub, f"the halted transaction applied (level {levels.level_of(count)})")
                outcome = replace(
                    outcome, applied=outcome.applied + tally.applied, skipped=outcome.skipped + tally.skipped,
                    batches=outcome.batches + 1, count=count, level=levels.level_of(count),
                )  # fmt: skip
                if memo is not None:
                    memo.applied(sub, count, pub_count, acct)
                else:
                    record_position(sub, count, pub_count, account=acct)
                if progress is not None:
                    progress(outcome)
            if outcome.waiting:
                break
    finally:
        if ahead is not None:
            ahead.close()
    return outcome


class WalDirect:
    """A sync of a WAL publication's only subscriber applying what the slot decoded straight from memory, before it
    is stored (capture.read_wal calls it with the log's count and the decoded transactions' rows): the log then
    only counts what the subscriber committed, and the transactions are not written into the log and read back.

    Offered only where nothing else needs those transactions in the log: no other subscription of the publication
    (as do_purge, which would drop them once this subscriber applied them), the subscriber valid, not halted,
    not updateable, and current with the log (else it reads the log first, as usual). It stops before a schema
    change (which may wait for approval): that one and what follows are stored and applied from the log."""

    def __init__(self, sub: ReplSubscriber, acct: ReplAccount, target: Target, count: int, batch: int) -> None:
        self.sub, self.acct, self.target, self.batch = sub, acct, target, batch
        self.reached = count  # the subscriber's count
        self.tally, self.batches = _Tally(), 0  # what it applied and skipped, in how many batches
        self.halted: ApplyHalted | None = None  # raised by the sync once the log stored what follows

    @classmethod
    def offer(
        cls,
        sub: ReplSubscriber,
        acct: ReplAccount,
        pub_server: Server,
        sub_server: Server,
        position: tuple[int, int],
        batch: int | None,
        timeout: int = 0,
    ) -> WalDirect | None:
        level, count = position
        if not (_d(pub_server).decodes_wal and acct.capture == ReplAccount.Capture.WAL) or acct.is_updateable:
            return None
        if not sub.valid or sub.halt_count is not None or level != levels.level_of(count):
            return None
        others = ReplSubscriber.objects.filter(server=sub.server, account=sub.account, subscribed=True)
        if others.exclude(pk=sub.pk).exists():
            return None
        target = Target(sub_server, sub.server, sub.account, source_dialect=pub_server.dialect,
                        replay_user=sub.replay_user, timeout=timeout).use_filters(sub.row_filters)  # fmt: skip
        return cls(sub, acct, target, count, batch or profile.apply_batch(sub))

    def __call__(self, count: int, rows: list[tuple], parts: dict[int, int] | None = None) -> int:
        if count != self.reached:
            return count  # behind the log (or ahead of it after a crash): the log is read as usual
        done = 0
        while done < len(rows):
            end, last = done, self.reached + self.batch
            while end < len(rows) and rows[end][0] <= last:
                end += 1
            # Whole transactions within the bounds a read of the log keeps to (the first one whole, however large).
            window = sql.bounded_window(rows[done:end], settings.TRX_BATCH_ROWS, settings.TRX_BATCH_BYTES, False)[0]
            if not window:
                break
            within = {i - done: n for i, n in (parts or {}).items() if done <= i < done + len(window)}
            txns = sql.read_in_runs(window, within)
            schema = next((i for i, t in enumerate(txns) if t.entries_of(("S",))), None)
            if schema is not None:
                txns = txns[:schema]
            if txns:
                try:
                    self.reached = _apply_or_halt(self.sub, self.acct, self.target, txns, self.reached, self.tally)
                except ApplyHalted as exc:
                    self.halted, self.reached = exc, exc.count
                    return self._durable(count)
                self.batches += 1
            if schema is not None:
                break
            done += len(window)
        return self._durable(count)

    def _durable(self, count: int) -> int:
        """The count reached, once durable on the subscriber: the log counts those transactions without storing
        them, so an apply that did not wait for its flush is made durable first (positions.durable_position)."""
        if self.reached != count and applies_async(self.target.server):
            durable_position(self.target.server, self.sub.server, self.sub.account)
        return self.reached


def _until_held(acct: ReplAccount, txns: list[sql.Transaction]) -> tuple[list[sql.Transaction], str]:
    """The transactions before the first schema change that waits for approval, and what it waits for."""
    for i, txn in enumerate(txns):
        for entry in txn.entries_of(("S",)):
            held = trx_schema.may_apply(acct, entry.table, txn.count)
            if held is not None:
                what = f"#{held.pk} " if held.pk else ""
                return txns[:i], f"the schema change {what}of {entry.table} waits for approval"
    return txns, ""


def key_names_of(acct: ReplAccount, target: Target) -> Callable[[str], list[str] | None]:
    """The key columns of a published table: the publisher's, else the subscriber's copy's, else unknown."""

    def names(table: str) -> list[str] | None:
        for source in (lambda: published_tables(acct, cached=True).get(table), lambda: target.table(table)):
            try:
                info = source()
            except Exception as exc:  # a table the subscriber lacks (the very cause of a halt)
                log.debug("the key of %s: %s", table, exc)
                continue
            if info is not None and info.primary_key:
                return [c.name for c in info.primary_key]
        return None

    return names


@dataclass
class _Tally:
    """The transactions one batch applied and skipped, counted as _apply_or_halt goes."""

    applied: int = 0
    skipped: int = 0


def _apply_or_halt(
    sub: ReplSubscriber,
    acct: ReplAccount,
    target: Target,
    txns: list[sql.Transaction],
    count: int,
    tally: _Tally,
) -> int:
    """Apply the batch; when it fails for a reason a retry does not cure, apply it one transaction at a time,
    and at the one that fails halt (ApplyHalted) or, with on_error = skip, skip it and go on."""
    try:
        count = apply_batch(target, txns, count)
        tally.applied += len(txns)
        return count
    except (LevelMoved, ApplyTimedOut):
        raise  # ApplyTimedOut: the bound cut a statement, nothing against these transactions; the sync is tried again
    except (pyodbc.Error, TrxError, ValueError, KeyError) as exc:
        if is_retryable(exc):
            # A lost or refused connection (its retries ran out) says nothing against this transaction: it is
            # not halted at, nor offered for skipping; the sync fails as unreachable and is tried again.
            raise
        if target.remembered:
            # Tables a follower described in an earlier step may have changed since: described again, then tried.
            target.forget_tables()
            return _apply_or_halt(sub, acct, target, txns, count, tally)
        if len(txns) > 1:
            for txn in txns:
                count = _apply_or_halt(sub, acct, target, [txn], count, tally)
            return count
        txn, error = txns[0], error_message(exc)
        keys = transaction_keys([txn], key_names_of(acct, target))
        if sub.on_error == "skip":
            count = skip_transaction(target, txn, count, error, keys)
            tally.skipped += 1
            safely_raise(
                Alert.Kind.TRANSACTION_SKIPPED, sub.label,
                f"{sub.subscriber} skipped level {txn.level} of {sub.server}/{sub.account} (transaction {txn.count}): "
                f"{' '.join(error.split())}; keys: {_keys_text(keys)}; repair them on the subscription's page",
                sub.get_absolute_url(),
            )  # fmt: skip
            return count
        # The next try starts on new sessions: one kept from this attempt could miss a grant made meanwhile.
        connections.forget(target.server)
        raise ApplyHalted(_record_halt(sub, txn, error, keys), count) from exc


# --- REPL_SYNC as a job ---------------------------------------------------------------------------------------


def wait_for_initial_copy(sub: ReplSubscriber, job: JobRun) -> None:
    """A sync waits for the subscription's initial copy (queued or running) instead of failing for want of
    a level: a copy requested before it, the next attempt of such a copy, or — for a subscription never
    copied yet — any copy, even one requested just after it. Queued, the sync goes back to the queue
    behind the copy; run inside the requesting process it waits (REPLADMIN_LOCK_WAIT at most); scheduled,
    it is skipped."""
    copies = JobRun.objects.filter(kind="trx_init", params__subscription=sub.pk)
    never_copied = not copies.filter(state=JobRun.State.SUCCEEDED).exists()
    while True:
        pending = copies.filter(state__in=[JobRun.State.QUEUED, JobRun.State.RUNNING])
        if not never_copied:
            pending = pending.filter(Q(pk__lt=job.pk) | Q(trigger=JobRun.Trigger.RETRY))
        copy = pending.order_by("pk").first()
        if copy is None:
            return
        wait_behind(job, copy, "the initial copy")


# How often one sync goes on after finding its level moved by another apply before it gives up.
LEVEL_MOVED_RETRIES = 20


def _sync_merging(sub: ReplSubscriber, reporter) -> SyncOutcome:
    """sync_once under the item lock. A level moved by another apply (an attempt whose commit was not
    acknowledged, a follower elsewhere whose lease ran out) means those transactions are applied: the
    level is read again and the sync goes on from it, counting what it applied itself."""
    done = SyncOutcome()
    latest: list[SyncOutcome] = []  # the outcome of the attempt as far as its last committed batch

    def progress(o: SyncOutcome) -> None:
        latest[:] = [o]
        applied = done.applied + done.skipped + o.applied + o.skipped
        reporter.progress(applied, max(1, o.publisher_count), f"level {o.level}")

    for attempt in range(LEVEL_MOVED_RETRIES + 1):
        try:
            outcome = sync_once(sub, progress=progress)
        except LevelMoved as exc:
            if attempt == LEVEL_MOVED_RETRIES:
                raise TrxError(f"{exc}: another apply kept moving it; {sub.subscriber} synced in part") from exc
            if latest:
                done = latest[0].plus(done)
            latest.clear()
            reporter.log(f"{exc}: another apply got there first; reading the level again")
            continue
        return outcome.plus(done)
    raise AssertionError("unreachable")


def sync_subscription(job: JobRun, reporter, subscription_id: int) -> dict:
    sub = ReplSubscriber.objects.get(pk=subscription_id)
    wait_for_initial_copy(sub, job)
    with item_lock(lock_name(sub), job), connections.reuse():
        set_state(sub, ReplSubscriber.SYNCING)
        try:
            outcome = _sync_merging(sub, reporter)
        except Exception as exc:
            set_state(sub, ReplSubscriber.DISCONNECTED, error_message(exc))
            raise
        set_state(sub, ReplSubscriber.IN_SYNC if sub.follow else ReplSubscriber.OFF)
        ReplSubscriber.objects.filter(pk=sub.pk).update(last_error=outcome.waiting)
        return outcome.as_json()


# --- in-sync mode -------------------------------------------------------------------------------------------


# The follower reads the registry's tuning values (batch size, backlog threshold) at most this often: a change
# reaches it within that long. They decide how much one step takes on, never whether a transaction applies.
FOLLOW_REGISTRY_SECONDS = 2.0


class RegistryInts:
    """RegistryEntry.get_int as one follower's steps read it (from any of its threads): kept
    FOLLOW_REGISTRY_SECONDS."""

    def __init__(self, seconds: float = FOLLOW_REGISTRY_SECONDS) -> None:
        self.seconds = seconds
        self.values: dict[str, tuple[float, int]] = {}
        self.guard = threading.Lock()

    def __call__(self, key: str) -> int:
        now = time.monotonic()
        with self.guard:
            cached = self.values.get(key)
        if cached is not None and now - cached[0] < self.seconds:
            return cached[1]
        value = RegistryEntry.get_int(key)
        with self.guard:
            self.values[key] = (now, value)
        return value


# The catalog's copy of a followed subscriber's progress (its count, the publication's, the level samples and the lag
# alert) is written at most this often per subscription: the subscriber's own position row, moved in the apply's
# transaction, is the truth for exactly-once; the catalog's is what pages and alerts read, this much behind at most.
FOLLOW_PROGRESS_SECONDS = 0.5
# A follower trusts the subscriber's position its own last apply left for at most this long before reading it again.
FOLLOW_POSITION_SECONDS = 2.0
# The loop reads the in-sync subscriptions (`followed`) again at most this often while every row it holds is in sync
# and each step handed out since ended with an outcome (its row, which the step keeps current, is then still good): a
# publisher's wake-up goes to the step without a catalog query first. A change made elsewhere (a subscription added,
# stopped or unsubscribed) reaches the follower within this long.
FOLLOW_ROWS_SECONDS = 0.25


class FollowMemo:
    """What one follower's steps would otherwise read and write on every step (docs/architecture.md, "the latency
    path"), shared by its threads:

    - the registered servers and the publications' grants, kept FOLLOW_REGISTRY_SECONDS like the registry's numbers;
    - each subscriber's position (level, count) as the follower's last apply committed it, trusted
      FOLLOW_POSITION_SECONDS and forgotten when a step ends without an outcome (the item busy, a level moved, an
      error) or the catalog's count is not the one this follower wrote (another apply, a copy). The apply checks it
      again in the subscriber's transaction (LevelMoved): a stale one costs a step, never a transaction;
    - the publisher's count an open WAL stream of the loop stored (`stream_counts`): the step reads the log from it
      without asking the publisher;
    - the catalog's progress (record_position): written by the step under its item lock when the last write is
      FOLLOW_PROGRESS_SECONDS old, else left pending; the loop writes what is pending once it is due (`write_due`),
      under the item lock, unless another writer changed the catalog's count since, and so does `close`."""

    def __init__(self, seconds: float = FOLLOW_REGISTRY_SECONDS) -> None:
        self.seconds = seconds
        self.guard = threading.Lock()
        self.servers: dict[str, tuple[float, Server]] = {}
        self.accounts: dict[tuple[str, str], tuple[float, ReplAccount]] = {}
        self.granted: dict[str, tuple[float, set[str]]] = {}
        self.oldests: dict[tuple[str, str], tuple[float, int | None]] = {}
        self.positions: dict[int, tuple[float, int]] = {}  # subscription -> (read or applied at, count)
        self.stream_counts: dict[tuple[str, str], int] = {}
        self.written: dict[int, tuple[float, int]] = {}  # subscription -> (when, the count) the catalog got
        self.seen: dict[int, int] = {}  # subscription -> the catalog's count as this follower last knew it
        # subscription -> (its row, the count applied, the publisher's count, the publication's row)
        self.pending: dict[int, tuple[ReplSubscriber, int, int, ReplAccount]] = {}
        self.targets: dict[int, tuple[float, Target]] = {}  # subscription -> (described at, its tables)

    def _kept(self, store: dict[K, tuple[float, V]], key: K, read: Callable[[], V]) -> V:
        """What `read` gives for `key`, read again once it is `seconds` old (the servers, the publications' rows and
        grants, the oldest transaction of each log)."""
        now = time.monotonic()
        with self.guard:
            cached = store.get(key)
        if cached is None or now - cached[0] >= self.seconds:
            cached = (now, read())
            with self.guard:
                store[key] = cached
        return cached[1]

    def account(self, publisher: str, account: str) -> ReplAccount:
        """The publication's row, kept like the servers; each step gets a copy of its own (it moves its count)."""
        return copy.copy(self._kept(self.accounts, (publisher, account), lambda: publication(publisher, account)))

    def grantees(self, account: str) -> set[str]:
        """The publication's grants (REPL_GRANT), kept like the servers: a revoked one stops the feed this late."""
        return self._kept(self.granted, account, lambda: grantees_of(account))

    def server(self, name: str) -> Server:
        return self._kept(self.servers, name, lambda: server_named(name))

    def position(self, sub: ReplSubscriber) -> tuple[int, int] | None:
        with self.guard:
            cached = self.positions.get(sub.pk)
        if cached is None or time.monotonic() - cached[0] >= FOLLOW_POSITION_SECONDS:
            return None
        return levels.level_of(cached[1]), cached[1]

    def oldest(self, server: Server, account: str) -> int | None:
        """The oldest transaction in the publication's log, kept like the servers: a purge only moves it up, and
        the step's read still finds a log purged past the subscriber (no transaction after its count)."""
        return self._kept(self.oldests, (server.name, account), lambda: oldest_count(server, account))

    def read(self, sub: ReplSubscriber, count: int) -> None:
        """The step read the subscriber's position: trusted from now on for FOLLOW_POSITION_SECONDS."""
        with self.guard:
            self.positions[sub.pk] = (time.monotonic(), count)

    def publisher_count(self, sub: ReplSubscriber) -> int | None:
        return self.stream_counts.get((sub.server, sub.account))

    def counts(self) -> dict[int, int]:
        """The subscribers' counts as the follower's own applies left them (the catalog's may lag behind)."""
        now = time.monotonic()
        with self.guard:
            return {pk: n for pk, (at, n) in self.positions.items() if now - at < FOLLOW_POSITION_SECONDS}

    def check(self, subs: list[ReplSubscriber], read_at: float) -> None:
        """The rows the loop read at `read_at` (a row read before this follower's last write of it says nothing): a
        catalog count another writer changed (another apply, a copy) makes the position be read again, and is the
        count the pending progress is written over."""
        with self.guard:
            for sub in subs:
                written = self.written.get(sub.pk)
                if written is not None and written[0] >= read_at:
                    continue
                if self.seen.get(sub.pk) != sub.count:
                    self.positions.pop(sub.pk, None)
                self.seen[sub.pk] = sub.count

    def forget(self, sub: ReplSubscriber) -> None:
        with self.guard:
            self.positions.pop(sub.pk, None)
            self.targets.pop(sub.pk, None)

    def target(self, sub: ReplSubscriber, described: Callable[[], Target]) -> Target:
        """The subscriber's tables as a step of this subscription described them, kept FOLLOW_POSITION_SECONDS (one
        step of a subscription runs at a time, so no two use it at once): a step then reads no table description. A
        batch that fails on a kept description is tried again on fresh ones before anything halts
        (_apply_or_halt)."""
        now = time.monotonic()
        with self.guard:
            cached = self.targets.get(sub.pk)
        if cached is not None and now - cached[0] < FOLLOW_POSITION_SECONDS:
            cached[1].remembered = True
            return cached[1]
        made = described()
        with self.guard:
            self.targets[sub.pk] = (now, made)
        return made

    def applied(self, sub: ReplSubscriber, count: int, pub_count: int, account: ReplAccount) -> None:
        """A step committed the subscriber at `count` (under the item lock): remember it, and write the catalog's
        progress now when due."""
        now = time.monotonic()
        with self.guard:
            # Trusted since it was read from the subscriber (read), not since each apply.
            self.positions[sub.pk] = (self.positions.get(sub.pk, (now, 0))[0], count)
            due = now - self.written.get(sub.pk, (float("-inf"), 0))[0] >= FOLLOW_PROGRESS_SECONDS
            if not due:
                self.pending[sub.pk] = (sub, count, pub_count, account)
                return
            self.pending.pop(sub.pk, None)
        record_position(sub, count, pub_count, account=account)
        with self.guard:  # stamped once committed: a row read after this shows it
            self.written[sub.pk] = (time.monotonic(), count)
            self.seen[sub.pk] = count

    def write_due(self, idle: Callable[[int], bool], force: bool = False) -> None:
        """Write the pending progress that is due (all of it with `force`) of the subscriptions `idle` says no step
        runs for, under the item lock and only while the catalog still holds the count this follower last knew there
        (another apply or a copy wrote its own since: that one stands). The catalog alone is asked: a subscriber that
        stopped answering never holds the loop. One whose item is busy, or that fails, stays pending."""
        now = time.monotonic()
        with self.guard:
            due = [
                (pk, entry) for pk, entry in self.pending.items()
                if force or now - self.written.get(pk, (float("-inf"), 0))[0] >= FOLLOW_PROGRESS_SECONDS
            ]  # fmt: skip
        for pk, (sub, count, pub_count, account) in due:
            if not idle(pk):
                continue
            with self.guard:
                self.pending.pop(pk, None)
                known = self.seen.get(pk)
            try:
                with item_lock(lock_name(sub), None, wait=0):
                    if known is None or ReplSubscriber.objects.filter(pk=pk, count=known).exists():
                        record_position(sub, count, pub_count, account=account)
                        with self.guard:
                            self.written[pk] = (time.monotonic(), count)
                            self.seen[pk] = count
            except Exception as exc:  # the item busy (a repair, a sync), the catalog away
                if not isinstance(exc, LockBusy):
                    log.info("writing the progress of %s: %s", sub, str(exc).splitlines()[0] if str(exc) else exc)
                    _reconnect_catalog()
                with self.guard:  # tried again next round (unless a step left a newer one meanwhile)
                    self.pending.setdefault(pk, (sub, count, pub_count, account))


class BacklogWatch:
    """When a follower cuts a feed: not while the backlog over the threshold is shrinking (a burst being
    drained), only once it has stayed over it for `grace` seconds without getting smaller (falling behind)."""

    def __init__(self, grace: float = CUT_GRACE_SECONDS) -> None:
        self.grace = grace
        self._over: dict[int, tuple[float, int]] = {}  # subscription -> (since when, smallest backlog seen)

    def cut(self, sub: ReplSubscriber, backlog: int) -> bool:
        now = time.monotonic()
        since, smallest = self._over.get(sub.pk, (now, backlog + 1))
        if backlog < smallest:
            self._over[sub.pk] = (now, backlog)  # draining: the grace starts again
            return False
        if now - since < self.grace:
            return False
        self._over.pop(sub.pk, None)
        return True

    def under(self, sub: ReplSubscriber) -> None:
        self._over.pop(sub.pk, None)


def follow_step(
    sub: ReplSubscriber,
    watch: BacklogWatch | None = None,
    registry: Callable[[str], int] = RegistryEntry.get_int,
    windows: SharedWindows | None = None,
    memo: FollowMemo | None = None,
) -> SyncOutcome | None:
    """One look at the publisher for an in-sync subscriber: apply what is new, or cut the feed when the
    backlog is over the publication's threshold (at once, or as `watch` decides); the subscriber re-syncs
    from its level later. `registry` reads the registry's numbers (a follower's keeps them a moment); `windows`:
    the log windows its subscriptions of one publication share; `memo`: the follower's FollowMemo."""
    acct = memo.account(sub.server, sub.account) if memo is not None else publication(sub.server, sub.account)
    try:
        # The same item lock as a sync job: while one runs, the follower leaves the subscription to it.
        with item_lock(lock_name(sub), None, wait=0):
            batch = profile.apply_batch(sub, registry)
            limit = profile.max_backlog(sub, acct, registry)
            cut = None if watch is None else (lambda backlog: watch.cut(sub, backlog))
            outcome = sync_once(
                sub, max_transactions=batch, max_backlog=limit, cut=cut, following=True, account=acct, batch=batch,
                windows=windows, memo=memo, timeout=profile.apply_timeout(sub, registry),
                grantees=memo.grantees(sub.account) if memo is not None else None,
            )  # fmt: skip
            if watch is not None and outcome.publisher_count - outcome.count <= limit:
                watch.under(sub)
            if sub.state != ReplSubscriber.IN_SYNC and not outcome.reinitialise:  # back after an error
                set_state(sub, ReplSubscriber.IN_SYNC)
                ReplSubscriber.objects.filter(pk=sub.pk).update(last_error="")
            if outcome.waiting != sub.last_error and (
                outcome.waiting or sub.last_error.startswith("the schema change")
            ):
                ReplSubscriber.objects.filter(pk=sub.pk).update(last_error=outcome.waiting)
        if outcome.reinitialise:  # once the item lock is free: the initial copy takes it
            set_state(sub, ReplSubscriber.DISCONNECTED, "copied again after a conflict (publisher wins)")
            start_reinitialisation(sub)
        return outcome
    except LockBusy:
        return None
    except BacklogExceeded as exc:
        set_state(sub, ReplSubscriber.DISCONNECTED, str(exc))
        log.warning("%s", exc)
        return None
    except LevelMoved:
        return None  # a sync job applied the same transactions meanwhile; look again next round
    except ApplyHalted as exc:
        set_state(sub, ReplSubscriber.DISCONNECTED, str(exc))  # recorded and alerted; tried again after retry_at
        return None
    except GrantRevoked as exc:
        # Not fed until granted again: tried again like a lost subscription (FOLLOW_RETRY_SECONDS), quietly.
        set_state(sub, ReplSubscriber.DISCONNECTED, str(exc))
        return None
    except Exception as exc:
        set_state(sub, ReplSubscriber.DISCONNECTED, error_message(exc))
        raise


def start_reinitialisation(sub: ReplSubscriber) -> None:
    """Queue the initial copy of a subscription whose conflict re-initialises it (REPL_INIT_COPY's job)."""
    runner = RUNNERS["trx_init"]
    do_start_job(
        Actor.scheduler(), runner, sub.label,
        runner.params_type.from_json({"subscription": sub.pk}),
    )  # fmt: skip


def followable() -> QuerySet[ReplSubscriber]:
    """The subscriptions followers serve, whatever the moment: in sync, or lost and tried again (a feed cut waits
    for a sync instead). Followers share them out by lease (core/follow_leases.py)."""
    lost = Q(state=ReplSubscriber.DISCONNECTED) & ~Q(last_error__endswith=FEED_CUT)
    return ReplSubscriber.objects.filter(Q(state=ReplSubscriber.IN_SYNC) | lost, follow=True, subscribed=True, valid=1)


def followed(leases: FollowLeases | None = None) -> list[ReplSubscriber]:
    """The in-sync subscriptions to follow now; with `leases` only those this follower holds a lease on."""
    retry = timezone.now() - dt.timedelta(seconds=FOLLOW_RETRY_SECONDS)
    # A lost one is tried again after a pause; a halted one keeps to its own backoff (retry_at, below) instead.
    subs = followable().filter(
        Q(state=ReplSubscriber.IN_SYNC) | Q(last_error_at__lt=retry) | Q(halt_count__isnull=False)
    )
    # A halted one is tried again once its backoff has passed, not every round.
    subs = subs.filter(Q(halt_count__isnull=True) | Q(retry_at__isnull=True) | Q(retry_at__lte=timezone.now()))
    if leases is not None:
        subs = leases.follows(subs)
    return list(subs.order_by("id"))


def _reconnect_catalog() -> None:
    """After a failure: a catalog connection that was cut (restart, failover) is opened anew next time."""
    if not connection.in_atomic_block:
        close_old_connections()


def with_news(
    subs: list[ReplSubscriber],
    servers: dict[str, Server],
    streams: WalStreams | None = None,
    notified: set[tuple[str, str]] | None = None,
    applied: dict[int, int] | None = None,
) -> list[ReplSubscriber]:
    """The subscriptions whose publisher shows transactions past the subscriber's count: one read-only probe
    per publication, nothing locked or numbered (a publisher that cannot be read counts as news: the step
    reports why). A publication this process streams (`streams`) needs no probe: its stored count is it; nor one
    that `notified` a commit since the follower last looked (its step reads the count anyway). `applied`: the
    subscribers' counts as the follower's own applies left them, when the catalog's may lag behind (FollowMemo)."""
    counts: dict[tuple[str, str], int | None] = dict(streams.counts if streams else {})
    counts.update(dict.fromkeys(notified or (), None))
    for sub in subs:
        key = (sub.server, sub.account)
        if key not in counts:
            try:
                server = servers.get(sub.server) or servers.setdefault(sub.server, server_named(sub.server))
                wal = key in streams.wal if streams else None
                counts[key] = visible_count(server, sub.account, wal=wal)
            except Exception:
                counts[key] = None
    applied = applied or {}
    return [
        s for s in subs
        if (seen := counts[(s.server, s.account)]) is None or seen > max(s.count, applied.get(s.pk, s.count))
    ]  # fmt: skip


def _look_at_schemas(subs: list[ReplSubscriber], looked: dict[tuple[str, str], float] | None = None) -> None:
    """A schema change shows whether or not rows arrive (on MariaDB a rename stops the writers until the
    capture triggers are made anew): the followed publications are looked at every few seconds (`looked`: when
    the caller last did, so the rounds between read nothing)."""
    now = time.monotonic()
    for key in sorted({(s.server, s.account) for s in subs}):
        if looked is not None:
            if now - looked.get(key, float("-inf")) < trx_schema.CHECK_EVERY:
                continue
            looked[key] = now
        try:
            trx_schema.detect(publication(*key), throttle=True)
        except Exception as exc:
            log.info(
                "looking at the tables of %s/%s: %s", key[0], key[1], str(exc).splitlines()[0] if str(exc) else exc
            )


class WalStreams:
    """The follower's WalStreams, one per followed publication that captures from the WAL: opened when a
    followed subscription needs one, pumped every round, closed when none does. One that cannot be opened
    (another follower streams it, the server is away) is tried again after RETRY_SECONDS; meanwhile the
    publication is probed and sync jobs read the slot themselves."""

    RETRY_SECONDS = 5.0
    CAPTURE_SECONDS = 5.0

    def __init__(self) -> None:
        self.every_wal: set[tuple[str, str]] = set()  # the WAL publications, as last read from the catalog
        self.known: set[tuple[str, str]] = set()  # the followed publications at that read
        self.known_at = float("-inf")
        self.open: dict[tuple[str, str], WalStream] = {}
        self.failed: dict[tuple[str, str], float] = {}  # when opening last failed
        self.wal: set[tuple[str, str]] = set()  # the followed publications that capture from the WAL
        self.counts: dict[tuple[str, str], int] = {}  # what each open stream has stored

    def pump(
        self,
        subs: list[ReplSubscriber],
        servers: dict[str, Server],
        offer: Callable[[tuple[str, str], list[tuple], dict[int, int]], None] | None = None,
    ) -> None:
        """Pump every stream the subscriptions need. Which publications capture from the WAL is read from the
        catalog when a followed publication was not known at the last read, else every CAPTURE_SECONDS. What a
        stream stored is handed to `offer` (the steps' shared windows): the steps apply it from memory."""
        wanted = {(s.server, s.account) for s in subs}
        now = time.monotonic()
        if not wanted <= self.known or now - self.known_at >= self.CAPTURE_SECONDS:
            self.every_wal, self.known, self.known_at = wal_publications(), set(wanted), now
        self.wal = wanted & self.every_wal
        for key in [k for k in self.open if k not in self.wal]:
            self.open.pop(key).close()
        self.counts = {}
        now = time.monotonic()
        for key in self.wal:
            if key not in self.open and now - self.failed.get(key, -self.RETRY_SECONDS) < self.RETRY_SECONDS:
                continue
            try:
                stream = self.open.get(key)
                if stream is None:
                    server = servers.get(key[0]) or servers.setdefault(key[0], server_named(key[0]))
                    stream = self.open[key] = WalStream(server, key[1])
                if stream.pump() and stream.fresh is not None and offer is not None:
                    offer(key, *stream.fresh)
                self.counts[key] = stream.count
            except Exception as exc:  # another follower streams it, or the server is away: probe instead
                log.info(
                    "streaming the WAL of %s/%s: %s", key[0], key[1], str(exc).splitlines()[0] if str(exc) else exc
                )
                self.failed[key] = now
                if key in self.open:
                    self.open.pop(key).close()

    def filenos(self) -> list[int]:
        """The open streams' sockets (the follower's wait wakes when one has data)."""
        found = []
        for stream in self.open.values():
            with contextlib.suppress(Exception):
                found.append(stream.fileno())
        return found

    def close(self) -> None:
        for stream in self.open.values():
            stream.close()
        self.open.clear()


class FollowSteps:
    """The follower's steps, each subscription on its own: `follow_step` runs on one of `threads` worker threads, at
    most one step of a subscription at a time, so a subscriber that stops answering mid-apply holds its own step
    (and one thread) while the others go on. A subscription whose step has not ended (busy, or stuck on a stalled
    link) is not handed out again, nor one whose row was read before its last step ended (the row would be stale: a
    halt's retry_at, a state set meanwhile). Each thread has its own catalog connection and its own pooled server
    connections (`connections.reuse`), closed when it ends: no connection is shared between threads. The threads
    are daemons: a step stuck when the follower stops ends with the process, its subscriber transaction rolled back.

    With `threads` = 0, or for a caller inside a catalog transaction (whose rows no other connection sees), the
    steps run in the caller's thread, one after another."""

    def __init__(self, threads: int, watch: BacklogWatch, on_end: Callable[[], None] | None = None) -> None:
        self.size = max(0, threads)
        self.watch = watch
        self.on_end = on_end  # told when a step ends (from the step's thread)
        self.registry = RegistryInts()
        self.windows = SharedWindows()  # one read of a publication's log serves its subscriptions' steps
        self.memo = FollowMemo()
        self.inline = self.size == 0 or connection.in_atomic_block
        self.tasks: queue.SimpleQueue[ReplSubscriber | None] = queue.SimpleQueue()
        self.guard = threading.Lock()
        self.running: dict[int, float] = {}  # subscription -> when its step was handed out (time.monotonic())
        self.ended: dict[int, float] = {}  # subscription -> when its last step ended
        # subscription -> the row its last step ended with an outcome, in sync: current, though read before it ended
        self.current: dict[int, ReplSubscriber] = {}
        self.applied = 0
        self.last_applied = float("-inf")  # when a step last applied something
        self.threads: list[threading.Thread] = []
        self.ending = threading.Event()  # set when a step ends

    def offer(self, key: tuple[str, str], rows: list[tuple], parts: dict[int, int]) -> None:
        """What a WAL stream of the loop stored of the publication `key`, for the steps to apply from memory: kept
        under the identity of the log their steps read (the publication's row, as the memory gives it to them)."""
        self.windows.offer(key, self.memo.account(*key).pk, rows, parts)

    def hand_out(self, subs: list[ReplSubscriber], read_at: float, between: Callable[[], None]) -> int:
        """Start a step for each subscription that has none running and was read (at `read_at`) after its last step
        ended; `between` runs before each step taken inline (the heartbeat). Returns how many were started."""
        started = 0
        for sub in subs:
            if self.inline:
                between()  # a round over slow or unreachable subscribers goes on beating
                self._step(sub)
                started += 1
                continue
            with self.guard:
                stale = self.ended.get(sub.pk, float("-inf")) >= read_at and self.current.get(sub.pk) is not sub
                if sub.pk in self.running or stale:
                    continue
                self.running[sub.pk] = time.monotonic()
                more = len(self.threads) < min(self.size, len(self.running))
            if more:
                thread = threading.Thread(target=self._work, name=f"follower-{len(self.threads)}", daemon=True)
                self.threads.append(thread)
                thread.start()
            self.tasks.put(sub)
            started += 1
        return started

    def reusable(self, subs: list[ReplSubscriber], read_at: float) -> bool:
        """Whether rows read at `read_at` may serve another round (FOLLOW_ROWS_SECONDS): each in sync and not halted,
        and each that a step ended with since is the row that step kept current."""
        with self.guard:
            return all(
                sub.state == ReplSubscriber.IN_SYNC and sub.halt_count is None
                and (self.ended.get(sub.pk, float("-inf")) < read_at or self.current.get(sub.pk) is sub)
                for sub in subs
            )  # fmt: skip

    def busy(self) -> bool:
        with self.guard:
            return bool(self.running)

    def slow(self, seconds: float = FOLLOW_SLOW_STEP) -> list[int]:
        """The subscriptions whose step has been running for more than `seconds`."""
        now = time.monotonic()
        with self.guard:
            return sorted(pk for pk, since in self.running.items() if now - since > seconds)

    def _step(self, sub: ReplSubscriber) -> None:
        outcome = None
        try:
            outcome = follow_step(sub, self.watch, self.registry, self.windows, memo=self.memo)
        except Exception:
            log.exception("in-sync apply for %s failed", sub)
            _reconnect_catalog()
        finally:
            if outcome is None:  # the item busy, a level moved, a halt, an error: read the position again
                self.memo.forget(sub)
            with self.guard:
                self.running.pop(sub.pk, None)
                self.ended[sub.pk] = time.monotonic()
                if outcome is not None and not outcome.reinitialise and sub.state == ReplSubscriber.IN_SYNC:
                    self.current[sub.pk] = sub
                else:
                    self.current.pop(sub.pk, None)
                if outcome is not None and outcome.applied:
                    self.applied += outcome.applied
                    self.last_applied = time.monotonic()
            self.ending.set()
            if self.on_end is not None:
                self.on_end()

    def _work(self) -> None:
        try:
            with connections.reuse():
                while (sub := self.tasks.get()) is not None:
                    self._step(sub)
        finally:
            connection.close()  # this thread's catalog connection

    def idle(self, pk: int) -> bool:
        """Whether no step of subscription `pk` runs now."""
        with self.guard:
            return pk not in self.running

    def close(self, wait: float = FOLLOW_STOP_WAIT) -> None:
        """Let the steps handed out end, for at most `wait` seconds in all; the threads then end. The progress
        still pending is written."""
        for _ in self.threads:
            self.tasks.put(None)
        ends = time.monotonic() + wait
        for thread in self.threads:
            thread.join(max(0.0, ends - time.monotonic()))
        self.memo.write_due(self.idle, force=True)
        if stuck := self.slow(0.0):
            log.warning("stopping with the steps of subscriptions %s still running (their subscribers do not answer); "
                        "what they had not committed is rolled back", stuck)  # fmt: skip


def follow_loop(stop: Callable[[], bool], interval: float = 0.1, reaps: bool = True, leased: bool = True) -> int:
    """Serve the in-sync subscriptions this follower holds a lease on (core/follow_leases.py: followers on several
    hosts share them out, and take over those of one that died), until `stop()` says so; returns how many
    transactions it applied. `reaps`: the loop also runs the reaper and the heartbeat watchdog. `leased=False`
    serves every in-sync subscription without leases (a follower embedded in a process of its own making).

    The loop reads which subscriptions have news and hands each one's step to its threads (FollowSteps,
    settings.FOLLOW_THREADS of them): a subscriber that stops answering holds only its own subscription, and the loop
    goes on beating the follower's heartbeat. Between rounds it waits for a wake-up (transactional/wake.py): a
    publisher's notification (PostgreSQL trigger capture, while the follower is idle), WAL arriving on an open
    stream, or a step's end. Publications that cannot wake it are polled adaptively: a cheap read-only probe of
    each publication's count, every FOLLOW_MIN_POLL seconds for a second after something arrived, backing off to
    `interval` while nothing does."""
    reaped = 0.0
    leases = FollowLeases(followable) if leased else None
    servers: dict[str, Server] = {}
    streams = WalStreams()
    wake = Wakeups()
    steps = FollowSteps(settings.FOLLOW_THREADS, BacklogWatch(), on_end=wake.ring)
    pause = FOLLOW_MIN_POLL
    rounds = 0
    looked: dict[tuple[str, str], float] = {}  # publication -> when the loop last looked at its tables' shapes
    held: list[int] = []  # the subscriptions served this round, in the follower's heartbeat (core/heartbeats.py)
    rows: tuple[float, list[ReplSubscriber]] | None = None  # the last read of `followed`: when, and its rows

    def details() -> dict:
        return {"subscriptions": held, "leases": leases.details() if leases else None, "applied": steps.applied,
                "threads": steps.size, "slow": steps.slow(), "rounds": rounds,
                "listening": sorted(f"{name}/{account}" for name, listener in wake.listeners.items()
                                    for account in listener.channels),
                "wakes": dict(wake.counts.__dict__)}  # fmt: skip

    kind = heartbeats.Kind.FOLLOWER
    with (
        connections.reuse(),
        contextlib.closing(streams),
        contextlib.closing(wake),
        heartbeats.beating(kind, watches=reaps) as pulse,
    ):
        try:
            while not stop():
                started = time.monotonic()
                rounds += 1
                steps.ending.clear()
                if reaps and started - reaped >= settings.REAP_INTERVAL:
                    reaper.safely_reap()
                    reaped = started
                    servers.clear()  # registrations may have changed
                    rows = None
                wanted: set[tuple[str, str]] = set()
                covered: set[tuple[str, str]] = set()
                notified = wake.take_notified()
                read_at = started
                try:
                    steps.memo.write_due(steps.idle)
                    if leases is not None and leases.refresh():
                        pulse.last = float("-inf")  # the heartbeat says at once what the leases now hold
                        rows = None  # another share of the subscriptions: read them again
                    read_at = time.monotonic()
                    if (
                        rows is not None
                        and read_at - rows[0] < FOLLOW_ROWS_SECONDS
                        and steps.reusable(rows[1], rows[0])
                    ):
                        read_at, subs = rows[0], list(rows[1])
                    else:
                        subs = followed(leases)
                        rows = (read_at, list(subs))
                    steps.windows.followed([(s.server, s.account) for s in subs], streamed=streams.open)
                    steps.memo.check(subs, read_at)
                    held = [s.pk for s in subs]
                    wanted = {(s.server, s.account) for s in subs}
                    _look_at_schemas(subs, looked)
                    streams.pump(subs, servers, steps.offer)
                    steps.memo.stream_counts = dict(streams.counts)
                    if not steps.busy():  # a busy follower polls: writers then commit without notifying
                        covered = wake.arm(wanted - streams.wal, _servers_of(wanted, servers))
                    else:
                        wake.disarm()
                    subs = with_news(subs, servers, streams, notified, steps.memo.counts())
                except Exception:  # the catalog is unreachable: look again next round, on a new connection
                    log.exception("reading the in-sync subscriptions failed")
                    _reconnect_catalog()
                    subs, rows = [], None
                pulse(details)
                handed = steps.hand_out(subs, read_at, lambda: pulse(details))
                wake.found_news(handed > 0)
                if handed or steps.busy():
                    wake.disarm()
                    covered = set()
                covered |= set(streams.open) & wanted
                recent = time.monotonic() - steps.last_applied < FOLLOW_BUSY_SECONDS
                pause = FOLLOW_MIN_POLL if recent else min(interval, pause * 2)
                if wanted and wanted <= covered:
                    wait = max(pause, FOLLOW_IDLE_WAIT)  # every publication wakes the follower: the poll is a fallback
                elif wake.writing & wanted and not steps.busy():
                    wait = min(pause, FOLLOW_STEP_WAIT)  # a writer under way will not notify: its commit is near
                elif handed or not steps.busy():
                    wait = pause
                else:  # nothing new to hand out while steps run: look again when one ends
                    wait = max(pause, FOLLOW_STEP_WAIT)
                timeout = max(0.0, wait - (time.monotonic() - started))
                if leases is not None:  # the leases are renewed in time, whatever the poll's interval
                    timeout = min(timeout, max(0.0, leases.next_renewal - time.monotonic()))
                wake.wait(timeout, streams.filenos())
        finally:
            steps.close()
            if leases is not None:
                leases.release()  # a clean stop: the other followers take these subscriptions at once
    return steps.applied


def _servers_of(publications: set[tuple[str, str]], servers: dict[str, Server]) -> dict[str, Server]:
    """The registered servers of these publications' publishers (looked up once, kept in `servers`)."""
    for name in {n for n, _ in publications}:
        if name not in servers:
            with contextlib.suppress(Exception):
                servers[name] = server_named(name)
    return servers


# --- updateable subscriptions: the subscriber's changes go back to the publisher -----------------------------


# --- published procedures (PostgreSQL publishers) ----------------------------------------------------------

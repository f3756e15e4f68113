"""Health of replication items (pure): the ONE place that decides an item's state from live facts. The dashboard,
every list and detail page, the topology, /api/status, /metrics and the alerts read these states and words.

Every item is in one of these states, from harmless to urgent:

    ok < copying < never < lagging < follower down < unreachable < invalid < failing < broken

(`never` reads "not initialised" for a subscription: it was never copied, or its database records no level.)

The rules, per kind of item:

* snapshot: `failing` when its latest refresh job failed; `never` when no refresh has succeeded and
  SN_LAST_TS is empty; `ok` otherwise (a queued, running or cancelled refresh after a good one is ok).
* bi-directional subscriber: `failing` when SS_LAST_ERROR is set; `copying` while its initial copy runs; `never`
  when its initial copy is not done; `lagging` when the publication has synchronised since the subscriber last did,
  by more than STALE_AFTER (the subscriber was left out of the later syncs); `ok` otherwise.
* bi-directional publication: `failing` when its last sync reported an error, else the worst state of its
  subscribers (`ok` without subscribers).
* transactional subscriber, in this order: `broken` when a published table or the subscriber's copy is gone;
  `invalid` when RS_VALID = 0; `failing` when its apply is halted at a transaction (RS_HALT_COUNT), when it skipped
  transactions not yet repaired, when a validation found its copy drifted, when the publication's grants no longer
  name it (REPL_REVOKE), or when RS_LAST_ERROR is set and the state is DISCONNECTED; `copying` while its
  initial copy runs; `never` when its initial copy is not done (or its database records no level); `unreachable`
  when its publisher or its own server cannot be reached now; `follower down` when it should be followed (IN SYNC)
  and no live follower holds it; `lagging` when it is behind (lag > 0) and its oldest unapplied transaction is
  older than the publication's lag limit in seconds, or it is not IN SYNC with its last sync more than STALE_AFTER
  ago (or none), or it is more than half the publication's backlog limit behind; `ok` otherwise.
* transactional publication: the worst state of its subscribers (`ok` without subscribers), `broken` when one of
  its tables is gone on the publisher.
* snapshot and bi-directional subscriber: `unreachable` in place of `ok` or `lagging` when a server it reads
  cannot be reached now; `broken` when its source or its copy is gone.
* scheduled event: `failing` when SE_LAST_ERROR is set, `ok` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

OK, NEVER, LAGGING, UNREACHABLE, INVALID, FAILING = "ok", "never", "lagging", "unreachable", "invalid", "failing"
COPYING, FOLLOWER_DOWN, BROKEN = "copying", "follower_down", "broken"
# In order of severity.
STATES = (OK, COPYING, NEVER, LAGGING, FOLLOWER_DOWN, UNREACHABLE, INVALID, FAILING, BROKEN)

# What each state means, for people: the console's legend and the title text of every state badge.
LABELS = {OK: "ok", COPYING: "copying", NEVER: "not initialised", LAGGING: "lagging",
          FOLLOWER_DOWN: "follower down", UNREACHABLE: "unreachable", INVALID: "invalid: needs re-init",
          FAILING: "failing", BROKEN: "broken"}  # fmt: skip
SNAPSHOT_LABELS = {**LABELS, NEVER: "never refreshed"}
# The badge (CSS class) of each state on every page: green only for ok.
BADGES = {OK: "ok", COPYING: "running", NEVER: "warn", LAGGING: "warn", FOLLOWER_DOWN: "bad", UNREACHABLE: "bad",
          INVALID: "bad", FAILING: "bad", BROKEN: "bad"}  # fmt: skip
EXPLANATIONS = {
    OK: "Replicating normally: nothing waits longer than its schedule or its lag limit allows.",
    COPYING: "Its initial copy is running; changes are applied once it is done.",
    FOLLOWER_DOWN: "It should be followed in sync, but no live follower (replfollow) holds it: nothing applies its "
    "changes until one runs again.",
    BROKEN: "A table it replicates is gone (dropped or renamed on the publisher, or the subscriber's copy): it "
    "cannot go on until the table is back or the item is made again.",
    NEVER: "Not initialised: the initial copy never succeeded (a snapshot: never refreshed), so nothing is applied.",
    LAGGING: "Behind: its oldest unapplied change is older than the lag limit, or the last sync is older than "
    "expected, or the backlog is over half its limit.",
    UNREACHABLE: "A server it reads or writes cannot be reached now (the cause is shown); the lag may be a "
    "lower bound or unknown.",
    INVALID: "The subscriber's level is no longer valid for its publisher; re-initialise it and mark it valid.",
    FAILING: "The apply is halted at a transaction that fails (retried with backoff; the cause is shown), "
    "transactions were skipped and not yet repaired, a validation found its copy different from the publisher's, "
    "its grant on the publication was revoked, or the last refresh or sync failed.",
}
STALE_AFTER = timedelta(minutes=5)
# The default lag limit in seconds (REPLADMIN_LAG_ALERT_SECONDS, ACC_ALERT_LAG_SECONDS per publication).
LAG_LIMIT_SECONDS = 60.0

# ReplSubscriber.state values (RS_STATE).
TRX_OFF, TRX_SYNCING, TRX_IN_SYNC, TRX_DISCONNECTED = 0, 1, 2, 3
TRX_STATE_LABELS = {TRX_OFF: "OFF", TRX_SYNCING: "SYNCING", TRX_IN_SYNC: "IN SYNC", TRX_DISCONNECTED: "DISCONNECTED"}


def worst(states: Iterable[str]) -> str:
    """The most severe of `states` (ok when there are none)."""
    return max(states, key=STATES.index, default=OK)


def snapshot_state(last_job_state: str | None, has_succeeded: bool, last_ts: datetime | None) -> str:
    """A snapshot's state from its latest refresh job's state, whether a refresh ever succeeded, and SN_LAST_TS."""
    if last_job_state == "failed":
        return FAILING
    if not has_succeeded and last_ts is None:
        return NEVER
    return OK


def bidir_subscriber_state(
    last_error: str,
    init_done: bool,
    last_sync_at: datetime | None,
    publication_synced_at: datetime | None,
    stale_after: timedelta = STALE_AFTER,
) -> str:
    if last_error:
        return FAILING
    if not init_done:
        return NEVER
    if publication_synced_at is not None and (
        last_sync_at is None or publication_synced_at - last_sync_at > stale_after
    ):
        return LAGGING
    return OK


def bidir_publication_state(last_sync_error: str, subscriber_states: Iterable[str]) -> str:
    return worst([FAILING if last_sync_error else OK, *subscriber_states])


def trx_lag(publication_count: int | None, subscriber_count: int) -> int | None:
    """Transactions a subscriber is behind: the difference of the unwrapped counts (None without a publication)."""
    if publication_count is None:
        return None
    return max(0, publication_count - subscriber_count)


def trx_subscriber_state(
    *,
    valid: int,
    reachable: bool = True,
    sync_state: int,
    last_error: str,
    init_done: bool,
    lag: int | None,
    last_sync_at: datetime | None,
    now: datetime,
    max_backlog: int,
    stale_after: timedelta = STALE_AFTER,
    halted: bool = False,
    gaps: int = 0,
    copying: bool = False,
    follower_alive: bool | None = None,
    broken: str = "",
    lag_seconds: float | None = None,
    lag_limit_seconds: float = LAG_LIMIT_SECONDS,
    drifted: bool = False,
    refused: str = "",
) -> str:
    """`follower_alive`: whether a live follower holds it (None: not asked); `gaps`: skipped transactions not yet
    repaired; `broken`: why a table it needs is gone ("" when none is); `drifted`: a validation found keys of its
    copy that differ from the publisher's once applied, not yet found equal again; `refused`: why the
    publication's grants no longer let it be fed ("" when they do)."""
    if broken:
        return BROKEN
    if not valid:
        return INVALID
    if halted or gaps or drifted or refused or (last_error and sync_state == TRX_DISCONNECTED):
        return FAILING
    if copying:
        return COPYING
    if not init_done:
        return NEVER
    if not reachable:
        return UNREACHABLE
    if sync_state == TRX_IN_SYNC and follower_alive is False:
        return FOLLOWER_DOWN
    if lag:
        stale = sync_state != TRX_IN_SYNC and (last_sync_at is None or now - last_sync_at > stale_after)
        late = lag_seconds is not None and lag_seconds > lag_limit_seconds
        if stale or late or lag > max_backlog / 2:
            return LAGGING
    return OK


def with_reachability(state: str, reachable: bool) -> str:
    """`unreachable` in place of ok or lagging when a server the item needs cannot be reached."""
    return UNREACHABLE if not reachable and state in (OK, LAGGING) else state


def with_presence(state: str, broken: str) -> str:
    """`broken` in place of any state when a table the item needs is gone (`broken`: why; "" when none is)."""
    return BROKEN if broken else state


def event_state(last_error: str | None) -> str:
    return FAILING if last_error else OK

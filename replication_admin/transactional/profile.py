"""A transactional subscription's profile: the tuning it overrides, each with the fallbacks a DBA expects (the
subscription's own value, else the publication's, else the registry's or the environment's), in one place, so the
sync, the follower, the states, the lag alerts and the subscription's page read the same numbers.

- apply batch: transactions one subscriber commit takes (registry `repl_apply_batch`);
- backlog limit: an in-sync subscriber further behind has its feed cut and re-syncs (the publication's
  ACC_MAX_BACKLOG, registry `repl_max_backlog`);
- lag alerts: more transactions behind than (the publication's ACC_ALERT_LAG; none: no such alert), oldest
  unapplied transaction older than (ACC_ALERT_LAG_SECONDS, REPLADMIN_LAG_ALERT_SECONDS);
- retry window: a halted apply is tried again after 5 s, the wait doubling up to this many seconds (300);
- apply timeout: an apply statement on the subscriber running longer (waiting for an application's lock, say) is
  cancelled, its transaction rolled back and tried again; not a halt (registry `repl_apply_timeout`, 0: none);
- validation: how often its tables are compared with the publisher's, one slice each time (registry
  `repl_validate_every`, 0: never on a schedule), and into how many slices (`repl_validate_slices`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from replication_admin.engine import dialects
from replication_admin.models import RegistryEntry, ReplAccount, ReplSubscriber, Server

Registry = Callable[[str], int]


@dataclass(frozen=True)
class Knob:
    """One setting of the profile: what people read it as, and the values a person may give it."""

    label: str
    low: int
    high: int


# The profile's settings, by their ReplSubscriber field (the form, the action's check and the page read these).
KNOBS = {
    "apply_batch": Knob("Transactions per subscriber commit", 1, 100_000),
    "max_backlog": Knob("In sync: the feed is cut above (transactions behind)", 1, 1_000_000_000),
    "alert_lag": Knob("Alert above (transactions behind)", 0, 1_000_000_000),
    "alert_lag_seconds": Knob("Alert when the oldest unapplied transaction is older than (s)", 1, 30 * 86_400),
    "retry_most": Knob("Halted: the longest wait between two tries (s)", 5, 86_400),
    "apply_timeout": Knob("An apply statement is cancelled and tried again after (s)", 1, 86_400),
    "validate_every": Knob("Validate its tables every (s; 0: never on a schedule)", 0, 30 * 86_400),
    "validate_slices": Knob("Slices a validated table is cut into (one compared a validation)", 1, 10_000),
}
FIELDS = tuple(KNOBS)  # states.py reads them with the other subscription fields
HALT_RETRY_MOST = 300.0  # seconds: the longest wait between two tries of a halted apply, unless the profile says


def _own(sub: ReplSubscriber | Mapping[str, Any], name: str) -> Any:
    return sub.get(name) if isinstance(sub, Mapping) else getattr(sub, name)


def apply_batch(sub: ReplSubscriber | Mapping[str, Any], registry: Registry = RegistryEntry.get_int) -> int:
    return int(_own(sub, "apply_batch") or registry("repl_apply_batch"))


def max_backlog(
    sub: ReplSubscriber | Mapping[str, Any], account: ReplAccount | None, registry: Registry = RegistryEntry.get_int
) -> int:
    return int(_own(sub, "max_backlog") or (account.max_backlog if account else None) or registry("repl_max_backlog"))


def alert_lag(sub: ReplSubscriber | Mapping[str, Any], account: ReplAccount | None) -> int | None:
    own = _own(sub, "alert_lag")
    return own if own is not None else (account.alert_lag if account else None)


def lag_limit_seconds(sub: ReplSubscriber | Mapping[str, Any], account: ReplAccount | None) -> float:
    own = _own(sub, "alert_lag_seconds")
    if own:
        return float(own)
    if account is not None and account.alert_lag_seconds:
        return float(account.alert_lag_seconds)
    return float(settings.LAG_ALERT_SECONDS)


def retry_most(sub: ReplSubscriber | Mapping[str, Any]) -> float:
    return float(_own(sub, "retry_most") or HALT_RETRY_MOST)


def apply_timeout(sub: ReplSubscriber | Mapping[str, Any], registry: Registry = RegistryEntry.get_int) -> int:
    """Seconds an apply statement may run on the subscriber (0: no bound of the product's)."""
    return int(_own(sub, "apply_timeout") or registry("repl_apply_timeout"))


def validate_every(sub: ReplSubscriber | Mapping[str, Any], registry: Registry = RegistryEntry.get_int) -> int:
    """Seconds between two scheduled validations of the subscription's tables (0: none on a schedule). The
    subscription's 0 is its own choice (never), not a fallback to the registry's."""
    own = _own(sub, "validate_every")
    return int(own if own is not None else registry("repl_validate_every"))


def validate_slices(sub: ReplSubscriber | Mapping[str, Any], registry: Registry = RegistryEntry.get_int) -> int:
    return max(1, int(_own(sub, "validate_slices") or registry("repl_validate_slices")))


def timeout_refused(sub: ReplSubscriber) -> str:
    """Why the subscriber's dialect cannot bound an apply's statements ("": it can; Dialect.apply_timeout_refused)."""
    dialect = Server.objects.filter(name=sub.subscriber).values_list("dialect", flat=True).first()
    return dialects.get(dialect).apply_timeout_refused if dialect else ""


@dataclass(frozen=True)
class Setting:
    """One line of the profile as the subscription's page shows it."""

    name: str
    label: str
    value: Any
    source: str  # "this subscription", "the publication", "the registry (repl_apply_batch)", …
    own: Any  # the subscription's override (None: none)


def settings_of(sub: ReplSubscriber, account: ReplAccount | None) -> list[Setting]:
    """Every setting of the profile with the value in force and where it comes from."""

    def source(name: str, own: Any, of_publication: Any, fallback: str) -> str:
        if own not in (None, 0) or (own == 0 and name == "validate_every"):
            return "this subscription"
        if of_publication not in (None, 0):
            return "the publication"
        return fallback

    # name: (the value in force, the publication's own, where it comes from without either)
    rows: dict[str, tuple[Any, Any, str]] = {
        "apply_batch": (apply_batch(sub), None, "the registry (repl_apply_batch)"),
        "max_backlog": (max_backlog(sub, account), account.max_backlog if account else None,
                        "the registry (repl_max_backlog)"),
        "alert_lag": (alert_lag(sub, account), account.alert_lag if account else None, "none set"),
        "alert_lag_seconds": (lag_limit_seconds(sub, account), account.alert_lag_seconds if account else None,
                              "the environment (REPLADMIN_LAG_ALERT_SECONDS)"),
        "retry_most": (retry_most(sub), None, "the default (300 s)"),
        "apply_timeout": (apply_timeout(sub) or None, None, "the registry (repl_apply_timeout)"),  # None: no bound
        "validate_every": (validate_every(sub), None, "the registry (repl_validate_every)"),
        "validate_slices": (validate_slices(sub), None, "the registry (repl_validate_slices)"),
    }  # fmt: skip
    if refused := timeout_refused(sub):
        rows["apply_timeout"] = (None, None, refused)
    return [
        Setting(name, KNOBS[name].label, value, source(name, getattr(sub, name), of_publication, fallback),
                getattr(sub, name))
        for name, (value, of_publication, fallback) in rows.items()
    ]  # fmt: skip

"""A subscriber's level: RTLEVEL on the subscriber (moved in the same transaction as each apply), its samples
for the charts, and the subscription's state."""

from __future__ import annotations

import contextlib

from django.conf import settings
from django.utils import timezone

from replication_admin.core import connections
from replication_admin.core.alerts import open_alerts, safely_raise, safely_resolve
from replication_admin.core.transactions import (
    run_each,
)
from replication_admin.engine import levels
from replication_admin.engine import transactional_sql as sql
from replication_admin.models import (
    Alert,
    LevelSample,
    ReplAccount,
    ReplSubscriber,
    Server,
)
from replication_admin.transactional.lookups import (
    _d,
    schema_of,
)
from replication_admin.transactional.profile import alert_lag


def ensure_level_table(server: Server) -> None:
    key = (server.name, server.dialect, server.database)
    if key in _LEVEL_TABLES:
        return
    d = _d(server)
    run_each(server, [sql.level_table_ddl(d, schema_of(server)), *sql.context_ddl(d, schema_of(server))])
    _LEVEL_TABLES.add(key)


def subscriber_position(sub: Server, publisher: str, account: str) -> tuple[int, int] | None:
    """(level, count) the subscriber has applied, as its own database records it."""
    d = _d(sub)
    ensure_level_table(sub)
    with connections.connect(sub, readonly=True) as conn:
        row = conn.cursor().execute(sql.level_read_sql(d, schema_of(sub)), [publisher, account]).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def applies_async(sub: Server) -> bool:
    """Whether applies on `sub` commit without waiting for their flush (apply.async_commit_sql)."""
    return bool(settings.APPLY_ASYNC_COMMIT and _d(sub).async_commit_sql)


def durable_position(sub: Server, publisher: str, account: str) -> tuple[int, int] | None:
    """(level, count) the subscriber has applied that no crash of it can take back: what a purge, a straight-from-
    the-slot apply or an acknowledgement may count on. Where applies commit without waiting for their flush, the
    level row is rewritten as it is in a transaction that commits as the server's synchronous_commit says (on by
    default): its commit waits for the flush of the WAL up to it, which holds every apply committed before. One
    attempt, no retry: an unreachable subscriber raises (its catalog level is not durable for the caller)."""
    if not applies_async(sub):
        return subscriber_position(sub, publisher, account)
    d = _d(sub)
    ensure_level_table(sub)
    with connections.connect(sub, autocommit=False) as conn:
        try:
            row = conn.cursor().execute(sql.level_confirm_sql(d, schema_of(sub)), [publisher, account]).fetchone()
            conn.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise
    return None if row is None else (int(row[0]), int(row[1]))


def set_subscriber_position(sub: Server, publisher: str, account: str, count: int, cursor=None) -> list:
    d = _d(sub)
    delete, insert = sql.level_set_sql(d, schema_of(sub))
    statements = [(delete, [publisher, account]), (insert, [levels.level_of(count), count, publisher, account])]
    if cursor is not None:
        for text, params in statements:
            cursor.execute(text, params)
    return statements


SAMPLE_EVERY = 5.0  # seconds between two level samples of one subscriber


def record_position(
    sub: ReplSubscriber, count: int, pub_count: int, force: bool = False, account: ReplAccount | None = None
) -> None:
    """Store the subscriber's count in the catalog (and the publication's, a level sample every SAMPLE_EVERY
    seconds, the lag alert). `account`: the publication's row as the caller read it in this sync (its alert
    threshold and count are taken from it instead of read again)."""
    now = timezone.now()
    level = levels.level_of(count)
    pub_level = levels.level_of(max(pub_count, count))
    ReplSubscriber.objects.filter(pk=sub.pk).update(count=count, level=level, last_sync_at=now)
    sub.count, sub.level, sub.last_sync_at = count, level, now
    if account is None or account.count < pub_count:
        ReplAccount.objects.filter(server=sub.server, account=sub.account, count__lt=pub_count).update(
            count=pub_count, level=levels.level_of(pub_count)
        )
        if account is not None:
            account.count, account.level = pub_count, levels.level_of(pub_count)
    last = (
        LevelSample.objects.filter(server=sub.server, account=sub.account, subscriber=sub.subscriber)
        .order_by("-at")
        .values_list("at", flat=True)
        .first()
    )
    if account is None:
        account = ReplAccount.objects.filter(server=sub.server, account=sub.account).first()
    threshold: list[int | None] = [] if account is None and sub.alert_lag is None else [alert_lag(sub, account)]
    behind = pub_count - count
    if threshold and threshold[0] is not None and behind > threshold[0]:
        safely_raise(
            "lag",
            sub.label,
            f"{sub.subscriber} is {behind} transactions behind {sub.server}/{sub.account} (alert above {threshold[0]})",
            sub.get_absolute_url(),
        )
    elif threshold and (behind == 0 or not _late(sub.label)):
        limit = threshold[0]
        safely_resolve(
            "lag",
            sub.label,
            f"lag back to {behind} transactions" + ("" if limit is None else f" (alert above {limit})"),
        )
    if force or last is None or (now - last).total_seconds() >= SAMPLE_EVERY:
        LevelSample.objects.create(
            server=sub.server,
            account=sub.account,
            subscriber=sub.subscriber,
            at=now,
            level=level,
            publisher_level=pub_level,
            lag=max(0, pub_count - count),
        )


TIME_REASON = "oldest unapplied transaction"  # in the message of a lag alert raised for the age of the lag


def _late(target: str) -> bool:
    """Whether the open lag alert of `target` was raised for the age of its oldest unapplied transaction: a sync that
    leaves some behind cannot tell whether that cleared; the periodic check (health/checks.check_lag) can."""
    return open_alerts().filter(kind="lag", target=target, message__contains=TIME_REASON).exists()


def set_state(sub: ReplSubscriber, state: int, error: str | None = None) -> None:
    updates: dict = {"state": state}
    if error is not None:
        updates.update(last_error=error[:4000], last_error_at=timezone.now())
    ReplSubscriber.objects.filter(pk=sub.pk).update(**updates)
    sub.state = state


_LEVEL_TABLES: set[tuple] = set()


def clear_halt(sub: ReplSubscriber, how: str) -> None:
    """The halted transaction is behind the subscriber now (applied, skipped or copied over): the halt ends."""
    ReplSubscriber.objects.filter(pk=sub.pk).update(
        halt_count=None, halt_level=None, halt_error="", halt_keys=[], halted_at=None, halt_attempts=0, retry_at=None
    )
    sub.halt_count = sub.halt_level = sub.halted_at = sub.retry_at = None
    sub.halt_error, sub.halt_keys, sub.halt_attempts = "", [], 0
    safely_resolve(Alert.Kind.APPLY_HALTED, sub.label, how)

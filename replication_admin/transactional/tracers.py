"""Tracer tokens (SQL Server's Replication Monitor has them): a marker written into a transactional publication's
log as a transaction of its own, timed until each subscriber's apply has committed it. The latency they measure is
the whole path a row takes: capture on the publisher, the follower or the scheduled sync reading it, and the apply.

The marker is an entry 'K' ({"tracer": id}); the replay writes nothing for it on the subscriber, and the apply
records the arrival in the catalog right after its subscriber transaction commits. Both times are taken on the
console's clock, so a publisher's or a subscriber's clock being off does not bend the figures. An arrival lost to
a crash between that commit and the catalog write is not recorded: that tracer shows no time for the subscriber
(the rows themselves are not affected; the level moved in the apply's own transaction)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from replication_admin.core.audit import Actor, record, require
from replication_admin.core.permissions import OPERATE
from replication_admin.core.transactions import error_message
from replication_admin.core.web import local_stamp
from replication_admin.engine.statements import string_literal
from replication_admin.models import AuditEntry, ReplAccount, ReplSubscriber, ScheduledEvent, Tracer, TracerArrival
from replication_admin.transactional import capture as trx_capture
from replication_admin.transactional import lookups as trx_lookups

log = logging.getLogger(__name__)

MARKER = "K"  # the log entry's op: no row of any table
SHOWN = 12  # tracers listed on the publication page
CHARTED_HOURS = 24


def tracer_event_name(account: ReplAccount) -> str:
    return f"repl_tracer_{account.server}_{account.account}"


def do_post_tracer(actor: Actor, account: ReplAccount) -> Tracer:
    """REPL_TRACER and the publication page: write a tracer token into the publication's log now."""
    target = f"{account.server}/{account.account}"
    require(actor, OPERATE, "trx.tracer", target)
    with transaction.atomic(durable=True):
        tracer = Tracer.objects.create(
            server=account.server, account=account.account, posted_at=timezone.now(), posted_by=actor.username
        )
        record(actor, "trx.tracer", target, detail={"tracer": tracer.pk})
    try:
        server = trx_lookups.server_named(account.server)
        trx_capture.append_entry(server, account.account, MARKER, "", json.dumps({"tracer": tracer.pk}))
    except Exception as exc:
        message = f"the tracer could not be written on {account.server}: {error_message(exc)}"
        Tracer.objects.filter(pk=tracer.pk).update(error=message[:4000])
        record(actor, "trx.tracer", target, AuditEntry.Outcome.ERROR, {"tracer": tracer.pk, "error": message})
        raise trx_lookups.TrxError(message) from exc
    return tracer


def do_schedule_tracer(actor: Actor, account: ReplAccount, interval: int) -> str:
    """A tracer every `interval` minutes through the scheduler (0 stops them)."""
    target = f"{account.server}/{account.account}"
    require(actor, OPERATE, "trx.tracer_schedule", target)
    if not 0 <= interval <= 10080:
        record(actor, "trx.tracer_schedule", target, AuditEntry.Outcome.ERROR, {"interval": interval})
        raise trx_lookups.TrxError("the interval must be 0 (no tracers) to 10080 minutes (a week)")
    name = tracer_event_name(account)
    with transaction.atomic(durable=True):
        if interval == 0:
            ScheduledEvent.objects.filter(name=name).delete()
            record(actor, "trx.tracer_schedule", target, detail={"interval": 0})
            return f"no more scheduled tracers for {target}"
        ScheduledEvent.objects.update_or_create(
            name=name,
            defaults={"start": timezone.now(), "sql": f"REPL_TRACER ({string_literal(account.account)})",
                      "server": account.server, "interval": interval, "disabled": 0},
        )  # fmt: skip
        record(actor, "trx.tracer_schedule", target, detail={"interval": interval})
    return f"a tracer for {target} every {interval} minute(s)"


def tracer_ids(txns: Sequence) -> list[int]:
    """The tracer tokens among `txns`' entries."""
    found = []
    for txn in txns:
        for entry in txn.entries_of((MARKER,)):
            if isinstance(entry.new, dict) and isinstance(entry.new.get("tracer"), int):
                found.append(entry.new["tracer"])
    return found


def record_arrivals(subscriber: str, ids: list[int]) -> None:
    """After the apply that carried them committed: when each tracer reached `subscriber` (once; a tracer of
    another console's catalog is not ours to record)."""
    now = timezone.now()
    for tracer_id in Tracer.objects.filter(pk__in=ids).values_list("pk", flat=True):
        try:
            with transaction.atomic():
                TracerArrival.objects.create(tracer_id=tracer_id, subscriber=subscriber, applied_at=now)
        except IntegrityError:
            pass  # applied again after a crash before the level moved: the first arrival stands


def recent(account: ReplAccount) -> list[dict]:
    """The latest tracers with, per subscriber, the latency or why there is none yet."""
    subscribers = list(
        ReplSubscriber.objects.filter(server=account.server, account=account.account, subscribed=True)
        .order_by("subscriber")
        .values_list("subscriber", flat=True)
    )
    tracers = list(
        Tracer.objects.filter(server=account.server, account=account.account).prefetch_related("arrivals")[:SHOWN]
    )
    rows = []
    for tracer in tracers:
        arrived = {a.subscriber: a for a in tracer.arrivals.all()}
        cells = []
        for name in subscribers:
            arrival = arrived.get(name)
            if arrival is not None:
                cells.append({"subscriber": name, "latency": round(arrival.latency, 3)})
            else:
                cells.append({"subscriber": name, "latency": None,
                              "waiting": (timezone.now() - tracer.posted_at).total_seconds()})  # fmt: skip
        rows.append({"tracer": tracer, "cells": cells})
    return rows


def latest_arrival(sub: ReplSubscriber) -> TracerArrival | None:
    """The newest tracer token `sub` has applied."""
    arrivals = TracerArrival.objects.filter(tracer__server=sub.server, tracer__account=sub.account,
                                            subscriber=sub.subscriber)  # fmt: skip
    return arrivals.select_related("tracer").order_by("-tracer__posted_at").first()


def latency_series(account: ReplAccount, hours: int = CHARTED_HOURS) -> dict[str, list[tuple[str, float]]]:
    """Per subscriber: (posted at, latency in seconds) of the tracers of the last `hours`."""
    since = timezone.now() - timedelta(hours=hours)
    arrivals = (
        TracerArrival.objects.filter(
            tracer__server=account.server, tracer__account=account.account, tracer__posted_at__gte=since
        )
        .select_related("tracer")
        .order_by("tracer__posted_at")
    )
    series: dict[str, list[tuple[str, float]]] = {}
    for arrival in arrivals:
        point = (local_stamp(arrival.tracer.posted_at), round(arrival.latency, 3))
        series.setdefault(arrival.subscriber, []).append(point)
    return series

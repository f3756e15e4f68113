"""Read-only status API (`GET /api/status`, JSON) and Prometheus metrics (`GET /metrics`).

Neither uses the console's session login: a caller sends a token as `Authorization: Bearer <token>`, either one
made on the console's API tokens page (`/api/status` needs one of scope `status`, `/metrics` one of scope
`metrics`; a revoked one is refused) or one listed in REPLADMIN_STATUS_TOKENS (good for both). `/metrics` also
takes `?token=<token>` for scrapers that cannot send headers (the token then shows in access logs: prefer the
header). With no token at all, neither in the console nor in the environment, both answer 403 "not enabled".
Both read the catalog in a fixed number of queries whatever the number of items, and the servers live
(lag, pending log rows, reachability: bounded reads cached a few seconds, see core/live.py). Every item carries
state, lag_transactions, lag_seconds, pending_rows, reachable, last_success and last_error. The item states and
their rules are in replication_admin/engine/health.py. "components" lists the worker hosts, followers, scheduler,
Spark service and catalog, each ok, down or unknown with its cause (health/selectors.py); /metrics has them as
repladmin_component_up.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import CharField, Count, F, FloatField, OuterRef, Q, Subquery, Sum, Value, Window
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, Concat, RowNumber
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from replication_admin.bidir.selectors import bidir_status_rows
from replication_admin.core.times import iso
from replication_admin.engine import health
from replication_admin.health.selectors import component_rows
from replication_admin.models import (
    ApiToken,
    ConflictBackup,
    JobRun,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Snapshot,
    SnapshotPublication,
    TracerArrival,
    Validation,
)
from replication_admin.snapshots.selectors import last_refreshes, snapshot_states
from replication_admin.transactional.selectors import (
    WalBacklog,
    gap_counts,
    slots,
    trx_status_rows,
)

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# --- token check ------------------------------------------------------------------------------------------

# How stale a token's last_used_at may get before a request writes it again.
USE_NOTED_EVERY = timedelta(minutes=1)


def _environment_token_matches(given: str) -> bool:
    """Whether `given` is one of the REPLADMIN_STATUS_TOKENS; every one is compared, each in constant time."""
    matched = False
    for token in settings.STATUS_TOKENS:
        matched |= hmac.compare_digest(given.encode(), token.encode())
    return matched


def _unauthorized(error: str) -> JsonResponse:
    response = JsonResponse({"error": error}, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="replication_admin"'
    return response


def _note_use(token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= USE_NOTED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)


def _refusal(request: HttpRequest, scope: str, allow_query_token: bool) -> HttpResponse | None:
    """The response refusing the request, or None when it carries a token good for `scope`."""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        given = request.GET.get("token", "") if allow_query_token else ""
    given = given.strip()
    if given and _environment_token_matches(given):
        return None
    # Console tokens are found by the SHA-256 of what was sent: the time an index lookup takes tells nothing about
    # a stored token, as nobody can choose what a hash begins with.
    token = ApiToken.objects.filter(token_hash=ApiToken.digest(given)).first() if given else None
    if token is None:
        if not settings.STATUS_TOKENS and not ApiToken.objects.filter(revoked_at__isnull=True).exists():
            error = ("the status API is not enabled: no API token exists; an editor makes one on the console's API "
                     "tokens page (/tokens/), or set REPLADMIN_STATUS_TOKENS")  # fmt: skip
            return JsonResponse({"error": error}, status=403)
        return _unauthorized("a valid token is required")
    if not token.active:
        return _unauthorized("this token was revoked")
    if scope not in token.scopes:
        return JsonResponse({"error": f"this token does not have the {scope} scope"}, status=403)
    _note_use(token)
    return None


# --- /api/status ------------------------------------------------------------------------------------------


def snapshot_rows(now: datetime | None = None) -> list[dict]:
    """Every snapshot's status (snapshots/selectors.py decides it, as for the snapshot pages)."""
    return snapshot_states(now=now)


def bidir_rows(now: datetime | None = None) -> list[dict]:
    """Every bi-directional publication with its subscribers (bidir/selectors.py decides their states, as for the
    bi-directional pages)."""
    return bidir_status_rows(now=now)


def trx_rows(now: datetime) -> list[dict]:
    """Every transactional publication with its subscribers (transactional/states.py decides their states, as for
    the transactional pages)."""
    return trx_status_rows(now)


def event_rows() -> list[dict]:
    failing = ScheduledEvent.objects.exclude(last_error__isnull=True).exclude(last_error="")
    return [
        {"name": e.name, "server": e.server, "interval_minutes": e.interval, "disabled": bool(e.disabled),
         "last_completed": iso(e.last_completed), "last_error": e.last_error,
         "state": health.event_state(e.last_error), "state_label": health.LABELS[health.event_state(e.last_error)],
         "lag_transactions": None, "lag_seconds": None, "pending_rows": None, "reachable": True,
         "last_success": iso(e.last_completed)}
        for e in failing
    ]  # fmt: skip


def _states(*groups: list[dict]) -> list[str]:
    states = []
    for group in groups:
        for item in group:
            states.append(item["state"])
            states.extend(s["state"] for s in item.get("subscribers", []))
    return states


@login_not_required
@never_cache
@require_GET
def status(request: HttpRequest) -> HttpResponse:
    if refused := _refusal(request, ApiToken.Scope.STATUS, allow_query_token=False):
        return refused
    now = timezone.now()
    day_ago = now - timedelta(days=1)
    snapshots, bidir, trx, events = snapshot_rows(now), bidir_rows(now), trx_rows(now), event_rows()
    conflicts = ConflictBackup.objects.aggregate(
        total=Count("id"),
        last_24h=Count("id", filter=Q(created_at__gte=day_ago)),
        held=Count("id", filter=Q(decision=ConflictBackup.HELD)),  # waiting for a person to pick a version
    )
    states = _states(snapshots, bidir, trx, events)
    return JsonResponse({
        "generated_at": iso(now),
        "state": health.worst(states),
        "snapshots": snapshots,
        "bidirectional_publications": bidir,
        "transactional_publications": trx,
        "scheduled_events_failing": events,
        "jobs": {"failed_last_24h": JobRun.objects.filter(state=JobRun.State.FAILED, finished_at__gte=day_ago).count()},
        "conflicts": conflicts,
        "components": component_rows(now),  # worker hosts, followers, scheduler, Spark, catalog: ok, down, unknown
    })  # fmt: skip


# --- /metrics (Prometheus text exposition format 0.0.4) ---------------------------------------------------


def escape_label_value(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Exposition:
    """Metric families written in order, each with its HELP and TYPE lines before its samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines += [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} {kind}"]

    def sample(self, name: str, labels: Mapping[str, object], value: float) -> None:
        text = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
        self.lines.append(f"{name}{{{text}}} {format_value(value)}" if text else f"{name} {format_value(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _trx_metrics(out: Exposition) -> None:
    accounts = list(ReplAccount.objects.all())
    counts = {(a.server, a.account): a.count for a in accounts}
    subs = list(
        ReplSubscriber.objects.filter(subscribed=True)
        .only("server", "account", "subscriber", "level", "count", "valid")
        .order_by("server", "account", "subscriber")
    )
    out.family(
        "repladmin_trx_publication_level", "gauge", "Level (last transaction, wrapping) of a transactional publication."
    )
    for a in accounts:
        out.sample("repladmin_trx_publication_level", {"publisher": a.server, "account": a.account}, a.level)
    families = [
        ("repladmin_trx_subscriber_level", "Level a transactional subscriber has applied.", lambda s: s.level),
        ("repladmin_trx_subscriber_lag", "Transactions a transactional subscriber is behind its publication.",
         lambda s: health.trx_lag(counts.get((s.server, s.account)), s.count)),
        ("repladmin_trx_subscriber_valid", "1 when the subscriber's level is valid for its publisher (RS_VALID).",
         lambda s: int(bool(s.valid))),
    ]  # fmt: skip
    for name, help_text, value_of in families:
        out.family(name, "gauge", help_text)
        for s in subs:
            value = value_of(s)
            if value is not None:
                out.sample(name, {"publisher": s.server, "account": s.account, "subscriber": s.subscriber}, value)
    gaps = {(s.server, s.account, s.subscriber): 0 for s in subs} | gap_counts()
    out.family("repladmin_skipped_transactions_total", "counter", "Transactions a subscriber skipped (gaps).")
    for (server, account, subscriber), n in sorted(gaps.items()):
        labels = {"publisher": server, "account": account, "subscriber": subscriber}
        out.sample("repladmin_skipped_transactions_total", labels, n)


def _slot_metrics(out: Exposition) -> None:
    """The replication slot of each WAL publication, read live (bounded, cached 5 s): the WAL it keeps, its
    wal_status, and the committed transactions of the publication it still holds."""
    reads = slots()
    found = sorted((key, r.value) for key, r in reads.items() if r.ok and isinstance(r.value, WalBacklog))
    gauges = [
        ("repladmin_slot_retained_wal_bytes",
         "WAL a publication's replication slot keeps on its publisher (its end minus restart_lsn).",
         lambda b: b.retained_bytes),
        ("repladmin_slot_safe_wal_size_bytes",
         "WAL that can be written before the slot is past max_slot_wal_keep_size (if set).",
         lambda b: b.safe_wal_size),
        ("repladmin_slot_pending_transactions",
         "Committed transactions of the publication its slot holds that no reader has stored yet.",
         lambda b: b.pending),
    ]  # fmt: skip
    for name, help_text, value_of in gauges:
        out.family(name, "gauge", help_text)
        for (server, account), backlog in found:
            value = value_of(backlog)
            if value is not None:
                out.sample(name, {"publisher": server, "account": account, "slot": backlog.slot}, value)
    out.family("repladmin_slot_wal_status", "gauge",
               "1 for the slot's wal_status (reserved, extended, unreserved, lost; gone: no slot).")  # fmt: skip
    for (server, account), b in found:
        labels = {"publisher": server, "account": account, "slot": b.slot, "wal_status": b.wal_status or "gone"}
        out.sample("repladmin_slot_wal_status", labels, 1)


def _job_metrics(out: Exposition) -> None:
    counts = list(JobRun.objects.values("kind", "state").annotate(n=Count("id")).order_by("kind", "state"))
    out.family("repladmin_jobs_total", "counter", "Finished background job runs by kind and final state.")
    for r in counts:
        if r["state"] in JobRun.FINISHED:
            out.sample("repladmin_jobs_total", {"kind": r["kind"], "state": r["state"]}, r["n"])
    out.family("repladmin_jobs_in_progress", "gauge", "Background job runs queued or running, by kind and state.")
    for r in counts:
        if r["state"] not in JobRun.FINISHED:
            out.sample("repladmin_jobs_in_progress", {"kind": r["kind"], "state": r["state"]}, r["n"])
    durations = (
        JobRun.objects.filter(timings__has_key="total")
        .values("kind")
        .annotate(total=Sum(Cast(KT("timings__total"), FloatField())), n=Count("id"))
        .order_by("kind")
    )
    out.family("repladmin_job_duration_seconds", "summary", "Run time of background jobs (their measured total).")
    for r in durations:
        out.sample("repladmin_job_duration_seconds_sum", {"kind": r["kind"]}, float(r["total"] or 0.0))
        out.sample("repladmin_job_duration_seconds_count", {"kind": r["kind"]}, r["n"])


def _conflict_metrics(out: Exposition) -> None:
    choices = cast("list[tuple[str, str]]", ConflictBackup._meta.get_field("conflict_type").choices)
    types, decisions = dict(choices), dict(ConflictBackup.DECISIONS)
    rows = (
        ConflictBackup.objects.values("kind", "conflict_type", "decision")
        .annotate(n=Count("id"))
        .order_by("kind", "conflict_type", "decision")
    )
    out.family("repladmin_conflicts_total", "counter", "Replication conflicts recorded, by kind, type and decision.")
    for r in rows:
        labels = {"kind": r["kind"], "type": types.get(r["conflict_type"], r["conflict_type"]),
                  "decision": decisions.get(r["decision"], r["decision"])}  # fmt: skip
        out.sample("repladmin_conflicts_total", labels, r["n"])
    per_subscription = (
        ConflictBackup.objects.values("item", "source", "conflict_type")
        .annotate(n=Count("id"))
        .order_by("item", "source", "conflict_type")
    )
    out.family(
        "repladmin_subscription_conflicts_total",
        "counter",
        "Replication conflicts kept, by publication item, the subscriber the change came from, and type.",
    )
    for r in per_subscription:
        labels = {"item": r["item"], "source": r["source"], "type": types.get(r["conflict_type"], r["conflict_type"])}
        out.sample("repladmin_subscription_conflicts_total", labels, r["n"])


def _latest_validations(partition: list[str], **labels: Any) -> list[dict[str, Any]]:
    """The latest validation of each `partition` (its first field: which kind of item it validated), with the
    metric's labels (publisher, account, subscriber) read in the same query."""
    owner = partition[0]
    return list(
        Validation.objects.filter(**{f"{owner}__isnull": False}).annotate(
            recency=Window(RowNumber(), partition_by=[F(p) for p in partition],
                           order_by=[F("at").desc(), F("pk").desc()])
        )
        .filter(recency=1)
        .annotate(**labels)
        .values("publisher", "account", "subscriber", "table", "drift", "in_flight", "verdict", "at")
        .order_by("publisher", "account", "subscriber", "table")
    )  # fmt: skip


def _validation_metrics(out: Exposition) -> None:
    """The latest validation of each table of each transactional subscription, of each bi-directional one and of
    each incremental snapshot (one query each); a bi-directional subscription's publisher is its publication's
    server, its account its item; a snapshot's publisher is its source server, its account `snapshot <name>`."""
    publication_server = Subquery(
        SnapshotPublication.objects.filter(item=OuterRef("bidir__item")).values("server_id")[:1]
    )
    text: CharField[str, str] = CharField()
    rows = [
        *_latest_validations(["subscription", "table"], publisher=F("subscription__server"),
                             account=F("subscription__account"), subscriber=F("subscription__subscriber")),
        *_latest_validations(["bidir"], publisher=Coalesce(publication_server, Value(""), output_field=text),
                             account=F("bidir__item"), subscriber=F("bidir__server")),
        *_latest_validations(["snapshot"],
                             publisher=Coalesce(F("snapshot__source_server"), Value(""), output_field=text),
                             account=Concat(Value("snapshot "), F("snapshot__name"), output_field=text),
                             subscriber=F("snapshot__dest_server")),
    ]  # fmt: skip
    now = timezone.now()
    for name, help_text in (
        ("repladmin_validation_drift_keys", "Keys of a subscriber's table that its latest validation found different "
         "from the publisher's once applied (0: equal; inconclusive validations are not counted as drift)."),
        ("repladmin_validation_inconclusive", "1 when a table's latest validation could not tell (the subscriber "
         "stayed behind what the publisher had committed)."),
        ("repladmin_validation_age_seconds", "Seconds since a subscriber's table was last validated."),
    ):  # fmt: skip
        out.family(name, "gauge", help_text)
        for r in rows:
            labels = {"publisher": r["publisher"], "account": r["account"], "subscriber": r["subscriber"],
                      "table": r["table"]}  # fmt: skip
            value = {
                "repladmin_validation_drift_keys": r["drift"],
                "repladmin_validation_inconclusive": int(r["verdict"] == Validation.INCONCLUSIVE),
                "repladmin_validation_age_seconds": round((now - r["at"]).total_seconds(), 3),
            }[name]
            out.sample(name, labels, value)


def _snapshot_metrics(out: Exposition) -> None:
    refreshes = last_refreshes()
    rows = [
        (name, refreshes.get(name, {}).get("last_success_at"))
        for name in Snapshot.objects.values_list("name", flat=True)
    ]
    out.family(
        "repladmin_snapshot_last_success_timestamp_seconds", "gauge", "When a snapshot's last refresh succeeded."
    )
    for name, at in rows:
        if at is not None:
            out.sample("repladmin_snapshot_last_success_timestamp_seconds", {"snapshot": name}, at.timestamp())


def _item_metrics(out: Exposition) -> None:
    """Lag in seconds and pending changes of every item, read live like /api/status (bounded, cached 5 s)."""
    now = timezone.now()
    samples: list[tuple[dict, float | None, int | None]] = []
    for s in snapshot_rows(now):
        labels = {"kind": "snapshot", "item": s["name"], "subscriber": s["dest_server"]}
        samples.append((labels, s["lag_seconds"], s["pending_rows"]))
    for pub in bidir_rows(now):
        for sub in pub["subscribers"]:
            labels = {"kind": "bidirectional", "item": pub["item"], "subscriber": sub["server"]}
            samples.append((labels, sub["lag_seconds"], sub["pending_rows"]))
    for account in trx_rows(now):
        for sub in account["subscribers"]:
            labels = {"kind": "transactional", "item": f"{account['server']}/{account['account']}",
                      "subscriber": sub["subscriber"]}  # fmt: skip
            samples.append((labels, sub["lag_seconds"], sub["lag_transactions"]))
    lag_help = "How far behind an item is: the age of the oldest change not yet applied (0 when none waits)."
    out.family("repladmin_item_lag_seconds", "gauge", lag_help)
    for labels, seconds, _ in samples:
        if seconds is not None:
            out.sample("repladmin_item_lag_seconds", labels, float(seconds))
    out.family("repladmin_item_pending_changes", "gauge",
               "Changes waiting for an item: log rows (snapshots, bi-directional) or transactions.")  # fmt: skip
    for labels, _, pending in samples:
        if pending is not None:
            out.sample("repladmin_item_pending_changes", labels, pending)
    latest = TracerArrival.objects.order_by("tracer__server", "tracer__account", "subscriber", "-tracer__posted_at")
    seen: set[tuple[str, str, str]] = set()
    out.family("repladmin_tracer_latency_seconds", "gauge",
               "End-to-end latency of the latest tracer token each transactional subscriber applied.")  # fmt: skip
    for arrival in latest.select_related("tracer")[:10000]:
        key = (arrival.tracer.server, arrival.tracer.account, arrival.subscriber)
        if key not in seen:
            seen.add(key)
            labels = {"publisher": key[0], "account": key[1], "subscriber": key[2]}
            out.sample("repladmin_tracer_latency_seconds", labels, arrival.latency)


def _component_metrics(out: Exposition) -> None:
    help_text = ("1 while a component answers (a worker host, follower or scheduler renews its heartbeat; Spark or "
                 "the catalog answers), 0 when it is down or not known to be up.")  # fmt: skip
    out.family("repladmin_component_up", "gauge", help_text)
    for c in component_rows():
        labels = {"kind": c["kind"], "host": c["host"], "pid": "" if c["pid"] is None else c["pid"]}
        out.sample("repladmin_component_up", labels, int(c["state"] == "ok"))


@login_not_required
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if refused := _refusal(request, ApiToken.Scope.METRICS, allow_query_token=True):
        return refused
    out = Exposition()
    _trx_metrics(out)
    _slot_metrics(out)
    _conflict_metrics(out)
    _validation_metrics(out)
    _job_metrics(out)
    _snapshot_metrics(out)
    _item_metrics(out)
    _component_metrics(out)
    return HttpResponse(out.text(), content_type=PROMETHEUS_CONTENT_TYPE)

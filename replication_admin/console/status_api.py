"""Read-only status API (`GET /api/status`, JSON) and Prometheus metrics (`GET /metrics`).

Neither uses the console's session login: a caller sends a token as `Authorization: Bearer <token>`, either one
made on the console's API tokens page (`/api/status` needs one of scope `status`, `/metrics` one of scope
`metrics`; a revoked one is refused) or one listed in REPLADMIN_STATUS_TOKENS (good for both). `/metrics` also
takes `?token=<token>` for scrapers that cannot send headers (the token then shows in access logs: prefer the
header). With no token at all, neither in the console nor in the environment, both answer 403 "not enabled".
Both read the catalog in a fixed number of queries whatever the number of items, and the servers live
(lag, pending log rows, reachability: bounded reads cached a few seconds, see core/live.py). Every item carries
state, lag_transactions, lag_seconds, pending_rows, reachable, last_success and last_error. The item states and
their rules are in replication_admin/engine/health.py.
"""

from __future__ import annotations

import hmac
import math
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count, FloatField, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from replication_admin.bidir.selectors import pending_rows
from replication_admin.core.live import Backlog, Live
from replication_admin.engine import health
from replication_admin.models import (
    ApiToken,
    ConflictBackup,
    JobRun,
    RegistryEntry,
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    SkippedTransaction,
    Snapshot,
    SnapshotPublication,
    SnapshotSubscription,
    TracerArrival,
)
from replication_admin.snapshots.selectors import last_refreshes, pending_log_rows
from replication_admin.transactional.selectors import live_lags

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


def _iso(at: datetime | None) -> str | None:
    return at.astimezone(UTC).isoformat() if at else None


# --- /api/status ------------------------------------------------------------------------------------------


# The columns the status rows read, as values(): thousands of model instances would cost more than all the rest.
SNAPSHOT_FIELDS = ("name", "source_server", "source_table", "dest_server", "dest_table", "is_incremental", "last_ts")


def _live_fields(live: Live | None) -> tuple[Backlog | None, bool, str]:
    """(the backlog, reachable, the reason it could not be read) of a live backlog read (None: nothing to read)."""
    if live is None:
        return None, True, ""
    return (live.value, True, "") if live.ok else (None, False, live.error)


def _seconds(backlog: Backlog | None, now: datetime) -> float | None:
    return None if backlog is None else round(backlog.seconds(now), 3)


BIDIR_PUB_FIELDS = ("id", "item", "type", "server", "table", "last_sync_at", "last_sync_error")
BIDIR_SUB_FIELDS = (
    "server",
    "item",
    "type",
    "init_state",
    "init_started_at",
    "last_pull_ts",
    "last_push_ts",
    "last_sync_at",
    "last_error",
)
TRX_SUB_FIELDS = ("server", "account", "subscriber", "level", "count", "valid", "state", "init_state",
                  "last_sync_at", "last_error")  # fmt: skip


def _duration(job: Mapping[str, Any]) -> float | None:
    total = (job["timings"] or {}).get("total")
    if isinstance(total, int | float):
        return float(total)
    started, finished = job["started_at"], job["finished_at"]
    return (finished - started).total_seconds() if started and finished else None


def snapshot_rows(now: datetime | None = None) -> list[dict]:
    """Every snapshot's status. Lag in seconds: for an incremental snapshot the age of the oldest change its log
    holds for the next refresh (0 when none waits); for a full one the age of its copy (since its last successful
    refresh)."""
    now = now or timezone.now()
    refreshes = last_refreshes()
    jobs = JobRun.objects.filter(pk__in=[r["last_job_id"] for r in refreshes.values()])
    last_jobs = {j["id"]: j for j in jobs.values("id", "state", "started_at", "finished_at", "timings", "error")}
    snapshots = list(Snapshot.objects.values(*SNAPSHOT_FIELDS))
    pending = pending_log_rows(s for s in snapshots if s["is_incremental"] and s["source_table"])
    rows = []
    for s in snapshots:
        refresh = refreshes.get(s["name"], {})
        last_success_at = refresh.get("last_success_at")
        job_id = refresh.get("last_job_id")
        job = last_jobs.get(job_id) if job_id is not None else None
        rows.append({
            "name": s["name"], "source_server": s["source_server"], "source_table": s["source_table"],
            "dest_server": s["dest_server"], "dest_table": s["dest_table"], "incremental": bool(s["is_incremental"]),
            "last_ts": _iso(s["last_ts"]), "last_success_at": _iso(last_success_at),
            "last_refresh": {"job": job["id"], "state": job["state"], "finished_at": _iso(job["finished_at"]),
                             "duration_seconds": _duration(job)} if job else None,
        })  # fmt: skip
        backlog, reachable, problem = _live_fields(pending.get(s["name"]))
        if s["is_incremental"]:
            lag_seconds = _seconds(backlog, now)
        else:
            lag_seconds = round((now - last_success_at).total_seconds(), 3) if last_success_at else None
        state = health.snapshot_state(job["state"] if job else None, last_success_at is not None, s["last_ts"])
        state = health.with_reachability(state, reachable)
        last_error = job["error"] if job and job["state"] == JobRun.State.FAILED else ""
        rows[-1].update({
            "state": state, "state_label": health.SNAPSHOT_LABELS[state], "lag_transactions": None,
            "lag_seconds": lag_seconds, "pending_rows": backlog.rows if backlog else None, "reachable": reachable,
            "last_success": _iso(last_success_at), "last_error": last_error or problem,
        })  # fmt: skip
    return rows


BidirState = tuple[SnapshotPublication, str, list[tuple[dict, str]]]


def bidir_states(sub_fields: tuple[str, ...] = BIDIR_SUB_FIELDS) -> list[BidirState]:
    """Every bi-directional publication with its state, and its subscriptions (dicts of `sub_fields`) each with
    theirs (two queries)."""
    fields = dict.fromkeys(("item", "type", "init_state", "init_started_at", "last_push_ts", "last_sync_at",
                            "last_error", *sub_fields))  # fmt: skip
    subscriptions: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for sub in SnapshotSubscription.objects.values(*fields):
        subscriptions[(sub["item"], sub["type"])].append(sub)
    publications = list(SnapshotPublication.objects.only(*BIDIR_PUB_FIELDS))
    pending = pending_rows((pub, sub) for pub in publications for sub in subscriptions.get((pub.item, pub.type), []))
    result = []
    for pub in publications:
        subs = []
        for sub in subscriptions.get((pub.item, pub.type), []):
            sub["backlog"], sub["reachable"], sub["live_error"] = _live_fields(pending.get((pub.item, sub["server"])))
            sub["pending_rows"] = sub["backlog"].rows if sub["backlog"] else None
            state = health.bidir_subscriber_state(sub["last_error"], sub["init_state"] == "done", sub["last_sync_at"],
                                                  pub.last_sync_at)  # fmt: skip
            subs.append((sub, health.with_reachability(state, sub["reachable"])))
        state = health.bidir_publication_state(pub.last_sync_error, [s for _, s in subs])
        result.append((pub, state, subs))
    return result


def bidir_rows(now: datetime | None = None) -> list[dict]:
    """Every bi-directional publication with its subscribers. Lag in seconds: the age of the oldest change a sync
    has yet to carry between the publisher and the subscriber (0 when none waits); a publication's is its worst."""
    now = now or timezone.now()
    rows = []
    for pub, pub_state, subscribers in bidir_states():
        subs = [
            {
                "server": sub["server"], "init_state": sub["init_state"], "last_pull_ts": _iso(sub["last_pull_ts"]),
                "last_push_ts": _iso(sub["last_push_ts"]), "last_sync_at": _iso(sub["last_sync_at"]),
                "last_error": sub["last_error"] or sub["live_error"], "state": state,
                "state_label": health.LABELS[state], "lag_transactions": None,
                "lag_seconds": _seconds(sub["backlog"], now), "pending_rows": sub["pending_rows"],
                "reachable": sub["reachable"],
                "last_success": _iso(sub["last_sync_at"]) if not sub["last_error"] else None,
            }
            for sub, state in subscribers
        ]  # fmt: skip
        pending = [s["pending_rows"] for s in subs]
        ages = [s["lag_seconds"] for s in subs]
        rows.append({
            "item": pub.item, "server": pub.server_id, "table": pub.table, "last_sync_at": _iso(pub.last_sync_at),
            "last_sync_error": pub.last_sync_error, "subscribers": subs, "state": pub_state,
            "state_label": health.LABELS[pub_state], "lag_transactions": None,
            "lag_seconds": None if None in ages else max(ages, default=0.0),
            "pending_rows": None if None in pending else sum(p for p in pending if p is not None),
            "reachable": all(s["reachable"] for s in subs), "last_error": pub.last_sync_error,
            "last_success": _iso(pub.last_sync_at) if not pub.last_sync_error else None,
        })  # fmt: skip
    return rows


def _gap_counts() -> dict[tuple[str, str, str], int]:
    counts = SkippedTransaction.objects.values("server", "account", "subscriber").annotate(n=Count("id")).order_by()
    return {(r["server"], r["account"], r["subscriber"]): r["n"] for r in counts}


def trx_rows(now: datetime) -> list[dict]:
    default_backlog = RegistryEntry.get_int("repl_max_backlog")
    accounts = {(a.server, a.account): a for a in ReplAccount.objects.all()}
    gaps = _gap_counts()
    subscribers: dict[tuple[str, str], list[dict]] = defaultdict(list)
    subs = list(
        ReplSubscriber.objects.filter(subscribed=True)
        .order_by("server", "account", "subscriber")
        .values(*TRX_SUB_FIELDS)
    )
    lags = live_lags(subs, now, {key: a.count for key, a in accounts.items()})
    for sub in subs:
        server, name, subscriber = sub["server"], sub["account"], sub["subscriber"]
        account = accounts.get((server, name))
        live = lags[(server, name, subscriber)]
        lag = live.transactions
        state = health.trx_subscriber_state(
            valid=sub["valid"], sync_state=sub["state"], last_error=sub["last_error"],
            init_done=sub["init_state"] == "done" and live.initialised, lag=lag, last_sync_at=sub["last_sync_at"],
            now=now, max_backlog=(account.max_backlog if account else None) or default_backlog,
            reachable=live.reachable,
        )  # fmt: skip
        subscribers[(server, name)].append({
            "subscriber": subscriber, "level": sub["level"], "count": sub["count"], "lag": lag,
            "lag_transactions": lag,
            "lag_seconds": 0.0 if lag == 0 else None if live.seconds is None else round(live.seconds, 3),
            "lag_text": live.unknown or f"{lag} transactions", "pending_rows": lag, "reachable": live.reachable,
            "valid": bool(sub["valid"]), "sync_state": health.TRX_STATE_LABELS.get(sub["state"], str(sub["state"])),
            "init_state": sub["init_state"], "last_sync_at": _iso(sub["last_sync_at"]),
            "last_success": _iso(sub["last_sync_at"]), "last_error": sub["last_error"] or live.problem,
            "gaps": gaps.get((server, name, subscriber), 0), "state": state, "state_label": health.LABELS[state],
        })  # fmt: skip
    rows = []
    for server, name in sorted(accounts.keys() | subscribers.keys()):  # subscribers of an uncatalogued publication too
        account, sub_rows = accounts.get((server, name)), subscribers.get((server, name), [])
        state = health.worst(s["state"] for s in sub_rows)
        sub_lags = [s["lag_transactions"] for s in sub_rows]
        most = None if None in sub_lags else max(sub_lags, default=0)
        ages = [s["lag_seconds"] for s in sub_rows if s["lag_seconds"] is not None]
        rows.append({
            "server": server, "account": name, "level": account.level if account else None,
            "count": account.count if account else None, "subscribers": sub_rows, "state": state,
            "state_label": health.LABELS[state], "lag_transactions": most,
            "lag_seconds": max(ages, default=None), "pending_rows": most,
            "reachable": all(s["reachable"] for s in sub_rows),
            "last_success": max((s["last_success"] for s in sub_rows if s["last_success"]), default=None),
            "last_error": next((s["last_error"] for s in sub_rows if s["last_error"]), ""),
        })  # fmt: skip
    return rows


def event_rows() -> list[dict]:
    failing = ScheduledEvent.objects.exclude(last_error__isnull=True).exclude(last_error="")
    return [
        {"name": e.name, "server": e.server, "interval_minutes": e.interval, "disabled": bool(e.disabled),
         "last_completed": _iso(e.last_completed), "last_error": e.last_error,
         "state": health.event_state(e.last_error), "state_label": health.LABELS[health.event_state(e.last_error)],
         "lag_transactions": None, "lag_seconds": None, "pending_rows": None, "reachable": True,
         "last_success": _iso(e.last_completed)}
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
        "generated_at": _iso(now),
        "state": health.worst(states),
        "snapshots": snapshots,
        "bidirectional_publications": bidir,
        "transactional_publications": trx,
        "scheduled_events_failing": events,
        "jobs": {"failed_last_24h": JobRun.objects.filter(state=JobRun.State.FAILED, finished_at__gte=day_ago).count()},
        "conflicts": conflicts,
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
    gaps = {(s.server, s.account, s.subscriber): 0 for s in subs} | _gap_counts()
    out.family("repladmin_skipped_transactions_total", "counter", "Transactions a subscriber skipped (gaps).")
    for (server, account, subscriber), n in sorted(gaps.items()):
        labels = {"publisher": server, "account": account, "subscriber": subscriber}
        out.sample("repladmin_skipped_transactions_total", labels, n)


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


@login_not_required
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if refused := _refusal(request, ApiToken.Scope.METRICS, allow_query_token=True):
        return refused
    out = Exposition()
    _trx_metrics(out)
    _conflict_metrics(out)
    _job_metrics(out)
    _snapshot_metrics(out)
    _item_metrics(out)
    return HttpResponse(out.text(), content_type=PROMETHEUS_CONTENT_TYPE)

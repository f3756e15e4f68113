"""Read queries of the snapshot feature for other features' pages and jobs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db.models import Max, Q
from django.db.models.fields.json import KT
from django.utils import timezone

from replication_admin.core import live
from replication_admin.core.alerts import open_alerts
from replication_admin.core.presence import Presence
from replication_admin.core.times import iso
from replication_admin.core.web import Chart, line_chart, local_stamp
from replication_admin.engine import health
from replication_admin.engine.schema import TableInfo
from replication_admin.engine.statements import quote_name
from replication_admin.models import (
    JobRun,
    RegistryEntry,
    Server,
    Snapshot,
    SnapshotLog,
    Validation,
)
from replication_admin.snapshots.runs import RefreshResult
from replication_admin.snapshots.shapes import SnapshotError, drift_target, shape_of

VALIDATIONS_SHOWN = 100  # validations the snapshot page lists and charts, newest


@dataclass(frozen=True)
class ValidationPanel:
    """The snapshot page's validation panel: its latest validations, the drift trend, the registry's schedule."""

    rows: list[Validation]
    chart: Chart
    every: int
    slices: int


def validation_panel(snapshot: Snapshot) -> ValidationPanel:
    rows = list(Validation.objects.filter(snapshot=snapshot).order_by("-at", "-pk")[:VALIDATIONS_SHOWN])
    points = rows[::-1]
    traces = [{
        "type": "scatter", "mode": "lines+markers", "name": snapshot.dest_table,
        "x": [local_stamp(r.at) for r in points], "y": [r.drift for r in points],
        "text": [f"{r.slice_text}: {r.verdict}" for r in points],
    }] if points else []  # fmt: skip
    return ValidationPanel(
        rows=rows[:10], chart=Chart(line_chart(traces, "keys that differ")),
        every=RegistryEntry.get_int("repl_validate_every"),
        slices=max(1, RegistryEntry.get_int("repl_validate_slices")),
    )  # fmt: skip


def drift_messages(snapshots: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Snapshot name -> the message of its open drift alert (one query): a validation found its destination
    different from its source after an incremental refresh. Alerts are matched by their whole target, never parsed
    (a name or a table may hold ": ")."""
    names = {drift_target(s["name"], s["source_table"]): s["name"] for s in snapshots if s["source_table"]}
    drift: dict[str, str] = {}
    if not names:
        return drift
    drifted = open_alerts().filter(kind="validation_drift", target__in=names)
    for target, message in drifted.values_list("target", "message"):
        drift.setdefault(names[target], f"validation: {message}")
    return drift


def snapshot_source(name: str) -> tuple[Server, TableInfo, str]:
    """A snapshot's source query as a compare's left side: (server, virtual table of its output, query)."""
    snapshot = Snapshot.objects.select_related("source_server").filter(name=name).first()
    if snapshot is None:
        raise SnapshotError(f"snapshot {name} does not exist")
    shape = shape_of(snapshot)
    return shape.server, shape.as_table(f"query of {snapshot.name}"), shape.sql


def last_refreshes(names: list[str] | None = None) -> dict[str, dict]:
    """Per snapshot (all, or those named): the id of its latest refresh job and when a refresh last succeeded.

    One pass over the refresh jobs, grouped by snapshot: a correlated subquery per snapshot would read the params
    of every refresh job once per snapshot, which takes seconds with a few hundred snapshots."""
    jobs = JobRun.objects.filter(kind="snapshot_refresh")
    if names is not None:
        jobs = jobs.filter(params__snapshot__in=names)
    rows = (
        jobs.values(snapshot=KT("params__snapshot"))
        .annotate(last_job_id=Max("id"), last_success_at=Max("finished_at", filter=Q(state=JobRun.State.SUCCEEDED)))
        .order_by()
    )
    return {r["snapshot"]: r for r in rows}


def snapshot_name(server: Server, table: str) -> str:
    """SN_NAME: the destination's qualified name, written as in statements (`pg_demo.sub_orders`)."""
    return f"{server.name}.{quote_name(table)}"


def pending_log_rows(snapshots: Iterable[Mapping[str, Any]]) -> dict[str, live.Live]:
    """Per incremental snapshot (dicts with name, source_server (its name), source_table, last_ts): the rows of
    its snapshot log newer than SN_LAST_TS, i.e. not yet applied, with the oldest one's time (a live.Backlog), read
    live on the source (one bounded read, cached a few seconds); an unreachable source gives the reason instead.
    One catalog query."""
    snapshots = [s for s in snapshots if s["source_table"]]
    servers = {s.name: s for s in Server.objects.filter(name__in={s["source_server"] for s in snapshots})}
    reach = live.reachability(servers.values())
    result = {}
    for s in snapshots:
        server = servers.get(s["source_server"])
        if server is None:
            result[s["name"]] = live.Live(error=f"server {s['source_server']} is not registered")
            continue
        key = ("snapshot-backlog", s["source_table"], s["last_ts"])
        result[s["name"]] = live.read(server, reach, key, partial(live.log_backlog, server, s["source_table"],
                                                                   s["last_ts"]))  # fmt: skip
    return result


# The columns the status rows read, as values(): thousands of model instances would cost more than all the rest.
SNAPSHOT_FIELDS = ("name", "source_server", "source_table", "dest_server", "dest_table", "is_incremental", "last_ts")


def _duration(job: Mapping[str, Any]) -> float | None:
    total = (job["timings"] or {}).get("total")
    if isinstance(total, int | float):
        return float(total)
    started, finished = job["started_at"], job["finished_at"]
    return (finished - started).total_seconds() if started and finished else None


def snapshot_states(names: Iterable[str] | None = None, now: datetime | None = None) -> list[dict]:
    """The status of every snapshot (or of those named): engine/health.py decides its state from live facts; the
    status API, the dashboard and the snapshot pages all show this. Lag in seconds: for an incremental snapshot the
    age of the oldest change its log holds for the next refresh (0 when none waits); for a full one the age of its
    copy (since its last successful refresh)."""
    now = now or timezone.now()
    names = None if names is None else list(names)
    refreshes = last_refreshes(names)
    jobs = JobRun.objects.filter(pk__in=[r["last_job_id"] for r in refreshes.values()])
    last_jobs = {j["id"]: j for j in jobs.values("id", "state", "started_at", "finished_at", "timings", "error")}
    chosen = Snapshot.objects.all() if names is None else Snapshot.objects.filter(name__in=names)
    snapshots = list(chosen.values(*SNAPSHOT_FIELDS))
    # Only a snapshot log has pending rows: an incremental snapshot without one copies everything each refresh.
    logged = {(server, table.lower()) for server, table in SnapshotLog.objects.values_list("server", "table")}
    pending = pending_log_rows(
        s for s in snapshots
        if s["is_incremental"] and s["source_table"] and (s["source_server"], s["source_table"].lower()) in logged
    )  # fmt: skip
    presence = Presence({s["source_server"] for s in snapshots} | {s["dest_server"] for s in snapshots})
    drift = drift_messages(snapshots)
    rows = []
    for s in snapshots:
        refresh = refreshes.get(s["name"], {})
        last_success_at = refresh.get("last_success_at")
        job_id = refresh.get("last_job_id")
        job = last_jobs.get(job_id) if job_id is not None else None
        rows.append({
            "name": s["name"], "source_server": s["source_server"], "source_table": s["source_table"],
            "dest_server": s["dest_server"], "dest_table": s["dest_table"], "incremental": bool(s["is_incremental"]),
            "last_ts": iso(s["last_ts"]), "last_success_at": iso(last_success_at),
            "last_refresh": {"job": job["id"], "state": job["state"], "finished_at": iso(job["finished_at"]),
                             "duration_seconds": _duration(job)} if job else None,
        })  # fmt: skip
        backlog, reachable, problem = live.backlog_fields(pending.get(s["name"]))
        if s["is_incremental"]:
            lag_seconds = live.backlog_seconds(backlog, now)
        else:
            lag_seconds = round((now - last_success_at).total_seconds(), 3) if last_success_at else None
        state = health.snapshot_state(job["state"] if job else None, last_success_at is not None, s["last_ts"])
        state = health.with_reachability(state, reachable)
        broken = presence.gone(s["source_server"], s["source_table"], "source") or (
            presence.gone(s["dest_server"], s["dest_table"], "destination") if s["last_ts"] else ""
        )
        drifted = drift.get(s["name"], "")
        state = health.with_presence(health.FAILING if drifted else state, broken)
        last_error = broken or drifted or (job["error"] if job and job["state"] == JobRun.State.FAILED else "")
        rows[-1].update({
            "state": state, "state_label": health.SNAPSHOT_LABELS[state], "lag_transactions": None,
            "lag_seconds": lag_seconds, "pending_rows": backlog.rows if backlog else None, "reachable": reachable,
            "last_success": iso(last_success_at), "last_error": last_error or problem,
        })  # fmt: skip
    return rows


def refresh_result(stored: object) -> RefreshResult | None:
    """A refresh job's stored result, typed (a FullRefresh or an IncrementalRefresh; None when it has none)."""
    return RefreshResult.from_json(stored) if isinstance(stored, dict) else None

"""Read queries of the snapshot feature for other features' pages and jobs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from django.db.models import Max, Q
from django.db.models.fields.json import KT

from replication_admin.core import live
from replication_admin.engine.schema import TableInfo
from replication_admin.engine.statements import quote_name
from replication_admin.models import (
    JobRun,
    Server,
    Snapshot,
)
from replication_admin.snapshots.shapes import SnapshotError, shape_of


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

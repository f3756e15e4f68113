"""The Health page, /api/status's "components" and /metrics' repladmin_component_up: every process and service
the product depends on, each ok, down or unknown with its one-line cause.

Worker hosts, followers and the scheduler are read from their heartbeats (core/heartbeats.py: REPL_PROCESS); the
Spark service is asked live in the background (a fresh session runs one task) at most every SPARK_CACHE_SECONDS;
a page waits SPARK_WAIT seconds at most for a new answer and otherwise shows the last one while it is younger than
SPARK_KEPT_SECONDS (a busy service takes seconds to run a task: that is not "unknown"), "unknown" after that; a
service port that refuses connections is "down" at once; the catalog is timed on the heartbeats' query. A process that
ended is shown down until a live one of the same kind takes its place on its host (for a follower: the same part),
or for a day."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from replication_admin.core import heartbeats
from replication_admin.core.heartbeats import Kind
from replication_admin.core.spark import ping_service
from replication_admin.core.spark_service import executors_text
from replication_admin.core.times import duration_text, iso
from replication_admin.core.transactions import error_message
from replication_admin.models import ProcessHeartbeat, ReplSubscriber, subscription_label

OK, DOWN, UNKNOWN = "ok", "down", "unknown"
BADGES = {OK: "ok", DOWN: "bad", UNKNOWN: "warn"}
SPARK_WAIT = 1.0
SPARK_CACHE_SECONDS = 10.0
SPARK_KEPT_SECONDS = 60.0


def _first_line(exc: BaseException) -> str:
    lines = error_message(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _row(kind: str, name: str, state: str, cause: str, **extra: Any) -> dict:
    return {"kind": kind, "name": name, "host": "", "pid": None, "state": state, "cause": cause,
            "started_at": None, "last_heartbeat": None, "age_seconds": None, "holds": [], **extra}  # fmt: skip


# --- processes (heartbeats) ---------------------------------------------------------------------------------


def _held(row: ProcessHeartbeat, names: dict[int, str], now: datetime) -> tuple[list[str], str]:
    """What a live process holds, for people, and its one-line cause."""
    details = row.details or {}
    if row.kind == Kind.WORKER:
        jobs = [f"job #{j}" for j in details.get("jobs", [])]
        workers = details.get("workers")
        return jobs, f"{len(jobs)} job(s) running" + (f" on {workers} workers" if workers else "")
    if row.kind == Kind.FOLLOWER:
        subs = [names.get(pk, f"subscription #{pk}") for pk in details.get("subscriptions", [])]
        part = heartbeats.part_of(row)
        leases = details.get("leases") if isinstance(details.get("leases"), dict) else None
        if leases:  # shared out by lease with the other followers (core/follow_leases.py)
            cause = (f"serves {len(subs)} in-sync subscription(s), holding {leases.get('held', 0)} of "
                     f"{leases.get('total', 0)} leases (a fair share is {leases.get('share', 0)} among "
                     f"{leases.get('live', 1)} followers), {details.get('applied', 0)} applied")  # fmt: skip
        else:
            which = f"part {part[0]}/{part[1]} of " if part else ""
            cause = f"serves {which}the in-sync subscriptions: {len(subs)} now, {details.get('applied', 0)} applied"
        if slow := [names.get(pk, f"subscription #{pk}") for pk in details.get("slow", [])]:
            cause += f"; waiting on the subscriber of {', '.join(slow)} (the others go on)"
        return subs, cause
    tick = details.get("tick")
    try:
        ago = duration_text((now - datetime.fromisoformat(tick)).total_seconds()) if tick else ""
    except ValueError:
        ago = ""
    return [], f"last tick {ago} ago" if ago else "ticking"


def _supersedes_key(row: ProcessHeartbeat) -> tuple:
    return row.kind, row.host, heartbeats.part_of(row) if row.kind == Kind.FOLLOWER else None


def process_rows(now: datetime | None = None) -> tuple[list[dict], list[str], float]:
    """The worker hosts, followers and scheduler, live or down, the in-sync subscriptions no live follower serves, and
    the seconds the catalog took to answer the first of the (two or three) queries."""
    now = now or timezone.now()
    started = time.monotonic()
    rows = list(ProcessHeartbeat.objects.filter(heartbeats.recent()).order_by("kind", "host", "pid"))
    answered = time.monotonic() - started
    rows = [r for r in rows if r.kind != Kind.SPARK]  # the Spark service has a row of its own (spark_row)
    followers = heartbeats.live_followers(rows, now)
    wanting = list(heartbeats.wanting_follower().values("id", "subscriber", "server", "account"))
    held_ids = {pk for r in rows if r.kind == Kind.FOLLOWER for pk in (r.details or {}).get("subscriptions", [])}
    named = ReplSubscriber.objects.filter(pk__in=held_ids - {s["id"] for s in wanting})
    names = {s["id"]: subscription_label(s["subscriber"], s["server"], s["account"])
             for s in [*wanting, *named.values("id", "subscriber", "server", "account")]}  # fmt: skip
    live_keys = {_supersedes_key(r) for r in rows if heartbeats.is_alive(r, now)}
    result = []
    for row in rows:
        down = heartbeats.stopped_or_stale(row, now)
        if down and _supersedes_key(row) in live_keys:
            continue  # restarted: a live process of the same kind serves the same on this host
        holds, cause = ([], down) if down else _held(row, names, now)
        label = heartbeats.KIND_LABELS.get(row.kind, row.kind)
        result.append(_row(
            row.kind, f"{label} {row.pid}@{row.host}", DOWN if down else OK, cause, host=row.host, pid=row.pid,
            started_at=iso(row.started_at), last_heartbeat=iso(row.renewed_at),
            age_seconds=round((now - row.renewed_at).total_seconds(), 3), holds=holds,
        ))  # fmt: skip
    kinds = {r.kind for r in rows}
    for kind, missing in ((Kind.WORKER, "jobs stay queued"), (Kind.SCHEDULER, "no scheduled event is handed out")):
        if kind not in kinds:
            label = heartbeats.KIND_LABELS[kind]
            result.append(_row(kind, label, DOWN, f"no {label} has sent a heartbeat in the last day: {missing}"))
    uncovered = [names[s["id"]] for s in wanting if not followers.holds(s["id"])]
    if uncovered and not any(r["kind"] == Kind.FOLLOWER and r["state"] == DOWN for r in result):
        result.append(_row(Kind.FOLLOWER, "follower", DOWN,
                           f"no live follower (replfollow) serves {len(uncovered)} in-sync subscription(s)",
                           holds=uncovered))  # fmt: skip
    order = [Kind.WORKER, Kind.FOLLOWER, Kind.SCHEDULER]
    return sorted(result, key=lambda r: order.index(r["kind"])), uncovered, answered


# --- services -----------------------------------------------------------------------------------------------


@dataclass
class _SparkProbe:
    """The last answer of the Spark service, and the probe under way (one at a time per process)."""

    guard: threading.Lock = field(default_factory=threading.Lock)
    answer: tuple[str, str] | None = None
    at: float = float("-inf")
    running: threading.Thread | None = None

    def _probe(self) -> None:
        try:
            info = ping_service()
            cores = f"{info['slots']} cores" if info["slots"] else "cores not reported"
            answer = (OK, f"answers: master {info['master']}, {cores}, one task in {info['seconds']:.1f} s")
        except Exception as exc:
            answer = (DOWN, f"does not answer: {_first_line(exc)}")
        with self.guard:
            self.answer, self.at, self.running = answer, time.monotonic(), None

    def state(self, wait: float = SPARK_WAIT) -> tuple[str, str]:
        refused = _refused(str(settings.SPARK_REMOTE))
        if refused:
            return DOWN, f"does not answer: {refused}"
        with self.guard:
            if self.answer is not None and time.monotonic() - self.at < SPARK_CACHE_SECONDS:
                return self.answer
            if self.running is None:
                self.running = threading.Thread(target=self._probe, name="spark-probe", daemon=True)
                self.running.start()
            probe = self.running
        probe.join(wait)
        with self.guard:
            age = time.monotonic() - self.at
            if self.answer is not None and age < SPARK_KEPT_SECONDS:
                state, cause = self.answer
                return state, cause if age < SPARK_CACHE_SECONDS else f"{cause} ({age:.0f} s ago)"
            if self.answer is None:
                return UNKNOWN, f"asked; no answer within {wait:g} s yet (a busy service takes seconds to run a task)"
        return UNKNOWN, f"no answer for {age:.0f} s"


def _refused(remote: str) -> str:
    """Why nothing accepts connections at the service's sc://host:port ("" when something does, or it is not
    known): a service that is gone is told at once, not after a probe's wait."""
    host, _, port = remote.removeprefix("sc://").partition("/")[0].rpartition(":")
    if not host or not port.isdigit():
        return ""
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return ""
    except ConnectionRefusedError:
        return f"nothing accepts connections at {host}:{port}"
    except OSError:
        return ""  # slow or unresolvable: the probe tells


SPARK = _SparkProbe()


def spark_row() -> dict:
    remote = settings.SPARK_REMOTE
    if not remote:
        return _row("spark", "Spark (embedded)", UNKNOWN,
                    "embedded: each worker process starts its own local Spark; nothing to ask from here")  # fmt: skip
    state, cause = SPARK.state()
    extra: dict[str, Any] = {"master_alive": None, "executors": None, "cores": None}
    now = timezone.now()
    beat = next((r for r in heartbeats.alive(Kind.SPARK, now) if (r.details or {}).get("remote") == remote), None)
    beat = beat or max(heartbeats.alive(Kind.SPARK, now), key=lambda r: r.renewed_at, default=None)
    if beat is not None:  # what the service's supervisor sees (core/spark_service.py)
        details = beat.details or {}
        extra = {key: details.get(key) for key in extra}
        cause = f"{cause}; {executors_text(details)}"
        standalone = str(details.get("master", "")).startswith("spark://")
        if state == OK and standalone and details.get("executors") == 0:
            state = DOWN  # it answers, but Spark jobs wait for executors
        elif state == OK and standalone and details.get("master_alive") is False:
            state = UNKNOWN  # jobs run on the executors it has; none lost comes back until the master does
    return _row("spark", f"Spark service {remote}", state, cause, host=remote, **extra)


def catalog_row(answered: float) -> dict:
    """The catalog answered the heartbeats' query (had it not, the page would not be): how fast."""
    vendor = connection.vendor
    return _row("catalog", f"catalog ({vendor})", OK, f"answers in {answered * 1000:.0f} ms")


def components(now: datetime | None = None) -> tuple[list[dict], list[str]]:
    """Every component (the worker hosts, followers and scheduler, the Spark service and the catalog), and the
    in-sync subscriptions no live follower serves."""
    processes, uncovered, answered = process_rows(now)
    return [*processes, spark_row(), catalog_row(answered)], uncovered


def component_rows(now: datetime | None = None) -> list[dict]:
    return components(now)[0]

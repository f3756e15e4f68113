"""Queueing and cancelling background jobs."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from replication_admin.core.audit import Actor, record, require
from replication_admin.models import AuditEntry, JobRun, Server

JOB_KINDS = {
    "compare": "Compare tables",
    "snapshot_refresh": "Refresh a snapshot",
    "snapshot_repair": "Repair a snapshot",
    "bidir_init": "Initial copy to a subscriber",
    "bidir_sync": "Sync a bi-directional publication",
}


def enqueue(job: JobRun, sync: bool | None = None) -> None:
    """Hand a JobRun to django-q2 once the row is committed (the worker reads it by id).

    In sync mode django-q2 runs the task right here (REPLADMIN_JOBS_SYNC, or `sync=True` for callers
    that need the outcome, such as replsql and the scheduler)."""
    sync = settings.JOBS_SYNC if sync is None else sync

    def send() -> None:
        task_id = async_task(
            "replication_admin.tasks.run_job",
            job.pk,
            task_name=f"job-{job.pk}-{job.kind}",
            group=job.kind,
            sync=sync,
        )
        JobRun.objects.filter(pk=job.pk, task_id="").update(task_id=str(task_id or "")[:64])

    if sync:
        send()
    else:
        transaction.on_commit(send)


def do_start_job(
    actor: Actor,
    kind: str,
    target: str,
    params: dict,
    perm: str = "replication_admin.operate",
    sync: bool | None = None,
) -> JobRun:
    require(actor, perm, f"job.{kind}", target)
    with transaction.atomic():
        job = JobRun.objects.create(
            kind=kind,
            target=target,
            params=params,
            created_by=actor.user if actor.user is not None and actor.user.is_authenticated else None,
        )
        record(actor, f"job.{kind}", target, detail={"job": job.pk, **params})
    enqueue(job, sync=sync)
    return JobRun.objects.get(pk=job.pk) if sync or (sync is None and settings.JOBS_SYNC) else job


def do_start_compare(actor: Actor, left: Server, left_table: str, right: Server, right_table: str) -> JobRun:
    target = f"{left.name}.{left_table} ↔ {right.name}.{right_table}"
    return do_start_job(
        actor,
        "compare",
        target,
        {
            "left_server": left.name,
            "left_table": left_table,
            "right_server": right.name,
            "right_table": right_table,
        },
    )


def do_compare_snapshot(actor: Actor, snapshot, sync: bool | None = None) -> JobRun:
    """Compare a snapshot's destination with its source query."""
    target = f"{snapshot.name} ↔ its source"
    params = {
        "snapshot": snapshot.name,
        "left_server": snapshot.source_server_id,
        "right_server": snapshot.dest_server_id,
        "right_table": snapshot.dest_table,
    }
    return do_start_job(actor, "compare", target, params, sync=sync)


def do_cancel_job(actor: Actor, job: JobRun) -> bool:
    """Cancel a queued job, or ask a running one to stop at its next progress report."""
    require(actor, "replication_admin.operate", "job.cancel", str(job))
    with transaction.atomic():
        updated = JobRun.objects.filter(pk=job.pk, state__in=[JobRun.State.QUEUED, JobRun.State.RUNNING]).update(
            state=JobRun.State.CANCELLED, finished_at=timezone.now(), message="cancelled by " + actor.username
        )
        record(actor, "job.cancel", str(job), AuditEntry.Outcome.OK if updated else AuditEntry.Outcome.ERROR)
    return bool(updated)

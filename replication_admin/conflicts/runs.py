"""The conflicts feature's job: a dry run of a resolver chain over recorded conflicts, with its parameters and
result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse

from jobs.resolve import decide_rows
from replication_admin.conflicts.chains import (
    DRY_RUN_LIMIT,
    MAX_DRY_RUN_LIMIT,
    ConflictError,
    conflict_input,
    proposed_spec,
    table_columns,
)
from replication_admin.core.conflicts import resolver_chain
from replication_admin.core.jobs import JobParams, JobResult, JobRunner, Subject, register, run_counts
from replication_admin.core.spark import spark_session
from replication_admin.engine.resolvers import ResolverError
from replication_admin.models import (
    ConflictBackup,
    Server,
    SnapshotConflictResolver,
    SnapshotPublication,
    TransactionalConflictResolver,
)
from replication_admin.transactional import selectors as trx_selectors


@dataclass(frozen=True)
class DryRunParams(JobParams):
    item: str
    server: str
    table: str
    limit: int = DRY_RUN_LIMIT
    proposed: dict[str, Any] | None = None
    kind: str = "snapshot"  # or "transactional": which resolvers (SYS_SNAPSHOT_CR / SYS_REPL_CR) decide


@dataclass(frozen=True)
class DryRunRow(JobResult):
    """One recorded conflict decided again: what was decided then (by which resolver) and what would be now."""

    conflict: int = 0
    type: str = ""
    recorded_decision: int | None = None
    recorded_resolver: str | None = None
    decision: int | None = None
    resolver: str | None = None
    resolver_id: int | None = None
    final: Any = None
    note: str = ""
    same: bool = False


@dataclass(frozen=True)
class DryRunResult(JobResult):
    """A dry run: each recorded conflict decided again, how many decisions would change, of which item."""

    rows: list[DryRunRow] = field(default_factory=list)
    changed: int = 0
    conflicts: int = 0
    item: str = ""

    def counts(self) -> dict[str, int]:
        return run_counts(read=self.conflicts, written=0, conflicts=len(self.rows))


@register
class ResolverDryRun(JobRunner[DryRunParams]):
    """Decide the latest recorded conflicts of an item again, as a sync would now."""

    kind = "resolver_dry_run"
    label = "Dry run of conflict resolvers"
    params_type = DryRunParams
    result_type = DryRunResult

    @classmethod
    def subject(cls, params: dict[str, Any]) -> Subject | None:
        name = f"resolvers of {params['item']}"
        if params.get("kind") == "transactional":
            item = trx_selectors.table_item(params["server"], params["table"])
            return Subject(name, reverse("trx-items-resolvers", args=[item.pk]) if item is not None else "")
        publication = SnapshotPublication.objects.filter(item=params["item"]).first()
        return Subject(name, reverse("publications-resolvers", args=[publication.pk]) if publication else "")

    def run(self) -> DryRunResult:
        params, reporter = self.params, self.reporter
        item = params.item
        model = TransactionalConflictResolver if params.kind == "transactional" else SnapshotConflictResolver
        try:
            limit = max(1, min(int(params.limit or DRY_RUN_LIMIT), MAX_DRY_RUN_LIMIT))
        except (TypeError, ValueError):
            raise ConflictError(f"the limit must be a number, not {params.limit!r}") from None
        with reporter.phase("introspect"):
            server = Server.objects.filter(name=params.server).first()
            if server is None:
                raise ConflictError(f"server {params.server!r} is not registered")
            columns = table_columns(server, params.table)
        chain = resolver_chain(item, model)
        try:
            if params.proposed:
                proposed = proposed_spec(params.proposed, chain, columns)
                chain = [s for s in chain if proposed.id is None or s.id != proposed.id] + [proposed]
                reporter.log(
                    f"trying {proposed.name} ({proposed.cr_type}, order {proposed.order}): {proposed.expression}"
                )
        except ResolverError as exc:
            raise ConflictError(str(exc)) from None
        kind = "transactional" if model is TransactionalConflictResolver else "snapshot"
        backups = list(ConflictBackup.objects.filter(item=item, kind=kind).order_by("-created_at", "-id")[:limit])
        reporter.log(f"{len(backups)} recorded conflict(s) of {item}, {len(chain)} resolver(s)")
        decided: list[dict] = []
        if backups:
            with reporter.phase("spark_session"):
                spark = spark_session()
            with reporter.phase("spark_job"):
                try:
                    decided = decide_rows(spark, [conflict_input(b) for b in backups], chain, columns)
                except ResolverError as exc:
                    raise ConflictError(str(exc)) from None
        rows = [
            DryRunRow(
                conflict=backup.pk,
                type=backup.conflict_type,
                recorded_decision=backup.decision,
                recorded_resolver=backup.resolver,
                decision=decision["decision"],
                resolver=decision["resolver"],
                resolver_id=decision["resolver_id"],
                final=decision["final"],
                note=decision["note"],
                same=decision["decision"] == backup.decision,
            )
            for backup, decision in zip(backups, decided, strict=True)
        ]
        changed = sum(1 for r in rows if not r.same)
        reporter.progress(len(rows), max(len(rows), 1), f"{changed} of {len(rows)} decision(s) would change")
        return DryRunResult(rows=rows, changed=changed, conflicts=len(rows), item=item)

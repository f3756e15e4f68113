"""The compare feature's statement: REPL_VALIDATE, run on the subscriber (the context server), a validation job per
table (compare/validation.py), each outcome in one line."""

from __future__ import annotations

from replication_admin.compare import actions
from replication_admin.compare.selectors import ValidationResult, compare_result
from replication_admin.core.statement_handlers import Caller, Outcome, handles
from replication_admin.engine import statements as st
from replication_admin.models import JobRun
from replication_admin.transactional import actions as trx


def _said(job: JobRun) -> tuple[bool, str]:
    job = JobRun.objects.get(pk=job.pk)
    table = job.params.get("table", "")
    result = compare_result(job) if job.state == JobRun.State.SUCCEEDED else None
    if isinstance(result, ValidationResult):
        said = f"{table}: {result.verdict}, {result.drift} key(s) differ ({result.slice_text})"
        return True, said + (f"; {result.note}" if result.note else "")
    if job.state in JobRun.FINISHED:
        return False, f"{table}: validation {job.state}: {job.error}"
    return True, f"{table}: queued as job #{job.pk}"


@handles(st.Validate)
def validate(statement: st.Validate, caller: Caller) -> Outcome:
    sub = trx.find_subscription(caller.context_server("repl_validate"), statement.server, statement.account)
    jobs = actions.do_validate(caller.actor, sub, statement.table, sync=caller.sync)
    said = [_said(job) for job in jobs]
    details = {"jobs": [job.pk for job in jobs]}
    return Outcome(all(ok for ok, _ in said), "; ".join(text for _, text in said), jobs[-1].pk, details)

"""The one base class of errors a person can act on. Every feature's own error subclasses it, so a view,
the statement console or the job runner shows its message as it is: one line naming what is wrong."""

from __future__ import annotations


class ReplicationError(ValueError):
    """A request that cannot be carried out; the message says why."""


class LockBusy(ReplicationError):
    """The item is being applied by another job (`holder_job_id`, when a job holds it)."""

    def __init__(self, message: str, holder_job_id: int | None = None, waiting: str = "") -> None:
        super().__init__(message)
        self.holder_job_id = holder_job_id
        # What a job waiting behind the holder says meanwhile ("waiting for job #7, which is applying …").
        self.waiting = waiting or f"waiting: {message}"

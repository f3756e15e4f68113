"""The one base class of errors a person can act on. Every feature's own error subclasses it, so a view,
the statement console or the job runner shows its message as it is: one line naming what is wrong."""

from __future__ import annotations


class ReplicationError(ValueError):
    """A request that cannot be carried out; the message says why."""

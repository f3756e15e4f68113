from replication_admin.models.catalog import (
    ReplAccount,
    ReplSubscriber,
    ScheduledEvent,
    Server,
    Snapshot,
    SnapshotConflictResolver,
    SnapshotLog,
    SnapshotPublication,
    SnapshotSubscription,
    TpGrant,
    TpItem,
    TransactionalConflictResolver,
)
from replication_admin.models.console import REGISTRY_DEFAULTS, AuditEntry, JobRun, RegistryEntry

__all__ = [
    "REGISTRY_DEFAULTS",
    "AuditEntry",
    "JobRun",
    "RegistryEntry",
    "ReplAccount",
    "ReplSubscriber",
    "ScheduledEvent",
    "Server",
    "Snapshot",
    "SnapshotConflictResolver",
    "SnapshotLog",
    "SnapshotPublication",
    "SnapshotSubscription",
    "TpGrant",
    "TpItem",
    "TransactionalConflictResolver",
]

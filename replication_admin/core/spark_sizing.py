"""How wide the Spark jobs go: the cluster's cores and the per-server connection cap, as one
`jobs.jdbc.Parallelism` handed to every job plan (the jobs size their partitions from it and the rows)."""

from __future__ import annotations

from django.conf import settings

from jobs.jdbc import Parallelism
from replication_admin.core.spark import task_slots


def spark_cores() -> int:
    """The cores the Spark cluster runs tasks on: SPARK_CORES when set, else the task slots of the Spark
    service (or of the embedded session): the local master's threads, spark.cores.max or the standalone
    cluster's registered cores."""
    configured = getattr(settings, "SPARK_CORES", None)
    if configured:
        return max(int(configured), 1)
    return task_slots()


def max_connections_per_server() -> int:
    return max(int(getattr(settings, "MAX_CONNECTIONS_PER_SERVER", 4)), 1)


def parallelism() -> Parallelism:
    return Parallelism(cores=spark_cores(), connections=max_connections_per_server())

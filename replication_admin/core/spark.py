"""Spark as the control plane sees it: the session's configuration from settings, and JDBC endpoints
of registered servers for the jobs in jobs/."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

from jobs.session import SparkConfig, get_spark
from jobs.snapshot_refresh import Endpoint
from replication_admin.core import connections, transactions
from replication_admin.models import Server

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_config() -> SparkConfig:
    return SparkConfig(
        master=settings.SPARK_MASTER,
        driver_memory=settings.SPARK_DRIVER_MEMORY,
        jars=tuple(settings.JDBC_JARS),
    )


def spark_session() -> SparkSession:
    return get_spark(spark_config())


def endpoint(server: Server, readonly: bool = False) -> Endpoint:
    """Where a Spark job reads (readonly) or writes a server's tables."""
    transactions.note_spark_server(server)  # a JDBC failure naming no host is put down to the job's servers
    return Endpoint(dialect=server.dialect, jdbc=connections.jdbc_endpoint(server, readonly=readonly))

"""A restarted or lost Spark service is a retryable fault, whatever pyspark calls it, and the job's retry opens
a new session; the job's retries get their whole window from the fault, however long the attempt ran."""

from __future__ import annotations

import pytest
from pyspark.errors.exceptions.connect import SparkConnectException, SparkConnectGrpcException

from replication_admin.core import transactions
from replication_admin.core.transactions import is_retryable, is_spark_service_fault, one_line

LOST_SESSIONS = [
    SparkConnectException(errorClass="NO_ACTIVE_SESSION", messageParameters={}),
    SparkConnectGrpcException(
        "(org.apache.spark.SparkSQLException) [INVALID_HANDLE.SESSION_CHANGED] The existing "
        "Spark server driver instance has restarted. Please reconnect."
    ),
    SparkConnectGrpcException("[INVALID_HANDLE.SESSION_NOT_FOUND] The handle 1234 is invalid. Session not found."),
    SparkConnectGrpcException(
        "<_MultiThreadedRendezvous of RPC that terminated with: status = "
        'StatusCode.UNAVAILABLE details = "failed to connect to all addresses">'
    ),
    SparkConnectGrpcException("Job 12 cancelled because SparkContext was shut down"),
]


@pytest.mark.parametrize("exc", LOST_SESSIONS, ids=lambda e: type(e).__name__ + str(e)[:30])
def test_a_lost_or_restarted_spark_service_is_a_retryable_fault_named_after_the_service(exc, settings):
    settings.SPARK_REMOTE = "sc://spark-host:15002"
    assert is_spark_service_fault(exc) and is_retryable(exc)
    assert one_line(exc).startswith("Spark service sc://spark-host:15002: "), one_line(exc)


def test_a_spark_error_of_the_work_itself_is_not_a_service_fault():
    exc = SparkConnectGrpcException("[TABLE_OR_VIEW_NOT_FOUND] The table or view `t` cannot be found.")
    assert not is_spark_service_fault(exc) and not is_retryable(exc)


def test_a_service_fault_drops_the_jobs_cached_session_before_the_retry(settings, monkeypatch):
    dropped: list[BaseException] = []
    monkeypatch.setattr(transactions, "on_spark_service_fault", dropped.append)
    settings.RETRY_SECONDS = 30
    monkeypatch.setattr(transactions, "WAIT_FIRST", 0.0)
    calls = []

    def run() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise LOST_SESSIONS[len(calls) - 1]
        return "done"

    assert transactions.job_retries(run, lambda line: None) == "done"
    assert len(calls) == 3 and len(dropped) == 2


def test_a_jobs_retry_window_counts_from_the_fault_not_from_a_long_attempts_start(settings, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(transactions.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(transactions, "WAIT_FIRST", 0.0)
    monkeypatch.setattr(transactions, "JITTER", 0.0)
    settings.RETRY_SECONDS = 60
    calls = []

    def run() -> str:
        calls.append(1)
        if len(calls) == 1:
            clock[0] += 300  # minutes of work, then the service restarts
            raise LOST_SESSIONS[0]
        clock[0] += 10
        if len(calls) < 4:
            raise LOST_SESSIONS[3]  # still down
        return "done"

    assert transactions.job_retries(run, lambda line: None) == "done"
    assert len(calls) == 4

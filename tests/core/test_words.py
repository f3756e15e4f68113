"""Values shown to people are in plain words, never Python's repr."""

from __future__ import annotations

from replication_admin.core.words import plain


def test_a_jobs_result_reads_as_words():
    assert plain({"rows": 4, "seconds": 1.2}) == "rows 4, seconds 1.2"
    assert plain({"applied_transactions": 3}) == "applied transactions 3"


def test_a_list_of_jobs_reads_one_after_another():
    assert plain([{"job": 13, "state": "succeeded"}, {"job": 14, "state": "failed"}]) == (
        "job 13, state succeeded; job 14, state failed"
    )
    assert plain(["a", "b"]) == "a, b"


def test_nothing_and_flags_read_as_words():
    assert plain(None) == "none" and plain(True) == "yes" and plain({"id": 7}) == "id 7"
    assert "{" not in plain({"key": {"id": 7}}) and "[" not in plain({"jobs": [1, 2]})

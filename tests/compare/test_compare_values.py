"""How a compare's listed values are kept and shown: bounded, NULL apart from the empty string, binary as hex,
markup as text, long values folded; and the repair page's answers to a choice it cannot act on."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.compare import VALUE_LIMIT, stored_value
from replication_admin.models import AuditEntry, JobRun
from replication_admin.templatetags.console import compared_value


def test_a_long_value_is_kept_cut_with_its_length_and_short_ones_and_null_as_they_are():
    assert stored_value(None) is None
    assert stored_value("") == ""
    assert stored_value("x" * VALUE_LIMIT) == "x" * VALUE_LIMIT
    assert stored_value("表" * (VALUE_LIMIT + 5)) == {"text": "表" * VALUE_LIMIT, "length": VALUE_LIMIT + 5}


def test_values_are_shown_safely_null_apart_from_the_empty_string_and_binary_as_hex():
    assert compared_value(None) == '<span class="value-null">NULL</span>'
    assert "(empty)" in compared_value("") and "value-null" not in compared_value("")
    assert compared_value("00ff", "binary") == '<span class="value">0x00ff</span>'
    assert compared_value("<b>x</b> & 'y'") == '<span class="value">&lt;b&gt;x&lt;/b&gt; &amp; &#x27;y&#x27;</span>'
    folded = compared_value("a" * 100)
    assert folded.startswith('<details class="value-long"><summary>' + "a" * 60 + "…</summary>")
    assert "a" * 100 in folded
    cut = compared_value({"text": "b" * VALUE_LIMIT, "length": 5000})
    assert f"(first {VALUE_LIMIT} of 5000 characters)" in cut


@pytest.fixture
def compared(db) -> JobRun:
    return JobRun.objects.create(
        kind="compare", target="a.t ↔ b.t", state=JobRun.State.SUCCEEDED, finished_at=timezone.now(),
        params={"left_server": "a", "left_table": "t", "right_server": "b", "right_table": "t"},
        result={"equal": False, "rows_total": 1, "key_columns": ["id"], "compared_columns": ["v"],
                "families": {"id": "integer", "v": "binary"},
                "rows": [{"kind": "different", "key": {"id": "1"}, "left_key": ["1"], "right_key": ["1"], "columns": ["v"], "left": {"v": "00ff"},
                          "right": {"v": None}}]},
    )  # fmt: skip


def test_the_job_page_lists_the_values_side_by_side_with_a_box_per_key_for_an_operator_only(
    compared, operator_client, viewer_client
):
    page = operator_client.get(reverse("jobs-detail", args=[compared.pk])).content.decode()
    assert 'data-key="id=1"' in page and "0x00ff" in page and "value-null" in page
    assert 'name="row" value="0"' in page and 'id="select-all"' in page and 'id="compare-again"' in page
    viewer_page = viewer_client.get(reverse("jobs-detail", args=[compared.pk])).content.decode()
    assert "0x00ff" in viewer_page and 'name="row"' not in viewer_page and 'id="compare-again"' not in viewer_page


def test_a_choice_the_compare_does_not_list_is_sent_back_with_a_message_and_starts_nothing(compared, operator_client):
    address = reverse("jobs-compare-repair", args=[compared.pk])
    for data in ({}, {"row": "7"}, {"rows": "0,1"}):
        response = operator_client.post(address, data, follow=True)
        assert response.redirect_chain[-1][0] == reverse("jobs-detail", args=[compared.pk])
        text = response.content.decode()
        assert "choose at least one key" in text or "lists 1 key(s)" in text
    running = JobRun.objects.create(kind="compare", target="x", state=JobRun.State.RUNNING)
    answer = operator_client.get(reverse("jobs-compare-repair", args=[running.pk]), {"row": "0"}, follow=True)
    assert "is not a finished compare" in answer.content.decode()
    assert not JobRun.objects.filter(kind="compare_repair").exists()
    assert not AuditEntry.objects.filter(action="job.compare_repair", outcome="ok").exists()

"""The conflict detection a pull's apply repeats, under its locks, for changes whose publisher row moved:
the reference's rules, row by row (jobs.bidir_sync classifies the same way on Spark)."""

from __future__ import annotations

import pytest

from replication_admin.engine.bidir_sql import classify

P1, P2, S1 = "pub@1", "pub@2", "sub@1"


@pytest.mark.parametrize(
    ("op", "present", "old", "pub_here", "pub_guid", "expected"),
    [
        ("I", True, None, False, None, ("I", None, "W")),  # an insert of a new key
        ("I", True, None, True, P1, ("I", "I", "W")),  # the key exists: a uniqueness conflict
        ("U", True, P1, True, P1, ("U", None, "W")),  # made on the version the publisher has
        ("U", True, P1, True, P2, ("U", "U", "W")),  # the publisher's row moved: an update conflict
        ("U", True, P1, False, None, ("U", "D", "W")),  # the publisher deleted it: a delete conflict
        ("U", False, P1, True, P1, ("D", None, "D")),  # gone on the subscriber since: a delete
        ("D", False, P1, True, P1, ("D", None, "D")),  # a delete of the version the publisher has
        ("D", False, P1, True, P2, ("D", "D", "D")),  # a delete of a row the publisher changed
        ("D", False, P1, False, None, ("D", "D", "N")),  # deleted on both sides
        ("D", False, None, False, None, ("D", None, "N")),  # a delete of a row the publisher never had
        ("U", True, P1, True, S1, ("U", None, "N")),  # the publisher already has this very version
    ],
)
def test_a_pulled_change_is_classified_against_the_publishers_row_as_the_reference_says(
    op, present, old, pub_here, pub_guid, expected
):
    kind = classify(op, present, old, S1, pub_here, pub_guid)
    assert (kind.eff_op, kind.conflict, kind.action) == expected

"""How wide the data plane reads and writes: partitions from the cluster's cores, the rows and the
per-server connection cap; row numbers of an initial copy sized from the read's partition count."""

from __future__ import annotations

import pytest

from jobs.jdbc import MIN_ROWS_PER_PARTITION, Parallelism, modulo_predicates, partition_count
from jobs.snapshot_refresh import row_number_bits


@pytest.mark.parametrize(
    ("rows", "cores", "connections", "expected"),
    [
        (0, 2, 4, 1),
        (MIN_ROWS_PER_PARTITION, 8, 8, 1),  # never a tiny partition
        (2 * MIN_ROWS_PER_PARTITION, 8, 8, 2),
        (300_000, 2, 4, 4),  # two tasks per core
        (1_000_000, 2, 4, 4),
        (1_000_000, 1, 4, 2),
        (1_000_000, 16, 4, 4),  # the server's connection cap
        (1_000_000, 16, 64, 20),  # no partition below the minimum
        (100_000_000, 2, 64, 50),  # very large tables are split further
        (10_000_000, 4, 1, 1),
    ],
)
def test_partitions_follow_cores_rows_and_the_connection_cap(rows, cores, connections, expected):
    assert partition_count(rows, cores, connections) == expected
    assert Parallelism(cores, connections).partitions(rows) == expected


def test_modulo_predicates_cover_every_key_once():
    predicates = modulo_predicates("k0", 3)
    assert predicates == ["ABS(k0 % 3) = 0", "ABS(k0 % 3) = 1", "ABS(k0 % 3) = 2"]
    for key in range(-10, 11):
        # Python's % differs from SQL's on negative numbers: SQL truncates toward zero.
        sql_mod = abs(key) % 3
        assert sum(sql_mod == i for i in range(3)) == 1


@pytest.mark.parametrize(("partitions", "bits"), [(1, 0), (2, 1), (3, 2), (4, 2), (8, 3), (9, 4), (64, 6)])
def test_row_numbers_keep_below_2_31_with_as_few_partition_bits_as_needed(partitions, bits):
    partition_bits, place_bits = row_number_bits(partitions)
    assert partition_bits == bits and partition_bits + place_bits == 31
    assert (partitions - 1) << place_bits < 2**31

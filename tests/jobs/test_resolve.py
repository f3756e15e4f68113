"""Deciding conflicts on a real Spark: every code and type, defaults, chain order, assignments for code 2,
invalid codes, typed comparisons, missing publisher rows, failures that name their resolver."""

from __future__ import annotations

import pytest

from jobs.resolve import decide_rows
from jobs.session import is_connect
from replication_admin.engine.resolvers import ResolverColumn, ResolverError, ResolverSpec, generated_resolver

pytestmark = [pytest.mark.spark]

COLUMNS = [
    ResolverColumn("item_id", "bigint", True),
    ResolverColumn("name", "string", False),
    ResolverColumn("price", "decimal(10,2)", False),
    ResolverColumn("ROWGUID", "string", False),
    ResolverColumn("updated", "timestamp", False),
    ResolverColumn('ab "cd', "bigint", False),
    ResolverColumn("weight", "double", False),
]

MINIMAL_PRICE = "CASE WHEN pub.price < new.price THEN 3 WHEN pub.price > new.price THEN 1 ELSE 0 END"
CHANGE_TO_MINIMAL = "CASE WHEN pub.price < new.price THEN 2 ELSE 1 END"


def row(item_id, name="n", price="10.00", guid="pub@1", updated="2024-01-01 12:00:00.000000", abcd=1, weight=1.5):
    return {
        "item_id": item_id,
        "name": name,
        "price": price,
        "ROWGUID": guid,
        "updated": updated,
        'ab "cd': abcd,
        "weight": weight,
    }


def conflict(key, ctype, pub, new, old_guid="sub@0"):
    return {"key": key, "type": ctype, "pub": pub, "new": new, "old": {"ROWGUID": old_guid}}


def spec(rid, cr_type, order, expression, assignments=None, name=None):
    return ResolverSpec(rid, name or f"r{rid}", cr_type, order, expression, assignments or {})


def update(key, pub_price, new_price, **kw):
    return conflict(key, "U", row(key, price=pub_price, **kw), row(key, price=new_price, guid="sub@1"))


# --- codes, defaults and order ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ctype", "code"),
    [("I", 1), ("I", 2), ("I", 3), ("U", 1), ("U", 2), ("U", 3), ("D", 1), ("D", 3), ("D", 5)],
)
def test_every_valid_code_decides(spark, ctype, code):
    new = row(7, guid="sub@1") if ctype != "D" else {"item_id": 7, "ROWGUID": "sub@1"}
    chain = [spec(11, ctype, 10, str(code), name="decider")]
    [result] = decide_rows(spark, [conflict("k7", ctype, row(7), new)], chain, COLUMNS)
    assert result["key"] == "k7"
    assert result["decision"] == code
    assert (result["resolver_id"], result["resolver"]) == (11, "decider")
    assert result["note"] == ""
    assert result["final"] == (None if ctype == "D" else new)


def test_no_decision_means_publisher_wins_for_inserts_and_updates_and_ignore_for_deletes(spark):
    conflicts = [
        conflict(1, "I", row(1), row(1, guid="s@1")),
        conflict(2, "U", row(2), row(2, guid="s@1")),
        conflict(3, "D", row(3), {"item_id": 3}),
    ]
    # Without resolvers, and with resolvers that only say 0 (or belong to other types).
    for chain in ([], [spec(1, "I", 1, "0"), spec(2, "U", 1, "0"), spec(3, "D", 1, "0")]):
        results = decide_rows(spark, conflicts, chain, COLUMNS)
        assert [(r["key"], r["decision"], r["resolver"], r["resolver_id"]) for r in results] == [
            (1, 3, "default", None),
            (2, 3, "default", None),
            (3, 5, "default", None),
        ]
    only_deletes = [spec(9, "D", 1, "1")]
    results = decide_rows(spark, conflicts, only_deletes, COLUMNS)
    assert [r["decision"] for r in results] == [3, 3, 1]


def test_resolvers_run_in_order_then_id_and_the_first_non_zero_decides(spark):
    chain = [
        spec(5, "U", 30, "3"),
        spec(4, "U", 20, "CASE WHEN pub.price > 100 THEN 1 ELSE 0 END"),
        spec(3, "U", 10, "CASE WHEN pub.name = 'zero' THEN 0 WHEN pub.name = 'tie' THEN 0 ELSE 2 END"),
        spec(2, "U", 20, "CASE WHEN pub.name = 'tie' THEN 1 ELSE 0 END"),  # same order as r4, lower id: first
    ]
    conflicts = [
        conflict("a", "U", row(1, name="other"), row(1)),
        conflict("b", "U", row(2, name="zero", price="500.00"), row(2)),
        conflict("c", "U", row(3, name="zero"), row(3)),
        conflict("d", "U", row(4, name="tie", price="500.00"), row(4)),
    ]
    results = decide_rows(spark, conflicts, chain, COLUMNS)
    assert [(r["key"], r["decision"], r["resolver"]) for r in results] == [
        ("a", 2, "r3"),
        ("b", 1, "r4"),
        ("c", 3, "r5"),
        ("d", 1, "r2"),
    ]


def test_each_type_uses_its_own_chain_in_one_call_and_keys_come_back_unchanged_in_input_order(spark):
    chain = [spec(1, "I", 1, "1"), spec(2, "U", 1, "3"), spec(3, "D", 1, "5")]
    keys = [[i, "x"] if i % 3 == 0 else {"id": i} if i % 3 == 1 else i for i in range(60)]
    types = ["I", "U", "D"]
    conflicts = [
        conflict(k, types[i % 3], row(i), row(i) if i % 3 != 2 else {"item_id": i}) for i, k in enumerate(keys)
    ]
    results = decide_rows(spark, conflicts, chain, COLUMNS)
    assert [r["key"] for r in results] == keys
    assert [r["decision"] for r in results] == [{"I": 1, "U": 3, "D": 5}[types[i % 3]] for i in range(60)]


def test_a_call_is_one_spark_job_and_an_empty_list_starts_none(spark):
    assert decide_rows(None, [], [spec(1, "U", 1, "3")], COLUMNS) == []
    chain = [spec(1, "U", 1, MINIMAL_PRICE), spec(2, "U", 2, "2", {"price": "(pub.price + new.price) / 2"})]
    if is_connect(spark):
        # On the Spark service: count the operations the server reports progress for.
        operations: set[str] = set()

        def seen(stages, inflight_tasks, operation_id, done):
            operations.add(operation_id)

        spark.registerProgressHandler(seen)
        try:
            decide_rows(spark, [update(i, "9.50", "10.00") for i in range(20)], chain, COLUMNS)
        finally:
            spark.removeProgressHandler(seen)
        assert len(operations) == 1
        return
    sc = spark.sparkContext
    group = "resolve-one-job"
    sc.setJobGroup(group, "decide")
    try:
        decide_rows(spark, [update(i, "9.50", "10.00") for i in range(20)], chain, COLUMNS)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(sc.statusTracker().getJobIdsForGroup(group)) == 1


# --- code 2 and its assignments ------------------------------------------------------------------------


def test_the_references_change_to_minimal_price_resolver(spark):
    chain = [spec(1, "U", 10, CHANGE_TO_MINIMAL, {"price": "pub.price"})]
    results = decide_rows(spark, [update(1, "9.50", "10.00"), update(2, "12.00", "10.00")], chain, COLUMNS)
    assert results[0]["decision"] == 2
    assert results[0]["final"] == {**row(1, price="9.50", guid="sub@1")}
    assert results[1]["decision"] == 1
    assert results[1]["final"] == row(2, price="10.00", guid="sub@1")


def test_generated_ave_sets_the_average_and_other_resolvers_assignments_are_not_applied(spark):
    expression, assignments = generated_resolver("ave", "U", "price", COLUMNS)
    weight_expr, weight_assign = generated_resolver("ave", "U", "weight", COLUMNS)
    chain = [
        spec(1, "U", 10, "CASE WHEN pub.name = 'ave' THEN 0 ELSE 2 END", {"name": "concat(pub.name, '+', new.name)"}),
        spec(2, "U", 20, expression, assignments),
        spec(3, "U", 30, weight_expr, weight_assign),
    ]
    pub_a, new_a = row(1, name="ave", price="10.00", weight=1.0), row(1, name="b", price="20.01", weight=3.0)
    pub_b, new_b = row(2, name="x", price="1.00"), row(2, name="y", price="3.00")
    results = decide_rows(spark, [conflict(1, "U", pub_a, new_a), conflict(2, "U", pub_b, new_b)], chain, COLUMNS)
    assert (results[0]["decision"], results[0]["resolver"]) == (2, "r2")
    assert results[0]["final"] == {**new_a, "price": "15.01"}  # (10.00 + 20.01) / 2 = 15.005, rounded half up
    assert (results[1]["decision"], results[1]["resolver"]) == (2, "r1")
    assert results[1]["final"] == {**new_b, "name": "x+y"}


def test_assignments_to_names_that_need_quoting_and_typed_results(spark):
    chain = [spec(1, "I", 1, "2", {'ab "cd': 'pub.`ab "cd` * 10 + new.`ab "cd`', "updated": "pub.updated"})]
    pub = row(1, abcd=4, updated="2023-05-06 07:08:09.123456")
    new = row(1, abcd=2, guid="sub@9")
    [result] = decide_rows(spark, [conflict(1, "I", pub, new)], chain, COLUMNS)
    assert result["final"] == {**new, 'ab "cd': 42, "updated": "2023-05-06 07:08:09.123456"}


# --- invalid codes --------------------------------------------------------------------------------------


def test_invalid_codes_and_null_count_as_zero_with_a_note(spark):
    chain = [
        spec(1, "U", 1, "CASE WHEN pub.name = 'seven' THEN 7 WHEN pub.name = 'null' THEN NULL ELSE 0 END"),
        spec(2, "U", 2, "CASE WHEN pub.name = 'five' THEN 5 ELSE 0 END", name="five"),
        spec(3, "D", 1, "2", name="two_for_delete"),
        spec(4, "U", 3, "CASE WHEN pub.name = 'half' THEN 2.5 WHEN pub.name = 'three' THEN 3.0 ELSE 0 END"),
    ]
    conflicts = [
        conflict("seven", "U", row(1, name="seven"), row(1)),
        conflict("null", "U", row(2, name="null"), row(2)),
        conflict("five", "U", row(3, name="five"), row(3)),
        conflict("del", "D", row(4), {"item_id": 4}),
        conflict("half", "U", row(5, name="half"), row(5)),
        conflict("three", "U", row(6, name="three"), row(6)),
    ]
    results = {r["key"]: r for r in decide_rows(spark, conflicts, chain, COLUMNS)}
    assert (results["seven"]["decision"], results["seven"]["resolver"]) == (3, "default")
    assert (
        "resolver r1 (id 1) returned 7, which is not a code of an update resolver (0, 1, 2, 3, 4)"
        in (results["seven"]["note"])
    )
    assert "resolver r1 (id 1) returned NULL" in results["null"]["note"]
    assert results["null"]["decision"] == 3
    assert "resolver five (id 2) returned 5" in results["five"]["note"]
    assert "r1" not in results["five"]["note"]  # r1 said 0, a valid code
    assert (results["del"]["decision"], results["del"]["resolver"]) == (5, "default")
    assert (
        "resolver two_for_delete (id 3) returned 2, which is not a code of a delete resolver (0, 1, 3, 4, 5)"
        in (results["del"]["note"])
    )
    assert "returned 2.5" in results["half"]["note"]
    assert (results["three"]["decision"], results["three"]["resolver"], results["three"]["note"]) == (3, "r4", "")


# --- typed comparisons ---------------------------------------------------------------------------------


def test_decimals_are_compared_as_numbers_not_text(spark):
    expression, _ = generated_resolver("min", "U", "price", COLUMNS)
    chain = [spec(1, "U", 1, expression)]
    results = decide_rows(
        spark,
        [update(1, "9.50", "10.00"), update(2, "10.00", "9.50"), update(3, "10.00", "10.0"), update(4, 100, "99.99")],
        chain,
        COLUMNS,
    )
    assert [(r["decision"], r["resolver"]) for r in results] == [(3, "r1"), (1, "r1"), (3, "default"), (1, "r1")]


def test_timestamps_are_compared_to_the_microsecond(spark):
    expression, _ = generated_resolver("max", "U", "updated", COLUMNS)
    chain = [spec(1, "U", 1, expression)]
    conflicts = [
        update(1, "1", "1", updated="2024-01-01 12:00:00.000001")
        | {"new": row(1, updated="2024-01-01 12:00:00.000002")},
        update(2, "1", "1", updated="2024-01-01 12:00:00.000003")
        | {"new": row(2, updated="2024-01-01 12:00:00.000002")},
        update(3, "1", "1", updated="2024-01-01 12:00:00") | {"new": row(3, updated="2024-01-01 12:00:00.000000")},
    ]
    results = decide_rows(spark, conflicts, chain, COLUMNS)
    assert [(r["decision"], r["resolver"]) for r in results] == [(1, "r1"), (3, "r1"), (3, "default")]


def test_string_literals_reach_spark_as_written(spark):
    chain = [spec(1, "U", 1, "CASE WHEN pub.name = 'it\\'s' THEN 3 WHEN pub.name = 'a\\\\b' THEN 2 ELSE 1 END")]
    conflicts = [
        conflict(1, "U", row(1, name="it's"), row(1)),
        conflict(2, "U", row(2, name="a\\b"), row(2)),
        conflict(3, "U", row(3, name="its"), row(3)),
    ]
    assert [r["decision"] for r in decide_rows(spark, conflicts, chain, COLUMNS)] == [3, 2, 1]


# --- missing publisher rows ----------------------------------------------------------------------------


def test_a_delete_of_a_missing_row_sees_a_null_publisher_row(spark):
    chain = [
        spec(1, "D", 1, "CASE WHEN pub.ROWGUID IS NULL THEN 5 WHEN pub.ROWGUID = old.ROWGUID THEN 1 ELSE 0 END"),
        spec(2, "D", 2, "CASE WHEN pub.price > 5 THEN 3 ELSE 0 END"),
    ]
    conflicts = [
        conflict("gone", "D", None, {"item_id": 1, "ROWGUID": "sub@1"}),
        conflict("same", "D", row(2, guid="sub@0"), {"item_id": 2}, old_guid="sub@0"),
        conflict("changed", "D", row(3, guid="pub@3", price="9.00"), {"item_id": 3}),
        conflict("cheap", "D", row(4, guid="pub@4", price="1.00"), {"item_id": 4}),
    ]
    results = decide_rows(spark, conflicts, chain, COLUMNS)
    assert [(r["key"], r["decision"], r["resolver"], r["final"]) for r in results] == [
        ("gone", 5, "r1", None),
        ("same", 1, "r1", None),
        ("changed", 3, "r2", None),
        ("cheap", 5, "default", None),
    ]


def test_an_update_of_a_missing_row_is_a_delete_conflict_and_a_null_publisher_row_leaves_comparisons_undecided(spark):
    expression, _ = generated_resolver("min", "U", "price", COLUMNS)
    chain = [spec(1, "U", 1, expression), spec(2, "D", 1, "CASE WHEN pub.ROWGUID IS NULL THEN 0 ELSE 1 END")]
    full = row(1, guid="sub@1")
    conflicts = [conflict("upd-missing", "D", None, full), conflict("u-null-pub", "U", None, row(2))]
    results = decide_rows(spark, conflicts, chain, COLUMNS)
    assert [(r["decision"], r["resolver"], r["final"]) for r in results] == [
        (5, "default", None),
        (3, "default", row(2)),
    ]


# --- failures name their resolver ----------------------------------------------------------------------


def test_a_runtime_failure_names_the_resolver(spark):
    chain = [spec(1, "U", 1, "0"), spec(8, "U", 2, "CAST(pub.name AS INT)", name="bad_cast")]
    with pytest.raises(ResolverError, match=r"resolver bad_cast \(id 8\) failed in Spark: .*CAST_INVALID_INPUT"):
        decide_rows(spark, [conflict(1, "U", row(1, name="abc"), row(1))], chain, COLUMNS)
    # The same resolver is fine where an earlier one decides first: it is not evaluated there.
    early = [spec(1, "U", 1, "1"), spec(8, "U", 2, "CAST(pub.name AS INT)", name="bad_cast")]
    assert decide_rows(spark, [conflict(1, "U", row(1, name="abc"), row(1))], early, COLUMNS)[0]["decision"] == 1


def test_a_failing_assignment_names_the_resolver_and_column(spark):
    chain = [spec(4, "U", 1, "2", {'ab "cd': "CAST(pub.name AS BIGINT)"}, name="bad_assign")]
    with pytest.raises(ResolverError, match=r'assignment to ab "cd of resolver bad_assign \(id 4\) failed in Spark'):
        decide_rows(spark, [conflict(1, "U", row(1, name="x"), row(1))], chain, COLUMNS)


def test_type_errors_and_non_numeric_results_name_the_resolver(spark):
    one = [conflict(1, "U", row(1), row(1))]
    with pytest.raises(ResolverError, match=r"resolver adds_text \(id 2\) cannot be evaluated: .*DATATYPE_MISMATCH"):
        decide_rows(spark, one, [spec(2, "U", 1, "pub.name + new.ROWGUID", name="adds_text")], COLUMNS)
    with pytest.raises(ResolverError, match=r"resolver cond \(id 3\) returns boolean, not a code"):
        decide_rows(spark, one, [spec(3, "U", 1, "pub.price > 1", name="cond")], COLUMNS)
    with pytest.raises(ResolverError, match=r"resolver hostile \(id 4\): .*';' is not allowed"):
        decide_rows(spark, one, [spec(4, "U", 1, "3; drop table x", name="hostile")], COLUMNS)
    with pytest.raises(ResolverError, match="has type 'X'"):
        decide_rows(spark, [conflict(1, "X", None, None)], [], COLUMNS)

"""Resolver expressions: what is accepted, what is refused (and the message says why), what Spark gets."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from replication_admin.engine import resolvers
from replication_admin.engine import statements as st
from replication_admin.engine.resolvers import (
    CONFLICT_TYPES,
    CR_TYPES,
    DEFAULT_DECISION,
    RESOLVER_CLASSES,
    TYPE_NAMES,
    VALID_CODES,
    ColumnTypes,
    ResolverClass,
    ResolverColumn,
    ResolverError,
    check_conflict_type,
    class_names,
    compile_assignments,
    compile_expression,
    default_rules_text,
    from_json_value,
    generated_resolver,
    resolver_class,
    resolver_proc_name,
    spark_type,
    to_json_value,
    validate_assignments,
    validate_expression,
)
from replication_admin.engine.types import LogicalType

# The reference's items table, plus names that need quoting and a few more types.
COLUMNS = [
    ResolverColumn("item_id", "bigint", True),
    ResolverColumn("name", "string", False),
    ResolverColumn("price", "decimal(10,2)", False),
    ResolverColumn("ROWGUID", "string", False),
    ResolverColumn('ab "cd', "bigint", False),
    ResolverColumn("a`b", "double", False),
    ResolverColumn("select", "string", False),
    ResolverColumn("updated", "timestamp", False),
    ResolverColumn("active", "boolean", False),
]

MINIMAL_PRICE = "CASE WHEN pub.price < new.price THEN 3 WHEN pub.price > new.price THEN 1 ELSE 0 END"
CHANGE_TO_MINIMAL = "CASE WHEN pub.price < new.price THEN 2 ELSE 1 END"


# --- the reference's resolvers ------------------------------------------------------------------------


@pytest.mark.parametrize("cr_type", ["I", "U"])
def test_the_references_resolvers_are_accepted(cr_type):
    assert validate_expression("3", COLUMNS, cr_type) == "3"
    assert validate_expression(MINIMAL_PRICE, COLUMNS, cr_type) == MINIMAL_PRICE
    assert validate_expression(CHANGE_TO_MINIMAL, COLUMNS, cr_type) == CHANGE_TO_MINIMAL
    assert validate_assignments({"price": "pub.price"}, COLUMNS, cr_type) == {"price": "pub.price"}


def test_expressions_are_normalised_names_to_the_tables_spelling_and_functions_to_spark():
    assert validate_expression("case when PUB.PRICE < New.Price then 3 else 0 end", COLUMNS, "U") == (
        "CASE WHEN pub.price < new.price THEN 3 ELSE 0 END"
    )
    assert validate_expression("iif(pub.rowguid is null, 3, nvl(0, 1))", COLUMNS, "U") == (
        "IF(pub.ROWGUID IS NULL, 3, COALESCE(0, 1))"
    )
    # Names that need quoting come back quoted with backticks, backticks doubled.
    assert validate_expression('CASE WHEN pub.`ab "cd` > 1 THEN 3 ELSE 0 END', COLUMNS, "U") == (
        'CASE WHEN pub.`ab "cd` > 1 THEN 3 ELSE 0 END'
    )
    assert validate_expression("CASE WHEN pub.`a``b` > new.`select` THEN 1 ELSE 0 END", COLUMNS, "U") == (
        "CASE WHEN pub.`a``b` > new.`select` THEN 1 ELSE 0 END"
    )
    # Comments are dropped; the result validates to itself.
    text = validate_expression("CASE /* x */ WHEN pub.price > 1 THEN 3 ELSE 0 END -- done", COLUMNS, "U")
    assert text == "CASE WHEN pub.price > 1 THEN 3 ELSE 0 END"
    assert validate_expression(text, COLUMNS, "U") == text


@pytest.mark.parametrize(
    "expression",
    [
        "CASE WHEN coalesce(pub.price, 0) BETWEEN 1 AND 10 THEN 3 ELSE 0 END",
        "CASE WHEN upper(trim(pub.name)) LIKE 'A%' THEN 1 ELSE 0 END",
        "CASE WHEN pub.name IN ('a', 'b') THEN 3 WHEN NOT new.name IS NULL THEN 1 ELSE 0 END",
        "CASE WHEN length(substr(pub.name, 1, 2)) = 2 AND lower(new.name) <> 'x' THEN 3 ELSE 0 END",
        "CASE WHEN abs(round(pub.price, 1) - floor(new.price)) > ceil(1.5) THEN 3 ELSE 0 END",
        "CASE WHEN greatest(pub.price, new.price) = least(pub.price, 5) THEN 1 ELSE 0 END",
        "CASE WHEN cast(pub.name AS bigint) > try_cast(new.name AS decimal(10, 2)) THEN 3 ELSE 0 END",
        "CASE WHEN pub.updated > timestamp '2024-01-01 00:00:00' THEN 3 ELSE 0 END",
        "CASE WHEN concat(pub.name, '-', new.name) = 'a-b' OR pub.active THEN 1 ELSE 0 END",
        "CASE WHEN nullif(pub.item_id % 2, 0) IS NULL THEN 3 ELSE 0 END",
        "IF(pub.ROWGUID = old.ROWGUID, 1, 3)",
        "coalesce(cast(pub.item_id AS int), 0)",
    ],
)
def test_allowed_functions_and_operators_are_accepted(expression):
    assert validate_expression(expression, COLUMNS, "U")


# --- hostile and broken inputs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("3; DROP TABLE x", "';' is not allowed (line 1, column 2)"),
        ("3;", "';' is not allowed"),
        ("(select 1)", "may not contain a query"),
        ("1 + (select max(price) from items)", "may not contain a query"),
        ("CASE WHEN exists(select 1) THEN 3 ELSE 0 END", "may not contain a query"),
        ("CASE WHEN pub.price IN (select 1) THEN 3 ELSE 0 END", "IN with a list of values"),
        ("reflect('java.lang.Runtime', 'exec', 'x')", "may not call REFLECT() (line 1, column 1)"),
        ("java_method('java.lang.System', 'exit', 0)", "may not call JAVA_METHOD()"),
        ("CASE WHEN my_udf(pub.price) > 1 THEN 3 ELSE 0 END", "may not call MY_UDF() (line 1, column 11)"),
        ("new.price) or (1=1", "not a valid Spark SQL expression: Invalid expression / Unexpected token near ')'"),
        ('pub."ab ""cd"', "quotes a column name with double quotes (line 1, column 5)"),
        ('CASE WHEN pub.name = "x" THEN 3 ELSE 0 END', 'double-quoted string "x"'),
        ("CASE WHEN pub.name = 'x THEN 3 ELSE 0 END", "unbalanced ' quote"),
        ("CASE WHEN pub.`name = 'x' THEN 3 ELSE 0 END", "unbalanced ` quote"),
        ("1 + " * 1500 + "1", "at most 4000 are allowed"),
        ("", "is empty"),
        ("   \n ", "is empty"),
        ("rand()", "may not call RAND()"),
        ("CASE WHEN now() > pub.updated THEN 3 ELSE 0 END", "NOW() (line 1, column 11): it is not deterministic"),
        ("CASE WHEN current_timestamp() > pub.updated THEN 3 ELSE 0 END", "CURRENT_TIMESTAMP()"),
        ("count(*)", "aggregate function COUNT()"),
        ("CASE WHEN min(pub.price) > 1 THEN 3 ELSE 0 END", "use LEAST(a, b)"),
        ("sum(pub.price) OVER ()", "window functions"),
        ("CASE WHEN exists(array(1), x -> x > 1) THEN 3 ELSE 0 END", "may not"),
        ("transform(array(1), x -> x + 1)", "may not call TRANSFORM()"),
        ("pub.*", "may not use pub.*"),
        ("*", "may not use *"),
        ("CASE WHEN price > 1 THEN 3 ELSE 0 END", "refers to price (line 1, column 11) without saying which row"),
        ("CASE WHEN items.price > 1 THEN 3 ELSE 0 END", "'items' is not a row; use pub"),
        ("CASE WHEN new.bogus > 1 THEN 3 ELSE 0 END", "unknown column 'bogus' in new.bogus (line 1, column 11)"),
        ("CASE WHEN pub.item_id.x > 1 THEN 3 ELSE 0 END", "which is not a column reference"),
        ("CASE WHEN pub.price & 1 = 1 THEN 3 ELSE 0 END", "BitwiseAnd"),
        ("CASE WHEN pub.price > ${limit} THEN 3 ELSE 0 END", "parameters"),
        ("CASE WHEN pub.price > ? THEN 3 ELSE 0 END", "parameters"),
        ("cast(pub.name AS map<string, int>)", "casts to MAP<STRING, INT>"),
        ("pub.price > 1", "is a condition (true/false)"),
        ("7", "returns 7, which is not a code of an update resolver"),
        ("CASE WHEN pub.price > 1 THEN 6 ELSE 0 END", "returns 6"),
        ("-1", "returns -1"),
        ("'3'", "returns the text '3'"),
        ("new.name", "returns text (new.name); a resolver returns an integer code (0 undecided"),
        ("upper(new.name)", "returns text (UPPER(new.name))"),
        ("CASE WHEN new.price > pub.price THEN 3 ELSE new.name END", "returns text"),
        ("new.price", "returns a number with decimals (new.price)"),
        ("new.`a``b`", "returns a number with decimals"),
        ("pub.updated", "returns a timestamp"),
        ("coalesce(new.active, pub.active)", "returns true/false"),
        ("pub.price[0]", "Bracket"),
        ("interval 1 day", "Interval"),
    ],
)
def test_hostile_or_broken_expressions_are_refused_with_the_reason(expression, message):
    with pytest.raises(ResolverError) as caught:
        validate_expression(expression, COLUMNS, "U")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "expression",
    ["new.item_id - pub.item_id", "length(new.name) % 4", "CAST(new.price AS INT) % 2", 'coalesce(new.`ab "cd`, 0)'],
)
def test_expressions_whose_value_is_an_integer_are_accepted(expression):
    assert validate_expression(expression, COLUMNS, "U")


def test_a_delete_resolver_sees_only_the_key_and_rowguid_of_the_incoming_row():
    assert validate_expression("CASE WHEN new.ROWGUID = pub.ROWGUID THEN 5 ELSE 0 END", COLUMNS, "D")
    assert validate_expression("CASE WHEN new.item_id > 10 THEN 1 ELSE 0 END", COLUMNS, "D")
    assert validate_expression("CASE WHEN pub.price > 10 THEN 3 ELSE 5 END", COLUMNS, "D")
    with pytest.raises(ResolverError, match="a delete carries only the primary key and ROWGUID"):
        validate_expression("CASE WHEN new.price > 10 THEN 1 ELSE 0 END", COLUMNS, "D")
    with pytest.raises(ResolverError, match=r"returns 2, which is not a code of a delete resolver"):
        validate_expression("2", COLUMNS, "D")
    with pytest.raises(ResolverError, match=r"returns 5, which is not a code of an insert resolver"):
        validate_expression("5", COLUMNS, "I")
    with pytest.raises(ResolverError, match="cannot assign columns"):
        validate_assignments({"price": "pub.price"}, COLUMNS, "D")


def test_unknown_resolver_types_are_refused():
    with pytest.raises(ResolverError, match=r"must be I \(insert\), U \(update\) or D \(delete\), not 'X'"):
        validate_expression("3", COLUMNS, "X")


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ({"item_id": "1"}, "'item_id': it is part of the primary key"),
        ({"ROWGUID": "'x@1'"}, "the ROWGUID is set by replication"),
        ({"nope": "1"}, "cannot assign unknown column 'nope'"),
        ({"price": "(select 1)"}, "the assignment to price may not contain a query"),
        ({"price": "pub.price; drop table x"}, "';' is not allowed"),
        ({"price": "1", "PRICE": "2"}, "assigned twice"),
        ({"price": "new.bogus"}, "unknown column 'bogus'"),
    ],
)
def test_bad_assignments_are_refused(assignments, message):
    with pytest.raises(ResolverError) as caught:
        validate_assignments(assignments, COLUMNS, "U")
    assert message in str(caught.value)


def test_assignments_are_normalised_to_the_tables_column_names():
    assert validate_assignments(
        {"PRICE": "least(pub.price, NEW.price)", 'ab "cd': 'pub.`ab "cd` + 1'}, COLUMNS, "U"
    ) == {
        "price": "LEAST(pub.price, new.price)",
        'ab "cd': 'pub.`ab "cd` + 1',
    }


# --- what Spark gets -----------------------------------------------------------------------------------


def test_compile_maps_columns_to_positional_aliases_so_names_never_reach_spark():
    compiled = compile_expression(
        'CASE WHEN pub.`ab "cd` < new.`ab "cd` THEN 3 WHEN pub.`a``b` > old.`select` THEN 1 ELSE 0 END', COLUMNS
    )
    assert compiled == "CASE WHEN p4 < n4 THEN 3 WHEN p5 > o6 THEN 1 ELSE 0 END"
    assert '"' not in compiled and "`" not in compiled
    assert compile_expression(MINIMAL_PRICE, COLUMNS) == "CASE WHEN p2 < n2 THEN 3 WHEN p2 > n2 THEN 1 ELSE 0 END"
    assert compile_expression("IF(old.ROWGUID = pub.rowguid, 1, 3)", COLUMNS) == "IF(o3 = p3, 1, 3)"
    assert compile_assignments({"price": "pub.price", 'ab "cd': '(pub.`ab "cd` + new.`ab "cd`) / 2'}, COLUMNS) == {
        2: "p2",
        4: "(p4 + n4) / 2",
    }


def test_compile_regenerates_from_the_tree_not_the_text():
    # Comments and odd spacing do not survive; string literals are re-quoted.
    compiled = compile_expression("CASE WHEN pub.name = 'it\\'s' /* */ THEN 3\n ELSE 0 END -- x", COLUMNS)
    assert compiled == "CASE WHEN p1 = 'it\\'s' THEN 3 ELSE 0 END"
    with pytest.raises(ResolverError, match="';' is not allowed"):
        compile_expression("3; select 1", COLUMNS)
    with pytest.raises(ResolverError, match="unknown column"):
        compile_expression("pub.nope", COLUMNS)


# --- generated classes ---------------------------------------------------------------------------------


def test_generated_classes_produce_virtuosos_decisions():
    assert generated_resolver("pub_wins", "U", None, COLUMNS) == ("3", {})
    assert generated_resolver("sub_wins", "D", None, COLUMNS) == ("1", {})
    assert generated_resolver("custom", "I", None, COLUMNS) == ("0", {})
    assert generated_resolver("min", "U", "price", COLUMNS) == (MINIMAL_PRICE, {})
    assert generated_resolver("max", "I", "price", COLUMNS) == (
        "CASE WHEN pub.price > new.price THEN 3 WHEN pub.price < new.price THEN 1 ELSE 0 END",
        {},
    )
    assert generated_resolver("ave", "U", "price", COLUMNS) == ("2", {"price": "(pub.price + new.price) / 2"})
    assert generated_resolver("add", "U", "price", COLUMNS, transactional=True) == (
        "2",
        {"price": "pub.price + (new.price - old.price)"},
    )
    assert generated_resolver("MIN", "U", "updated", COLUMNS)[0].startswith("CASE WHEN pub.updated < new.updated")


def test_generated_classes_quote_names_that_need_it():
    expression, assignments = generated_resolver("ave", "U", 'ab "cd', COLUMNS)
    assert assignments == {'ab "cd': '(pub.`ab "cd` + new.`ab "cd`) / 2'}
    assert compile_assignments(assignments, COLUMNS) == {4: "(p4 + n4) / 2"}
    expression, _ = generated_resolver("min", "I", "a`b", COLUMNS)
    assert expression == "CASE WHEN pub.`a``b` < new.`a``b` THEN 3 WHEN pub.`a``b` > new.`a``b` THEN 1 ELSE 0 END"
    expression, _ = generated_resolver("max", "U", "select", COLUMNS)
    assert "pub.`select` > new.`select`" in expression


@pytest.mark.parametrize(
    ("cls", "cr_type", "column", "transactional", "message"),
    [
        ("min", "D", "price", False, "insert and update conflicts only"),
        ("ave", "U", None, False, "the ave class needs a column"),
        ("max", "U", "nope", False, "the table has no column 'nope'"),
        ("min", "U", "item_id", False, "it is part of the primary key"),
        ("min", "U", "ROWGUID", False, "cannot work on 'ROWGUID'"),
        ("ave", "U", "name", False, "needs a numeric column; 'name' is string"),
        ("min", "U", "active", False, "needs an orderable column; 'active' is boolean"),
        ("add", "U", "price", False, "transactional publications only"),
        ("bogus", "U", None, False, "unknown resolver class 'bogus'"),
    ],
)
def test_generated_classes_refuse_what_they_cannot_do(cls, cr_type, column, transactional, message):
    with pytest.raises(ResolverError) as caught:
        generated_resolver(cls, cr_type, column, COLUMNS, transactional)
    assert message in str(caught.value)


def test_resolver_proc_names():
    assert resolver_proc_name("pg1.items", "U", "min_price") == "pg1.items_cr_U_min_price"
    assert resolver_proc_name("items", "I", "A1") == "items_cr_I_A1"
    for bad in ["", "a b", "x;drop", "é", "a" * 41, "a-b"]:
        with pytest.raises(ResolverError, match="1-40 letters, digits or underscores"):
            resolver_proc_name("items", "U", bad)
    with pytest.raises(ResolverError, match="resolver type"):
        resolver_proc_name("items", "Q", "x")


# --- types and values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("logical", "expected"),
    [
        (LogicalType("smallint"), "bigint"),
        (LogicalType("integer"), "bigint"),
        (LogicalType("bigint"), "bigint"),
        (LogicalType("real"), "double"),
        (LogicalType("double"), "double"),
        (LogicalType("numeric", precision=12, scale=2), "decimal(12,2)"),
        (LogicalType("numeric", precision=38, scale=10), "decimal(38,10)"),
        (LogicalType("numeric"), "decimal(38,10)"),
        (LogicalType("numeric", precision=65, scale=30), "decimal(38,10)"),
        (LogicalType("boolean"), "boolean"),
        (LogicalType("date"), "date"),
        (LogicalType("timestamp"), "timestamp"),
        (LogicalType("timestamptz"), "timestamp"),
        (LogicalType("json"), "string"),
        (LogicalType("uuid"), "string"),
        (LogicalType("varbinary", length=16), "binary"),
        (LogicalType("long_varbinary"), "binary"),
        (LogicalType("varchar", length=10), "string"),
        (LogicalType("long_nvarchar"), "string"),
        (LogicalType("time"), "string"),
        (LogicalType("other"), "string"),
    ],
)
def test_spark_types_of_logical_types(logical, expected):
    assert spark_type(logical) == expected


def test_json_values_round_trip():
    assert to_json_value(Decimal("12.50")) == "12.50"
    assert to_json_value(Decimal("1E+2")) == "100"
    assert to_json_value(Decimal("0.0000001")) == "0.0000001"
    assert to_json_value(dt.datetime(2024, 1, 2, 3, 4, 5, 6)) == "2024-01-02 03:04:05.000006"
    assert to_json_value(dt.date(2024, 1, 2)) == "2024-01-02"
    assert to_json_value(dt.time(3, 4, 5)) == "03:04:05"
    assert to_json_value(dt.time(3, 4, 5, 120)) == "03:04:05.000120"
    assert to_json_value(b"\x00\xff") == {"hex": "00ff"}
    assert to_json_value(bytearray(b"ab")) == {"hex": "6162"}
    assert [to_json_value(v) for v in (1, 1.5, True, None, "x")] == [1, 1.5, True, None, "x"]

    assert from_json_value("12.5", "decimal(10,2)") == Decimal("12.50")
    assert from_json_value(9, "decimal(10,2)") == Decimal("9.00")
    assert from_json_value("42", "bigint") == 42
    assert from_json_value(42.0, "bigint") == 42
    assert from_json_value("1.5", "double") == 1.5
    assert from_json_value("2024-01-02 03:04:05.000006", "timestamp") == dt.datetime(2024, 1, 2, 3, 4, 5, 6)
    assert from_json_value("2024-01-02T03:04:05+01:00", "timestamp") == dt.datetime(2024, 1, 2, 2, 4, 5)
    assert from_json_value("2024-01-02", "date") == dt.date(2024, 1, 2)
    assert from_json_value({"hex": "00ff"}, "binary") == bytearray(b"\x00\xff")
    assert from_json_value("t", "boolean") is True and from_json_value(0, "boolean") is False
    assert from_json_value(5, "string") == "5"
    assert from_json_value(None, "bigint") is None
    for value, kind in [("x", "bigint"), ("1.5", "bigint"), ("abc", "decimal(10,2)"), ("12345678901", "decimal(10,2)"),
                        ("maybe", "boolean"), ("not a date", "date"), ({"hex": "zz"}, "binary")]:  # fmt: skip
        with pytest.raises(ResolverError, match="cannot read"):
            from_json_value(value, kind)


# --- the registry of conflict types and resolver classes ---------------------------------------------


def test_conflict_types_are_defined_once_with_their_labels_codes_and_defaults():
    assert CR_TYPES == ("I", "U", "D")
    assert TYPE_NAMES == {"I": "insert", "U": "update", "D": "delete"}
    assert DEFAULT_DECISION == {"I": 3, "U": 3, "D": 5}  # I and U: publisher wins; D: ignore
    # 4 (reserved in the reference) holds the conflict for a person: the manual class.
    assert VALID_CODES == {"I": (0, 1, 2, 3, 4), "U": (0, 1, 2, 3, 4), "D": (0, 1, 3, 4, 5)}
    assert all(t.default_decision in t.valid_codes for t in CONFLICT_TYPES.values())
    assert check_conflict_type("D") == "D"
    with pytest.raises(ResolverError, match=r"resolver type must be I \(insert\), U \(update\) or D \(delete\)"):
        check_conflict_type("X")


def test_the_registry_holds_the_classes_in_declaration_order_and_what_each_fits():
    assert tuple(RESOLVER_CLASSES) == ("pub_wins", "sub_wins", "min", "max", "ave", "add", "manual", "custom")
    assert class_names(transactional=False) == ("pub_wins", "sub_wins", "min", "max", "ave", "manual", "custom")
    assert class_names(transactional=True) == tuple(RESOLVER_CLASSES)
    assert [c.name for c in RESOLVER_CLASSES.values() if c.needs_column] == ["min", "max", "ave", "add"]
    assert [c.name for c in RESOLVER_CLASSES.values() if c.written] == ["custom"]
    assert {c.name: c.conflict_types for c in RESOLVER_CLASSES.values()} == {
        "pub_wins": CR_TYPES, "sub_wins": CR_TYPES, "min": ("I", "U"), "max": ("I", "U"), "ave": ("I", "U"),
        "add": ("I", "U"), "manual": CR_TYPES, "custom": CR_TYPES,
    }  # fmt: skip
    assert resolver_class(" MIN ").name == "min"
    with pytest.raises(ResolverError, match="unknown resolver class 'bogus'; the classes are pub_wins, sub_wins"):
        resolver_class("bogus")


@pytest.mark.parametrize("spec", list(RESOLVER_CLASSES.values()), ids=lambda c: c.name)
def test_every_registered_class_makes_a_valid_resolver_for_each_type_it_fits_and_refuses_the_others(spec):
    column = "price" if spec.needs_column else None
    for cr_type in CR_TYPES:
        if spec.fits_type(cr_type):
            expression, assignments = generated_resolver(spec.name, cr_type, column, COLUMNS, transactional=True)
            assert validate_expression(expression, COLUMNS, cr_type) == expression
            assert validate_assignments(assignments, COLUMNS, cr_type) == assignments
        else:
            with pytest.raises(ResolverError, match=f"not to {TYPE_NAMES[cr_type]}s"):
                generated_resolver(spec.name, cr_type, column, COLUMNS, transactional=True)
    if spec.needs_old_row:
        with pytest.raises(ResolverError, match="transactional publications only"):
            generated_resolver(spec.name, spec.conflict_types[0], column, COLUMNS, transactional=False)


LATEST = ResolverClass(
    "latest",
    "latest of a column",
    "the row with the later date or time wins",
    lambda c: (f"CASE WHEN {c.new} > {c.pub} THEN 1 ELSE 3 END", {}),
    conflict_types=("I", "U"),
    column=ColumnTypes("date or time", ("date", "timestamp")),
)


def test_one_registry_entry_is_a_new_class_for_the_generator_and_both_statement_forms(monkeypatch):
    """Adding a resolver class is one entry: the generator and the statement parser take it as it is."""
    with pytest.raises(st.StatementError, match="the class must be one of"):
        st.parse_one("REPL_ADD_CR ('items', 'U', 'late', 10, 'latest', 'updated')")
    monkeypatch.setitem(resolvers.RESOLVER_CLASSES, "latest", LATEST)

    assert class_names(transactional=False)[-1] == "latest" and class_names(transactional=True)[-1] == "latest"
    assert generated_resolver("latest", "U", "updated", COLUMNS) == (
        "CASE WHEN new.updated > pub.updated THEN 1 ELSE 3 END",
        {},
    )
    with pytest.raises(ResolverError, match="the latest class needs a date or time column; 'price' is decimal"):
        generated_resolver("latest", "U", "price", COLUMNS)
    with pytest.raises(ResolverError, match="applies to insert and update conflicts only, not to deletes"):
        generated_resolver("latest", "D", "updated", COLUMNS)
    trx = st.parse_one("REPL_ADD_CR ('items', 'U', 'late', 10, 'LATEST', 'updated')")
    assert (trx.cls, trx.column) == ("latest", "updated")
    snapshot = st.parse_one("REPL_ADD_SNAPSHOT_CR ('pg1.items', 'I', 'late', 10, 'latest', 'updated')")
    assert (snapshot.cls, snapshot.column) == ("latest", "updated")


def test_the_default_rule_is_stated_from_the_registry():
    assert DEFAULT_DECISION == {"I": 3, "U": 3, "D": 5}
    assert default_rules_text() == "inserts and updates: publisher wins (3); deletes: ignore (5)"

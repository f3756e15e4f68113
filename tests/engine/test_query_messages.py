"""A condition or query the SQL parser cannot read is refused in one line in SQL's words: no library class names,
no position in text the product wrapped around the user's."""

from __future__ import annotations

import pytest

from replication_admin.engine import resolvers
from replication_admin.engine.queries import QueryError, _parse
from replication_admin.engine.resolvers import ResolverError


@pytest.mark.parametrize(
    ("condition", "said"),
    [
        ("price <", "< is missing an operand"),
        ("a between 1", "BETWEEN … AND … is missing an operand"),
        ("(a", "Expecting )"),
        ("a = 'x", "a quote left open"),
    ],
)
def test_a_condition_sqlglot_cannot_read_is_explained_without_library_names(condition, said):
    with pytest.raises(QueryError) as caught:
        _parse(f"SELECT 1 FROM t WHERE {condition}", "postgresql", "condition")
    message = str(caught.value)
    assert message.startswith("the condition is not valid SQL: ") and said in message
    assert "<class" not in message and "sqlglot" not in message and "Line 1" not in message
    assert "SELECT 1 FROM t" not in message  # the product's wrapping is not the user's text


def test_a_resolver_expression_sqlglot_cannot_read_names_no_library_class():
    with pytest.raises(ResolverError) as caught:
        resolvers._parse("CASE WHEN pub.price < THEN 3 END", "expression")
    message = str(caught.value)
    assert "is missing an operand" in message and "<class" not in message and "sqlglot" not in message

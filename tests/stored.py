"""What the catalog holds, as text: for tests that a secret (a token, a webhook's URL) is never stored in clear."""

from __future__ import annotations

from django.db import connection


def everything_stored() -> str:
    """Every value of every table of the catalog, as text."""
    values = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            values.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(values)

"""Which row filter and column list each subscription's copy of a published table holds: the publication item's
(TpItem.row_filter, REPL_PUB_ROW_FILTER: a default for every subscriber, as PostgreSQL's publication filters are)
unless the subscription has one of its own (REPL_ROW_FILTER), which replaces it, condition and columns together.

The filters in force are kept in the subscription's row (ReplSubscriber.row_filters), so that each reader (an
apply, a follower's step, a copy, a reload, a validation, a repair) reads the one field it already has, with no
query more and never a stale publication filter; the entries the publication gave carry PUBLICATION_MARK and are
written again by `refresh` whenever the publication's filters or items change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from replication_admin.engine.row_filter import FilterSpec
from replication_admin.models import ReplAccount, ReplSubscriber
from replication_admin.transactional.lookups import item_table, table_items

PUBLICATION_MARK = "publication"

Stored = Mapping[str, Any]


def own_filters(stored: Stored | None) -> dict[str, Any]:
    """The subscription's own entries (an entry with no condition and no columns: every row, whatever the
    publication's filter says)."""
    return {name: data for name, data in (stored or {}).items() if not (data or {}).get(PUBLICATION_MARK)}


def publication_filters(account: ReplAccount) -> dict[str, Any]:
    """The publication's filters by table, marked as the publication's."""
    return {
        item_table(item.item): {**item.row_filter, PUBLICATION_MARK: True}
        for item in table_items(account)
        if FilterSpec.from_json(item.row_filter).active
    }


def merged(own: Stored, published: Stored) -> dict[str, Any]:
    """The filters in force: the publication's, each replaced by the subscription's own for its table."""
    return {**published, **own}


def is_own(stored: Stored | None, table: str) -> bool:
    data = (stored or {}).get(table)
    return data is not None and not data.get(PUBLICATION_MARK)


def changed_tables(before: Stored | None, after: Stored | None) -> list[str]:
    """The tables whose copy must hold other rows or columns between two stored sets."""
    names = sorted(set(before or {}) | set(after or {}))
    return [n for n in names if FilterSpec.for_table(before, n) != FilterSpec.for_table(after, n)]


def refresh(subs: Iterable[ReplSubscriber], published: Stored) -> list[tuple[ReplSubscriber, list[str]]]:
    """Write each subscription's filters in force again from its own and `published` (the caller's transaction);
    the subscriptions whose copies must change, with their tables."""
    changed = []
    for sub in subs:
        after = merged(own_filters(sub.row_filters), published)
        if after == (sub.row_filters or {}):
            continue
        tables = changed_tables(sub.row_filters, after)
        ReplSubscriber.objects.filter(pk=sub.pk).update(row_filters=after)
        sub.row_filters = after
        if tables:
            changed.append((sub, tables))
    return changed

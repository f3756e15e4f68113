"""Transactional replication's catalog lookups and errors: publications, subscriptions, their servers and
published tables."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from replication_admin.core import connections
from replication_admin.core.errors import ReplicationError
from replication_admin.core.introspection import lookup_table
from replication_admin.engine import dialects
from replication_admin.engine.schema import TableInfo
from replication_admin.models import (
    ReplAccount,
    ReplSubscriber,
    Server,
    TpGrant,
    TpItem,
)


class TrxError(ReplicationError):
    """A transactional replication request that cannot be carried out; the message says why."""


class InvalidSubscriber(TrxError):
    pass


class BacklogExceeded(TrxError):
    pass


def server_named(name: str) -> Server:
    server = Server.objects.filter(name=name).first()
    if server is None:
        raise TrxError(f"server {name!r} is not registered")
    return server


def schema_of(server: Server) -> str:
    return connections.table_schema(server)


def _d(server: Server):
    return dialects.get(server.dialect)


def item_table(item: str) -> str:
    """The table an item names: Virtuoso writes `DB.DBA.TEST` (qualifier and owner, then the name as
    it is, quotes included: `DB.DBA.ab "cd` is the table `ab "cd`); a bare name is the table."""
    parts = item.split(".", 2)
    if len(parts) == 3 and parts[0] and parts[1]:
        return parts[2]
    if item.startswith('"') and item.endswith('"') and len(item) > 1:
        return item[1:-1].replace('""', '"')
    return item


def table_items(account: ReplAccount) -> list[TpItem]:
    return list(TpItem.objects.filter(server=account.server, acct=account.account, type=2).order_by("id"))


def describe(server: Server, table: str) -> TableInfo:
    info = lookup_table(server, table)
    if info is None:
        raise TrxError(f"table {table!r} does not exist on {server.name}")
    return info


def publication(publisher: str, account: str) -> ReplAccount:
    row = ReplAccount.objects.filter(server=publisher, account=account).first()
    if row is None:
        raise TrxError(f"{publisher} has no publication {account!r}")
    return row


def subscription(subscriber: str, publisher: str, account: str) -> ReplSubscriber:
    row = ReplSubscriber.objects.filter(server=publisher, account=account, subscriber=subscriber).first()
    if row is None or not row.subscribed:
        raise TrxError(f"{subscriber} does not subscribe to {publisher}/{account}")
    return row


PUBLISHED_TTL = 30.0  # seconds a follower keeps the description of a publication's tables


def published_tables(account: ReplAccount, cached: bool = False) -> dict[str, TableInfo]:
    key = (account.server, account.account)
    if cached and key in _PUBLISHED and time.monotonic() - _PUBLISHED[key][0] < PUBLISHED_TTL:
        return _PUBLISHED[key][1]
    server = server_named(account.server)
    out = {}
    for item in table_items(account):
        name = item_table(item.item)
        info = lookup_table(server, name)
        if info is not None:
            out[name] = info
    _PUBLISHED[key] = (time.monotonic(), out)
    return out


_PUBLISHED: dict[tuple[str, str], tuple[float, dict]] = {}


def forget_published(account: ReplAccount) -> None:
    """After a schema change: the next reader describes the tables again."""
    _PUBLISHED.pop((account.server, account.account), None)


def lock_name(sub: ReplSubscriber) -> str:
    return f"trx:{sub.subscriber}:{sub.server}:{sub.account}"


def grants_of(accounts: Iterable[str]) -> dict[str, set[str]]:
    """Each publication's grantees (REPL_GRANT), in one query; none: anyone may subscribe, as in the reference's
    examples."""
    grants: dict[str, set[str]] = {}
    for acct, grantee in TpGrant.objects.filter(acct__in=set(accounts)).values_list("acct", "grantee"):
        grants.setdefault(acct, set()).add(grantee)
    return grants


def grantees_of(account: str) -> set[str]:
    return grants_of([account]).get(account, set())


def grant_refusal(sub: ReplSubscriber | Mapping[str, Any], grantees: set[str]) -> str:
    """Why the publication's grants no longer let the subscription be fed ("": they do). It is fed while the
    publication has no grants, or one names its replication user (ReplSubscriber.grantee) or its subscriber."""
    grantee, subscriber, account = (
        (sub["grantee"], sub["subscriber"], sub["account"]) if isinstance(sub, Mapping)
        else (sub.grantee, sub.subscriber, sub.account)
    )  # fmt: skip
    if not grantees or grantees & {grantee, subscriber}:
        return ""
    return (
        f"{grantee or subscriber!r} has no grant on the publication '{account}' (revoked): {subscriber} is not fed "
        "until REPL_GRANT gives it one again"
    )


class GrantRevoked(TrxError):
    """A sync or the follower found the subscription's grant gone: nothing is applied until it is given again."""

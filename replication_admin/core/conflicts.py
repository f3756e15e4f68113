"""The conflict decision step shared by bi-directional and transactional replication: a batch of
conflicts is decided by the item's resolver chain (SYS_SNAPSHOT_CR or SYS_REPL_CR rows) in ONE Spark job,
before the apply's transaction on a replicated database opens. The one exception is a bi-directional
pull's apply: the few changes whose publisher row moved while their batch was decided are decided again
inside it, under its row locks (`decide`: no Spark at all when no resolver of their types exists), so
that changes keep landing while applications keep writing the same rows."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import models

from jobs.resolve import decide_rows
from replication_admin.core.alerts import safely_raise
from replication_admin.core.spark import spark_session
from replication_admin.engine.resolvers import DEFAULT_DECISION, ResolverColumn, ResolverSpec, to_json_value
from replication_admin.models import SnapshotConflictResolver, TransactionalConflictResolver

ResolverModel = type[SnapshotConflictResolver] | type[TransactionalConflictResolver]


def resolver_spec(resolver: SnapshotConflictResolver | TransactionalConflictResolver) -> ResolverSpec:
    return ResolverSpec(
        id=resolver.pk,
        name=resolver.proc,
        cr_type=resolver.type,
        order=resolver.order,
        expression=resolver.expression or "0",
        assignments=dict(resolver.assignments or {}),
    )


def resolver_chain(table_name: str, model: ResolverModel = SnapshotConflictResolver) -> list[ResolverSpec]:
    """Every resolver of the item (all types), in CR_ORDER then CR_ID order."""
    rows: models.QuerySet[Any] = model.objects.filter(table_name=table_name).order_by("order", "id")
    return [resolver_spec(r) for r in rows]


def json_row(values: dict[str, Any]) -> dict[str, Any]:
    """A row's values as the conflict inbox and the resolvers see them (JSON-safe)."""
    return {k: to_json_value(v) for k, v in values.items()}


def key_text(values: Iterable[object]) -> str:
    """A primary key's values as one comparable text (decoded values and a backup's JSON key alike)."""
    return json.dumps([str(v) for v in values])


def new_guid(server_name: str) -> str:
    """A ROWGUID of a version made on `server_name`."""
    return f"{server_name}@{uuid.uuid4()}"


def default_decision(conflict: dict[str, Any]) -> dict[str, Any]:
    """What decide_rows answers for a conflict no resolver decides."""
    new = conflict.get("new")
    return {
        "key": conflict.get("key"),
        "decision": DEFAULT_DECISION[conflict["type"]],
        "resolver_id": None,
        "resolver": "default",
        "final": dict(new) if conflict["type"] != "D" and new is not None else None,
        "note": "",
    }


def decide(
    conflicts: list[dict[str, Any]], chain: Sequence[ResolverSpec], columns: Sequence[ResolverColumn]
) -> list[dict[str, Any]]:
    """Decide a batch of conflicts (decide_rows' input and output, in input order) in one Spark job; no
    Spark at all when no resolver of their types exists (the defaults decide)."""
    if not conflicts:
        return []
    types = {c["type"] for c in conflicts}
    if not any(spec.cr_type in types for spec in chain):
        return [default_decision(c) for c in conflicts]
    return decide_rows(spark_session(), conflicts, chain, columns)


HELD_ALERT = "conflict_held"


def held_target(item: str, source: str) -> str:
    return f"{item} from {source}"


def alert_held(item: str, source: str, key: dict[str, Any]) -> None:
    """A conflict was held for a person: an alert until every held conflict of the item from `source` is decided."""
    safely_raise(
        HELD_ALERT, held_target(item, source),
        f"a conflict on {item} from {source} ({', '.join(f'{k}={v}' for k, v in key.items())}) is held: "
        "pick the version in the conflict inbox",
        "/conflicts/?decision=4",
    )  # fmt: skip

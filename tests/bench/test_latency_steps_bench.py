"""Where a one-row transaction's time goes in the in-sync follower (run on demand: `make bench`).

A PostgreSQL publisher (trigger capture) and a PostgreSQL subscriber on the live server; each round commits one
row on the publisher, then times what the follower's loop and its step do for it: the loop's read of the in-sync
subscriptions (`followed`), the step's count of the publication (numbering what committed), its read of the log
window, the apply (the subscriber's commit included), and the rest of the step. Rounds alternate between applies
that commit without waiting for their flush (REPLADMIN_APPLY_ASYNC_COMMIT, the product's default) and applies that
wait for it, so both are measured under the same load. Printed, medians in milliseconds:

    BENCH trx_step_1row_ms: product=<step, async commit> peer=<step, waiting for the flush> ratio=<product/peer>
    BENCH trx_step_1row_parts_ms: followed=… number=… read=… apply_async=… apply_sync=… rest=…

Asserted: every row arrived, nothing else.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import pytest
from django.conf import settings as django_settings

from replication_admin.core import connections
from replication_admin.models import ReplSubscriber
from replication_admin.transactional import sync as trx_sync
from replication_admin.transactional.capture import SharedWindows
from tests.bench.test_trx_bench import report
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

ROUNDS = int(os.environ.get("BENCH_STEP_ROUNDS", "300"))
# BENCH_STEP_PROFILE=1 prints a pyinstrument profile of the rounds (when pyinstrument is importable).
PROFILE = os.environ.get("BENCH_STEP_PROFILE", "") not in ("", "0")


def timed(into: list[float], function: Callable) -> Callable:
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - started)

    return wrapper


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else 0.0


def test_where_a_one_row_transaction_spends_its_time_in_the_follower(
    make_server, jobs_sync, spark, settings, monkeypatch
):
    pub, sub = make_server("postgresql", "lpub"), make_server("postgresql", "lsub")
    sql(pub, "CREATE TABLE t (id integer PRIMARY KEY, v varchar(40), amount numeric(10, 2))")
    run(pub, "REPL_PUBLISH ('acct', 'acct.log'); REPL_PUB_ADD ('acct', 't', 2, 0, null)")
    run(sub, "REPL_SERVER ('lpub', 'lpub'); REPL_SUBSCRIBE ('lpub', 'acct'); REPL_INIT_COPY ('lpub', 'acct'); "
             "SYNC_REPL ()")  # fmt: skip
    parts: dict[str, list[float]] = {name: [] for name in ("number", "read", "apply")}
    monkeypatch.setattr(trx_sync, "publisher_count", timed(parts["number"], trx_sync.publisher_count))
    monkeypatch.setattr(trx_sync, "apply_batch", timed(parts["apply"], trx_sync.apply_batch))
    windows, memo, registry = SharedWindows(), trx_sync.FollowMemo(), trx_sync.RegistryInts()
    windows.read = timed(parts["read"], windows.read)  # type: ignore[method-assign]
    steps: dict[bool, list[float]] = {True: [], False: []}
    applies: dict[bool, list[float]] = {True: [], False: []}
    looks: list[float] = []
    profiler = None
    if PROFILE:
        from pyinstrument import Profiler  # noqa: PLC0415 - an optional tool, on demand

        profiler = Profiler(interval=0.0005)
        profiler.start()
    settings.APPLY_ASYNC_COMMIT = True  # one override, flipped in place below: one per round would nest hundreds
    overridden = django_settings._wrapped
    with connections.reuse(), connections.connect(pub) as writer:
        cursor = writer.cursor()
        for n in range(1, ROUNDS + 1):
            asynchronous = n % 2 == 0
            overridden.APPLY_ASYNC_COMMIT = asynchronous
            cursor.execute("INSERT INTO t (id, v, amount) VALUES (?, 'live', 1.00)", n)
            started = time.perf_counter()
            subs = trx_sync.followed()
            looks.append(time.perf_counter() - started)
            subscription = next(s for s in subs if s.subscriber == "lsub")
            applied = len(parts["apply"])
            started = time.perf_counter()
            outcome = trx_sync.follow_step(subscription, registry=registry, windows=windows, memo=memo)
            steps[asynchronous].append(time.perf_counter() - started)
            assert outcome is not None and outcome.applied == 1, outcome
            applies[asynchronous].extend(parts["apply"][applied:])
        memo.write_due(lambda _pk: True, force=True)
    if profiler is not None:
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    assert value(sub, "SELECT count(*) FROM t") == ROUNDS
    assert ReplSubscriber.objects.get(subscriber="lsub").count == value(pub, 'SELECT "N" FROM "RTSEQ_acct"')
    step_async, step_sync = ms(steps[True]), ms(steps[False])
    report("trx_step_1row_ms", product=step_async, peer=step_sync, ratio=step_async / step_sync)
    accounted = ms(parts["number"]) + ms(parts["read"]) + ms(applies[True])
    report(
        "trx_step_1row_parts_ms", followed=ms(looks), number=ms(parts["number"]), read=ms(parts["read"]),
        apply_async=ms(applies[True]), apply_sync=ms(applies[False]), rest=step_async - accounted,
    )  # fmt: skip

"""What a row filter and a column list cost the apply (run on demand: `make bench`). A PostgreSQL publisher and two
MariaDB subscribers of the same publication, one taking every row and column (the peer), one a filter's half of
the rows without a wide column: the same backlog applied by REPL_SYNC on each, timed; the filtered copy is checked
by content against the publisher's rows of the filter."""

from __future__ import annotations

import os
import time

import pytest

from replication_admin.core import connections
from tests.transactional.test_trx_replication import run, sql

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

TXNS = int(os.environ.get("BENCH_FILTER_TXNS", "100"))
ROWS = int(os.environ.get("BENCH_FILTER_ROWS", "1000"))  # rows per transaction


def report(name: str, product: float, peer: float) -> None:
    print(f"\nBENCH {name}: product={product:.3f} peer={peer:.3f} ratio={peer / product:.2f}")


def rows(server, query: str) -> list[tuple]:
    with connections.connect(server) as conn:
        return sorted(tuple(str(v) for v in r) for r in conn.cursor().execute(query).fetchall())


def test_a_filtered_subscriptions_apply_against_a_whole_ones(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pg1")
    whole, part = make_server("mysql", "whole"), make_server("mysql", "part")
    sql(pub, "CREATE TABLE order_lines (id integer PRIMARY KEY, region varchar(4), qty integer, note varchar(200))")
    run(pub, "REPL_PUBLISH ('b', 'b.log'); REPL_PUB_ADD ('b', 'order_lines', 2, 0, null)")
    for sub in (whole, part):
        run(sub, "REPL_SERVER ('pg1', 'pg1'); REPL_SUBSCRIBE ('pg1', 'b')")
    run(part, "REPL_ROW_FILTER ('pg1', 'b', 'order_lines', 'region = ''EU'' AND qty >= 0', 'region, qty')")
    for sub in (whole, part):
        run(sub, "REPL_INIT_COPY ('pg1', 'b')")
    for t in range(TXNS):
        first = t * ROWS
        sql(
            pub,
            f"INSERT INTO order_lines SELECT g, CASE WHEN g % 2 = 0 THEN 'EU' ELSE 'US' END, g % 50, repeat('n', 150) "
            f"FROM generate_series({first}, {first + ROWS - 1}) g",
        )
    timed = {}
    for name, sub in (("whole", whole), ("part", part)):
        started = time.perf_counter()
        outcome = run(sub, "REPL_SYNC ('pg1', 'b')")[0]
        timed[name] = time.perf_counter() - started
        assert outcome.details["applied"] == TXNS
    assert rows(part, "SELECT id, region, qty FROM order_lines") == rows(
        pub, "SELECT id, region, qty FROM order_lines WHERE region = 'EU' AND qty >= 0"
    )
    assert len(rows(whole, "SELECT id FROM order_lines")) == TXNS * ROWS
    report(f"trx_filtered_apply_{TXNS}x{ROWS}_s", timed["part"], timed["whole"])

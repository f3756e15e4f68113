"""What capture costs the publisher's writers (run on demand: `make bench`).

The same writes into an unpublished table (the baseline) and into a table of a transactional publication
(the capture triggers log them), through the product's own client, in one run: 1 and 4 clients, one-row
transactions and 1,000-row transactions (one INSERT … SELECT each, the shape of a bulk statement). It prints
rows per second with and without capture and their ratio; it asserts only that every captured transaction is
in the log and that the log numbers them without gaps.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from replication_admin.core import connections
from replication_admin.engine import transactional_sql as tsql
from replication_admin.engine.dialects.mysql import EarlierLog
from replication_admin.transactional import capture
from replication_admin.transactional.lookups import describe
from tests.bench.test_trx_bench import report
from tests.transactional.test_trx_replication import run, sql

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

SMALL_TXNS = int(os.environ.get("BENCH_CAPTURE_TXNS", "1500"))  # per client
BULK_TXNS = int(os.environ.get("BENCH_CAPTURE_BULK_TXNS", "30"))  # per client
ROUNDS = 2  # each configuration runs this often, alternating plain and captured; the best round counts


def write(server, table: str, clients: int, txns: int, rows: int, start: int) -> float:
    """`clients` connections each commit `txns` transactions of `rows` new rows; returns rows per second."""
    barrier = threading.Barrier(clients + 1)
    errors: list[BaseException] = []

    def client(c: int) -> None:
        try:
            with connections.connect(server, autocommit=False) as conn:
                cursor = conn.cursor()
                first = start + c * txns * rows
                barrier.wait()
                for t in range(txns):
                    low = first + t * rows
                    if rows == 1:
                        cursor.execute(f"INSERT INTO {table} (id, v, amount) VALUES (?, ?, ?)", low, "value", "1.25")
                    else:
                        cursor.execute(
                            f"INSERT INTO {table} (id, v, amount) SELECT g, 'value ' || g, g * 0.25 "
                            f"FROM generate_series({low}, {low + rows - 1}) g"
                        )
                    conn.commit()
        except BaseException as exc:  # reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    assert not errors, errors[0]
    return clients * txns * rows / elapsed


def test_publisher_write_rate_with_capture_against_without(make_server):
    pub = make_server("postgresql", "pg1")
    for table in ("bench", "plain"):
        sql(pub, f"CREATE TABLE {table} (id bigint PRIMARY KEY, v varchar(40), amount numeric(14, 2))")
    run(pub, "REPL_PUBLISH ('b', 'b.log'); REPL_PUB_ADD ('b', 'bench', 2, 0, null)")
    before = capture.publisher_count(pub, "b")
    start = 1
    captured_txns = 0
    for clients in (1, 4):
        for rows, txns in ((1, SMALL_TXNS), (1000, BULK_TXNS)):
            best_plain = best_captured = 0.0
            for _ in range(ROUNDS):
                best_plain = max(best_plain, write(pub, "plain", clients, txns, rows, start))
                best_captured = max(best_captured, write(pub, "bench", clients, txns, rows, start))
                start += clients * txns * rows
                captured_txns += clients * txns
            report(
                f"capture write rate ({clients} client(s), {rows}-row transactions)",
                plain_rows_per_s=best_plain,
                captured_rows_per_s=best_captured,
                ratio=best_captured / best_plain,
            )
    count = capture.publisher_count(pub, "b")
    assert count - before == captured_txns
    with connections.connect(pub) as conn:
        numbers = conn.cursor().execute('SELECT COUNT(*), MIN("N"), MAX("N") FROM "RTTX_b"').fetchone()
    assert tuple(numbers) == (count, 1, count)


MARIADB_SECONDS = float(os.environ.get("BENCH_CAPTURE_SECONDS", "10"))


def write_for(
    server, table: str, clients: int, seconds: float, start: int, round_trip: bool = False
) -> tuple[float, int]:
    """`clients` connections commit one-row transactions for `seconds`; returns (rows per second, rows written).
    `round_trip`: each transaction also reads a row back before it commits (an application's round trip)."""
    barrier = threading.Barrier(clients + 1)
    errors: list[BaseException] = []
    written = [0] * clients
    stop = threading.Event()

    def client(c: int) -> None:
        try:
            with connections.connect(server, autocommit=False) as conn:
                cursor = conn.cursor()
                key = start + c * 10_000_000
                barrier.wait()
                while not stop.is_set():
                    cursor.execute(f"INSERT INTO {table} (id, v, amount) VALUES (?, ?, ?)", key, "value", "1.25")
                    if round_trip:
                        cursor.execute(f"SELECT v FROM {table} WHERE id = ?", key).fetchall()
                    conn.commit()
                    key += 1
                    written[c] += 1
        except BaseException as exc:  # reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    assert not errors, errors[0]
    return sum(written) / elapsed, sum(written)


def test_mariadb_publisher_write_rate_with_four_clients_with_capture_against_without(make_server):
    """MariaDB: 4 clients writing one-row transactions for BENCH_CAPTURE_SECONDS into a published table and into
    an unpublished one (alternating, the best of ROUNDS each). Writers of one publication do not wait for each
    other; every captured transaction is numbered once, without gaps."""
    pub = make_server("mysql", "my1")
    for table in ("bench", "plain", "earlier"):
        sql(pub, f"CREATE TABLE {table} (id bigint PRIMARY KEY, v varchar(40), amount decimal(14, 2))")
    run(pub, "REPL_PUBLISH ('b', 'b.log'); REPL_PUB_ADD ('b', 'bench', 2, 0, null)")
    # Beside it, for comparison: a log as an earlier version made it (writers numbering at their first change).
    earlier = EarlierLog()
    sql(pub, *tsql.log_ddl(earlier, "e"), *tsql.capture_objects(earlier, "e", describe(pub, "earlier"), "my1").create)
    before = capture.publisher_count(pub, "b")
    captured_txns = 0
    # The second shape reads its row back before committing: a writer that holds its transaction open over a
    # round trip, the case where writers of one publication waiting for each other costs most.
    for suffix, round_trip in (("", False), ("_roundtrip", True)):
        best = {"plain": 0.0, "bench": 0.0, "earlier": 0.0}
        for r in range(ROUNDS):
            for table in best:
                first = 1 + (r + (2 if round_trip else 0)) * 100_000_000
                rate, written = write_for(pub, table, 4, MARIADB_SECONDS, first, round_trip)
                best[table] = max(best[table], rate)
                captured_txns += written if table == "bench" else 0
        for name, table in (("mariadb_capture_4clients", "bench"), ("mariadb_capture_4clients_earlier_log", "earlier")):
            print(
                f"\nBENCH {name}{suffix}: product={best[table]:.1f} peer={best['plain']:.1f} "
                f"ratio={best[table] / best['plain']:.3f}"
            )
    count = capture.publisher_count(pub, "b")
    assert count - before == captured_txns
    with connections.connect(pub) as conn:
        numbers = conn.cursor().execute("SELECT COUNT(*), MIN(`N`), MAX(`N`) FROM `RTTX_b`").fetchone()
    assert tuple(numbers) == (count, 1, count)

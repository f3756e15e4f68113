"""Reloading one table of one subscriber while the publisher keeps committing (run on demand: `make bench`).

A PostgreSQL publisher and subscriber; a table of BENCH_RELOAD_ROWS rows (200,000) is reloaded with
REPL_RELOAD_TABLE while a writer commits one-row transactions into it and a second table. product = seconds of the
reload job; peer = seconds of PostgreSQL's own single-stream copy of the same rows (psql COPY TO STDOUT piped into
COPY FROM) into an empty table; then the sync applies what the writer committed meanwhile, and the subscriber matches
the publisher by content."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from tests.bidir.test_bidir_sync import same
from tests.transactional.test_trx_replication import run, sql, value

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

ROWS = int(os.environ.get("BENCH_RELOAD_ROWS", "200000"))
SHAPE = "(id integer PRIMARY KEY, name varchar(40), amount numeric(12, 2), at timestamp)"


def native_pipe(pub, sub) -> float:
    sql(sub, f"CREATE TABLE native {SHAPE}")
    copy = ["psql", "-h", "127.0.0.1", "-U", "root", "-d", pub.database, "-c", "\\copy items TO STDOUT"]
    load = ["psql", "-h", "127.0.0.1", "-U", "root", "-d", sub.database, "-c", "\\copy native FROM STDIN"]
    started = time.perf_counter()
    producer = subprocess.Popen(copy, stdout=subprocess.PIPE)
    subprocess.run(load, stdin=producer.stdout, check=True, stdout=subprocess.DEVNULL)
    producer.wait()
    elapsed = time.perf_counter() - started
    assert value(sub, "SELECT count(*) FROM native") >= ROWS
    return elapsed


def test_reloading_one_table_while_the_publisher_writes_against_postgresqls_own_copy(make_server, jobs_sync, spark):
    pub, sub = make_server("postgresql", "pub"), make_server("postgresql", "sub")
    sql(pub, f"CREATE TABLE items {SHAPE}", "CREATE TABLE orders (id integer PRIMARY KEY, item integer)")
    sql(pub, "INSERT INTO items SELECT g, 'name ' || g, (g % 100000) / 100.0, "
             f"TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, {ROWS}) g")  # fmt: skip
    run(pub, "REPL_PUBLISH ('shop', 'shop.log'); REPL_PUB_ADD ('shop', 'items', 2, 0, null); "
             "REPL_PUB_ADD ('shop', 'orders', 2, 0, null)")  # fmt: skip
    run(sub, "REPL_SERVER ('pub', 'pub'); REPL_SUBSCRIBE ('pub', 'shop'); REPL_INIT_COPY ('pub', 'shop')")
    sql(sub, "DELETE FROM items WHERE id % 10 = 0")  # drift the reload repairs

    stop, written = threading.Event(), []

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            sql(pub, "BEGIN", f"UPDATE items SET amount = amount + 1 WHERE id = {n % ROWS + 1}",
                f"INSERT INTO orders VALUES ({n}, {n % ROWS + 1})", "COMMIT")  # fmt: skip
            written.append(n)
            time.sleep(0.01)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    started = time.perf_counter()
    outcome = run(sub, "REPL_RELOAD_TABLE ('pub', 'shop', 'items')")[0]
    product = time.perf_counter() - started
    stop.set()
    writer.join(30)
    peer = native_pipe(pub, sub)

    synced = run(sub, "REPL_SYNC ('pub', 'shop')")[0]
    assert synced.details["applied"] == len(written), synced.details
    assert same(pub, sub, "items")["equal"] and same(pub, sub, "orders")["equal"]
    print(
        f"\nBENCH trx_reload_table_{ROWS // 1000}k_s: product={product:.2f} peer={peer:.2f} ratio={peer / product:.2f}"
        f"  (rows {outcome.details['rows']}, path {outcome.details['path']}, {len(written)} transactions during it)"
    )

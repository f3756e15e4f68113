"""replication_admin beside MariaDB's own binlog replication (run on demand: `make bench`).

Two MariaDB servers of the benchmark's own (mariadbd with its own data directory under a temporary directory,
free ports): a primary with its binary log (row format) and a replica of it (replicating the database `peer`
only). A backlog of 100 transactions of 1,000 rows is written while each peer is stopped, then timed until it
is applied:

- the replica's SQL thread stopped while the backlog is written (its I/O thread fetches it meanwhile), then
  started: from START SLAVE SQL_THREAD until the replica has every row;
- replication_admin: a publication on the primary (capture triggers), a subscriber database on the replica
  server; the backlog is written with nothing syncing, then one REPL_SYNC applies it.

Printed: `BENCH trx_backlog_1000row_mariadb: product=<rows/s> peer=<rows/s> ratio=<product/peer>`. Asserted:
both delivered every row (counts and key sums equal), nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyodbc
import pytest

from replication_admin.core.audit import Actor
from replication_admin.servers.actions import ServerData, do_register_server
from replication_admin.transactional.actions import do_publish
from tests.dev_env import free_ports
from tests.transactional.test_trx_replication import run

pytestmark = [pytest.mark.bench, pytest.mark.live_db]

BULK_TXNS, BULK_ROWS = int(os.environ.get("BENCH_PEER_BULK_TXNS", "100")), 1000
TABLE = "CREATE TABLE t (id bigint PRIMARY KEY, v varchar(40), amount decimal(14, 2))"


def odbc(port: int, db: str = "", autocommit: bool = True) -> pyodbc.Connection:
    database = f"DATABASE={db};" if db else ""
    return pyodbc.connect(
        f"DRIVER={{MariaDB Unicode}};SERVER=127.0.0.1;PORT={port};UID=root;PWD=;{database}", autocommit=autocommit
    )


def scalar(port: int, query: str, db: str = ""):
    with contextlib.closing(odbc(port, db)) as conn:
        return conn.cursor().execute(query).fetchone()


def rows_and_sum(port: int, db: str) -> tuple[int, int]:
    count, total = scalar(port, "SELECT COUNT(*), COALESCE(SUM(id), 0) FROM t", db)
    return int(count), int(total)


def wait_until(port: int, db: str, count: int, seconds: float = 900) -> None:
    deadline = time.monotonic() + seconds
    while rows_and_sum(port, db)[0] < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{db} on port {port} did not reach {count} rows in {seconds:.0f} s")
        time.sleep(0.02)


def _start(base: Path, name: str, port: int, extra: list[str]) -> subprocess.Popen:
    datadir = base / name
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        check=True, capture_output=True,
    )  # fmt: skip
    log = open(base / f"{name}.err", "w")  # noqa: SIM115 - kept open for the server's lifetime
    server = subprocess.Popen(
        ["mariadbd", "--no-defaults", "--user=root", f"--datadir={datadir}", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={base / name}.sock", f"--pid-file={base / name}.pid",
         "--innodb-buffer-pool-size=256M", "--skip-name-resolve", *extra],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            scalar(port, "SELECT 1")
            return server
        except pyodbc.Error:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"mariadbd {name} did not start: {(base / f'{name}.err').read_text()[-2000:]}"
                ) from None
            time.sleep(0.2)


@pytest.fixture
def mariadb_pair(db) -> Iterator[tuple[int, int]]:
    """(primary port, replica port): a primary with its binary log and a replica replicating `peer` from it."""
    if not (shutil.which("mariadbd") and shutil.which("mariadb-install-db")):
        pytest.skip("mariadbd and mariadb-install-db are needed for the MariaDB replica peer")
    base = Path(tempfile.mkdtemp(prefix="bench-mariadb-"))
    primary_port = free_ports(2)
    replica_port = primary_port + 1
    servers: list[subprocess.Popen] = []
    try:
        servers.append(
            _start(base, "primary", primary_port, ["--log-bin=primary-bin", "--server-id=1", "--binlog-format=ROW"])
        )
        servers.append(
            _start(base, "replica", replica_port, ["--server-id=2", "--replicate-do-db=peer", "--relay-log=relay"])
        )
        with contextlib.closing(odbc(primary_port)) as conn:
            for db in ("peer", "prod_pub"):
                conn.cursor().execute(f"CREATE DATABASE {db}")
            conn.cursor().execute("USE peer")
            conn.cursor().execute(TABLE)
        with contextlib.closing(odbc(replica_port)) as conn:
            cursor = conn.cursor()
            cursor.execute("CREATE DATABASE peer")
            cursor.execute("CREATE DATABASE prod_sub")
            cursor.execute("USE peer")
            cursor.execute(TABLE)
            file, position = scalar(primary_port, "SHOW MASTER STATUS")[:2]
            cursor.execute(
                f"CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {primary_port}, MASTER_USER = 'root', "
                f"MASTER_PASSWORD = '', MASTER_LOG_FILE = '{file}', MASTER_LOG_POS = {int(position)}"
            )
            cursor.execute("START SLAVE")
        yield primary_port, replica_port
    finally:
        for server in reversed(servers):
            server.terminate()
        for server in servers:
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(base, ignore_errors=True)


def write_backlog(port: int, db: str, first: int) -> None:
    """BULK_TXNS transactions of BULK_ROWS new rows each (one INSERT … SELECT each, committed one by one)."""
    with contextlib.closing(odbc(port, db, autocommit=False)) as conn:
        cursor = conn.cursor()
        for n in range(BULK_TXNS):
            low = first + n * BULK_ROWS
            cursor.execute(
                f"INSERT INTO t (id, v, amount) SELECT {low - 1} + seq, CONCAT('value ', seq), seq * 0.25 "
                f"FROM seq_1_to_{BULK_ROWS}"
            )
            conn.commit()


def replica_backlog(primary: int, replica: int) -> float:
    with contextlib.closing(odbc(replica)) as conn:
        conn.cursor().execute("STOP SLAVE SQL_THREAD")
        write_backlog(primary, "peer", 1)
        file, position = scalar(primary, "SHOW MASTER STATUS")[:2]
        deadline = time.monotonic() + 300
        while True:  # the I/O thread has fetched the whole backlog: only applying it is timed
            status = conn.cursor().execute("SHOW SLAVE STATUS")
            names = [c[0] for c in status.description]
            row = dict(zip(names, status.fetchone(), strict=True))
            if row["Master_Log_File"] == file and int(row["Read_Master_Log_Pos"]) >= int(position):
                break
            assert time.monotonic() < deadline, "the replica did not fetch the backlog"
            time.sleep(0.05)
        expected = rows_and_sum(primary, "peer")[0]
        started = time.perf_counter()
        conn.cursor().execute("START SLAVE SQL_THREAD")
        wait_until(replica, "peer", expected)
        elapsed = time.perf_counter() - started
    assert rows_and_sum(replica, "peer") == rows_and_sum(primary, "peer")
    return BULK_TXNS * BULK_ROWS / elapsed


def product_backlog(primary: int, replica: int) -> float:
    with contextlib.closing(odbc(primary, "prod_pub")) as conn:
        conn.cursor().execute(TABLE)
    pub, sub = (
        do_register_server(
            Actor.command(),
            ServerData(name=name, dialect="mysql", host="127.0.0.1", port=port, database=db, user="root", password=""),
        )
        for name, port, db in (("mpub", primary, "prod_pub"), ("msub", replica, "prod_sub"))
    )
    do_publish(Actor.command(), pub, "b", "b.log", False, None)
    run(pub, "REPL_PUB_ADD ('b', 't', 2, 0, null)")
    run(sub, "REPL_SERVER ('mpub', 'mpub'); REPL_SUBSCRIBE ('mpub', 'b'); REPL_INIT_COPY ('mpub', 'b')")
    write_backlog(primary, "prod_pub", 1)
    started = time.perf_counter()
    run(sub, "REPL_SYNC ('mpub', 'b')")
    elapsed = time.perf_counter() - started
    assert rows_and_sum(replica, "prod_sub") == rows_and_sum(primary, "prod_pub")
    assert rows_and_sum(replica, "prod_sub")[0] == BULK_TXNS * BULK_ROWS
    return BULK_TXNS * BULK_ROWS / elapsed


def test_replication_admin_beside_a_mariadb_binlog_replica(mariadb_pair, jobs_sync, spark):
    primary, replica = mariadb_pair
    peer = replica_backlog(primary, replica)
    product = product_backlog(primary, replica)
    print(f"\nBENCH trx_backlog_1000row_mariadb: product={product:.1f} peer={peer:.1f} ratio={product / peer:.3f}")

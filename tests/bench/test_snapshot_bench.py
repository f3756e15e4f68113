"""Snapshot benchmarks (run on demand: `make bench`). They print ratios against baselines measured in
the same run; they assert nothing about speed.

- full refresh of 1,000,000 rows x 4 columns PostgreSQL -> MariaDB through our job, against the native
  pipe `psql \\copy ... TO STDOUT | mariadb LOAD DATA LOCAL INFILE '/dev/stdin'` (target >= 0.8);
- incremental refresh of 1,000 changes in a 10,000-row and in a 1,000,000-row table (target: the
  larger at most 1.5x slower, and at least 20x faster than the full refresh of 1,000,000 rows);
- a refresh queued to a warm django-q2 worker: time from queueing to its Spark work starting (< 1 s);
- full refreshes of 1,000,000 and 300,000 rows with the old fixed partitioning (250,000 rows a
  partition) against the sizing from the cluster's cores and the rows, and fixed counts around it;
- full copies (`BENCH full_copy_100k_pg_mariadb`, `full_copy_1m_pg_mariadb`, `full_copy_1m_pg_pg`): product =
  seconds of the product's full refresh (the path REPLADMIN_FULL_COPY_PATH picks: a native stream by default,
  `spark` for Spark's JDBC path), peer = seconds of a native pipe (psql COPY TO STDOUT | LOAD DATA or COPY
  FROM STDIN) in the same run, ratio = peer / product: higher is better, 1.0 is as fast as the pipe.
  BENCH_FULL_COPY_SCALE (default 1) scales the rows while iterating;
- `BENCH first_refresh_100k_pg_mariadb`: the same for the full refresh an incremental snapshot starts with,
  which also lists its snapshot log's tolerance window as replayed.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from django.utils import timezone

from jobs import jdbc
from replication_admin.core import spark_sizing
from replication_admin.core.audit import Actor
from replication_admin.models import JobRun, Snapshot
from replication_admin.snapshots.actions import do_refresh_snapshot
from replication_admin.statements import execute
from tests.conftest import wait_for_job
from tests.tables import execute as run_sql
from tests.tables import fetch_all

pytestmark = [pytest.mark.bench, pytest.mark.spark, pytest.mark.live_db]

ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
CHANGES = 1000


def report(name: str, **figures) -> None:
    text = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
    print(f"\nBENCH {name}: {text}")


def fill_source(server, rows: int) -> None:
    run_sql(
        server, "CREATE TABLE bench (id integer PRIMARY KEY, name varchar(40), amount numeric(12,2), at timestamp(6))"
    )
    run_sql(
        server,
        "INSERT INTO bench SELECT g, 'name ' || g, (g % 100000) / 100.0, "
        "TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, ?) g",
        [rows],
    )
    run_sql(server, "ANALYZE bench")


def native_pipe(pg, my, rows: int = ROWS) -> float:
    """psql COPY TO STDOUT piped into MariaDB's LOAD DATA (or, for a PostgreSQL destination, psql COPY FROM)."""
    if my.dialect == "postgresql":
        run_sql(my, "CREATE TABLE native (id int PRIMARY KEY, name varchar(40), amount numeric(12,2), at timestamp(6))")
        load = ["psql", "-h", "127.0.0.1", "-U", "root", "-d", my.database, "-c", "\\copy native FROM STDIN"]
    else:
        run_sql(my, "CREATE TABLE native (id int PRIMARY KEY, name varchar(40), amount decimal(12,2), at datetime(6))")
        load = ["mariadb", "-h", "127.0.0.1", "-uroot", "--local-infile=1", my.database, "-e",
                "LOAD DATA LOCAL INFILE '/dev/stdin' INTO TABLE native"]  # fmt: skip
    copy = ["psql", "-h", "127.0.0.1", "-U", "root", "-d", pg.database, "-c", "\\copy bench TO STDOUT"]
    started = time.perf_counter()
    producer = subprocess.Popen(copy, stdout=subprocess.PIPE)
    subprocess.run(load, stdin=producer.stdout, check=True)
    producer.wait()
    elapsed = time.perf_counter() - started
    assert fetch_all(my, "SELECT count(*) FROM native") == [(rows,)]
    return elapsed


def timed(statement: str) -> tuple[float, dict]:
    started = time.perf_counter()
    outcome = execute(Actor.command(), statement)[0]
    elapsed = time.perf_counter() - started
    assert outcome.ok, outcome.message
    return elapsed, outcome.details


@pytest.mark.parametrize("dest", ["mysql", "postgresql"])
def test_full_refresh_against_the_native_copy_load_pipe(make_server, spark, settings, dest):
    """Our full refresh with staging written by the bulk loaders (COPY / LOAD DATA per partition) and by
    Spark's JDBC writer, against one native single-stream pipe (psql COPY TO | LOAD DATA or COPY FROM)."""
    pg = make_server("postgresql", "bpg")
    target = make_server(dest, "bdst")
    fill_source(pg, ROWS)
    # The creation fills the table once, which also warms the worker's JVM, as on a running console.
    execute(Actor.command(), "create nonincremental snapshot bdst.copied as 'select * from bpg.bench'")
    natives: list[float] = []
    ours: dict[str, list[float]] = {"bulk": [], "jdbc": []}
    phases: dict[str, str] = {}
    for _ in range(3):
        run_sql(target, "DROP TABLE IF EXISTS native")
        natives.append(native_pipe(pg, target))
        for writer in ("bulk", "jdbc"):
            settings.NATIVE_LOAD = writer == "bulk"
            elapsed, details = timed("update snapshot bdst.copied")
            assert details["rows"] == ROWS
            ours[writer].append(elapsed)
            phases[writer] = str(JobRun.objects.filter(kind="snapshot_refresh").latest("id").timings)
    native = sorted(natives)[1]
    bulk, jdbc_writer = sorted(ours["bulk"])[1], sorted(ours["jdbc"])[1]
    report(
        f"full refresh PostgreSQL->{dest} (median of 3)",
        rows=ROWS,
        native_pipe_s=native,
        bulk_s=bulk,
        jdbc_s=jdbc_writer,
        bulk_vs_native=native / bulk,
        jdbc_vs_native=native / jdbc_writer,
        bulk_vs_jdbc=jdbc_writer / bulk,
        target=">= 1.0 of the native pipe",
        bulk_phases=phases["bulk"],
        jdbc_phases=phases["jdbc"],
    )


def test_incremental_refresh_cost_follows_the_changes_not_the_table(make_server, spark):
    pg = make_server("postgresql", "ipg")
    make_server("mysql", "imy")
    results = {}
    for rows in (10_000, ROWS):
        table = f"bench_{rows}"
        run_sql(
            pg,
            f"CREATE TABLE {table} (id integer PRIMARY KEY, name varchar(40), amount numeric(12,2), at timestamp(6))",
        )
        run_sql(
            pg,
            f"INSERT INTO {table} SELECT g, 'n' || g, g / 100.0, TIMESTAMP '2024-01-01' FROM generate_series(1, ?) g",
            [rows],
        )
        run_sql(pg, f"ANALYZE {table}")
        execute(Actor.command(), f"create snapshot log for ipg.{table}; create snapshot imy.{table} from ipg.{table}")
        timed(f"update snapshot imy.{table} as nonincremental")  # warm
        full, _ = timed(f"update snapshot imy.{table} as nonincremental")
        rounds = []
        for round_ in range(5):  # steady state: the median of five rounds of 1000 changes
            step = max(1, rows // CHANGES)
            run_sql(pg, f"UPDATE {table} SET name = ? WHERE id % ? = ? AND id <= ?", [f"r{round_}", step, round_, rows])
            time.sleep(1)  # let the write burst's background work (autovacuum, flushing) pass: time the refresh
            incremental, details = timed(f"update snapshot imy.{table}")
            assert details["changes"] == CHANGES
            rounds.append(incremental)
            timings = JobRun.objects.filter(kind="snapshot_refresh").latest("id").timings
            print(f"\n  {rows} rows, round {round_}: {incremental:.3f} s, phases {timings}")
        results[rows] = (full, sorted(rounds)[2])
    small, large = results[10_000][1], results[ROWS][1]
    report(
        "incremental refresh of 1000 changes",
        small_table_s=small,
        large_table_s=large,
        large_vs_small=large / small,
        target_large_vs_small="<= 1.5",
        full_refresh_large_s=results[ROWS][0],
        full_vs_incremental=results[ROWS][0] / large,
        target_full_vs_incremental=">= 20",
    )


def test_a_queued_refresh_on_a_warm_worker_starts_its_spark_work_quickly(make_server, qcluster):
    pg = make_server("postgresql", "wpg")
    make_server("sqlite", "wlite")
    run_sql(pg, "CREATE TABLE t (id integer PRIMARY KEY, v integer)")
    run_sql(pg, "INSERT INTO t SELECT g, g FROM generate_series(1, 1000) g")
    execute(Actor.command(), "create nonincremental snapshot wlite.t as 'select * from wpg.t'", wait=False)
    snapshot = Snapshot.objects.get()
    wait_for_job(JobRun.objects.get(kind="snapshot_refresh").pk)  # warms the worker's Spark
    starts = []
    for _ in range(5):
        queued_at = timezone.now()
        job = wait_for_job(do_refresh_snapshot(Actor.command(), snapshot).pk)
        assert job.state == "succeeded", job.error
        # Claimed by the worker, then the (warm) SparkSession handed over: the Spark work begins.
        starts.append((job.started_at - queued_at).total_seconds() + job.timings.get("spark_session", 0))
    report("queued refresh on a warm worker", start_s_median=sorted(starts)[2], start_s_max=max(starts), target="< 1 s")


def _fixed_partitions(rows: int, cores: int, connections: int) -> int:
    """The sizing before it followed the cluster: 250,000 rows a partition, at most 8, whatever the cores."""
    return min(8, max(1, rows // 250_000))


def test_full_refresh_partitions_sized_to_the_cluster_against_the_fixed_sizing(make_server, spark, monkeypatch):
    """1,000,000 and 300,000 rows PostgreSQL -> MariaDB: the old fixed partitioning, the sizing from the
    cluster's cores and the rows, and fixed counts around it (medians of 3, alternated, same run)."""
    pg = make_server("postgresql", "ppg")
    make_server("mysql", "pmy")
    sizes = {"large": ROWS, "small": max(ROWS * 3 // 10, 1)}
    for name, rows in sizes.items():
        run_sql(
            pg,
            f"CREATE TABLE {name} (id integer PRIMARY KEY, name varchar(40), amount numeric(12,2), at timestamp(6))",
        )
        run_sql(
            pg,
            f"INSERT INTO {name} SELECT g, 'name ' || g, (g % 100000) / 100.0, "
            "TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, ?) g",
            [rows],
        )
        run_sql(pg, f"ANALYZE {name}")
        execute(Actor.command(), f"create nonincremental snapshot pmy.{name} as 'select * from ppg.{name}'")
    cores = spark_sizing.spark_cores()
    original = jdbc.partition_count
    sizings = {
        "fixed (250k a partition)": _fixed_partitions,
        f"sized ({cores} cores, cap {spark_sizing.max_connections_per_server()})": original,
        "1 partition": lambda rows, cores, connections: 1,
        "2 partitions": lambda rows, cores, connections: 2,
        "8 partitions": lambda rows, cores, connections: 8,
    }
    for name, rows in sizes.items():
        times: dict[str, list[float]] = {label: [] for label in sizings}
        for _ in range(3):
            for label, sizing in sizings.items():
                monkeypatch.setattr(jdbc, "partition_count", sizing)
                elapsed, details = timed(f"update snapshot pmy.{name}")
                assert details["rows"] == rows
                times[label].append(elapsed)
        monkeypatch.setattr(jdbc, "partition_count", original)
        medians = {label: sorted(t)[1] for label, t in times.items()}
        fixed, sized = list(medians.values())[:2]
        report(
            f"full refresh of {rows} rows PostgreSQL->MariaDB by partitioning (median of 3)",
            fixed_partitions=_fixed_partitions(rows, cores, 0),
            sized_partitions=original(rows, cores, spark_sizing.max_connections_per_server()),
            **{label.split(" (")[0].replace(" ", "_") + "_s": m for label, m in medians.items()},
            fixed_vs_sized=fixed / sized,
        )


FULL_COPY_SCALE = float(os.environ.get("BENCH_FULL_COPY_SCALE", "1"))


@pytest.mark.parametrize(
    ("name", "rows", "dest"),
    [
        ("full_copy_100k_pg_mariadb", 100_000, "mysql"),
        ("full_copy_1m_pg_mariadb", 1_000_000, "mysql"),
        ("full_copy_1m_pg_pg", 1_000_000, "postgresql"),
    ],
)
def test_full_copy_against_a_native_pipe(make_server, spark, name, rows, dest):
    """The product's full refresh of a 4-column table against a native pipe moving the same rows, alternated,
    median of 3: product = our seconds, peer = the pipe's, ratio = peer / product (higher is better)."""
    rows = max(int(rows * FULL_COPY_SCALE), 1)
    pg = make_server("postgresql", "fpg")
    target = make_server(dest, "fdst")
    fill_source(pg, rows)
    execute(Actor.command(), "create nonincremental snapshot fdst.copied as 'select * from fpg.bench'")
    against_the_pipe(name, pg, target, rows, "update snapshot fdst.copied")


def against_the_pipe(name: str, pg, target, rows: int, refresh: str) -> None:
    """The refresh statement against the native pipe, alternated, median of 3; prints the BENCH line."""
    peers, ours, paths = [], [], set()
    for _ in range(3):
        run_sql(target, "DROP TABLE IF EXISTS native")
        peers.append(native_pipe(pg, target, rows))
        elapsed, details = timed(refresh)
        assert details["rows"] == rows
        ours.append(elapsed)
        paths.add(details.get("path", "spark"))
    product, peer = sorted(ours)[1], sorted(peers)[1]
    print(f"\n  {name}: {rows} rows, path {'/'.join(sorted(paths))}, ours {ours}, pipe {peers}")
    print(f"BENCH {name}: product={product:.3f} peer={peer:.3f} ratio={peer / product:.3f}")


def test_an_incremental_snapshots_full_refresh_against_a_native_pipe(make_server, spark):
    """`BENCH first_refresh_100k_pg_mariadb`: the full refresh an incremental snapshot starts with (and runs
    again `as nonincremental`), which also lists the snapshot log's tolerance window as replayed, against the
    native pipe; 1,000 log rows in the window. Median of 3, alternated; ratio = peer / product."""
    rows = max(int(100_000 * FULL_COPY_SCALE), 1)
    pg, target = make_server("postgresql", "fpg"), make_server("mysql", "fdst")
    fill_source(pg, rows)
    execute(Actor.command(), "create snapshot log for bench", context=pg)
    run_sql(pg, "UPDATE bench SET name = 'logged ' || id WHERE id <= 1000")
    execute(Actor.command(), "create snapshot fdst.copied from fpg.bench")
    assert Snapshot.objects.get(name="fdst.copied").last_ts is not None
    against_the_pipe("first_refresh_100k_pg_mariadb", pg, target, rows, "update snapshot fdst.copied as nonincremental")

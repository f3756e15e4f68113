"""Snapshot replication end to end on live databases and a real Spark, every source x destination pair.

Each check compares the destination with the snapshot's source query through the compare job
(counts, keys and a hash of every row), never by reading log messages.
"""

from __future__ import annotations

import itertools
import random
import threading
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from jobs import jdbc
from jobs.jdbc import read_query
from replication_admin.compare.actions import do_compare_snapshot
from replication_admin.core import connections
from replication_admin.core.audit import Actor
from replication_admin.engine import dialects
from replication_admin.engine.types import LogicalType
from replication_admin.models import JobRun, ScheduledEvent, Snapshot, SnapshotLog
from replication_admin.servers.actions import ServerData, do_register_server
from replication_admin.snapshots.actions import do_repair_snapshot
from replication_admin.statements import execute
from tests.tables import _bind, create_table, fetch_all, insert_rows
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

DIALECTS = ("sqlite", "postgresql", "mysql")
COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=60)),
    ("price", LogicalType("numeric", precision=38, scale=10)),
    ("at", LogicalType("timestamp")),
    ("note", LogicalType("long_varchar")),
]
NAMES = [c for c, _ in COLUMNS]


def run(text: str, context=None) -> list:
    outcomes = execute(Actor.command(), text, context=context, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def compare(snapshot_name: str) -> dict:
    job = do_compare_snapshot(Actor.command(), Snapshot.objects.get(name=snapshot_name), sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job.result


def row(i: int, rng: random.Random) -> tuple:
    note = rng.choice([None, "", f"note {i} ünïcødé ✓", "x" * rng.randint(1, 300)])
    price = Decimal(rng.randint(-(10**12), 10**12)) / Decimal(10 ** rng.randint(0, 10))
    at = datetime(2020, 1, 1) + timedelta(seconds=rng.randint(0, 10**8), microseconds=rng.randint(0, 999999))
    return (i, f"name {i} {rng.choice(['Ä', 'ß', '漢', 'o'])}", price, at, note)


class Workload:
    """Seeded inserts, updates, deletes and primary-key changes on a source table."""

    def __init__(self, server, table: str, seed: int) -> None:
        self.server, self.table, self.rng = server, table, random.Random(seed)
        self.d = dialects.get(server.dialect)
        self.ids: set[int] = set()
        self.next_id = 1

    def insert(self, n: int) -> None:
        rows = []
        for _ in range(n):
            rows.append(row(self.next_id, self.rng))
            self.ids.add(self.next_id)
            self.next_id += 1
        insert_rows(self.server, self.table, NAMES, rows)

    def step(self) -> str:
        q, t = self.d.quote, self.d.qualify(self.table)
        op = self.rng.choice(["insert", "update", "update", "delete", "rekey"])
        if op == "insert" or not self.ids:
            self.insert(1)
            return "insert"
        victim = self.rng.choice(sorted(self.ids))
        if op == "update":
            _, name, price, at, note = row(victim, self.rng)

            run_sql(
                self.server,
                f"UPDATE {t} SET {q('name')} = ?, {q('price')} = ?, {q('at')} = ?, {q('note')} = ? WHERE {q('id')} = ?",
                [_bind(self.server, v) for v in (name, price, at, note)] + [victim],
            )
        elif op == "delete":
            run_sql(self.server, f"DELETE FROM {t} WHERE {q('id')} = ?", [victim])
            self.ids.discard(victim)
        else:
            new = self.next_id
            self.next_id += 1
            run_sql(self.server, f"UPDATE {t} SET {q('id')} = ? WHERE {q('id')} = ?", [new, victim])
            self.ids.discard(victim)
            self.ids.add(new)
        return op


@pytest.mark.parametrize("path", ["control plane", "spark"])
@pytest.mark.parametrize(("source_dialect", "dest_dialect"), list(itertools.product(DIALECTS, DIALECTS)))
def test_incremental_and_full_snapshots_match_their_source_after_random_changes(
    make_server, spark, settings, monkeypatch, source_dialect, dest_dialect, path
):
    # Small log windows are applied by the control plane, large ones on Spark: both must agree.
    settings.REFRESH_SMALL_WINDOW = 0 if path == "spark" else 20000
    if path == "spark":  # read as large windows and tables are: split in several partitions
        monkeypatch.setattr(jdbc, "MIN_ROWS_PER_PARTITION", 1)
    source = make_server(source_dialect, "src")
    make_server(dest_dialect, "dst")
    create_table(source, "items", COLUMNS, ["id"])
    work = Workload(source, "items", seed=hash((source_dialect, dest_dialect)) % 1000)
    work.insert(150)

    run("create snapshot log for items", source)
    run(
        "create snapshot dst.inc_items from src.items; create nonincremental snapshot dst.full_items as 'select * from src.items where id < 120'",
        source,
    )
    for name in ("dst.inc_items", "dst.full_items"):
        result = compare(name)
        assert result["equal"], result

    ops = [work.step() for _ in range(80)]
    assert {"insert", "update", "delete", "rekey"} <= set(ops)
    outcomes = run("update snapshot dst.inc_items; update snapshot dst.full_items")
    assert outcomes[0].details["mode"] == "incremental" and outcomes[0].details["changes"] > 0
    assert outcomes[0].details["path"] == path
    assert outcomes[1].details["mode"] == "full"
    for name in ("dst.inc_items", "dst.full_items"):
        result = compare(name)
        assert result["equal"], (name, result)
        assert result["left_count"] > 0

    # Refreshing again changes nothing: every log row is in the replay log already.
    again = run("update snapshot dst.inc_items")[0].details
    assert again["mode"] == "incremental" and again["changes"] == 0
    assert compare("dst.inc_items")["equal"]


def fidelity_rows() -> list[tuple]:
    big_text = ("0123456789abcdef" * 65536)[:1_048_576]
    big_blob = bytes(range(256)) * 4096
    return [
        (1, None, None, None, None, None),
        (2, "", Decimal("0E-10"), datetime(1970, 1, 1), "", b""),
        (
            3,
            "ünïcødé ✓ 漢字 😀",
            Decimal("1234567890123456789012345678.1234567890"),
            datetime(2024, 2, 29, 23, 59, 59, 999999),
            "x",
            b"\x00",
        ),
        (4, 'it\'s "quoted"', Decimal("-0.0000000001"), datetime(1999, 12, 31, 0, 0, 0, 1), big_text, big_blob),
    ]


# Every type on every ordered pair of dialects, 1 MB values included: tests/fidelity/test_types_across_dialects.py.


@pytest.mark.parametrize(("source_dialect", "dest_dialect"), [("mysql", "postgresql"), ("postgresql", "mysql")])
def test_values_survive_exactly_through_the_bulk_loaders(make_server, spark, settings, source_dialect, dest_dialect):
    """The same values with staging written by COPY / LOAD DATA per partition (REPLADMIN_NATIVE_LOAD=1)."""
    settings.NATIVE_LOAD = True
    values_survive(make_server, source_dialect, dest_dialect)


def values_survive(make_server, source_dialect: str, dest_dialect: str) -> None:
    source = make_server(source_dialect, "vsrc")
    dest = make_server(dest_dialect, "vdst")
    columns = [
        ("id", LogicalType("integer")),
        ("label", LogicalType("varchar", length=40)),
        ("amount", LogicalType("numeric", precision=38, scale=10)),
        ("at", LogicalType("timestamp")),
        ("body", LogicalType("long_varchar")),
        ("data", LogicalType("long_varbinary")),
    ]
    create_table(source, "vals", columns, ["id"])
    insert_rows(source, "vals", [c for c, _ in columns], fidelity_rows())
    run("create snapshot log for vals; create snapshot vdst.vals_copy from vals", source)
    result = compare("vdst.vals_copy")
    assert result["equal"], result
    assert result["compared_columns"] == ["label", "amount", "at", "body", "data"]
    d = dialects.get(dest.dialect)
    stored = fetch_all(
        dest, f"SELECT {d.quote('label')}, {d.quote('body')} FROM {d.quote('vals_copy')} ORDER BY {d.quote('id')}"
    )
    assert stored[0] == (None, None) and stored[1] == ("", "")
    assert len(stored[3][1]) == 1_048_576

    # The same values changed through the incremental path arrive exactly too.
    s = dialects.get(source.dialect)
    run_sql(source, f"UPDATE {s.quote('vals')} SET {s.quote('label')} = '' WHERE {s.quote('id')} = 1")
    run_sql(source, f"UPDATE {s.quote('vals')} SET {s.quote('label')} = NULL WHERE {s.quote('id')} = 2")
    assert run("update snapshot vdst.vals_copy")[0].details["changes"] == 2
    assert compare("vdst.vals_copy")["equal"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_hostile_identifiers_replicate_on_every_dialect(make_server, spark, dialect):
    source = make_server(dialect, "hsrc")
    dest = make_server("sqlite" if dialect != "sqlite" else "mysql", "hdst")
    table = 'ab "cd' if dialect != "mysql" else "ab `cd"
    columns = [
        ("id key", LogicalType("integer")),
        ("select", LogicalType("varchar", length=20)),
        ("Größe", LogicalType("integer")),
    ]
    create_table(source, table, columns, ["id key"])
    insert_rows(source, table, [c for c, _ in columns], [(i, f"v'{i}\"`", i) for i in range(1, 31)])
    q = '"' + table.replace('"', '""') + '"'
    size = "`Größe`" if dialect == "mysql" else '""Größe""'.replace('""', '"')
    run(f"create snapshot log for {q}; create snapshot hdst.{q} from {q} where '{size} > 5'", source)
    snapshot = Snapshot.objects.get(dest_server=dest)
    assert compare(snapshot.name)["equal"]
    s = dialects.get(dialect)
    run_sql(source, f"UPDATE {s.quote(table)} SET {s.quote('Größe')} = 1 WHERE {s.quote('id key')} = 10")
    run_sql(source, f"UPDATE {s.quote(table)} SET {s.quote('select')} = 'new' WHERE {s.quote('id key')} = 20")
    details = run(f"update snapshot {snapshot.name}")[0].details
    assert details["changes"] == 2 and details["deleted_or_filtered"] == 1
    result = compare(snapshot.name)
    assert result["equal"] and result["left_count"] == 24


def test_snapshot_log_objects_are_created_and_dropped_exactly(make_server):
    for dialect in DIALECTS:
        server = make_server(dialect, f"log_{dialect[:2]}")
        create_table(
            server, "Orders", [("OrderID", LogicalType("integer")), ("v", LogicalType("integer"))], ["OrderID"]
        )
        before = set(table_names(server))
        run("create snapshot log for Orders", server)
        assert set(table_names(server)) - before == {"RLOG_Orders"}
        assert trigger_names(server) == {"Orders_I_log", "Orders_U_log", "Orders_D_log"}
        log = SnapshotLog.objects.get(server=server)
        assert (log.source, log.rlog, log.rplog) == (
            f"{server.name}.Orders",
            f"{server.name}.RLOG_Orders",
            f"RPLOG_{server.name}_Orders",
        )
        assert ScheduledEvent.objects.get(name="purge_rplogs").sql == "repl_purge_rplogs()"
        d = dialects.get(dialect)
        orders, key, v = d.quote("Orders"), d.quote("OrderID"), d.quote("v")
        run_sql(server, f"INSERT INTO {orders} VALUES (1, 1)")
        run_sql(server, f"UPDATE {orders} SET {v} = 2 WHERE {key} = 1")
        run_sql(server, f"UPDATE {orders} SET {key} = 5 WHERE {key} = 1")
        logged = fetch_all(
            server, f"SELECT {d.quote('RLOG_OrderID')}, {d.quote('DMLTYPE')} FROM {d.quote('RLOG_Orders')} ORDER BY 1"
        )
        assert logged == [(1, "D"), (5, "I")]
        run("drop snapshot log for Orders", server)
        assert set(table_names(server)) == before and trigger_names(server) == set()
        assert not SnapshotLog.objects.filter(server=server).exists()


def table_names(server) -> list[str]:
    return connections.list_tables(server)


def trigger_names(server) -> set[str]:
    if server.dialect == "sqlite":
        rows = fetch_all(server, "SELECT name FROM sqlite_master WHERE type = 'trigger'")
    elif server.dialect == "postgresql":
        rows = fetch_all(server, "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
    else:
        rows = fetch_all(
            server, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()"
        )
    return {r[0] for r in rows}


def test_without_a_snapshot_log_an_incremental_snapshot_refreshes_fully(make_server, spark):
    source = make_server("postgresql", "nolog_s")
    dest = make_server("sqlite", "nolog_d")
    create_table(source, "t", COLUMNS, ["id"])
    Workload(source, "t", 1).insert(20)
    outcomes = run("create snapshot nolog_d.t_copy from t", source)
    assert outcomes[0].details["mode"] == "full"
    insert_rows(source, "t", NAMES, [row(500, random.Random(5))])
    assert run("update snapshot nolog_d.t_copy")[0].details["mode"] == "full"
    assert compare("nolog_d.t_copy")["right_count"] == 21
    assert dest.name == "nolog_d"


def test_update_as_nonincremental_and_drop_with_delete(make_server, spark):
    source = make_server("mysql", "u_s")
    dest = make_server("postgresql", "u_d")
    create_table(source, "t", COLUMNS, ["id"])
    Workload(source, "t", 2).insert(30)
    run("create snapshot log for t; create snapshot u_d.t_copy from t 'name' where 'id <= 20'", source)
    assert run("update snapshot u_d.t_copy as nonincremental")[0].details["mode"] == "full"
    assert fetch_all(dest, "SELECT count(*) FROM t_copy") == [(20,)]
    assert [
        c[0]
        for c in fetch_all(
            dest,
            "SELECT column_name FROM information_schema.columns WHERE table_name = 't_copy' ORDER BY ordinal_position",
        )
    ] == ["id", "name"]
    run("drop snapshot u_d.t_copy with delete")
    assert not Snapshot.objects.exists()
    assert "t_copy" not in table_names(dest)


def test_a_source_transaction_spanning_the_log_read_is_not_missed(make_server, spark):
    """A transaction that began before a refresh and commits after it is replayed by the next refresh
    (its log rows carry its start time, inside the tolerance window)."""
    source = make_server("postgresql", "tx_s")
    make_server("sqlite", "tx_d")
    create_table(source, "t", COLUMNS, ["id"])
    work = Workload(source, "t", 3)
    work.insert(10)
    run("create snapshot log for t; create snapshot tx_d.t_copy from t", source)

    open_tx = connections.open_connection(source, autocommit=False)
    try:
        open_tx.cursor().execute("INSERT INTO t (id, name) VALUES (1000, 'slow transaction')")
        work.insert(1)  # a quick transaction that commits first
        assert run("update snapshot tx_d.t_copy")[0].details["changes"] == 1
        open_tx.commit()
    finally:
        open_tx.close()
    assert run("update snapshot tx_d.t_copy")[0].details["changes"] == 1
    result = compare("tx_d.t_copy")
    assert result["equal"] and result["right_count"] == 12


@pytest.mark.parametrize(
    ("source_dialect", "dest_dialect"), [("postgresql", "mysql"), ("mysql", "sqlite"), ("sqlite", "postgresql")]
)
def test_repair_fixes_exactly_the_rows_that_differ(make_server, spark, source_dialect, dest_dialect):
    source = make_server(source_dialect, "rs")
    dest = make_server(dest_dialect, "rd")
    create_table(source, "t", COLUMNS, ["id"])
    Workload(source, "t", 7).insert(50)
    run("create snapshot rd.t_copy from t where 'id > 5'", source)
    d = dialects.get(dest.dialect)
    table, key, name = d.quote("t_copy"), d.quote("id"), d.quote("name")
    run_sql(dest, f"DELETE FROM {table} WHERE {key} IN (10, 11)")
    run_sql(dest, f"UPDATE {table} SET {name} = 'tampered' WHERE {key} = 20")
    insert_rows(dest, "t_copy", NAMES, [row(3, random.Random(1)), row(999, random.Random(2))])
    broken = compare("rd.t_copy")
    assert (broken["missing_in_right"], broken["missing_in_left"], broken["different"]) == (2, 2, 1)

    job = do_repair_snapshot(Actor.command(), Snapshot.objects.get(), sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    assert (job.result["upserts"], job.result["deletes"]) == (3, 2)
    assert compare("rd.t_copy")["equal"]
    again = do_repair_snapshot(Actor.command(), Snapshot.objects.get(), sync=True)
    assert (again.result["upserts"], again.result["deletes"]) == (0, 0)


def test_purge_snapshot_log_deletes_only_rows_every_snapshot_has_replayed(make_server, spark):
    source = make_server("sqlite", "pg_s")
    make_server("sqlite", "pg_d1")
    make_server("mysql", "pg_d2")
    create_table(source, "t", COLUMNS, ["id"])
    run("create snapshot log for t", source)
    Workload(source, "t", 8).insert(10)
    run("create snapshot pg_d1.a from t; create snapshot pg_d2.b from t", source)
    assert fetch_all(source, 'SELECT count(*) FROM "RLOG_t"') == [(10,)]
    run_sql(source, 'UPDATE "RLOG_t" SET "SNAPTIME" = \'2020-01-01 00:00:00.000000\' WHERE "RLOG_id" <= 4')
    # One snapshot has read up to an hour ago, the other up to now: the older one decides.
    Snapshot.objects.filter(name="pg_d1.a").update(last_ts=timezone.now() - timedelta(hours=1))
    Snapshot.objects.filter(name="pg_d2.b").update(last_ts=timezone.now())
    outcome = run("purge snapshot log for t", source)[0]
    assert outcome.details["deleted"] == 4
    assert fetch_all(source, 'SELECT count(*) FROM "RLOG_t"') == [(6,)]
    Snapshot.objects.filter(name="pg_d1.a").update(last_ts=None)  # a snapshot that never ran: keep everything
    assert run("purge snapshot log for t", source)[0].details["deleted"] == 0


@pytest.mark.parametrize("dest_dialect", ["postgresql", "mysql"])
def test_readers_see_the_old_or_the_new_content_during_a_full_refresh(make_server, spark, dest_dialect):
    source = make_server("postgresql", "ro_s")
    dest = make_server(dest_dialect, "ro_d")
    create_table(source, "t", COLUMNS, ["id"])
    work = Workload(source, "t", 9)
    work.insert(30_000)
    run("create nonincremental snapshot ro_d.t_copy as 'select * from t'", source)
    old = len(work.ids)
    work.insert(5_000)
    seen: list[int] = []
    stop = threading.Event()

    def read() -> None:
        d = dialects.get(dest.dialect)
        with connections.connect(dest, readonly=True) as conn:
            while not stop.is_set():
                seen.append(conn.cursor().execute(f"SELECT count(*) FROM {d.quote('t_copy')}").fetchone()[0])

    reader = threading.Thread(target=read)
    reader.start()
    try:
        run("update snapshot ro_d.t_copy")
    finally:
        stop.set()
        reader.join()
    assert len(seen) > 5
    assert set(seen) <= {old, old + 5_000}, sorted(set(seen))
    assert seen[-1] == old + 5_000


def test_an_unreachable_server_gives_a_clear_error_and_changes_nothing(make_server, db):
    source = make_server("sqlite", "un_s")
    create_table(source, "t", COLUMNS, ["id"])
    do_register_server(
        Actor.command(), ServerData(name="down", dialect="postgresql", host="127.0.0.1", port=1, database="x", user="u")
    )
    outcomes = execute(Actor.command(), "create snapshot down.t_copy from t", context=source)
    assert (
        not outcomes[0].ok
        and "nothing accepts connections" in outcomes[0].message
        and "server down" in outcomes[0].message
    )
    assert not Snapshot.objects.exists()
    outcomes = execute(Actor.command(), "create snapshot log for down.t")
    assert not outcomes[0].ok and "server down" in outcomes[0].message
    assert not SnapshotLog.objects.exists()


def test_source_reads_run_in_read_only_sessions(make_server, spark):
    source = make_server("postgresql", "rdo")
    run_sql(source, "CREATE SEQUENCE s")
    with pytest.raises(Exception, match="read-only transaction"):
        read_query(
            spark, connections.jdbc_endpoint(source, readonly=True), "SELECT nextval('s') AS v", "v BIGINT"
        ).collect()
    assert (
        read_query(spark, connections.jdbc_endpoint(source), "SELECT nextval('s') AS v", "v BIGINT").collect()[0]["v"]
        == 1
    )


def test_a_query_snapshot_from_sqlite_gets_typed_columns_for_its_expressions(make_server, spark):
    source = make_server("sqlite", "agg_s")
    dest = make_server("postgresql", "agg_d")
    create_table(
        source,
        "lines",
        [
            ("id", LogicalType("integer")),
            ("qty", LogicalType("smallint")),
            ("price", LogicalType("numeric", precision=10, scale=2)),
        ],
        ["id"],
    )
    insert_rows(source, "lines", ["id", "qty", "price"], [(i, i % 7, Decimal(f"{i}.25")) for i in range(1, 101)])
    run(
        "create nonincremental snapshot agg_d.totals as 'select qty, count(*) as n, sum(price) as total from agg_s.lines group by qty'"
    )
    types = fetch_all(
        dest,
        "SELECT column_name, data_type, numeric_scale FROM information_schema.columns WHERE table_name = 'totals' ORDER BY ordinal_position",
    )
    assert types == [("qty", "smallint", 0), ("n", "bigint", 0), ("total", "numeric", 2)]
    assert fetch_all(dest, "SELECT sum(n), sum(total) FROM totals") == [(100, Decimal("5075.00"))]


@pytest.mark.parametrize("dest_dialect", DIALECTS)
def test_a_full_refresh_keeps_the_destinations_indexes_and_triggers(make_server, spark, dest_dialect):
    source = make_server("postgresql", "ix_s")
    dest = make_server(dest_dialect, "ix_d")
    create_table(source, "t", COLUMNS, ["id"])
    Workload(source, "t", 10).insert(50)
    run("create nonincremental snapshot ix_d.t_copy as 'select * from t'", source)
    d = dialects.get(dest_dialect)
    run_sql(dest, f"CREATE INDEX {d.quote('t_copy_name')} ON {d.quote('t_copy')} ({d.quote('name')})")
    first = run("update snapshot ix_d.t_copy")[0].details
    if dest_dialect == "sqlite":
        assert first["swap"] is False  # its staging copy would not carry the index
        names = fetch_all(dest, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 't_copy'")
    elif dest_dialect == "postgresql":
        assert first["swap"] is True  # LIKE ... INCLUDING ALL copies the index
        names = fetch_all(dest, "SELECT indexname FROM pg_indexes WHERE tablename = 't_copy'")
        # The staging copy was loaded without them and they were built after: the key is a key again.
        assert "index" in JobRun.objects.filter(kind="snapshot_refresh").latest("id").timings
        assert fetch_all(dest, "SELECT count(*) FROM pg_constraint WHERE conrelid = 't_copy'::regclass "
                               "AND contype = 'p'") == [(1,)]  # fmt: skip
    else:
        assert first["swap"] is True  # CREATE TABLE ... LIKE copies the index
        names = fetch_all(
            dest, "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_NAME = 't_copy'"
        )
    index_columns = {n[0] for n in names}
    assert any("name" in n for n in index_columns), index_columns
    assert compare("ix_d.t_copy")["equal"]


def test_a_snapshot_log_table_dropped_behind_the_consoles_back_means_a_full_refresh(make_server, spark):
    source = make_server("sqlite", "gone_s")
    make_server("sqlite", "gone_d")
    create_table(source, "t", COLUMNS, ["id"])
    run("create snapshot log for t", source)
    Workload(source, "t", 12).insert(10)
    run("create snapshot gone_d.t_copy from t", source)
    run_sql(source, 'DROP TRIGGER "t_I_log"')
    run_sql(source, 'DROP TABLE "RLOG_t"')
    insert_rows(source, "t", NAMES, [row(77, random.Random(3))])
    details = run("update snapshot gone_d.t_copy")[0].details
    assert details["mode"] == "full" and details["rows"] == 11
    assert compare("gone_d.t_copy")["equal"]

"""Bi-directional snapshot replication across three nodes on live databases and a real Spark:
a PostgreSQL publisher, MariaDB and SQLite subscribers, driven through the statement language.

Replicas are compared with the compare job (counts, keys and a hash of every row, ROWGUID included)."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from jobs import jdbc
from replication_admin.bidir import sync as bidir_sync
from replication_admin.bidir.actions import do_schedule_publication, publication_for
from replication_admin.compare.actions import do_start_compare
from replication_admin.conflicts.actions import do_add_resolver, do_start_dry_run
from replication_admin.conflicts.chains import table_columns
from replication_admin.core.audit import Actor
from replication_admin.core.connections import list_tables
from replication_admin.engine import dialects
from replication_admin.engine.statements import Name, UpdateSnapshotPub, parse_one
from replication_admin.engine.types import LogicalType
from replication_admin.models import (
    ConflictBackup,
    JobRun,
    RegistryEntry,
    ScheduledEvent,
    SnapshotConflictResolver,
    SnapshotPublication,
    SnapshotSubscription,
)
from replication_admin.statements import execute
from tests.tables import create_table, fetch_all, insert_rows
from tests.tables import execute as run_sql

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

COLUMNS = [
    ("id", LogicalType("integer")),
    ("name", LogicalType("varchar", length=40)),
    ("price", LogicalType("numeric", precision=12, scale=2)),
]


def run(text: str) -> list:
    outcomes = execute(Actor.command(), text, wait=True)
    failed = [o for o in outcomes if not o.ok]
    assert not failed, failed[0].message
    return outcomes


def same(left, right, table: str = "items") -> dict:
    job = do_start_compare(Actor.command(), left, table, right, table)
    job = JobRun.objects.get(pk=job.pk)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    return job.result


def assert_converged(pub, *subs) -> None:
    for sub in subs:
        result = same(pub, sub)
        assert result["equal"], (sub.name, result)


def assert_same_rows(pub, *subs) -> None:
    """Every column of every row, ROWGUID included, read from each node (cheaper than a compare job)."""
    expected = rows(pub)
    for sub in subs:
        assert rows(sub) == expected, sub.name


def rows(server, table: str = "items") -> dict:
    d = dialects.get(server.dialect)
    data = fetch_all(server, f"SELECT id, name, price, {d.quote('ROWGUID')} FROM {d.quote(table)} ORDER BY id")
    return {r[0]: (r[1], Decimal(str(r[2])) if r[2] is not None else None, r[3]) for r in data}


def sql(server, text: str, params=()) -> None:
    run_sql(server, text.replace('"', dialects.get(server.dialect).quote_char), params)


@pytest.fixture
def nodes(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pg1")
    sub_my = make_server("mysql", "my2")
    sub_lite = make_server("sqlite", "lite3")
    create_table(pub, "items", COLUMNS, ["id"])
    insert_rows(
        pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i) + Decimal("0.5")) for i in range(1, 21)]
    )
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2);"
        "REPL_SNP_SERVER ('my2', 'root', '');"
        "REPL_CREATE_SNAPSHOT_SUB (REPL_SERVER_NAME ('my2'), 'pg1.items', 2);"
        "REPL_INIT_SNAPSHOT (REPL_SERVER_NAME ('my2'), 'pg1.items', 2, 7);"
        "REPL_CREATE_SNAPSHOT_SUB ('lite3', 'pg1.items', 2);"
        "REPL_INIT_SNAPSHOT ('lite3', 'pg1.items', 2)"
    )
    return pub, sub_my, sub_lite


def test_initial_copy_creates_the_subscriber_tables_and_copies_every_row(nodes):
    pub, sub_my, sub_lite = nodes
    assert_converged(pub, sub_my, sub_lite)
    assert len(rows(sub_my)) == 20
    subscription = SnapshotSubscription.objects.get(server="my2")
    assert subscription.init_state == "done" and subscription.init_rows_done == 20
    assert subscription.init_rows_per_commit == 7


def test_changes_on_every_node_reach_every_other_node_and_never_echo(nodes):
    pub, sub_my, sub_lite = nodes
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 1', ["pub changed"])
    sql(pub, 'INSERT INTO "items" (id, name, price) VALUES (100, ?, 1.25)', ["from pub"])
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 2', ["my changed"])
    sql(sub_my, 'INSERT INTO "items" (id, name, price) VALUES (200, ?, 2.5)', ["from my"])
    sql(sub_my, 'DELETE FROM "items" WHERE id = 3')
    sql(sub_lite, 'UPDATE "items" SET price = 99.99 WHERE id = 4')
    sql(sub_lite, 'DELETE FROM "items" WHERE id = 5')
    outcome = run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")[0]
    assert outcome.details["subscribers"]["my2"]["pulled"] == 3
    assert outcome.details["subscribers"]["lite3"]["pulled"] == 2
    assert_converged(pub, sub_my, sub_lite)
    data = rows(pub)
    assert data[1][0] == "pub changed" and data[2][0] == "my changed" and data[4][1] == Decimal("99.99")
    assert 3 not in data and 5 not in data and data[100][0] == "from pub" and data[200][0] == "from my"
    # Origins survive replication: the MariaDB change carries my2's ROWGUID everywhere.
    assert data[2][2].startswith("my2@") and rows(sub_lite)[2][2] == data[2][2]
    assert ConflictBackup.objects.count() == 0
    # Nothing echoes: a second sync moves nothing.
    again = run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")[0].details["subscribers"]
    assert all(v["pulled"] == 0 and v["pushed"] == 0 for v in again.values()), again
    assert fetch_all(sub_my, "SELECT COUNT(*) FROM `RLOG_items`") == [(0,)]
    # The pulls' work tables are gone, and the publisher's replay log forgot the consumed changes.
    for server in (pub, sub_my, sub_lite):
        assert not [t for t in list_tables(server) if t.startswith(("BSPL_", "BSCN_", "BSIN_", "BSAP_"))]
    replay = next(t for t in list_tables(pub) if t.startswith("RPLOG_"))
    assert fetch_all(pub, f"SELECT COUNT(*) FROM \"{replay}\" WHERE \"SOURCE\" IN ('my2', 'lite3')") == [(0,)]


def test_changes_read_in_several_partitions_reach_every_node_once(nodes, monkeypatch):
    """Large windows are read split by key modulo (pull, the publisher's rows, push): nothing is lost or
    read twice, negative keys included."""
    monkeypatch.setattr(jdbc, "MIN_ROWS_PER_PARTITION", 1)
    pub, sub_my, sub_lite = nodes
    sql(pub, 'UPDATE "items" SET name = ? WHERE id <= 6', ["pub changed"])
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id IN (1, 2, 7, 8, 9, 10)', ["my changed"])
    sql(sub_my, 'INSERT INTO "items" (id, name, price) VALUES (-7, ?, 1), (-8, ?, 2)', ["my -7", "my -8"])
    sql(sub_lite, 'DELETE FROM "items" WHERE id IN (11, 12)')
    sql(sub_lite, 'UPDATE "items" SET price = 7.5 WHERE id IN (13, 14, 15)')
    details = run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")[0].details
    assert details["subscribers"]["my2"]["pulled"] == 8 and details["subscribers"]["lite3"]["pulled"] == 5
    assert details["conflicts"] == 2  # my2's updates of 1 and 2: the publisher wins
    assert_converged(pub, sub_my, sub_lite)
    data = rows(pub)
    assert data[1][0] == "pub changed" and data[7][0] == "my changed" and data[-8][0] == "my -8"
    assert 11 not in data and data[15][1] == Decimal("7.5")


def sync() -> dict:
    return run("REPL_UPDATE_SNAPSHOT ('pg1.items', 2)")[0].details


def backup_for(key: int, source: str) -> ConflictBackup:
    matches = [b for b in ConflictBackup.objects.filter(source=source) if b.primary_key == {"id": key}]
    assert len(matches) == 1, [(b.primary_key, b.source) for b in ConflictBackup.objects.all()]
    return matches[0]


def test_default_decisions_for_every_conflict_type(nodes):
    pub, sub_my, sub_lite = nodes
    # insert conflict: both insert key 300
    sql(pub, 'INSERT INTO "items" (id, name, price) VALUES (300, ?, 3)', ["pub 300"])
    sql(sub_my, 'INSERT INTO "items" (id, name, price) VALUES (300, ?, 4)', ["my 300"])
    # update conflict: both update row 6
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 6', ["pub 6"])
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 6', ["my 6"])
    # update of a row the publisher deleted: a delete conflict
    sql(pub, 'DELETE FROM "items" WHERE id = 7')
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 7', ["my 7"])
    # delete of a row the publisher changed: a delete conflict
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 8', ["pub 8"])
    sql(sub_lite, 'DELETE FROM "items" WHERE id = 8')
    # delete of a row the publisher deleted too
    sql(pub, 'DELETE FROM "items" WHERE id = 9')
    sql(sub_lite, 'DELETE FROM "items" WHERE id = 9')
    before_my = rows(sub_my)
    summary = sync()
    assert summary["conflicts"] == 5, summary
    assert_converged(pub, sub_my, sub_lite)
    data = rows(pub)
    assert data[300][0] == "pub 300" and data[6][0] == "pub 6" and data[8][0] == "pub 8"
    assert 7 not in data and 9 not in data
    b = backup_for(300, "my2")
    assert (b.conflict_type, b.operation, b.decision, b.resolver) == ("I", "I", 3, "default")
    assert b.losing_row["name"] == "my 300" and b.winning_row["name"] == "pub 300"
    assert b.losing_row["ROWGUID"] == before_my[300][2]
    b = backup_for(6, "my2")
    assert (b.conflict_type, b.decision) == ("U", 3) and b.losing_row["name"] == "my 6"
    b = backup_for(7, "my2")
    assert (b.conflict_type, b.operation, b.decision) == ("D", "U", 5) and b.losing_row["name"] == "my 7"
    assert b.publisher_row is None
    b = backup_for(8, "lite3")
    assert (b.conflict_type, b.operation, b.decision) == ("D", "D", 5) and b.publisher_row["name"] == "pub 8"
    b = backup_for(9, "lite3")
    assert (b.conflict_type, b.operation, b.decision) == ("D", "D", 5)
    # Re-running the sync neither moves nor records anything more.
    assert sync()["conflicts"] == 0 and ConflictBackup.objects.count() == 5


def test_subscriber_wins_keeps_the_origin_and_skips_the_originator(nodes):
    pub, sub_my, sub_lite = nodes
    run(
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 'sw', 10, 'sub_wins');"
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'I', 'sw', 10, 'sub_wins');"
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'D', 'sw', 10, 'sub_wins')"
    )
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 6', ["pub 6"])
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 6', ["my 6"])
    sql(pub, 'INSERT INTO "items" (id, name, price) VALUES (300, ?, 3)', ["pub 300"])
    sql(sub_lite, 'INSERT INTO "items" (id, name, price) VALUES (300, ?, 4)', ["lite 300"])
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 8', ["pub 8"])
    sql(sub_lite, 'DELETE FROM "items" WHERE id = 8')
    my_guid = rows(sub_my)[6][2]
    summary = sync()
    assert summary["conflicts"] == 3
    assert_converged(pub, sub_my, sub_lite)
    data = rows(pub)
    assert data[6][0] == "my 6" and data[6][2] == my_guid  # the subscriber's version, origin kept
    assert data[300][0] == "lite 300" and 8 not in data
    assert summary["subscribers"]["my2"]["pushed"] >= 1  # lite3's insert and delete went to my2 ...
    assert {b.decision for b in ConflictBackup.objects.all()} == {1}
    assert backup_for(6, "my2").losing_row["name"] == "pub 6"


def test_change_origin_reaches_the_originator_too(nodes):
    pub, sub_my, sub_lite = nodes
    run("REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 'avg', 10, 'ave', 'price')")
    sql(pub, 'UPDATE "items" SET price = 10 WHERE id = 6')
    sql(sub_my, 'UPDATE "items" SET price = 20 WHERE id = 6')
    sync()
    assert_converged(pub, sub_my, sub_lite)
    data = rows(sub_my)
    assert data[6][1] == Decimal("15.00") and data[6][2].startswith("pg1@")
    b = backup_for(6, "my2")
    assert b.decision == 2 and b.incoming_row["price"] in ("20.00", "20")
    assert Decimal(b.winning_row["price"]) == Decimal("15") and Decimal(b.losing_row["price"]) == Decimal("10")


def test_the_references_minimal_price_resolvers(nodes):
    pub, sub_my, sub_lite = nodes
    # Decide on the minimal price: the cheaper version wins, whichever side it is on.
    run(
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 'minprice', 10, 'custom', NULL, "
        "'CASE WHEN pub.price < new.price THEN 3 WHEN pub.price > new.price THEN 1 ELSE 0 END')"
    )
    sql(pub, 'UPDATE "items" SET price = 5, name = ? WHERE id = 6', ["pub cheaper"])
    sql(sub_my, 'UPDATE "items" SET price = 7, name = ? WHERE id = 6', ["my dearer"])
    sql(pub, 'UPDATE "items" SET price = 9, name = ? WHERE id = 7', ["pub dearer"])
    sql(sub_lite, 'UPDATE "items" SET price = 3, name = ? WHERE id = 7', ["lite cheaper"])
    sync()
    assert_converged(pub, sub_my, sub_lite)
    data = rows(pub)
    assert data[6][0] == "pub cheaper" and data[7][0] == "lite cheaper"
    assert backup_for(6, "my2").decision == 3 and backup_for(7, "lite3").decision == 1


def state(server) -> dict[int, str]:
    return {k: v[2] for k, v in rows(server).items()}


def user_op(server, rng, round_: int, superseded: set, created: set) -> None:
    """One seeded local change; remembers the version it replaced and the one it made."""
    key = rng.randint(1, 45)
    current = state_of_key(server, key)
    if current is None:
        sql(
            server,
            'INSERT INTO "items" (id, name, price) VALUES (?, ?, ?)',
            [key, f"{server.name} r{round_}", rng.randint(1, 999)],
        )
    elif rng.random() < 0.75:
        sql(
            server,
            'UPDATE "items" SET name = ?, price = ? WHERE id = ?',
            [f"{server.name} r{round_} {rng.random():.6f}", rng.randint(1, 999), key],
        )
    else:
        sql(server, 'DELETE FROM "items" WHERE id = ?', [key])
    if current is not None:
        superseded.add(current)
    made = state_of_key(server, key)
    if made is not None:
        created.add(made)


def state_of_key(server, key: int) -> str | None:
    d = dialects.get(server.dialect)
    found = fetch_all(server, f"SELECT {d.quote('ROWGUID')} FROM {d.quote('items')} WHERE id = ?", [key])
    return found[0][0] if found else None


def test_a_seeded_random_workload_on_all_nodes_converges_and_loses_no_version(nodes):
    pub, sub_my, sub_lite = nodes
    rng = random.Random(20261123)
    superseded: set[str] = set()
    seen: set[str] = set()
    operations = 0
    for round_ in range(4):
        for server in (pub, sub_my, sub_lite):
            seen |= set(state(server).values())
        for _ in range(66):
            user_op(rng.choice((pub, sub_my, sub_lite)), rng, round_, superseded, seen)
            operations += 1
        for server in (pub, sub_my, sub_lite):
            seen |= set(state(server).values())
        sync()
        assert_same_rows(pub, sub_my, sub_lite)
    assert_converged(pub, sub_my, sub_lite)
    assert operations >= 200
    final = set(state(pub).values())
    kept: set[str] = set()
    for b in ConflictBackup.objects.all():
        kept.add(b.change_guid)
        for version in (b.publisher_row, b.incoming_row, b.losing_row):
            if version and version.get("ROWGUID"):
                kept.add(version["ROWGUID"])
    lost = seen - final - superseded - kept
    assert not lost, f"{len(lost)} row version(s) vanished without a conflict backup: {sorted(lost)[:5]}"
    assert ConflictBackup.objects.count() > 0  # the workload does race on keys
    # Nothing echoes back: one more sync moves nothing.
    again = sync()["subscribers"]
    assert all(v["pulled"] == 0 and v["pushed"] == 0 for v in again.values()), again


def test_the_dry_run_decides_recorded_conflicts_as_the_sync_did_and_owners_are_told(nodes, mailoutbox):
    pub, sub_my, sub_lite = nodes
    columns = table_columns(pub, "items")
    do_add_resolver(
        Actor.command(), "pg1.items", columns, "U", "custom",
        expression="CASE WHEN pub.price < new.price THEN 3 WHEN pub.price > new.price THEN 2 ELSE 0 END",
        assignments={"name": "concat(new.name, ' (cheaper)')"}, notify="owner@example.com",
    )  # fmt: skip
    for key, (pub_price, sub_price) in enumerate([(5, 7), (9, 3), (4, 4), (8, 1)], start=10):
        sql(pub, 'UPDATE "items" SET price = ? WHERE id = ?', [pub_price, key])
        sql(
            sub_my if key % 2 else sub_lite,
            'UPDATE "items" SET price = ?, name = ? WHERE id = ?',
            [sub_price, f"sub {key}", key],
        )
    sync()
    assert_converged(pub, sub_my, sub_lite)
    decisions = {b.primary_key["id"]: b.decision for b in ConflictBackup.objects.all()}
    assert decisions == {10: 3, 11: 2, 12: 3, 13: 2}  # 12: equal prices, undecided, so the default
    assert rows(pub)[11][0] == "sub 11 (cheaper)"
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["owner@example.com"]
    assert (
        "conflict on id=11 in items from" in mailoutbox[0].body
        and ConflictBackup.objects.filter(notified=True).count() == 4
    )  # 12 too: told to nobody (no default address)

    job = do_start_dry_run(Actor.command(), "pg1.items", pub, "items", sync=True)
    assert job.state == JobRun.State.SUCCEEDED, job.error
    result = job.result
    assert len(result["rows"]) == 4 and result["changed"] == 0
    assert all(
        r["same"] and r["decision"] == decisions[ConflictBackup.objects.get(pk=r["conflict"]).primary_key["id"]]
        for r in result["rows"]
    )
    # A proposed chain that always lets the subscriber win would change all four decisions.
    job = do_start_dry_run(
        Actor.command(), "pg1.items", pub, "items", sync=True,
        proposed={"id": None, "cr_type": "U", "order": 0, "expression": "1", "assignments": {}},
    )  # fmt: skip
    assert job.result["changed"] == 4 and {r["decision"] for r in job.result["rows"]} == {1}


def test_hostile_resolver_expressions_are_refused_and_change_nothing(nodes):
    for expression in (
        "3; drop table items",
        "(select max(price) from items)",
        "reflect('java.lang.Runtime', 'exec', 'id')",
    ):
        outcome = execute(
            Actor.command(),
            f"REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 'x', 1, 'custom', NULL, '{expression.replace(chr(39), chr(39) * 2)}')",
        )[-1]
        assert not outcome.ok and outcome.message
    assert SnapshotConflictResolver.objects.count() == 0
    assert len(rows(nodes[0])) == 20


def test_a_change_made_while_its_previous_version_is_pulled_is_not_a_conflict(nodes, monkeypatch):
    pub, sub_my, sub_lite = nodes
    consume = bidir_sync._consume

    def user_writes_during_the_sync(sub, *args):
        if sub.server.name == "my2":  # after the publisher applied the pulled version, before the consume
            sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 6', ["my second"])
            sql(sub_my, 'DELETE FROM "items" WHERE id = 7')
            sql(sub_my, 'INSERT INTO "items" (id, name, price) VALUES (7, ?, 1)', ["my 7 again"])
        return consume(sub, *args)

    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 6', ["my first"])
    sql(sub_my, 'DELETE FROM "items" WHERE id = 7')
    monkeypatch.setattr(bidir_sync, "_consume", user_writes_during_the_sync)
    sync()
    monkeypatch.setattr(bidir_sync, "_consume", consume)
    assert rows(pub)[6][0] == "my first" and 7 not in rows(pub)
    summary = sync()
    assert summary["conflicts"] == 0, list(ConflictBackup.objects.values("primary_key", "conflict_type"))
    assert_converged(pub, sub_my, sub_lite)
    assert rows(pub)[6][0] == "my second" and rows(pub)[7][0] == "my 7 again"


def test_explicit_codes_and_undecided_resolvers_pass_the_decision_on(nodes):
    pub, sub_my, sub_lite = nodes
    run(
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'I', 'pw', 10, 'pub_wins');"
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 'undecided', 10, 'custom', NULL, '0');"
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'U', 'pw', 20, 'pub_wins');"
        "REPL_ADD_SNAPSHOT_CR ('pg1.items', 'D', 'ignore', 10, 'custom', NULL, '5')"
    )
    names = dict(SnapshotConflictResolver.objects.values_list("proc", "id"))
    sql(pub, 'INSERT INTO "items" (id, name, price) VALUES (300, ?, 3)', ["pub 300"])
    sql(sub_lite, 'INSERT INTO "items" (id, name, price) VALUES (300, ?, 4)', ["lite 300"])
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 6', ["pub 6"])
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 6', ["my 6"])
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 8', ["pub 8"])
    sql(sub_my, 'DELETE FROM "items" WHERE id = 8')
    sync()
    assert_converged(pub, sub_my, sub_lite)
    data = rows(sub_lite)
    assert data[300][0] == "pub 300" and data[6][0] == "pub 6" and data[8][0] == "pub 8"
    decided = {b.primary_key["id"]: (b.decision, b.resolver_id) for b in ConflictBackup.objects.all()}
    assert decided == {
        300: (3, names["pg1.items_cr_I_pw"]),
        6: (3, names["pg1.items_cr_U_pw"]),  # the undecided resolver passed it on
        8: (5, names["pg1.items_cr_D_ignore"]),
    }


def test_a_scheduled_sync_holds_a_statement_naming_the_publication_even_with_a_hostile_name(make_server):
    server = make_server("sqlite", "lite9")
    publication = SnapshotPublication.objects.create(item='lite9.ab "cd', server=server, table='ab "cd')
    event = do_schedule_publication(Actor.command(), publication, 5)
    statement = parse_one(event.sql)
    assert statement == UpdateSnapshotPub(item=Name('ab "cd', "lite9"))
    assert publication_for(server, statement.item.table) == publication
    assert event.name == 'bidir lite9.ab "cd' and event.interval == 5
    assert do_schedule_publication(Actor.command(), publication, None) is None


def test_hostile_table_and_column_names_replicate_both_ways(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pg7")
    sub = make_server("mysql", "my8")
    table = 'ab "cd'
    create_table(
        pub, table, [("id", LogicalType("integer")), ('we"ird col', LogicalType("varchar", length=20))], ["id"]
    )
    insert_rows(pub, table, ["id", 'we"ird col'], [(1, "one"), (2, "two")])
    run(
        'REPL_CREATE_SNAPSHOT_PUB (\'pg7."ab ""cd"\', 2);'
        "REPL_CREATE_SNAPSHOT_SUB ('my8', 'pg7.\"ab \"\"cd\"', 2);"
        "REPL_INIT_SNAPSHOT ('my8', 'pg7.\"ab \"\"cd\"', 2)"
    )
    run_sql(pub, 'UPDATE "ab ""cd" SET "we""ird col" = ? WHERE id = 1', ["uno"])
    run_sql(sub, 'UPDATE `ab "cd` SET `we"ird col` = ? WHERE id = 2', ["dos"])
    run('REPL_UPDATE_SNAPSHOT (\'pg7."ab ""cd"\', 2)')
    assert same(pub, sub, table)["equal"]
    assert fetch_all(sub, 'SELECT id, `we"ird col` FROM `ab "cd` ORDER BY id') == [(1, "uno"), (2, "dos")]


def test_replay_logs_are_purged_and_a_change_the_publisher_already_has_is_not_applied_twice(nodes, monkeypatch):
    pub, sub_my, sub_lite = nodes
    assert ScheduledEvent.objects.get(name="purge_urplogs").sql == "repl_purge_urplogs()"
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 6', ["my 6"])
    sql(sub_my, 'INSERT INTO "items" (id, name, price) VALUES (400, ?, 4)', ["my 400"])
    # The worker dies after the publisher applied the pull, before the subscriber's log was consumed ...
    monkeypatch.setattr(bidir_sync, "_consume", lambda *args, **kwargs: None)
    monkeypatch.setattr(bidir_sync, "_forget", lambda *args, **kwargs: None)
    sync()
    monkeypatch.undo()
    assert fetch_all(sub_my, "SELECT COUNT(*) FROM `RLOG_items`") == [(2,)]
    # The purge keeps the publisher's rows of changes still in the subscriber's log ...
    RegistryEntry.objects.update_or_create(key="snp_repl_purge_offset", defaults={"value": "0"})
    run("REPL_PURGE_URPLOGS ()")
    replay = '"RPLOG_pg1_items"'
    assert fetch_all(pub, f"SELECT COUNT(*) FROM {replay} WHERE \"SOURCE\" = 'my2'") == [(2,)]
    last_push = SnapshotSubscription.objects.get(server="lite3").last_push_ts.replace(tzinfo=None)
    older = fetch_all(sub_lite, f"SELECT COUNT(*) FROM {replay} WHERE SNAPTIME < ?", [last_push.isoformat(" ")])
    assert older == [(0,)]
    # ... and should they be lost anyway, the publisher sees it already has those versions.
    run_sql(pub, f"DELETE FROM {replay}")
    summary = sync()
    assert summary["conflicts"] == 0 and ConflictBackup.objects.count() == 0
    assert fetch_all(sub_my, "SELECT COUNT(*) FROM `RLOG_items`") == [(0,)]
    assert_converged(pub, sub_my, sub_lite)
    assert rows(sub_lite)[400][0] == "my 400"


def test_an_initial_copy_read_in_several_spark_partitions_finishes_on_sqlite(make_server, jobs_sync, spark):
    pub = make_server("postgresql", "pg5")
    sub = make_server("sqlite", "lite6")
    create_table(pub, "items", COLUMNS, ["id"])
    # Keys spread over 1,000,000 make the copy read the publisher in four Spark partitions.
    insert_rows(pub, "items", ["id", "name", "price"], [(i * 500, f"item {i}", Decimal(i)) for i in range(1, 2001)])
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('pg5.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('lite6', 'pg5.items', 2);"
        "REPL_INIT_SNAPSHOT ('lite6', 'pg5.items', 2, 300)"
    )
    assert same(pub, sub)["equal"] and len(rows(sub)) == 2000
    assert SnapshotSubscription.objects.get(server="lite6").init_bookmark < 2**31


# --- re-copies ---------------------------------------------------------------------------------------------


def pending(server) -> int:
    return fetch_all(server, f"SELECT COUNT(*) FROM {dialects.get(server.dialect).quote('RLOG_items')}")[0][0]


def count_log_writes(server) -> None:
    """Record every row written into the subscriber's log from now on (the change type of each insert or
    update of RLOG_items) in the table log_writes."""
    run_sql(server, "CREATE TABLE log_writes (op varchar(1))")
    if server.dialect == "postgresql":
        run_sql(
            server,
            "CREATE FUNCTION count_log_write() RETURNS trigger LANGUAGE plpgsql AS "
            '$$ BEGIN INSERT INTO log_writes VALUES (NEW."DMLTYPE"); RETURN NULL; END $$',
        )
        run_sql(
            server,
            'CREATE TRIGGER count_log_write AFTER INSERT OR UPDATE ON "RLOG_items" '
            "FOR EACH ROW EXECUTE FUNCTION count_log_write()",
        )
        return
    for when in ("INSERT", "UPDATE"):
        if server.dialect == "mysql":
            body = "FOR EACH ROW INSERT INTO log_writes VALUES (NEW.`DMLTYPE`)"
            run_sql(server, f"CREATE TRIGGER count_log_{when.lower()} AFTER {when} ON `RLOG_items` {body}")
        else:
            body = 'BEGIN INSERT INTO log_writes VALUES (NEW."DMLTYPE"); END'
            run_sql(server, f'CREATE TRIGGER count_log_{when.lower()} AFTER {when} ON "RLOG_items" {body}')


def change_locally(sub, first_key: int) -> None:
    """Three local changes the subscriber's log holds until a sync sends them: an update, an insert, a delete."""
    sql(sub, 'UPDATE "items" SET name = ? WHERE id = 1', [f"{sub.name} before"])
    sql(sub, 'INSERT INTO "items" (id, name, price) VALUES (?, ?, 1.5)', [first_key, "local before"])
    sql(sub, 'DELETE FROM "items" WHERE id = 2')
    assert pending(sub) == 3


def assert_recopied(pub, *subs) -> None:
    """Every subscriber holds the publisher's rows (ROWGUIDs included) and nothing in its log, and the
    re-copy logged no row: the replaced rows were not deleted through the capture triggers."""
    assert_same_rows(pub, *subs)
    for sub in subs:
        assert pending(sub) == 0, sub.name
        assert fetch_all(sub, "SELECT op FROM log_writes") == [], sub.name


def test_a_re_copy_discards_pending_changes_without_logging_the_rows_it_replaces(nodes):
    pub, sub_my, sub_lite = nodes
    change_locally(sub_my, 200)
    change_locally(sub_lite, 300)
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 4', ["pub before"])
    for sub in (sub_my, sub_lite):
        count_log_writes(sub)
    run("REPL_INIT_SNAPSHOT ('my2', 'pg1.items', 2, 7); REPL_INIT_SNAPSHOT ('lite3', 'pg1.items', 2)")
    assert_recopied(pub, sub_my, sub_lite)
    published = rows(pub)
    assert published[1][0] == "item 1" and published[4][0] == "pub before" and 2 in published
    assert 200 not in published and 300 not in published
    # Nothing logged before the re-copy flows back to the publisher.
    summary = sync()
    assert all(s["pulled"] == 0 for s in summary["subscribers"].values()), summary
    assert rows(pub) == published and ConflictBackup.objects.count() == 0
    assert_same_rows(pub, sub_my, sub_lite)
    # The ROWGUID columns and the capture triggers are intact: changes flow both ways again.
    sql(sub_my, 'UPDATE "items" SET name = ? WHERE id = 3', ["my after"])
    sql(sub_lite, 'DELETE FROM "items" WHERE id = 6')
    sql(sub_lite, 'INSERT INTO "items" (id, name, price) VALUES (301, ?, 3)', ["lite after"])
    sql(pub, 'INSERT INTO "items" (id, name, price) VALUES (500, ?, 5)', ["pub after"])
    assert (pending(sub_my), pending(sub_lite)) == (1, 2)
    summary = sync()
    assert {n: s["pulled"] for n, s in summary["subscribers"].items()} == {"my2": 1, "lite3": 2}, summary
    assert_converged(pub, sub_my, sub_lite)
    data = rows(pub)
    assert data[3][0] == "my after" and data[3][2].startswith("my2@") and 6 not in data
    assert data[301][2].startswith("lite3@") and rows(sub_my)[500][0] == "pub after"


def test_a_re_copy_of_a_postgresql_subscriber_truncates_it_or_deletes_when_foreign_keys_reference_it(
    make_server, jobs_sync, spark
):
    pub = make_server("mysql", "my11")
    sub = make_server("postgresql", "pg12")
    create_table(pub, "items", COLUMNS, ["id"])
    insert_rows(pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i)) for i in range(1, 31)])
    copy = "REPL_INIT_SNAPSHOT ('pg12', 'my11.items', 2, 10)"
    run(f"REPL_CREATE_SNAPSHOT_PUB ('my11.items', 2); REPL_CREATE_SNAPSHOT_SUB ('pg12', 'my11.items', 2); {copy}")
    change_locally(sub, 200)
    count_log_writes(sub)
    run(copy)
    assert_recopied(pub, sub)
    # A table referencing the copy refuses TRUNCATE: the re-copy deletes the rows instead, logging none
    # that stays behind.
    run_sql(sub, "CREATE TABLE refs (id integer PRIMARY KEY, item integer REFERENCES items (id))")
    change_locally(sub, 201)
    run(copy)
    assert_same_rows(pub, sub)
    assert pending(sub) == 0
    published = rows(pub)
    run("REPL_UPDATE_SNAPSHOT ('my11.items', 2)")
    assert rows(pub) == published
    sql(sub, 'UPDATE "items" SET name = ? WHERE id = 5', ["pg after"])
    run("REPL_UPDATE_SNAPSHOT ('my11.items', 2)")
    assert rows(pub)[5][0] == "pg after" and rows(pub)[5][2].startswith("pg12@")
    assert_same_rows(pub, sub)


# The subscriber's dialect beside each publisher's.
SUBSCRIBER_OF = {"postgresql": "mysql", "mysql": "sqlite", "sqlite": "postgresql"}


@pytest.mark.parametrize("pub_dialect", sorted(SUBSCRIBER_OF))
def test_changes_whose_publisher_row_moves_after_their_decision_are_decided_again_under_the_locks_and_applied(
    make_server, jobs_sync, spark, monkeypatch, pub_dialect
):
    pub = make_server(pub_dialect, "pub1")
    sub = make_server(SUBSCRIBER_OF[pub_dialect], "sub2")
    create_table(pub, "items", COLUMNS, ["id"])
    insert_rows(pub, "items", ["id", "name", "price"], [(i, f"item {i}", Decimal(i)) for i in range(1, 11)])
    run(
        "REPL_CREATE_SNAPSHOT_PUB ('pub1.items', 2);"
        "REPL_CREATE_SNAPSHOT_SUB ('sub2', 'pub1.items', 2);"
        "REPL_INIT_SNAPSHOT ('sub2', 'pub1.items', 2)"
    )
    for key in (1, 2, 3, 4):
        sql(sub, 'UPDATE "items" SET name = ? WHERE id = ?', [f"sub {key}", key])
    sql(sub, 'DELETE FROM "items" WHERE id = 5')
    sql(sub, 'UPDATE "items" SET name = ? WHERE id = 6', ["sub 6"])
    sql(pub, 'UPDATE "items" SET name = ? WHERE id = 6', ["pub 6 before"])  # a conflict when decided
    plain = bidir_sync.run_apply
    moved: list[str] = []

    def application_writes_after_the_decision(server, plan, *args, **kwargs):
        if server.name == "pub1" and not moved:
            # Decided on the rows as they were; the publisher's application changes some of them now.
            for key in (1, 2, 5, 6):
                sql(pub, 'UPDATE "items" SET name = ? WHERE id = ?', [f"pub {key} after", key])
            moved.append(server.name)
        return plain(server, plan, *args, **kwargs)

    monkeypatch.setattr(bidir_sync, "run_apply", application_writes_after_the_decision)
    details = run("REPL_UPDATE_SNAPSHOT ('pub1.items', 2)")[0].details
    monkeypatch.setattr(bidir_sync, "run_apply", plain)
    assert moved
    pulled = details["subscribers"]["sub2"]
    # Every change read is applied by this sync: the four whose row moved were decided again.
    assert (pulled["read"], pulled["applied"], pulled["left_for_next_sync"]) == (6, 6, 0), pulled
    assert (pulled["decided_again"], pulled["conflicts"]) == (4, 4), pulled
    data = rows(pub)
    # Decided on the rows as they now are: the publisher's later versions win (the defaults), none is lost.
    assert [data[k][0] for k in (1, 2, 3, 4, 5, 6)] == [
        "pub 1 after", "pub 2 after", "sub 3", "sub 4", "pub 5 after", "pub 6 after"
    ]  # fmt: skip
    backups = {b.primary_key["id"]: b for b in ConflictBackup.with_pending.all()}
    assert sorted(backups) == [1, 2, 5, 6] and not [b for b in backups.values() if b.pending]
    assert [backups[k].publisher_row["name"] for k in (1, 2, 5, 6)] == [
        "pub 1 after", "pub 2 after", "pub 5 after", "pub 6 after"
    ]  # fmt: skip
    assert [backups[k].losing_row and backups[k].losing_row["name"] for k in (1, 2, 6)] == ["sub 1", "sub 2", "sub 6"]
    # The next sync brings the subscriber to the same rows and decides nothing again.
    assert run("REPL_UPDATE_SNAPSHOT ('pub1.items', 2)")[0].details["conflicts"] == 0
    assert_same_rows(pub, sub)
    assert ConflictBackup.with_pending.count() == 4

"""Real separate hosts: a worker host that dies whole mid-job is healed by the other one, in seconds.

The test builds its hosts itself (tests/netns.py: Linux network namespaces on a private bridge, as root):
- `db`: a PostgreSQL cluster of its own on the host's address, holding the catalog and the replicated databases
  (PostgreSQL → PostgreSQL: a MariaDB in a namespace would add a second server for no new network path);
- `spark`: the standalone Spark master (web UI on its port 8080) and the Spark service (`manage.py spark_service`);
- `w1`, `w2`: each a Spark worker (one executor of the service) and a `manage.py qcluster` (REPLADMIN_HOST=w1/w2).
Nothing between hosts goes over 127.0.0.1; the test process is the operator, on the bridge's own address.

Each trial changes the data, queues a job (a full refresh through Spark, REPLADMIN_FULL_COPY_PATH=spark, or a
bi-directional sync), and kills the host running it while it runs: its link goes down, then every process on it
(qcluster, Spark worker and executor) gets SIGKILL. Nobody closes a connection: the catalog, the databases and
Spark learn of it only from their timeouts (the product's lease and Spark's DEAD_HOST_CONF in jobs/session.py).
It asserts on data: the job's request ends succeeded (on the surviving host), content equal by count and a hash
of every row, no key twice, no item lock, no job left running and no staging table. Kill → succeeded seconds are
printed as BENCH lines (never asserted): REPLADMIN_FAULT_TRIALS=3 for the median/max over 3 kills per job kind.

Whatever it starts or makes (processes, namespaces, links, the bridge, the cluster) is removed afterwards, also on
failure; what a crashed earlier run left is removed first. With CI=true, a machine that cannot make namespaces
fails the test.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from jobs.service import spark_home
from jobs.session import master_java_options
from tests.conftest import ROOT, unavailable
from tests.netns import Host, NamespacesUnavailable, Network, postgres_on
from tests.pg_cluster import BIN

pytestmark = [pytest.mark.spark, pytest.mark.live_db]

TRIALS = int(os.environ.get("REPLADMIN_FAULT_TRIALS", "1"))
REFRESH_ROWS = int(os.environ.get("REPLADMIN_HOSTS_TEST_ROWS", "200000"))
BIDIR_ROWS = int(os.environ.get("REPLADMIN_HOSTS_TEST_BIDIR_ROWS", "30000"))
HEAL_TARGET = 60  # seconds from a host's death to its job ending succeeded: printed beside the figures
SPARK_PORT, MASTER_PORT, SERVICE_PORT = 7077, 8080, 15002
# The database host ends the sessions of a client that vanished (docs/deploy.md, "Network"): a dead executor's
# open write would otherwise hold its locks (and a connection slot) for hours.
DB_HOST_SETTINGS = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "client_connection_check_interval": "5000",
}
HEALED: dict[str, list[float]] = {}


@dataclass
class Hosts:
    net: Network
    db: Host
    spark: Host
    workers: dict[str, Host]
    work: Path
    env: dict[str, str] = field(default_factory=dict)

    # --- processes ---------------------------------------------------------------------------------------------

    def spark_env(self, host: Host) -> dict[str, str]:
        return {
            **self.env,
            "SPARK_LOCAL_IP": host.address,
            "SPARK_LOCAL_HOSTNAME": host.address,
            "SPARK_LOG_DIR": str(self.work),
            "SPARK_WORKER_DIR": str(self.work / f"spark-{host.name}"),
        }

    def spark_class(self, *args: str) -> list[str]:
        return [os.path.join(spark_home(), "bin", "spark-class"), *args]

    def start_master_and_service(self) -> None:
        host = self.spark
        env = {**self.spark_env(host), "SPARK_MASTER_OPTS": master_java_options()}
        host.start(
            "master",
            self.spark_class(
                "org.apache.spark.deploy.master.Master", "--host", host.address, "--port", str(SPARK_PORT),
                "--webui-port", str(MASTER_PORT),
            ),
            env,
        )  # fmt: skip
        service_env = {
            **self.spark_env(host),
            "REPLADMIN_SPARK_MASTER": f"spark://{host.address}:{SPARK_PORT}",
            "REPLADMIN_SPARK_CONNECT_HOST": host.address,
            "REPLADMIN_SPARK_DRIVER_HOST": host.address,
            "REPLADMIN_SPARK_BIND_ADDRESS": host.address,
            "REPLADMIN_SPARK_DRIVER_MEMORY": "1g",
            "REPLADMIN_SPARK_CONF": "spark.cores.max=2 spark.executor.cores=1 spark.executor.memory=640m",
        }
        service_env.pop("REPLADMIN_SPARK_REMOTE", None)
        host.start(
            "service", [sys.executable, str(ROOT / "manage.py"), "spark_service", "--port", str(SERVICE_PORT)],
            service_env, cwd=ROOT,
        )  # fmt: skip

    def start_worker_host(self, name: str) -> None:
        host = self.workers[name]
        host.start(
            "worker",
            self.spark_class(
                "org.apache.spark.deploy.worker.Worker", f"spark://{self.spark.address}:{SPARK_PORT}",
                "--host", host.address, "--cores", "1", "--memory", "1g", "--webui-port", "8081",
                "--work-dir", str(self.work / f"spark-{name}"),
            ),
            self.spark_env(host),
        )  # fmt: skip
        host.start(
            "qcluster", [sys.executable, str(ROOT / "manage.py"), "qcluster"],
            {**self.env, "REPLADMIN_HOST": name}, cwd=ROOT,
        )  # fmt: skip

    def executors(self) -> int:
        """Cores the master has given the Spark service (one per live worker host)."""
        try:
            url = f"http://{self.spark.address}:{MASTER_PORT}/json/"
            with urllib.request.urlopen(url, timeout=3) as reply:
                apps = json.load(reply).get("activeapps", [])
        except (OSError, ValueError):
            return 0
        return sum(int(app.get("cores", 0)) for app in apps)

    def wait_for_executors(self, count: int, seconds: float = 240) -> None:
        deadline = time.monotonic() + seconds
        while self.executors() < count:
            if time.monotonic() > deadline:
                pytest.fail(f"the Spark service has {self.executors()} of {count} executors\n{self.logs()}")
            time.sleep(0.5)

    def kill(self, name: str) -> float:
        """The worker host dies whole; the wall-clock time of its death (its link going down)."""
        died = time.time()
        self.workers[name].kill()
        return died

    def revive(self, name: str) -> None:
        self.workers[name].revive()
        self.start_worker_host(name)
        self.wait_for_executors(2)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}" for path in sorted(self.work.glob("*.log"))
        )

    # --- the operator's side ------------------------------------------------------------------------------------

    def manage(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        assert done.returncode == 0, f"manage.py {args[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    def connect(self, database: str) -> psycopg.Connection:
        return psycopg.connect(
            host=self.db.address, port=5432, user="postgres", dbname=database, autocommit=True, connect_timeout=10
        )

    def catalog(self, sql: str, *params: object) -> list[tuple]:
        with self.connect("catalog") as conn:
            return conn.execute(sql, params).fetchall()

    def queue(self, statement: str, server: str | None = None) -> int:
        out = self.manage("replsql", "--queue", *(["--server", server] if server else []), statement)
        found = re.search(r"\s(\d+)\s*$", out.strip().splitlines()[-1])
        assert found, out
        return int(found.group(1))

    def job(self, job_id: int) -> dict:
        columns = ["id", "state", "worker_host", "error", "started_at", "finished_at", "trigger"]
        rows = self.catalog(f'SELECT {", ".join(columns)} FROM "REPL_JOB_RUN" WHERE id = %s', job_id)
        assert rows, f"no job #{job_id}"
        return dict(zip(columns, rows[0], strict=True))

    def final_attempt(self, job_id: int, seconds: float = 600) -> dict:
        """Follow the request's attempts until one has finished and none follows it."""
        deadline = time.monotonic() + seconds
        current = job_id
        while time.monotonic() < deadline:
            job = self.job(current)
            following = self.catalog('SELECT id FROM "REPL_JOB_RUN" WHERE retry_of_id = %s', current)
            if following:
                current = following[0][0]
                continue
            if job["state"] not in {"queued", "running"}:
                return job
            time.sleep(0.2)
        pytest.fail(f"job #{job_id}: attempt #{current} still {self.job(current)['state']} after {seconds} s")

    def run(self, statement: str, server: str | None = None) -> float:
        """Queue a job, wait for it to succeed; the seconds it ran."""
        job = self.final_attempt(self.queue(statement, server))
        assert job["state"] == "succeeded", f"{job}\n{self.logs()}"
        return (job["finished_at"] - job["started_at"]).total_seconds()

    def kill_mid_job(self, statement: str, server: str | None, ran: float, rng: random.Random, label: str) -> bool:
        """Queue `statement`, kill the host running it part way in; wait for the request to end succeeded and
        bring the host back. True when the kill landed inside the running job (then its heal time is kept)."""
        job_id = self.queue(statement, server)
        deadline = time.monotonic() + 300
        while (job := self.job(job_id))["state"] != "running":
            assert job["state"] == "queued", f"{job}\n{self.logs()}"
            assert time.monotonic() < deadline, f"job #{job_id} never started\n{self.logs()}"
            time.sleep(0.05)
        victim = job["worker_host"]
        assert victim in self.workers, job
        delay = rng.uniform(0.25, 0.5) * ran
        time.sleep(delay)
        landed = self.job(job_id)["state"] == "running"
        killed_at = self.kill(victim)
        final = self.final_attempt(job_id)
        assert final["state"] == "succeeded", f"{final}\n{self.logs()}"
        if landed:
            lost = self.job(job_id)
            assert lost["state"] == "lost", lost
            assert final["id"] != job_id and final["trigger"] == "retry", final
            assert final["worker_host"] != victim, final
            healed = final["finished_at"].timestamp() - killed_at
            taken_back = lost["finished_at"].timestamp() - killed_at
            HEALED.setdefault(label, []).append(healed)
            print(
                f"\n{label}: {victim} killed {delay:.1f} s into a job of ~{ran:.0f} s; taken back after "
                f"{taken_back:.1f} s, succeeded on {final['worker_host']} {healed:.1f} s after the kill"
            )
        self.revive(victim)
        return landed

    def assert_clean(self) -> None:
        assert self.catalog('SELECT count(*) FROM "REPL_LOCK"') == [(0,)]
        assert self.catalog("""SELECT count(*) FROM "REPL_JOB_RUN" WHERE state IN ('running', 'queued')""") == [(0,)]

    def tables(self, database: str) -> set[str]:
        with self.connect(database) as conn:
            rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
            return {r[0] for r in rows.fetchall()}

    def digest(self, database: str, table: str, columns: str) -> tuple[int, int, str]:
        """Count, distinct keys and a hash of every row in key order (the key is the first column)."""
        with self.connect(database) as conn:
            distinct = conn.execute(f"SELECT count(DISTINCT {columns.split(',')[0]}) FROM {table}").fetchone()
            hashed, count = hashlib.sha256(), 0
            with conn.cursor(name="rows", withhold=True) as cursor:
                cursor.execute(f"SELECT {columns} FROM {table} ORDER BY 1")
                for row in cursor:
                    count += 1
                    hashed.update("\x1f".join(map(str, row)).encode() + b"\x1e")
        assert distinct is not None
        return count, int(distinct[0]), hashed.hexdigest()


def _check_capabilities() -> None:
    if not (BIN / "initdb").exists():
        unavailable(f"the PostgreSQL 15 server binaries in {BIN}")
    missing = [jar for jar in settings.JDBC_JARS if not os.path.isfile(jar)]
    if missing:
        unavailable(f"JDBC jars missing: {', '.join(missing)}")
    if subprocess.run(["sh", "-c", "command -v java"], capture_output=True).returncode != 0:
        unavailable("no java on PATH (Spark needs a Java runtime)")


def _child_env(hosts: Hosts) -> dict[str, str]:
    """The environment every manage.py of the hosts (and of the operator) runs with: the catalog on the db host,
    the Spark service on the spark host; nothing of the suite's own catalog, Spark or Redis."""
    dropped = ("REPLADMIN_SPARK_", "REPLADMIN_TEST_", "REPLADMIN_DB_", "REPLADMIN_REDIS", "SPARK_", "PYSPARK_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and k != "REPLADMIN_HOST"}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.update({
        "REPLADMIN_DB_ENGINE": "postgresql",
        "REPLADMIN_DB_NAME": "catalog",
        "REPLADMIN_DB_HOST": hosts.db.address,
        "REPLADMIN_DB_PORT": "5432",
        "REPLADMIN_DB_USER": "postgres",
        "REPLADMIN_DB_PASSWORD": "",
        "REPLADMIN_SPARK_REMOTE": f"sc://{hosts.spark.address}:{SERVICE_PORT}",
        "REPLADMIN_SPARK_CONNECT_RETRY_SECONDS": "60",
        "REPLADMIN_FULL_COPY_PATH": "spark",
        "REPLADMIN_WORKERS": "1",
        "REPLADMIN_JOBS_SYNC": "0",
    })  # fmt: skip
    return env


@pytest.fixture(scope="module")
def hosts(request) -> Iterator[Hosts]:
    _check_capabilities()
    # Not under pytest's temporary folder: other pytest runs of the machine's user rotate those away, with the
    # Spark workers' directories in them.
    work = Path(tempfile.mkdtemp(prefix="repladmin-hosts-"))
    work.chmod(0o755)  # the database host's server (user postgres) writes its log there
    try:
        net = Network(work)
    except NamespacesUnavailable as exc:
        shutil.rmtree(work, ignore_errors=True)
        unavailable(f"separate hosts (network namespaces): {exc}")
    passed, failed_before = False, request.session.testsfailed
    try:
        names = ("db", "spark", "w1", "w2")
        made = {name: net.add_host(name) for name in names}
        pool = Hosts(net, made["db"], made["spark"], {"w1": made["w1"], "w2": made["w2"]}, work)
        pool.env = _child_env(pool)
        with postgres_on(pool.db, DB_HOST_SETTINGS):
            with pool.connect("postgres") as conn:
                for database in ("catalog", "src", "dst", "bpub", "bsub"):
                    conn.execute(f'CREATE DATABASE "{database}"')
            pool.manage("migrate", "--no-input")
            pool.start_master_and_service()
            for name in pool.workers:
                pool.start_worker_host(name)
            # A loaded machine takes minutes to start four JVMs; the ping waits for the service's first task.
            pool.manage("spark_service", "--ping", "--wait", "600", timeout=660)
            pool.wait_for_executors(2)
            for name, database in (("src", "src"), ("dst", "dst"), ("pg1", "bpub"), ("pg2", "bsub")):
                pool.manage(
                    "register_server", name, "--dialect", "postgresql", "--host", pool.db.address, "--port", "5432",
                    "--database", database, "--user", "postgres",
                )  # fmt: skip
            yield pool
            for host in (*pool.workers.values(), pool.spark):
                host.stop()
            passed = request.session.testsfailed == failed_before
    finally:
        net.destroy()
        if passed:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"\nthe hosts' logs are kept in {work}")


def report(label: str, landed: int) -> None:
    times = HEALED.get(label, [])
    if times:
        median = statistics.median(times)
        print(
            f"\nBENCH {label}: product={median:.1f} peer={HEAL_TARGET} ratio={median / HEAL_TARGET:.3f}"
            f"\nBENCH {label}_max: product={max(times):.1f} peer={HEAL_TARGET} ratio={max(times) / HEAL_TARGET:.3f}"
            f"  (kill → job succeeded, seconds, over {len(times)} kills)"
        )
    assert landed >= max(1, TRIALS // 2), f"only {landed} of {TRIALS} kills landed inside a running job"


def test_a_full_refresh_whose_worker_host_dies_is_finished_by_the_other_host_with_nothing_lost_or_doubled(hosts):
    rng = random.Random("dead-host-refresh")
    with hosts.connect("src") as conn:
        conn.execute("CREATE TABLE t (id integer PRIMARY KEY, name varchar(40) NOT NULL, amount integer NOT NULL)")
        conn.execute(
            "INSERT INTO t SELECT n, 'row ' || md5(n::text), mod(n::bigint * 7919, 100003) "
            "FROM generate_series(1, %s) n",
            (REFRESH_ROWS,),
        )
        conn.execute("ANALYZE t")
    hosts.manage("replsql", "--server", "src", "create snapshot dst.t_copy from t")
    source_tables, dest_tables = hosts.tables("src"), hosts.tables("dst")
    statement = "update snapshot dst.t_copy as nonincremental"
    ran = hosts.run(statement, "src")
    landed = 0
    for trial in range(TRIALS):
        with hosts.connect("src") as conn:  # a refresh that copies stale rows again would be seen
            conn.execute("UPDATE t SET amount = amount + %s WHERE id %% 7 = %s", (trial + 1, trial % 7))
            conn.execute("DELETE FROM t WHERE id %% 101 = %s", (trial,))
            top = conn.execute("SELECT max(id) FROM t").fetchall()[0][0]
            conn.execute(
                "INSERT INTO t SELECT n, 'new ' || n, n FROM generate_series(%s::int, %s::int) n", (top + 1, top + 500)
            )
        for attempt in range(3):  # a refresh that ended before the kill is run again, killed sooner
            if hosts.kill_mid_job(statement, "src", ran / 3**attempt, rng, "dead_host_full_refresh"):
                landed += 1
                break
        columns = "id, name, amount"
        assert hosts.digest("dst", "t_copy", columns) == hosts.digest("src", "t", columns)
        count, distinct, _ = hosts.digest("dst", "t_copy", columns)
        assert count == distinct, "a row was copied twice"
        assert hosts.tables("dst") == dest_tables and hosts.tables("src") == source_tables, "staging left behind"
        hosts.assert_clean()
    report("dead_host_full_refresh", landed)


def test_a_bidirectional_sync_whose_worker_host_dies_is_finished_by_the_other_host_with_nothing_lost_or_doubled(
    hosts,
):
    rng = random.Random("dead-host-bidir")
    with hosts.connect("bpub") as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY, name varchar(40), price numeric(12, 2))")
        conn.execute("INSERT INTO items SELECT n, 'item ' || n, n / 4.0 FROM generate_series(1, %s) n", (BIDIR_ROWS,))
    hosts.manage(
        "replsql",
        "REPL_CREATE_SNAPSHOT_PUB ('pg1.items', 2); REPL_CREATE_SNAPSHOT_SUB ('pg2', 'pg1.items', 2)",
    )
    hosts.run("REPL_INIT_SNAPSHOT ('pg2', 'pg1.items', 2, 500)")
    pub_tables, sub_tables = hosts.tables("bpub"), hosts.tables("bsub")
    statement = "REPL_UPDATE_SNAPSHOT ('pg1.items', 2)"
    top = BIDIR_ROWS

    def change_both_sides(step: int) -> None:
        """Changes on each side, on rows of its own (no conflicts: both must end with all of them)."""
        nonlocal top
        for database, parity in (("bpub", 0), ("bsub", 1)):
            with hosts.connect(database) as conn:
                conn.execute(
                    "UPDATE items SET name = %s, price = price + 1 WHERE id %% 2 = %s AND id %% 13 = %s",
                    (f"{database} {step}", parity, step % 13),
                )
                conn.execute("DELETE FROM items WHERE id %% 2 = %s AND id %% 97 = %s", (parity, step % 97))
                conn.execute(
                    "INSERT INTO items (id, name, price) SELECT n, %s || n, n FROM generate_series(%s::int, %s::int) n",
                    (f"{database} new ", top + 1, top + 500),
                )
                top += 500

    change_both_sides(0)
    ran = hosts.run(statement)
    landed = 0
    for trial in range(TRIALS):
        for attempt in range(3):  # a sync that ended before the kill gets new changes and a sooner kill
            change_both_sides(1 + trial * 3 + attempt)
            if hosts.kill_mid_job(statement, None, ran / 3**attempt, rng, "dead_host_bidir_sync"):
                landed += 1
                break
        columns = "id, name, price"
        pub, sub = hosts.digest("bpub", "items", columns), hosts.digest("bsub", "items", columns)
        assert pub == sub, f"publisher {pub[:2]} and subscriber {sub[:2]} differ"
        assert pub[0] == pub[1], "a row is there twice"
        assert hosts.tables("bpub") == pub_tables and hosts.tables("bsub") == sub_tables, "staging left behind"
        hosts.assert_clean()
    report("dead_host_bidir_sync", landed)

"""The benchmarks' own PostgreSQL clusters beside the peers they are compared with: two clusters with logical
replication on (a publisher and a subscriber), their databases, PostgreSQL's built-in subscriptions between them,
and the product's servers registered on them. Shared by test_peers_bench.py and test_follower_bench.py."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import psycopg
import pytest

from replication_admin.core.audit import Actor
from replication_admin.models import Server
from replication_admin.servers.actions import ServerData, do_register_server
from tests.pg_cluster import own_cluster

TABLE = "CREATE TABLE t (id bigint PRIMARY KEY, v varchar(40), amount numeric(14, 2))"
HAS_PGLOGICAL = Path("/usr/lib/postgresql/15/lib/pglogical.so").exists()
# Enough slots and senders for several built-in subscriptions and the product's own slot beside them.
SETTINGS = {"wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20",
            "max_worker_processes": "40", "shared_buffers": "256MB",
            "wal_retrieve_retry_interval": "100ms"}  # fmt: skip


def pg(port: int, db: str = "postgres", autocommit: bool = True) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname=db, autocommit=autocommit)


@contextlib.contextmanager
def two_clusters(pub_port: int, sub_port: int, databases: Iterable[str], pglogical: bool = False) -> Iterator[None]:
    """A publisher's and a subscriber's cluster (logical replication on), each with `databases` created; stopped
    afterwards, also on failure. `pglogical`: preloaded (when installed)."""
    if not shutil.which("runuser"):
        pytest.skip("runuser (util-linux) is needed to start PostgreSQL as its own user")
    settings = dict(SETTINGS)
    if pglogical and HAS_PGLOGICAL:
        settings |= {
            "shared_preload_libraries": "pglogical",
            "track_commit_timestamp": "on",
            "output_plugin_libraries": "pgoutput, test_decoding, pglogical_output",
        }
    names = list(databases)
    with own_cluster(pub_port, settings), own_cluster(sub_port, settings):
        for port in (pub_port, sub_port):
            with pg(port) as conn:
                for name in names:
                    conn.execute(f"CREATE DATABASE {name}")
        yield


def builtin_subscription(pub_port: int, pub_db: str, sub_port: int, sub_db: str, name: str = "bench") -> None:
    """PostgreSQL's own subscription `name` in sub_db to the publication `bench` of pub_db (made when missing), the
    table `t` on both sides, nothing copied at the start."""
    with pg(pub_port, pub_db) as conn:
        if not conn.execute("SELECT 1 FROM pg_publication WHERE pubname = 'bench'").fetchone():
            conn.execute(TABLE.replace("CREATE TABLE t", "CREATE TABLE IF NOT EXISTS t"))
            conn.execute("CREATE PUBLICATION bench FOR TABLE t")
    with pg(sub_port, sub_db) as conn:
        conn.execute(TABLE)
        conn.execute(
            f"CREATE SUBSCRIPTION {name} CONNECTION 'host=127.0.0.1 port={pub_port} user=postgres dbname={pub_db}' "
            "PUBLICATION bench WITH (copy_data = false)"
        )


def registered(name: str, port: int, db: str) -> Server:
    """The product's server `name` on database `db` of the benchmark's cluster at `port` (registered once)."""
    server = Server.objects.filter(name=name).first()
    if server is None:
        data = ServerData(
            name=name, dialect="postgresql", host="127.0.0.1", port=port, database=db, user="postgres", password=""
        )
        server = do_register_server(Actor.command(), data)
    return server

"""Fixtures of the network-fault tests: TCP proxies in front of the live databases, and servers registered
through them (the control plane's ODBC and Spark's JDBC then both go through the proxy)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from replication_admin.core.audit import Actor
from replication_admin.servers.actions import do_register_server
from tests.conftest import MY, PG, server_data
from tests.faults.proxy import ProxyProcess


@pytest.fixture
def tcp_proxy() -> Iterator[Callable[[str], ProxyProcess]]:
    """Factory: a started proxy forwarding to the live PostgreSQL or MariaDB; stopped after the test,
    whatever its outcome."""
    made: list[ProxyProcess] = []

    def make(dialect: str) -> ProxyProcess:
        params = PG if dialect == "postgresql" else MY
        proxy = ProxyProcess(str(params["host"]), int(params["port"]))
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.stop()


@pytest.fixture
def proxied_server(db, live_database, tcp_proxy):
    """Factory: (server, proxy) — a fresh database registered under `name` on a proxy's port."""

    def make(dialect: str, name: str):
        proxy = tcp_proxy(dialect)
        data = server_data(dialect, name, live_database(dialect))
        data = dataclasses.replace(data, port=proxy.port)
        return do_register_server(Actor.command(), data), proxy

    return make

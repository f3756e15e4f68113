"""Separate hosts on one machine: Linux network namespaces on a private bridge (iproute2, as root).

Each host is a network namespace with one veth link into a bridge of the run's own, on a private /24 of
10.213.0.0/16 that no interface of the machine uses; the machine itself (the test process) is .1 on that bridge.
Processes started on a host see only its address (and its own loopback): nothing between hosts goes over
127.0.0.1. `Host.kill()` is a dead host: its link goes down first (so that no FIN or RST leaves it), then
every process in the namespace gets SIGKILL; its peers learn of it only from their own timeouts.

Every name made here starts with PREFIX and the hexadecimal pid of the run that made it, then a non-hex mark
(`rans1a2b3-db`, `rans1a2b3-br`, `rans1a2b3v2`), so a new run removes what a crashed run left behind (its pid is
gone) and never touches a live run's.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.pg_cluster import BIN, _as_postgres, wait_accepting

PREFIX = "rans"
SUBNETS = ipaddress.ip_network("10.213.0.0/16")


class NamespacesUnavailable(RuntimeError):
    """This machine (or this user) cannot make network namespaces; the message says why."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NamespacesUnavailable(f"ip {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pids_in(netns: str) -> list[int]:
    done = _ip("netns", "pids", netns, check=False)
    return [int(p) for p in done.stdout.split() if p.isdigit()]


def _kill_namespace_processes(netns: str) -> None:
    for _ in range(20):
        pids = _pids_in(netns)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _owner(name: str) -> int | None:
    found = re.match(rf"{PREFIX}([0-9a-f]+)[-vp]", name)
    return int(found.group(1), 16) if found else None


def remove_leftovers() -> list[str]:
    """Remove the namespaces and links of earlier runs that are no longer alive; the names removed."""
    removed: list[str] = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        owner = _owner(name)
        if owner is not None and owner != os.getpid() and not _alive(owner):
            _kill_namespace_processes(name)
            _ip("netns", "delete", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        found = re.match(r"\d+:\s+([^:@\s]+)", line)
        name = found.group(1) if found else ""
        owner = _owner(name)
        if owner is not None and owner != os.getpid() and not _alive(owner):
            _ip("link", "delete", name, check=False)
            removed.append(name)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    used = _ip("-4", "-o", "addr", "show", check=False).stdout + _ip("-4", "route", "show", check=False).stdout
    start = os.getpid() % 250 + 2
    for n in range(250):
        third = (start + n) % 250 + 2
        subnet = ipaddress.ip_network(f"10.213.{third}.0/24")
        if f"10.213.{third}." not in used:
            return subnet
    raise NamespacesUnavailable(f"no free /24 left in {SUBNETS}")


@dataclass
class Host:
    """One separate host: a network namespace, its address, and the processes started on it."""

    name: str
    netns: str
    address: str
    link: str  # the bridge side of its veth pair
    log_dir: Path
    procs: list[subprocess.Popen] = field(default_factory=list)

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.netns, *argv], **kwargs)

    def start(self, label: str, argv: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.Popen:
        """A process on this host, in a process group of its own, its output in `label`.log."""
        with open(self.log_dir / f"{self.name}-{label}.log", "ab") as log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, *argv],
                cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def kill(self) -> None:
        """The host dies: its link goes down (no FIN or RST gets out), then every process on it is SIGKILLed."""
        _ip("link", "set", self.link, "down")
        self.run(["ip", "link", "set", "eth0", "down"], capture_output=True)
        _kill_namespace_processes(self.netns)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self.procs = [p for p in self.procs if p.poll() is None]

    def revive(self) -> None:
        """The host is back (with nothing running on it): its link is up again."""
        self.run(["ip", "link", "set", "eth0", "up"], check=True, capture_output=True)
        _ip("link", "set", self.link, "up")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        _kill_namespace_processes(self.netns)
        self.procs.clear()


class Network:
    """A private bridge and the hosts on it; `destroy()` removes all of it (also what a failed start made)."""

    def __init__(self, log_dir: Path) -> None:
        if os.geteuid() != 0:
            raise NamespacesUnavailable("network namespaces need root")
        if shutil.which("ip") is None:
            raise NamespacesUnavailable("iproute2 (the `ip` command) is not installed")
        remove_leftovers()
        self.tag = f"{PREFIX}{os.getpid():x}"
        self.bridge = f"{self.tag}-br"  # not a hex digit after the pid: another run must read the owner right
        self.log_dir = log_dir
        self.hosts: dict[str, Host] = {}
        self.subnet = _free_subnet()
        self.gateway = str(self.subnet.network_address + 1)
        self._made_bridge = False
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def add_host(self, name: str) -> Host:
        number = len(self.hosts) + 2
        netns, link, peer = f"{self.tag}-{name}", f"{self.tag}v{number}", f"{self.tag}p{number}"
        address = str(self.subnet.network_address + number)
        _ip("netns", "add", netns)
        host = Host(name, netns, address, link, self.log_dir)
        self.hosts[name] = host
        _ip("link", "add", link, "type", "veth", "peer", "name", peer)
        _ip("link", "set", link, "master", self.bridge)
        _ip("link", "set", link, "up")
        _ip("link", "set", peer, "netns", netns)
        for args in (
            ("link", "set", "lo", "up"),
            ("link", "set", peer, "name", "eth0"),
            ("addr", "add", f"{address}/24", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
            ("route", "add", "default", "via", self.gateway),
        ):
            _ip("-n", netns, *args)
        return host

    def destroy(self) -> None:
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                host.stop()
            _kill_namespace_processes(host.netns)
            _ip("netns", "delete", host.netns, check=False)
            _ip("link", "delete", host.link, check=False)
        if self._made_bridge:
            _ip("link", "delete", self.bridge, check=False)
        self.hosts.clear()


@contextlib.contextmanager
def postgres_on(host: Host, settings: dict[str, str] | None = None, port: int = 5432) -> Iterator[str]:
    """A PostgreSQL cluster of its own on `host` (its address only, trust from the private subnet); yields its
    data directory. Stopped and removed afterwards, also on failure."""
    base = Path(tempfile.mkdtemp(prefix=f"repladmin-{host.netns}-"))
    data = base / "data"
    log = host.log_dir / f"{host.name}-postgres.log"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        log.touch()
        shutil.chown(log, "postgres", "postgres")
    try:
        subprocess.run(
            _as_postgres(str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"),
            check=True, capture_output=True,
        )  # fmt: skip
        options = {
            "port": str(port),
            "listen_addresses": host.address,
            "unix_socket_directories": str(base),
            "max_connections": "200",
            **(settings or {}),
        }
        with open(data / "postgresql.auto.conf", "a") as conf:
            conf.writelines(f"{key} = '{value}'\n" for key, value in options.items())
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {SUBNETS} trust\n")
        started = host.run(
            _as_postgres(str(BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "start"),
            capture_output=True, text=True,
        )  # fmt: skip
        if started.returncode != 0:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"PostgreSQL on {host.name} did not start: {started.stderr.strip()} {text[-2000:]}")
        wait_accepting(host.address, port)
        yield str(data)
    finally:
        if (data / "postmaster.pid").exists():
            host.run(_as_postgres(str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)

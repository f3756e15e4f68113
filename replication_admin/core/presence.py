"""Whether the tables replication items read and write are still there: a published table dropped or renamed on
its publisher, or a subscriber's copy dropped, makes its item "broken" (engine/health.py) with a one-line reason,
instead of an "ok" over a replication that can no longer go on.

Read live: each server's list of tables, one bounded read per server cached for LIVE_SECONDS (core/live.py). A
server that cannot be read says nothing about its tables (the item's reachability tells that), so nothing is
called gone on a guess.
"""

from __future__ import annotations

from collections.abc import Iterable

from replication_admin.core import connections, live
from replication_admin.models import Server


class Presence:
    """The tables of the servers named, as they are now (each server's list read on first use)."""

    def __init__(self, names: Iterable[str], servers: Iterable[Server] | None = None) -> None:
        wanted = set(names)
        known = {s.name: s for s in (servers or []) if s.name in wanted}
        if wanted - known.keys():
            known.update({s.name: s for s in Server.objects.filter(name__in=wanted - known.keys())})
        self.servers = known
        self.reach = live.reachability(self.servers.values()) if self.servers else {}
        self._tables: dict[str, tuple[set[str], dict[str, list[str]]] | None] = {}

    def _list(self, name: str) -> tuple[set[str], dict[str, list[str]]] | None:
        if name not in self._tables:
            server = self.servers.get(name)
            listed = None
            if server is not None:
                read = live.read(server, self.reach, ("tables",), lambda: connections.list_tables(server))
                listed = read.value if read.ok else None
            if listed is None:
                self._tables[name] = None
            else:
                folded: dict[str, list[str]] = {}
                for table in listed:
                    folded.setdefault(table.lower(), []).append(table)
                self._tables[name] = (set(listed), folded)
        return self._tables[name]

    def gone(self, server: str, table: str, role: str = "") -> str:
        """Why `table` is not on `server`, one line ("" when it is there, or when that cannot be known now). A
        name matches exactly, or as the one table of that name in another case (as lookups find tables)."""
        if not table:
            return ""
        listed = self._list(server)
        if listed is None:
            return ""
        exact, folded = listed
        if table in exact or len(folded.get(table.lower(), [])) == 1:
            return ""
        what = f"{role} table" if role else "table"
        return f"the {what} {table} is gone from server {server} (dropped or renamed)"

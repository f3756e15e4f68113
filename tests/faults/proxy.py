"""A TCP proxy on 127.0.0.1 in front of PostgreSQL or MariaDB, to make network faults on demand.

Servers registered on the proxy's port reach the database through it, the ODBC control plane and Spark's
JDBC reads and writes alike. The proxy can

- `cut()` every open connection (both sockets closed at once, as a broken link or a restarted server);
- `outage(seconds)`: cut, and refuse new connections (nothing listens on the port) for that long;
- `stall()` / `resume()`: keep connections open but stop forwarding bytes;
- `outage_after(nbytes, seconds)`: start an outage by itself once `nbytes` more bytes went through, so a
  test hits the middle of a copy or an apply without racing it;
- `stall_after(nbytes, seconds)`: likewise, a stall of `seconds` (connections stay open, nothing is forwarded;
  a connection its client closes meanwhile is closed towards the server too).

`connections` counts accepted connections, `forwarded` the bytes passed either way, `outages` the outages
started, `stalls` the stalls started by stall_after.

The proxy runs in a process of its own (`ProxyProcess`, driven over a pipe): the code under test holds
Python's lock while the ODBC driver waits on the network (pyodbc's fast executemany), and forwarding threads
in the same process would then wait with it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import threading
import time


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0
        self.forwarded = 0
        self.outages = 0
        self.stalls = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._listener: socket.socket | None = None
        self._stopped = threading.Event()
        self._stalled = threading.Event()
        # (forwarded count that starts it, "outage" or "stall", seconds)
        self._trigger: tuple[int, str, float] | None = None
        self._threads: list[threading.Thread] = []

    # --- life ---------------------------------------------------------------------------------------------

    def start(self) -> TcpProxy:
        self._listen()
        return self

    def stop(self) -> None:
        """Close the port and every connection; nothing listens afterwards (a closed port)."""
        self._stopped.set()
        self._close_listener()
        self.cut()
        for thread in self._threads:
            thread.join(timeout=2)

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._spawn(self._accept_loop, listener)

    def _close_listener(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    # --- faults -------------------------------------------------------------------------------------------

    def cut(self) -> int:
        """Close every open connection; returns how many were cut."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, upstream in pairs:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
        return len(pairs)

    def outage(self, seconds: float) -> None:
        """Cut every connection and refuse new ones for `seconds` (returns at once)."""
        self.outages += 1
        self._close_listener()
        self.cut()

        def back() -> None:
            time.sleep(seconds)
            if not self._stopped.is_set():
                self._listen()

        self._spawn(back)

    def outage_after(self, nbytes: int, seconds: float) -> None:
        """Start an outage of `seconds` once `nbytes` more bytes have gone through."""
        with self._lock:
            self._trigger = (self.forwarded + nbytes, "outage", seconds)

    def stall_after(self, nbytes: int, seconds: float) -> None:
        """Stall every connection for `seconds` once `nbytes` more bytes have gone through."""
        with self._lock:
            self._trigger = (self.forwarded + nbytes, "stall", seconds)

    def _stall_for(self, seconds: float) -> None:
        self.stalls += 1
        self.stall()

        def back() -> None:
            time.sleep(seconds)
            self.resume()

        self._spawn(back)

    def stall(self) -> None:
        self._stalled.set()

    def resume(self) -> None:
        self._stalled.clear()

    # --- forwarding ---------------------------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopped.is_set() and self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed: an outage or the end
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._pairs.append((client, upstream))
                self.connections += 1
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while self._stalled.is_set() and not self._stopped.is_set():
                    time.sleep(0.05)
                sink.sendall(data)
                fire = None
                with self._lock:
                    self.forwarded += len(data)
                    if self._trigger is not None and self.forwarded >= self._trigger[0]:
                        fire, self._trigger = self._trigger[1:], None
                if fire is not None and fire[0] == "stall":
                    self._stall_for(fire[1])
                elif fire is not None:
                    self.outage(fire[1])
                    return
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _serve(target_host: str, target_port: int, pipe) -> None:
    proxy = TcpProxy(target_host, target_port).start()
    pipe.send(proxy.port)
    while True:
        name, args = pipe.recv()
        if name == "stats":
            pipe.send((proxy.connections, proxy.forwarded, proxy.outages, proxy.stalls))
            continue
        result = getattr(proxy, name)(*args)
        pipe.send(result)
        if name == "stop":
            return


class ProxyProcess:
    """A TcpProxy in a child process, with the same methods and counters."""

    def __init__(self, target_host: str, target_port: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(target_host, target_port, child), daemon=True)
        self._process.start()
        self.port: int = self._pipe.recv()
        self._stopped = False

    def _call(self, name: str, *args):
        self._pipe.send((name, args))
        return self._pipe.recv()

    def cut(self) -> int:
        return self._call("cut")

    def outage(self, seconds: float) -> None:
        self._call("outage", seconds)

    def outage_after(self, nbytes: int, seconds: float) -> None:
        self._call("outage_after", nbytes, seconds)

    def stall_after(self, nbytes: int, seconds: float) -> None:
        self._call("stall_after", nbytes, seconds)

    def stall(self) -> None:
        self._call("stall")

    def resume(self) -> None:
        self._call("resume")

    @property
    def connections(self) -> int:
        return self._call("stats")[0]

    @property
    def forwarded(self) -> int:
        return self._call("stats")[1]

    @property
    def outages(self) -> int:
        return self._call("stats")[2]

    @property
    def stalls(self) -> int:
        return self._call("stats")[3]

    def stop(self) -> None:
        """Close the port (nothing listens afterwards) and end the process."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            self._call("stop")
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

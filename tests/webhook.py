"""A JSON webhook receiver on 127.0.0.1 for the notification tests: a real HTTP server on a thread, recording what
Apprise's `json://` service posts; `failing` makes it answer 500 (a service that refuses) until cleared."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Webhook:
    port: int = 0
    received: list[dict] = field(default_factory=list)
    failing: bool = False

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hooks/replication"

    def titles(self) -> list[str]:
        return [message["title"] for message in self.received]


@contextmanager
def webhook() -> Iterator[Webhook]:
    hook = Webhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if hook.failing:
                self.send_response(500)
                self.end_headers()
                return
            hook.received.append(json.loads(body) | {"path": self.path})
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()

"""A scripted registry answering Confluent's API on loopback, for the client's error paths.

The jobs' real-registry tests use Apicurio (the ``schema_registry`` fixture); this one answers
what a real registry is hard to make answer on demand (a refusal, a 500) and records the
requests, so the tests can see which credentials were sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def fake_registry(routes: dict[str, tuple[Any, ...]]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Serve ``routes`` (path → (status, JSON body or raw bytes[, headers])); yields (base URL,
    request headers seen)."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **dict(self.headers.items())})
            status, body, *more = routes.get(
                self.path, (404, {"error_code": 40401, "message": "Subject not found"})
            )
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            for name, value in (more[0] if more else {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def versions(
    subject: str, *schemas: tuple[int, str, str], references: Any = ()
) -> dict[str, tuple[int, Any]]:
    """Routes for ``subject`` with versions 1.. of (id, schemaType, schema text)."""
    routes: dict[str, tuple[int, Any]] = {
        f"/subjects/{subject}/versions": (200, list(range(1, len(schemas) + 1)))
    }
    for n, (schema_id, kind, text) in enumerate(schemas, start=1):
        body = {"subject": subject, "version": n, "id": schema_id, "schemaType": kind, "schema": text}
        if references and n == len(schemas):
            body["references"] = list(references)
        routes[f"/subjects/{subject}/versions/{n}"] = (200, body)
    return routes

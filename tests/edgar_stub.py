"""Loopback stand-in for SEC EDGAR (data.sec.gov + www.sec.gov on one 127.0.0.1 port).

`LoopbackServer` is the generic part (also used by dart_stub): a threaded http.server that
records every request (path, query, headers, arrival time), serves registered routes, and
plays scripted faults first (`fail(path, [(status, headers, body), ...])`).
`EdgarStub` speaks EDGAR's real paths and, like SEC, answers 403 to a User-Agent without a
contact email; it gzips bodies when the client accepts gzip.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

# A route answers (status, headers, body) for a request.
Response = tuple[int, dict, bytes]
Route = Callable[["Recorded"], Response]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    t: float = field(default_factory=time.monotonic)

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


def json_response(obj, status: int = 200, headers: dict | None = None) -> Response:
    return (
        status,
        {"Content-Type": "application/json; charset=utf-8", **(headers or {})},
        json.dumps(obj, ensure_ascii=False).encode("utf-8"),
    )


class LoopbackServer:
    def __init__(self, gzip_bodies: bool = False):
        self.requests: list[Recorded] = []
        self.routes: dict[str, Route] = {}
        self.faults: dict[str, deque[Response | Callable[[Recorded], Response]]] = defaultdict(deque)
        self.gzip_bodies = gzip_bodies
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def _serve(self, with_body: bool):
                parts = urlsplit(self.path)
                rec = Recorded(
                    self.command, parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()}, dict(self.headers.items())
                )
                with stub._lock:
                    stub.requests.append(rec)
                    fault = stub.faults[parts.path].popleft() if stub.faults.get(parts.path) else None
                status, headers, body = (fault(rec) if callable(fault) else fault) if fault else stub.dispatch(rec)
                headers = dict(headers)
                if (
                    stub.gzip_bodies
                    and status == 200
                    and body
                    and "gzip" in (rec.header("Accept-Encoding") or "")
                    and "Content-Encoding" not in headers
                ):
                    body = gzip.compress(body, compresslevel=1)
                    headers["Content-Encoding"] = "gzip"
                headers.setdefault("Content-Length", str(len(body)))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if with_body:
                    try:
                        self.wfile.write(body)
                    except (BrokenPipeError, ConnectionResetError):
                        pass

            def do_GET(self):
                self._serve(True)

            def do_HEAD(self):
                self._serve(False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- lifecycle

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- behaviour

    def route(self, path: str, handler: Route | Response | bytes):
        if isinstance(handler, bytes):
            body = handler
            handler = lambda rec: (200, {"Content-Type": "application/octet-stream"}, body)  # noqa: E731
        elif isinstance(handler, tuple):
            resp = handler
            handler = lambda rec: resp  # noqa: E731
        self.routes[path] = handler

    def fail(self, path: str, responses: list[Response | Callable[[Recorded], Response]]):
        """Answer the next len(responses) requests to `path` with these, then the route again."""
        self.faults[path].extend(responses)

    def dispatch(self, rec: Recorded) -> Response:
        handler = self.routes.get(rec.path)
        if handler is None:
            return 404, {"Content-Type": "text/plain"}, f"no route {rec.path}".encode()
        return handler(rec)

    def hits(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]


class EdgarStub(LoopbackServer):
    """EDGAR paths: /submissions/CIK##########.json, /api/xbrl/companyfacts/CIK##########.json,
    /Archives/edgar/data/<cik>/<acc-no-dashes>/{index.json,<document>}."""

    def __init__(self):
        super().__init__(gzip_bodies=True)
        self.folders: dict[str, dict[str, bytes]] = {}

    def dispatch(self, rec: Recorded) -> Response:
        if "@" not in (rec.header("User-Agent") or ""):
            return 403, {"Content-Type": "text/html"}, b"<h1>Your Request Originates from an Undeclared Automated Tool</h1>"
        return super().dispatch(rec)

    def add_submissions(self, cik: int, body: bytes):
        self.route(f"/submissions/CIK{cik:010d}.json", (200, {"Content-Type": "application/json"}, body))

    def add_companyfacts(self, cik: int, body: bytes):
        self.route(f"/api/xbrl/companyfacts/CIK{cik:010d}.json", (200, {"Content-Type": "application/json"}, body))

    def add_document(self, cik: int, accession: str, name: str, body: bytes, content_type: str = "text/html"):
        """Serve a filing document and list it (with its size) in the folder's index.json."""
        folder = f"/Archives/edgar/data/{cik}/{accession.replace('-', '')}"
        files = self.folders.setdefault(folder, {})
        files[name] = body
        self.route(f"{folder}/{name}", (200, {"Content-Type": content_type}, body))

        def index(rec: Recorded, folder=folder) -> Response:
            items = [
                {"last-modified": "2022-02-07 06:49:47", "name": n, "type": "text.gif", "size": str(len(b))}
                for n, b in sorted(self.folders[folder].items())
            ]
            items.insert(
                0, {"last-modified": "2022-02-07 06:49:47", "name": f"{accession}-index.html", "type": "text.gif", "size": ""}
            )
            return json_response({"directory": {"item": items, "name": folder, "parent-dir": folder.rsplit("/", 1)[0]}})

        self.route(f"{folder}/index.json", index)

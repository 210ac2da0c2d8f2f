"""A scripted HTTP server on 127.0.0.1 for the network tests: each path is answered by a
function that writes the raw response (so it can stall, trickle, lie or loop), and every
request is recorded with its arrival time."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

Handler = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() on arrival


@dataclass
class Scripted:
    """Routes path (without query) -> handler; `requests` in arrival order."""

    url: str = ""
    routes: dict[str, Handler] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)

    def route(self, path: str, handler: Handler) -> str:
        self.routes[path] = handler
        return self.url + path

    def hits(self, path: str) -> list[Seen]:
        return [r for r in self.requests if r.path.split("?")[0] == path]

    def hits_when(self, path: str, count: int, within_s: float = 5.0) -> list[Seen]:
        """`hits(path)` once `count` requests have arrived (or `within_s` has passed): a client
        that gave up on its last attempt may return before the server's thread records it."""
        deadline = time.monotonic() + within_s
        while len(self.hits(path)) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.hits(path)


def reply(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Handler:
    """A complete response with a Content-Length."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return handle


def sequence(*handlers: Handler) -> Handler:
    """Each handler in turn, then the last one for every later request."""
    queue = list(handlers)
    return lambda h: (queue.pop(0) if len(queue) > 1 else queue[0])(h)


def trickle(phase: str, interval_s: float = 0.05, count: int = 10_000) -> Handler:
    """Never finish, but never go quiet for longer than `interval_s`: one byte at a time in
    the status line/headers (`headers`) or in the body (`body`, `chunked`); or `stall`."""

    def handle(h: BaseHTTPRequestHandler) -> None:
        if phase == "stall":
            time.sleep(interval_s * count)
            return
        if phase == "headers":
            raw = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * count
            drip, h.close_connection = raw, True
        else:
            h.send_response(200)
            if phase == "chunked":
                h.send_header("Transfer-Encoding", "chunked")
                drip = b"1\r\nx\r\n" * count
            else:
                h.send_header("Content-Length", str(count))
                drip = b"x" * count
            h.end_headers()
        step = 6 if phase == "chunked" else 1
        for i in range(0, len(drip), step):
            h.wfile.write(drip[i : i + step])
            h.wfile.flush()
            time.sleep(interval_s)

    return handle


def gzip_bomb(decoded_bytes: int) -> bytes:
    # mtime=0: the same bytes in every process (xdist workers must collect the same test ids).
    return gzip.compress(b"\0" * decoded_bytes, mtime=0)


@contextmanager
def _serving() -> Iterator[Scripted]:
    state = Scripted()

    class Handle(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            state.requests.append(
                Seen(self.command, self.path, dict(self.headers), body, time.monotonic())
            )
            handler = state.routes.get(self.path.split("?")[0], reply(404, b"no route"))
            try:
                handler(self)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up: the point of most tests

        do_GET = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    with _serving() as state:
        yield state


@pytest.fixture
def elsewhere() -> Iterator[Scripted]:
    """A second server: another port, so another origin than `scripted`."""
    with _serving() as state:
        yield state

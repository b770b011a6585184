"""A local HTTP server on 127.0.0.1 that answers at a real API's paths with recorded data (tests only).

An *app* maps ``(path, query)`` to a :class:`Reply`; scripted faults (429, 5xx, empty bodies, truncated
bodies, bodies cut short mid-transfer, slow headers and bodies, dropped connections) can be queued in front of it. Every
request is recorded.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    drop_connection: bool = False  # close the socket without answering
    reason: str | None = None  # the reason phrase of the status line (default: the standard one)
    truncate_at: int | None = None  # close the socket after this many body bytes (Content-Length stays full)
    send_length: bool = True  # False: no Content-Length, the body ends when the socket closes
    drip: float = 0.0  # seconds between body pieces of ``drip_bytes`` (a slow server)
    drip_bytes: int = 64
    drip_headers: bool = False  # drip the status line and headers too (a server slow before its body)


App = Callable[[str, dict[str, str]], Reply]


class ReplayServer:
    def __init__(self, app: App) -> None:
        self.app = app
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []  # path, query, headers
        self._faults: list[tuple[str, Reply]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                with server._lock:
                    server.requests.append((parts.path, query, dict(self.headers)))
                    fault = next((f for f in server._faults if f[0] in parts.path), None)
                    if fault:
                        server._faults.remove(fault)
                reply = fault[1] if fault else server.app(parts.path, query)
                if reply.drop_connection:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(reply.status, reply.reason)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if reply.send_length:
                    self.send_header("Content-Length", str(len(reply.body)))
                body = reply.body if reply.truncate_at is None else reply.body[: reply.truncate_at]
                try:
                    if reply.drip_headers:  # what end_headers would send at once, in pieces
                        head, self._headers_buffer = b"".join(self._headers_buffer) + b"\r\n", []
                        for i in range(0, len(head), reply.drip_bytes):
                            self.wfile.write(head[i : i + reply.drip_bytes])
                            self.wfile.flush()
                            time.sleep(reply.drip)
                    else:
                        self.end_headers()
                    if reply.drip:
                        for i in range(0, len(body), reply.drip_bytes):
                            self.wfile.write(body[i : i + reply.drip_bytes])
                            self.wfile.flush()
                            time.sleep(reply.drip)
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first
                    self.close_connection = True
                    return
                if reply.truncate_at is not None:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, path_part: str, reply: Reply, times: int = 1) -> None:
        """The next ``times`` requests whose path contains ``path_part`` get ``reply`` instead."""
        with self._lock:
            self._faults.extend([(path_part, reply)] * times)

    def paths(self) -> list[str]:
        return [p for p, _, _ in self.requests]

    def __enter__(self) -> ReplayServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def refused_url() -> str:
    """A loopback URL on which nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"

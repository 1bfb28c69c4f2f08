"""The page and its API over HTTP, on 127.0.0.1 only (the standard library's server)."""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qsl, urlsplit

from wgk.conformance.view.api import Api
from wgk.conformance.view.page import page

HOST = "127.0.0.1"


def make_handler(api: Api) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "wgk-view"

        def log_message(self, format: str, *args) -> None:  # quiet: the terminal shows the URL only
            pass

        def _send(self, status: int, body: bytes, kind: str, extra: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _answer(self, method: str, body) -> None:
            url = urlsplit(self.path)
            if method == "GET" and url.path in ("/", "/index.html"):
                self._send(200, page(title=f"wgk view: {api.session.title}").encode(),
                           "text/html; charset=utf-8")
                return
            if not url.path.startswith("/api/"):
                self._send(404, b'{"error": "not found"}', "application/json")
                return
            status, data = api.handle(method, url.path, dict(parse_qsl(url.query)), body)
            extra = None
            if url.path == "/api/export" and status == 200:
                extra = {"Content-Disposition": f'attachment; filename="{data["id"]}.json"'}
            self._send(status, json.dumps(data).encode(), "application/json", extra)

        def do_GET(self) -> None:
            self._answer("GET", None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except (ValueError, UnicodeDecodeError):
                self._send(400, b'{"error": "the body is not JSON"}', "application/json")
                return
            self._answer("POST", body)

    return Handler


def serve(api: Api, port: int = 0) -> HTTPServer:
    """A server bound to 127.0.0.1 (``port`` 0: a free one); the caller runs ``serve_forever``."""
    return HTTPServer((HOST, port), make_handler(api))


def url_of(server: HTTPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/"

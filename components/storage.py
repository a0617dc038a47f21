"""Where snapshots are read and written: a local directory or a gs:// prefix. Why: docs/internals.md."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import BinaryIO, Iterator, Optional, Protocol

from components import gcs


class Storage(Protocol):
    """The few operations snapshots need, on paths relative to one base URI."""

    uri: str

    def list(self, prefix: str = "") -> dict[str, tuple[int, str]]:
        """{relative path: (size, change token)} of every file under prefix."""

    def open_read(self, path: str) -> BinaryIO: ...

    def write(self, path: str, chunks: Iterator[bytes]) -> None: ...

    def exists(self, path: str) -> bool: ...

    def publish(self, tmp: str, final: str, last: str) -> None:
        """Make tmp/* visible as final/*, with final/<last> appearing last."""

    def delete(self, prefix: str) -> None: ...

    def create(self, path: str, body: bytes) -> bool:
        """Write path only if it does not exist (O_EXCL; a GCS generation precondition); False if it did."""

    def modified(self, prefix: str) -> Optional[float]:
        """The newest write time of anything under prefix (seconds since the epoch); None when empty."""


class LocalStorage:
    def __init__(self, uri: str):
        self.uri = uri.rstrip("/") or "/"
        self.base = Path(uri)

    def list(self, prefix: str = "") -> dict[str, tuple[int, str]]:
        top = self.base / prefix
        out = {}
        if top.is_dir():
            for p in sorted(top.rglob("*")):
                if p.is_file():
                    st = p.stat()
                    out[p.relative_to(self.base).as_posix()] = (st.st_size, str(st.st_mtime_ns))
        return out

    def open_read(self, path: str) -> BinaryIO:
        return open(self.base / path, "rb")

    def write(self, path: str, chunks: Iterator[bytes]) -> None:
        target = self.base / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())

    def exists(self, path: str) -> bool:
        return (self.base / path).exists()

    def publish(self, tmp: str, final: str, last: str) -> None:
        # The manifest is already inside tmp: one rename makes the whole
        # snapshot appear at once, complete.
        dir_fd = os.open(self.base, os.O_RDONLY)
        try:
            os.rename(self.base / tmp, self.base / final)
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def delete(self, prefix: str) -> None:
        target = self.base / prefix
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)

    def create(self, path: str, body: bytes) -> bool:
        target = self.base / path
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        return True

    def modified(self, prefix: str) -> Optional[float]:
        top = self.base / prefix
        if top.is_file():
            return top.stat().st_mtime
        times = [p.stat().st_mtime for p in top.rglob("*") if p.is_file()] if top.is_dir() else []
        return max(times, default=None)


class GcsStorage:
    def __init__(self, uri: str, client=None):
        from google.cloud import storage
        from google.cloud.storage.retry import DEFAULT_RETRY

        self.uri = uri.rstrip("/")
        bucket, _, prefix = self.uri[len("gs://"):].partition("/")
        self.client = client or storage.Client()
        self.bucket = self.client.bucket(bucket)
        self.prefix = f"{prefix}/" if prefix else ""
        # Writes go to names unique to this attempt and copies are repeatable,
        # so retrying them is safe (the client does not retry uploads unless told to).
        self.retry = DEFAULT_RETRY

    def list(self, prefix: str = "") -> dict[str, tuple[int, str]]:
        full = self.prefix + (prefix.rstrip("/") + "/" if prefix else "")
        return {b.name[len(self.prefix):]: (b.size, f"{b.generation}:{b.crc32c}")
                for b in self.client.list_blobs(self.bucket, prefix=full) if not b.name.endswith("/")}

    def open_read(self, path: str) -> BinaryIO:
        return self.bucket.blob(self.prefix + path).open("rb")

    def write(self, path: str, chunks: Iterator[bytes]) -> None:
        with self.bucket.blob(self.prefix + path).open("wb", retry=self.retry) as f:
            for chunk in chunks:
                f.write(chunk)

    def exists(self, path: str) -> bool:
        return self.bucket.blob(self.prefix + path).exists()

    def publish(self, tmp: str, final: str, last: str) -> None:
        # No rename on GCS: server-side copies, the manifest strictly last, so
        # a crash in between leaves data objects without a manifest (ignored).
        names = sorted(self.list(tmp), key=lambda n: n == f"{tmp}/{last}")
        for name in names:
            self.bucket.copy_blob(self.bucket.blob(self.prefix + name), self.bucket,
                                  self.prefix + final + name[len(tmp):], retry=self.retry)
        self.delete(tmp)

    def delete(self, prefix: str) -> None:
        from google.api_core.exceptions import NotFound

        names = list(self.list(prefix)) or ([prefix] if prefix and self.exists(prefix) else [])
        for name in names:
            try:
                self.bucket.blob(self.prefix + name).delete(retry=self.retry)
            except NotFound:  # removed meanwhile (by a retried call or another cleaner): the goal holds
                pass

    def create(self, path: str, body: bytes) -> bool:
        return gcs.create(f"gs://{self.bucket.name}/{self.prefix}{path}", body, self.client) is not None

    def modified(self, prefix: str) -> Optional[float]:
        full = self.prefix + prefix
        times = [b.updated.timestamp() for b in self.client.list_blobs(self.bucket, prefix=full)
                 if b.name == full or b.name.startswith(full.rstrip("/") + "/")]
        return max(times, default=None)


def chunks(store: Storage, path: str) -> Iterator[bytes]:
    """The bytes of path in chunks: for a copy from one storage to another (store.write)."""
    with store.open_read(path) as f:
        while chunk := f.read(1 << 20):
            yield chunk


def append_record(store: Storage, directory: str, record: dict) -> None:
    """One JSON object as a new file under `directory`, created once and never rewritten; named by the time, so a
    listing is in the order they were written (a history of moves: components/serving/rollout.py,
    vertex_endpoint.py)."""
    store.create(f"{directory}/{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json",
                 json.dumps(record, sort_keys=True).encode())


def read_records(store: Storage, directory: str) -> list[dict]:
    """Every object append_record wrote under `directory`, oldest first."""
    out = []
    for path in sorted(store.list(directory)):
        with store.open_read(path) as f:
            out.append(json.loads(f.read()))
    return out


def storage_for(uri: str, gcs_client=None) -> Storage:
    return GcsStorage(uri, gcs_client) if uri.startswith("gs://") else LocalStorage(uri)

"""Single gs:// objects written under a generation precondition, with google-cloud-storage.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

GCS = "gs://"
# A directory where every bucket is mounted as <dir>/<bucket>/<object> (gcsfuse's layout with --implicit-dirs).
MOUNT_ENV = "PIPELINE_GCS_MOUNT"


def is_gcs(uri: str) -> bool:
    return uri.startswith(GCS)


def api_uri(path: str) -> str:
    """gs://<bucket>/<object> for a path under the declared bucket mount (MOUNT_ENV); any other path as it is."""
    mount = os.environ.get(MOUNT_ENV, "").rstrip("/")
    if not mount or is_gcs(path) or not os.path.isabs(path):
        return path
    relative = os.path.relpath(os.path.normpath(path), mount)
    if relative.startswith("..") or relative == ".":
        return path  # outside the mount, or the mount itself
    return GCS + relative


def bucket_of(uri: str) -> str:
    """The bucket of gs://bucket[/name]; ValueError when it is not a gs:// URI."""
    bucket = uri[len(GCS):].split("/", 1)[0] if is_gcs(uri) else ""
    if not bucket:
        raise ValueError(f"{uri!r} is not a gs://<bucket>[/<object>] URI")
    return bucket


def split(uri: str) -> tuple[str, str]:
    """(bucket, object name) of gs://bucket/name; ValueError when it is not one."""
    bucket, _, name = uri[len(GCS):].partition("/") if is_gcs(uri) else ("", "", "")
    if not bucket or not name:
        raise ValueError(f"{uri!r} is not a gs://<bucket>/<object> URI")
    return bucket, name


def client(gcs_client=None):
    """The given client, or one with the environment's credentials (STORAGE_EMULATOR_HOST is honoured)."""
    if gcs_client is not None:
        return gcs_client
    from google.cloud import storage

    return storage.Client()


@dataclasses.dataclass(frozen=True)
class Version:
    generation: int
    body: bytes
    updated: float  # the server's time of this generation, seconds since the epoch


def _blob(uri: str, gcs_client):
    bucket, name = split(uri)
    return client(gcs_client).bucket(bucket).blob(name)


def write(uri: str, body: bytes, content_type: str, gcs_client=None) -> None:
    """Write the object whole, whatever is there."""
    _blob(uri, gcs_client).upload_from_string(body, content_type=content_type)


def create(uri: str, body: bytes, gcs_client=None) -> Optional[int]:
    """Write the object only if it does not exist; its generation, or None when it already existed."""
    return _upload(uri, body, 0, gcs_client)


def replace(uri: str, body: bytes, generation: int, gcs_client=None) -> Optional[int]:
    """Overwrite the object only if its generation is still `generation`; the new one, or None (412)."""
    if generation <= 0:
        raise ValueError(f"replace {uri}: generation must be positive, got {generation}")
    return _upload(uri, body, generation, gcs_client)


def _upload(uri: str, body: bytes, generation: int, gcs_client) -> Optional[int]:
    from google.api_core.exceptions import PreconditionFailed

    blob = _blob(uri, gcs_client)
    try:
        # With a precondition set, the client's default policy retries transient errors: a retry
        # of a write that did land answers 412, which callers resolve by reading the object back.
        blob.upload_from_string(body, content_type="application/json", if_generation_match=generation)
    except PreconditionFailed:
        return None
    return int(blob.generation)


def read(uri: str, gcs_client=None) -> Optional[Version]:
    """The object's current generation and the body of exactly that generation; None when it does not exist."""
    from google.api_core.exceptions import NotFound

    bucket_name, name = split(uri)
    bucket = client(gcs_client).bucket(bucket_name)
    while True:
        found = bucket.get_blob(name)
        if found is None:
            return None
        try:
            # Read by generation: a write in between must not pair a newer body with the older generation.
            body = bucket.blob(name, generation=found.generation).download_as_bytes()
        except NotFound:  # replaced since its metadata was read (not kept: no versioning); read again
            continue
        return Version(int(found.generation), body, found.updated.timestamp())

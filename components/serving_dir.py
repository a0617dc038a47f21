"""The directory TF Serving watches: which version serves, and publishing a new one whole.

TF Serving's file-system source polls `<base>/` and treats every child whose
name parses as an integer as a version of the model (the highest one serves,
under the default "latest" policy); children with other names are ignored.
It starts loading a version as soon as its directory is listed, so a version
must never be visible before every file is in it. TFX's own Pusher copies
straight into `<base>/<version>/` (saved_model.pb last), which leaves a
half-copied numeric directory behind when the push is killed.

Here a push is first written to `<base>/.staging-<version>-<nonce>/` (not a
number: TF Serving ignores it) and checked against the source, then:
- on a local or any POSIX file system, renamed to `<base>/<version>`: one
  rename(2), so the version appears complete or not at all;
- on gs://, which has no directory rename, copied object by object (server-side)
  into `<base>/<version>/` with saved_model.pb strictly last. A version
  directory without saved_model.pb is not a loadable SavedModel: TF Serving's
  load fails and is retried (`--max_num_load_retries`, every
  `--load_retry_interval_micros`) while the previous version keeps serving,
  and the load succeeds once saved_model.pb, the last object, exists. The
  window is a few server-side copies, not a whole upload.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
import uuid
from typing import Callable, Optional

from tfx.dsl.io import fileio

SAVED_MODEL = "saved_model.pb"
STAGING_PREFIX = ".staging-"


@dataclasses.dataclass(frozen=True)
class Version:
    number: int
    path: str

    @property
    def name(self) -> str:
        return str(self.number)


def versions(base: str) -> list[Version]:
    """Loadable versions under base (numeric name and a saved_model.pb), oldest first."""
    if not fileio.exists(base):
        return []
    found = []
    for child in fileio.listdir(base):
        name = child.rstrip("/")
        if name.isdigit() and fileio.exists(_join(base, name, SAVED_MODEL)):
            found.append(Version(int(name), _join(base, name)))
    return sorted(found, key=lambda v: v.number)


def serving(base: str) -> Optional[Version]:
    """The version TF Serving serves under its default policy: the highest loadable one."""
    found = versions(base)
    return found[-1] if found else None


def tree_digest(directory: str) -> str:
    """sha256 over every file's relative path and bytes: equal digests, equal models."""
    entries = []
    for root, _, files in fileio.walk(directory):
        for name in files:
            path = _join(root.rstrip("/"), name)
            h = hashlib.sha256()
            with fileio.open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            entries.append(f"{h.hexdigest()}  {os.path.relpath(path, directory)}\n")
    return hashlib.sha256("".join(sorted(entries)).encode()).hexdigest()


def next_version(base: str, now: Optional[float] = None) -> int:
    """A Unix timestamp like TFX's, but always above every existing version (two pushes in one second)."""
    existing = [int(c.rstrip("/")) for c in (fileio.listdir(base) if fileio.exists(base) else [])
                if c.rstrip("/").isdigit()]
    return max(int(now if now is not None else time.time()), max(existing, default=0) + 1)


def clear_staging(base: str) -> None:
    """Remove what killed pushes left; callers hold the pipeline root's run lock, so none is in progress."""
    if fileio.exists(base):
        for child in fileio.listdir(base):
            if child.startswith(STAGING_PREFIX):
                fileio.rmtree(_join(base, child.rstrip("/")))


def publish(model_dir: str, base: str, version: int,
            copy_file: Callable[[str, str], None] = lambda s, d: fileio.copy(s, d, overwrite=True)) -> str:
    """Copy model_dir to <base>/<version> so that TF Serving never sees it incomplete; returns that path.

    copy_file is the one file copy, a parameter so a test can kill a push midway.
    """
    final = _join(base, str(version))
    if fileio.exists(final):
        raise FileExistsError(f"serving version {final} already exists; refusing to overwrite it")
    staging = _join(base, f"{STAGING_PREFIX}{version}-{uuid.uuid4().hex[:8]}")
    files = _files(model_dir)
    for rel in files:
        fileio.makedirs(os.path.dirname(_join(staging, rel)))
        copy_file(_join(model_dir, rel), _join(staging, rel))
    if tree_digest(staging) != tree_digest(model_dir):
        fileio.rmtree(staging)
        raise OSError(f"the copy of {model_dir} in {staging} does not match it; nothing was pushed")
    if base.startswith("gs://"):
        for rel in sorted(files, key=lambda r: r == SAVED_MODEL):  # saved_model.pb last
            fileio.makedirs(os.path.dirname(_join(final, rel)))
            fileio.copy(_join(staging, rel), _join(final, rel), overwrite=True)
        fileio.rmtree(staging)
    else:
        os.rename(staging, final)
    return final


def _files(directory: str) -> list[str]:
    return sorted(os.path.relpath(_join(root.rstrip("/"), name), directory)
                  for root, _, names in fileio.walk(directory) for name in names)


def _join(*parts: str) -> str:
    return "/".join([parts[0].rstrip("/"), *(p.strip("/") for p in parts[1:])])

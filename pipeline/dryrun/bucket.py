"""gs:// mapped to a local directory, the way gcsfuse mounts a bucket. Why: docs/internals.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from pipeline.config import Config
from pipeline.errors import ConfigError

GCS = "gs://"
# The local dir is spliced into JSON text (possibly JSON inside JSON), so it must need no escaping.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/+-]*$")


class BucketMap:
    def __init__(self, local_dir: str | Path):
        root = Path(local_dir).resolve()
        if not _SAFE_PATH.match(str(root)):
            raise ConfigError(f"dry run directory {str(root)!r}: use only letters, digits and ._/+- in its path")
        self.root = root / "gcs"
        self._local_prefix = f"{self.root}/"

    def local(self, uri: str) -> str:
        """The local path of a gs:// URI; other paths are returned unchanged."""
        return self._local_prefix + uri[len(GCS):] if uri.startswith(GCS) else uri

    def to_local(self, value: Any) -> Any:
        """Every gs:// URI inside `value` (a JSON-able structure or a string) made local."""
        return self._swap(value, GCS, self._local_prefix)

    def to_gcs(self, value: Any) -> Any:
        """The inverse of to_local, for what a task wrote."""
        return self._swap(value, self._local_prefix, GCS)

    @staticmethod
    def _swap(value: Any, old: str, new: str) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        return json.loads(json.dumps(value).replace(old, new))

    def seed(self, uri: str, source: Path) -> bool:
        """Copy `source` (a file or directory) to `uri` unless something is there already; True if copied.

        Like uploading the data to the bucket before the first run; later runs
        read whatever is there, so changing it is changing the bucket's data.
        """
        target = Path(self.local(uri))
        if target.exists():
            return False
        if not source.exists():
            raise ConfigError(f"cannot seed {uri}: {source} does not exist")
        target.parent.mkdir(parents=True, exist_ok=True)
        # Copied beside it, then renamed into place: of two dry runs seeding at once one wins, neither sees
        # half a copy (rename(2) of a directory onto an existing one fails).
        staging = target.parent / f".seed-{target.name}-{uuid.uuid4().hex[:8]}"
        if source.is_dir():
            shutil.copytree(source, staging)
        else:
            shutil.copy2(source, staging)
        try:
            os.rename(staging, target)
        except OSError:
            if not target.exists():
                raise
            shutil.rmtree(staging) if staging.is_dir() else staging.unlink()
            return False
        return True


def local_view(config: Config, bucket: BucketMap) -> Config:
    """The same config with pipeline.root mapped, so metadata, serving dir and report paths are local."""
    return config.model_copy(update={"pipeline": config.pipeline.model_copy(
        update={"root": bucket.local(config.pipeline.root)})})

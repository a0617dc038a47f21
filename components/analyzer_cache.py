"""Where Transform's analyzer cache lives between runs: a chain of generations under one root.
Why and sources: docs/internals.md."""

from __future__ import annotations

import calendar
import logging
import posixpath
import re
import time
import uuid
from typing import Optional

from tfx.dsl.io import fileio

from components.coordination import lease

log = logging.getLogger(__name__)

LATEST = "LATEST"
_GENERATION_RE = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-[0-9a-f]{8}$")


class GenerationStore:
    def __init__(self, root: str, lease_root: Optional[str] = None):
        self.root = root.rstrip("/")
        self.lease_root = lease_root  # the pipeline root whose run lease says what is no run's any more

    def latest(self) -> Optional[str]:
        """The newest published generation's directory; None when there is none (or it is unreadable)."""
        pointer = posixpath.join(self.root, LATEST)
        if not fileio.exists(pointer):
            return None
        with fileio.open(pointer) as f:
            name = f.read().strip()
        path = posixpath.join(self.root, name)
        # A cache is only ever a speed-up: something odd here means analyzing everything, not failing.
        if not _GENERATION_RE.match(name) or not fileio.isdir(path):
            log.warning("analyzer cache: %s names %r, which is no generation under %s; analyzing all spans",
                        pointer, name, self.root)
            return None
        return path

    def new(self) -> str:
        """A directory for this run's output cache; invisible to readers until published."""
        now = time.time()
        name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now))}.{int(now % 1 * 1e6):06d}Z-{uuid.uuid4().hex[:8]}"
        return posixpath.join(self.root, name)

    def publish(self, generation: str, now: Optional[float] = None) -> None:
        previous = self.latest()
        fileio.makedirs(self.root)
        tmp = posixpath.join(self.root, f".{LATEST}-{uuid.uuid4().hex[:8]}")
        with fileio.open(tmp, "w") as f:
            f.write(posixpath.basename(generation))
        fileio.rename(tmp, posixpath.join(self.root, LATEST), overwrite=True)
        # Only generations older than the one just replaced (names sort by time) and begun before the live
        # lease: a newer one, or one begun since, may belong to a run still writing it.
        keep = {posixpath.basename(g) for g in (previous, generation) if g}
        cutoff = lease.debris_cutoff(lease.live_since(self.lease_root) if self.lease_root else None, now)
        for name in fileio.listdir(self.root):
            name = name.rstrip("/")
            if _GENERATION_RE.match(name) and name not in keep and name < min(keep) and _begun(name) < cutoff:
                fileio.rmtree(posixpath.join(self.root, name))


def _begun(name: str) -> float:
    """When the generation `name` (GenerationStore.new) was begun, seconds since the epoch."""
    return calendar.timegm(time.strptime(name[:15], "%Y%m%dT%H%M%S")) + int(name[16:22]) / 1e6

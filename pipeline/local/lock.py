"""One run at a time per pipeline root: `python -m pipeline` commands' face of components/lease.py.

A schedule and a person may start runs on the same root at once; both would
train, both would decide against the same (old) baseline and both would push.
A run holds `<root>/run.lock` while it runs: a file created with O_EXCL on a
local root, a lease object created and kept under GCS generation
preconditions on a gs:// root (components/lease.py says how, and what is stale
and taken over). A second run waits for it, up to `pipeline.lock_wait_seconds`,
then refuses naming the holder: RunLocked, exit 5.

A run on Vertex or Kubeflow takes the same lease in its first task and releases it in its exit handler
(pipeline/dag/run_lease.py).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional

from components.errors import LeaseBusy
from components.lease import LOCK_FILE, hold
from pipeline.errors import RunLocked

__all__ = ["LOCK_FILE", "RunLocked", "run_lock"]


@contextlib.contextmanager
def run_lock(root: str, wait_seconds: float, poll_seconds: float = 1.0,
             say: Callable[[str], None] = lambda _: None, owner: Optional[str] = None,
             gcs_client=None) -> Iterator[None]:
    """Hold <root>/run.lock for the duration; wait up to wait_seconds for another run, else RunLocked."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(hold(root, wait_seconds, poll_seconds, say, owner=owner, gcs_client=gcs_client))
        except LeaseBusy as e:
            raise RunLocked(str(e)) from None
        yield

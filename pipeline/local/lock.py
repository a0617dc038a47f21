"""One run at a time per pipeline root: `python -m pipeline` commands' face of components/coordination/lease.py.
Why and sources: docs/internals.md."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional

from components.coordination.lease import LOCK_FILE, hold
from components.errors import LeaseBusy
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

"""Following a run on a pipeline service to its end (submit --wait, Vertex AI and Kubeflow alike):
poll its state, report each change, and say whether it succeeded."""

from __future__ import annotations

import time
from typing import Callable, Collection, Optional


def follow(read: Callable[[], tuple[str, Optional[str]]], succeeded: str, failed: Collection[str],
           poll_seconds: float, report: Callable[[str], None] = print) -> bool:
    """`read` returns the run's (state, error message); True once it is `succeeded`, False once
    it is one of `failed` (its error reported)."""
    last = None
    while True:
        state, error = read()
        if state != last:
            report(f"{time.strftime('%H:%M:%S')} {state}")
            last = state
        if state == succeeded:
            return True
        if state in failed:
            if error:
                report(f"error: {error}")
            return False
        time.sleep(poll_seconds)

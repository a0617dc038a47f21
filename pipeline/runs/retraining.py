"""What scheduled retraining reads back from a run: did its Snapshot find anything the serving model has not seen?
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Optional

from components.data.snapshot import newness


def nothing_new(snapshot_properties: dict) -> Optional[str]:
    """Why the run skipped everything after its Snapshot, or None when it found something new (or didn't check)."""
    found = newness.from_properties(snapshot_properties)
    if found is None or found.new:
        return None
    why = found.why_not or f"nothing new since the model serving now (version {found.serving_version})"
    return (f"{why}; nothing to retrain, the run skipped everything after the Snapshot "
            "(data.skip_when_no_new_span=false retrains anyway)")

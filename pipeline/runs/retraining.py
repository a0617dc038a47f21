"""What scheduled retraining reads back from a run: did its Snapshot find a span the serving model has not seen?
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Optional

from components.snapshot import newness


def nothing_new(snapshot_properties: dict) -> Optional[str]:
    """Why the run skipped everything after its Snapshot, or None when it found something new (or didn't check)."""
    found = newness.from_properties(snapshot_properties)
    if found is None or found.new:
        return None
    source = snapshot_properties.get("source_uri", "the source")
    return (f"no new span: the newest in {source} is {found.newest}, and the model serving now "
            f"(version {found.serving_version}) was trained on {', '.join(found.serving_spans)}; nothing to "
            "retrain, the run skipped everything after the Snapshot "
            "(data.skip_when_no_new_span=false retrains anyway)")

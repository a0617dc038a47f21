"""What `submit --cache` / `--no-cache` do to a run on either target: a note for stderr."""

from __future__ import annotations

from typing import Optional


def cache_override_note(enable_caching: Optional[bool]) -> Optional[str]:
    """What --cache / --no-cache do to the run, for stderr; None without an override."""
    if enable_caching is None:
        return None
    if enable_caching:
        return ("note: --cache turns caching on for every task, Snapshot, ImportSchemaGen and ServingModel "
                "included: the run may reuse an old data snapshot, schema and baseline model")
    return "note: --no-cache turns caching off for every task: everything reruns"

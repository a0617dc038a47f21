"""Which spans of an inference source were scored already: a span is scored once, as a span is trained on once
(a span whose files changed is new again); a flat source is one unit, keyed by its content digest."""

from __future__ import annotations

import json
from typing import Optional

from components.scoring.keys import FLAT
from components.storage import storage_for

__all__ = ["FLAT", "unscored", "mark_scored"]


def unscored(units: dict[str, str], ledger_dir: str) -> tuple[list[str], list[str]]:
    """(units to score, units scored before with the same digest), of {unit: content digest}, in order."""
    store = storage_for(ledger_dir)
    todo, done = [], []
    for unit, digest in units.items():
        entry = _read(store, unit)
        (done if entry is not None and entry.get("digest") == digest else todo).append(unit)
    return todo, done


def mark_scored(ledger_dir: str, units: dict[str, str], version: str, predictions_uri: str) -> None:
    store = storage_for(ledger_dir)
    for unit, digest in units.items():
        body = {"digest": digest, "model_version": version, "predictions": predictions_uri}
        store.write(f"{unit}.json", iter([json.dumps(body, sort_keys=True).encode()]))


def _read(store, unit: str) -> Optional[dict]:
    if not store.exists(f"{unit}.json"):
        return None
    with store.open_read(f"{unit}.json") as f:
        return json.loads(f.read())

"""What scheduled retraining asks MLMD before a run: the last blessed model and the data behind it."""

from __future__ import annotations

import os
from typing import Optional

from components.snapshot import spans
from pipeline.config import Config, resolve
from pipeline.runs import mlmd
from pipeline.runs.lineage import Lineage, trace


def last_blessed(config: Config) -> Optional[Lineage]:
    """Lineage of the most recently blessed model of this pipeline root, or None."""
    if not os.path.exists(config.pipeline.metadata_path):
        return None
    reader = mlmd.Reader.open(config.pipeline.metadata_path)
    blessings = [b for b in reader.artifacts_of_type("ModelBlessing") if mlmd.properties(b).get("blessed") == 1]
    for blessing in sorted(blessings, key=lambda b: b.id, reverse=True):
        evaluator = reader.producer(blessing)
        models = reader.inputs(evaluator).get("model", []) if evaluator is not None else []
        if models:
            return trace(reader.store, models[0])
    return None


def trained_spans(lineage: Lineage) -> list[str]:
    """The span directories of the snapshot a model was trained on (empty for a flat source)."""
    if lineage.snapshot is None:
        return []
    return [s for s in str(mlmd.properties(lineage.snapshot).get("spans", "")).split(",") if s]


def no_new_span(config: Config, lineage: Optional[Lineage]) -> Optional[str]:
    """Why this run has nothing new to train on, or None when there is a span the last blessed model has not seen.

    lineage: last_blessed(config).
    """
    seen = trained_spans(lineage) if lineage is not None else []
    if not seen:
        return None
    source = resolve(config.data.input_dir)
    newest = spans.newest(source)
    newest_seen = max(spans.parse_name(s) for s in seen)
    if newest.key > newest_seen:
        return None
    return (f"no new span: the newest in {source} is {newest.name}, and the last blessed model "
            f"(artifact {lineage.model.id}) was trained on {', '.join(seen)}; nothing to retrain "
            "(data.skip_when_no_new_span=false retrains anyway)")

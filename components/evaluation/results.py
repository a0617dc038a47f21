"""TFMA's scalar metrics of every slice as the Evaluator wrote them, keyed as the slice counts key them: what the
Evaluator checks after TFMA ran and what the summary, the report and `history` read back."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from components.evaluation.slice_counts import SliceKey

CANDIDATE, BASELINE, DIFF = "candidate", "baseline", "diff"
EXAMPLE_COUNT = "example_count"  # TFMA's count of the examples it evaluated


def slice_key(serialized) -> SliceKey:
    """TFMA's slice key proto as ((column, value), ...), its byte values decoded."""
    return tuple((c, v.decode("utf-8") if isinstance(v, bytes) else v)
                 for c, v in tfma.slicer.deserialize_slice_key(serialized))


def read_metrics(evaluation_uri: str) -> dict[SliceKey, dict[str, dict[str, float]]]:
    """Slice -> {candidate | baseline | diff: {metric name: value}}: TFMA's scalar metrics of every slice."""
    found: dict[SliceKey, dict[str, dict[str, float]]] = {}
    for per_slice in tfma.load_metrics(evaluation_uri):
        if per_slice.HasField("cross_slice_key"):
            continue
        by_model = found.setdefault(slice_key(per_slice.slice_key), {CANDIDATE: {}, BASELINE: {}, DIFF: {}})
        for kv in per_slice.metric_keys_and_values:
            if kv.value.WhichOneof("type") != "double_value":
                continue  # a matrix (ConfusionMatrixAtThresholds): the report reads it from TFMA's output itself
            side = DIFF if kv.key.is_diff else BASELINE if kv.key.model_name == BASELINE else CANDIDATE
            by_model[side][kv.key.name] = kv.value.double_value.value
    return found

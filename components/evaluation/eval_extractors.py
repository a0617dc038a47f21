"""The Evaluator's TFMA extractors: TFMA's default ones, with the features no slice reads dropped from each batch
right before TFMA splits the batch back into one dict per example. (docs/internals.md)"""

from __future__ import annotations

import functools

import apache_beam as beam
import tensorflow_model_analysis as tfma

# What no metric of ours reads after the model has run: the transformed features (the label is extracted from
# them before) and the serialized example; the parsed features too, but for the columns a slice is keyed on.
PER_EXAMPLE_UNUSED = (tfma.constants.TRANSFORMED_FEATURES_KEY, tfma.constants.INPUT_KEY,
                      tfma.constants.ARROW_RECORD_BATCH_KEY)
FEATURES = tfma.constants.FEATURES_KEY
DROP_STAGE = "DropFeaturesBeforeUnbatch"


def slice_columns(eval_config: tfma.EvalConfig) -> set[str]:
    """The raw columns TFMA's slicer reads: those of every slicing spec and cross slicing spec."""
    specs = [*eval_config.slicing_specs,
             *(s for cross in eval_config.cross_slicing_specs for s in (cross.baseline_spec, *cross.slicing_specs))]
    return {c for s in specs for c in (*s.feature_keys, *s.feature_values)}


def features_unused(eval_config: tfma.EvalConfig) -> bool:
    """Whether nothing after the labels and predictions reads the features but the slicer (no query key, no SQL
    slice), so all but the slices' columns can go."""
    return (not any(spec.query_key for spec in eval_config.metrics_specs)
            and not any(s.slice_keys_sql for s in eval_config.slicing_specs))


def _drop_unused(batch: dict, keep: frozenset) -> dict:
    out = {k: v for k, v in batch.items() if k not in PER_EXAMPLE_UNUSED and k != FEATURES}
    if keep and batch.get(FEATURES) is not None:
        out[FEATURES] = {k: v for k, v in batch[FEATURES].items() if k in keep}
    return out


def custom_extractors(eval_shared_model, eval_config: tfma.EvalConfig, tensor_adapter_config):
    """TFMA's default extractors, with the features dropped before unbatching when unused
    (the signature TFX's executor calls it with)."""
    extractors = tfma.default_extractors(eval_shared_model=eval_shared_model, eval_config=eval_config,
                                         tensor_adapter_config=tensor_adapter_config)
    if not features_unused(eval_config):
        return extractors
    names = [x.stage_name for x in extractors]
    unbatch = names.index(tfma.extractors.unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    drop = tfma.extractors.Extractor(stage_name=DROP_STAGE, ptransform=beam.Map(
        functools.partial(_drop_unused, keep=frozenset(slice_columns(eval_config)))))
    return [*extractors[:unbatch], drop, *extractors[unbatch:]]

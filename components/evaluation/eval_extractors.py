"""The Evaluator's TFMA extractors: TFMA's default ones, with the features dropped
from each batch right before TFMA splits the batch back into one dict per example. (docs/internals.md)"""

from __future__ import annotations

import apache_beam as beam
import tensorflow_model_analysis as tfma

# What no metric of ours reads after the model has run: the parsed features, the
# transformed ones (the label is extracted from them before) and the serialized example.
PER_EXAMPLE_UNUSED = (tfma.constants.FEATURES_KEY, tfma.constants.TRANSFORMED_FEATURES_KEY,
                      tfma.constants.INPUT_KEY, tfma.constants.ARROW_RECORD_BATCH_KEY)
DROP_STAGE = "DropFeaturesBeforeUnbatch"


def features_unused(eval_config: tfma.EvalConfig) -> bool:
    """Whether nothing after the labels and predictions reads the features: only the overall
    slice, no cross slices, no query key."""
    return (all(spec == tfma.SlicingSpec() for spec in eval_config.slicing_specs)
            and not eval_config.cross_slicing_specs
            and not any(spec.query_key for spec in eval_config.metrics_specs))


def _drop_unused(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if k not in PER_EXAMPLE_UNUSED}


def custom_extractors(eval_shared_model, eval_config: tfma.EvalConfig, tensor_adapter_config):
    """TFMA's default extractors, with the features dropped before unbatching when unused
    (the signature TFX's executor calls it with)."""
    extractors = tfma.default_extractors(eval_shared_model=eval_shared_model, eval_config=eval_config,
                                         tensor_adapter_config=tensor_adapter_config)
    if not features_unused(eval_config):
        return extractors
    names = [x.stage_name for x in extractors]
    unbatch = names.index(tfma.extractors.unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    drop = tfma.extractors.Extractor(stage_name=DROP_STAGE, ptransform=beam.Map(_drop_unused))
    return [*extractors[:unbatch], drop, *extractors[unbatch:]]

"""TFX's Transform with fixed-size input batches and, for span snapshots, an analyzer cache per span.
Why and sources: docs/internals.md."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Optional

from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.beam import analyzer_cache as tft_cache
from tfx import types
from tfx.components.transform import executor as transform_executor
from tfx.components.transform import labels
from tfx.components.transform.component import Transform
from tfx.dsl.components.base import executor_spec
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.utils import io_utils, json_utils

from components.analyzer_cache import GenerationStore
from components.data import column_roles
from components.data.span_example_gen import span_shards

ANALYZER_BATCH_SIZE = 1000
# tf.Transform traces the preprocessing_fn as a TF1 graph, not as tf.functions: in TF2 mode it traces it five
# times as functions and saves the transform graph through concrete functions, a cost per output column
# (docs/performance.md, "Wide tables"). Tests that run tf.Transform directly use the same mode.
TF_COMPAT_V1 = True
# In Transform's custom_config: where the analyzer cache lives (set by the pipeline for span snapshots).
ANALYZER_CACHE_ROOT = "analyzer_cache_root"
# The pipeline root whose run lease (components/coordination/lease.py) tells the cache's clean-up what is no run's any
# more.
LEASE_ROOT = "lease_root"
_NOT_FEATURES = (ANALYZER_CACHE_ROOT, LEASE_ROOT)
ANALYZED_SPANS = "analyzed_spans"
CACHED_SPANS = "cached_spans"

log = logging.getLogger(__name__)


class _Processor(transform_executor.TransformProcessor):
    # Set per run by _bound (TFX instantiates the class itself, without arguments): the analyzed
    # split's whole pattern -> (span, pattern of its files, content key) per span, the two lookups
    # derived from it, and the spans analyzed / served from the cache, filled in as the run goes.
    span_datasets: dict[str, list[tuple[str, str, str]]] = {}
    key_of_pattern: dict[str, str] = {}
    span_of_key: dict[str, str] = {}
    analyzed: list[str] = []
    cached: list[str] = []
    disable_statistics = False

    def _GetDesiredBatchSize(self, data_format: int, schema: schema_pb2.Schema) -> Optional[int]:
        return super()._GetDesiredBatchSize(data_format, schema) or ANALYZER_BATCH_SIZE

    def Transform(self, inputs, outputs, status_file=None) -> None:
        self.disable_statistics = bool(inputs[labels.DISABLE_STATISTICS_LABEL])
        if self.span_datasets:
            paths, formats = [], []
            for path, file_format in zip(inputs[labels.ANALYZE_DATA_PATHS_LABEL],
                                         inputs[labels.ANALYZE_PATHS_FILE_FORMATS_LABEL]):
                parts = [pattern for _, pattern, _ in self.span_datasets.get(path, ())] or [path]
                paths += parts
                formats += [file_format] * len(parts)
            inputs = {**inputs, labels.ANALYZE_DATA_PATHS_LABEL: paths,
                      labels.ANALYZE_PATHS_FILE_FORMATS_LABEL: formats}
        super().Transform(inputs, outputs, status_file)

    def _MakeDatasetList(self, file_patterns, *args, **kwargs):
        datasets = super()._MakeDatasetList(file_patterns, *args, **kwargs)
        for dataset in datasets:
            if dataset.file_pattern in self.key_of_pattern:
                dataset.dataset_key = tft_cache.DatasetKey(self.key_of_pattern[dataset.file_pattern])
        datasets.sort(key=lambda d: d.dataset_key)
        for index, dataset in enumerate(datasets):
            dataset.index = index
        return datasets

    def _JoinUncachedDatasets(self, analyze_data_list, optimized_analyze_data_dict, *args, **kwargs):
        # TFX marks a dataset whose every analyzer result is in the cache with None: it is not analyzed.
        for key, dataset in optimized_analyze_data_dict.items():
            if key.key in self.span_of_key:
                (self.cached if dataset is None else self.analyzed).append(self.span_of_key[key.key])
        analyze_data_list, optimized_analyze_data_dict = super()._JoinUncachedDatasets(
            analyze_data_list, optimized_analyze_data_dict, *args, **kwargs)
        # TFX still reads such a dataset when it also materializes, and drops the rows unread by anything.
        # Only its statistics would use them, and this pipeline turns those off.
        if self.disable_statistics:
            analyze_data_list = [d for d in analyze_data_list if optimized_analyze_data_dict.get(d.dataset_key, d)]
        return analyze_data_list, optimized_analyze_data_dict


class Executor(transform_executor.Executor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        config_key = standard_component_specs.CUSTOM_CONFIG_KEY
        custom_config = json_utils.loads(exec_properties.get(config_key) or "null")
        # Before the analysis: the roles of the columns the features section leaves open, from the training data.
        roles = column_roles.infer(input_dict, custom_config)
        cache_root = (custom_config or {}).get(ANALYZER_CACHE_ROOT)
        span_datasets = _span_datasets(input_dict, custom_config, roles[0] if roles else {}) if cache_root else {}
        if roles:
            exec_properties = column_roles.with_roles(exec_properties, config_key, custom_config, roles[0])
        store = GenerationStore(cache_root, custom_config.get(LEASE_ROOT)) if span_datasets else None
        if store:
            input_dict, output_dict = dict(input_dict), dict(output_dict)
            latest, generation = store.latest(), store.new()
            if latest:
                input_dict[standard_component_specs.ANALYZER_CACHE_KEY] = [_cache_artifact(latest)]
            output_dict[standard_component_specs.UPDATED_ANALYZER_CACHE_KEY] = [_cache_artifact(generation)]
        processor = _bound(span_datasets)
        # TFX's Do instantiates the module-level TransformProcessor by name and
        # offers no hook for it, so swap in ours for the length of this call.
        # Executors run one at a time per process, so nothing else sees the swap.
        stock = transform_executor.TransformProcessor
        transform_executor.TransformProcessor = processor
        try:
            super().Do(input_dict, output_dict, exec_properties)
        finally:
            transform_executor.TransformProcessor = stock
        if roles:
            column_roles.keep(artifact_utils.get_single_instance(
                output_dict[standard_component_specs.TRANSFORM_GRAPH_KEY]), *roles)
        if store:
            store.publish(generation)
            order = [span for span, _, _ in next(iter(span_datasets.values()))]
            analyzed, cached = ([s for s in order if s in found] for found in (processor.analyzed, processor.cached))
            graph = artifact_utils.get_single_instance(output_dict[standard_component_specs.TRANSFORM_GRAPH_KEY])
            graph.set_string_custom_property(ANALYZED_SPANS, ",".join(analyzed))
            graph.set_string_custom_property(CACHED_SPANS, ",".join(cached))
            log.info("Transform analyzed spans [%s]; from the analyzer cache: [%s]", ", ".join(analyzed),
                     ", ".join(cached))


def _span_datasets(input_dict, custom_config: dict, roles: dict) -> dict[str, list[tuple[str, str, str]]]:
    """Per split of the one Examples artifact: (span, pattern of its files, content key) for each span. The key
    covers the roles' decisions, not the figures behind them, which change with every new span."""
    examples = input_dict[standard_component_specs.EXAMPLES_KEY]
    shards = span_shards(examples[0]) if len(examples) == 1 else []
    if not shards:
        return {}
    schema_uri = artifact_utils.get_single_uri(input_dict[standard_component_specs.SCHEMA_KEY])
    with fileio.open(io_utils.get_only_uri_in_dir(schema_uri), "rb") as f:
        schema = f.read()
    decisions = {name: [r.role, r.date_format, r.with_time] for name, r in roles.items()}
    features = json.dumps({**{k: v for k, v in custom_config.items() if k not in _NOT_FEATURES},
                           "roles": decisions}, sort_keys=True)
    result = {}
    for split in artifact_utils.decode_split_names(examples[0].split_names):
        split_uri = artifact_utils.get_split_uri(examples, split)
        result[io_utils.all_files_pattern(split_uri)] = [
            (s["span"], f"{split_uri}/{s['prefix']}*",
             f"{s['span']}-{split}-" + hashlib.sha256(s["key"].encode() + split.encode() + schema
                                                     + features.encode()).hexdigest()[:24])
            for s in shards]
    return result


def _bound(span_datasets: dict[str, list[tuple[str, str, str]]]) -> type:
    parts = [part for spans in span_datasets.values() for part in spans]
    return type("_ProcessorOfThisRun", (_Processor,), {
        "span_datasets": span_datasets, "analyzed": [], "cached": [],
        "key_of_pattern": {pattern: key for _, pattern, key in parts},
        # As tf.Transform spells the key once it is a DatasetKey.
        "span_of_key": {tft_cache.DatasetKey(key).key: span for span, _, key in parts}})


def _cache_artifact(uri: str) -> types.Artifact:
    artifact = standard_artifacts.TransformCache()
    artifact.uri = uri
    return artifact


class DeterministicTransform(Transform):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, *args, force_tf_compat_v1: bool = TF_COMPAT_V1, **kwargs):
        super().__init__(*args, force_tf_compat_v1=force_tf_compat_v1, **kwargs)


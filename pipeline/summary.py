"""What a run did, read back from MLMD: per-component state and time, eval
metrics against thresholds and the baseline, the blessing, the pushed model."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Optional

import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.snapshot.component import DatasetSnapshot
from pipeline.config import Config

ACCURACY = "sparse_categorical_accuracy"
_STATES = {metadata_store_pb2.Execution.COMPLETE: "ran", metadata_store_pb2.Execution.CACHED: "cached",
           metadata_store_pb2.Execution.FAILED: "failed", metadata_store_pb2.Execution.RUNNING: "running"}


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


@dataclasses.dataclass
class ComponentRun:
    name: str
    state: str
    seconds: float
    execution_id: int
    started: float = 0.0  # epoch seconds


@dataclasses.dataclass
class RunSummary:
    run_id: str
    components: list[ComponentRun]
    metrics: dict[str, float]           # candidate's overall metrics
    baseline_metrics: dict[str, float]  # last blessed model's, empty on a first run
    blessed: Optional[bool]
    validation_failures: list[str]
    pushed_path: Optional[str]
    pushed_version: Optional[str]
    # Every component's output artifacts, for the run report and lineage.
    outputs: dict[str, list["ArtifactInfo"]] = dataclasses.field(default_factory=dict)
    # Metric name -> the Evaluator's thresholds as it ran (value bounds, change bounds).
    thresholds: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # Component -> ids of the artifacts it read: lineage within the run.
    inputs: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    snapshot_digest: Optional[str] = None
    snapshot_rows: Optional[int] = None
    # Why the data gate stopped the run; empty when it passed or did not run.
    gate_anomalies: list[str] = dataclasses.field(default_factory=list)

    def component(self, name: str) -> Optional[ComponentRun]:
        return next((c for c in self.components if c.name == name), None)


@dataclasses.dataclass
class ArtifactInfo:
    id: int
    type_name: str
    uri: str
    properties: dict[str, object]


def latest_run(store: metadata_store.MetadataStore, pipeline_name: str) -> metadata_store_pb2.Context:
    runs = [c for c in store.get_contexts_by_type("pipeline_run")
            if any(p.name == pipeline_name for p in store.get_parent_contexts_by_context(c.id))]
    if not runs:
        raise LookupError(f"no runs of pipeline {pipeline_name!r} in this metadata store")
    return max(runs, key=lambda c: (c.create_time_since_epoch, c.id))


def summarize(metadata_path: str, pipeline_name: str, run_id: Optional[str] = None) -> RunSummary:
    store = open_store(metadata_path)
    run = (store.get_context_by_type_and_name("pipeline_run", run_id) if run_id
           else latest_run(store, pipeline_name))
    if run is None:
        raise LookupError(f"no run {run_id!r} in {metadata_path}")
    components: list[ComponentRun] = []
    outputs: dict[str, list[metadata_store_pb2.Artifact]] = {}
    inputs: dict[str, list[int]] = {}
    for execution in sorted(store.get_executions_by_context(run.id), key=lambda e: e.id):
        node = next(c.name for c in store.get_contexts_by_execution(execution.id) if c.type == "node")
        name = node.split(".", 1)[1]
        seconds = (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000
        components.append(ComponentRun(name, _STATES.get(execution.last_known_state, "unknown"),
                                       seconds, execution.id, execution.create_time_since_epoch / 1000))
        events = store.get_events_by_execution_ids([execution.id])
        outputs[name] = store.get_artifacts_by_id(
            [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT])
        inputs[name] = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.INPUT]

    metrics, baseline, failures, blessed, thresholds = {}, {}, [], None, {}
    evaluation = _first(outputs.get("Evaluator", []), "ModelEvaluation", store)
    if evaluation is not None:
        evaluator = next(c for c in components if c.name == "Evaluator")
        thresholds = _thresholds(store.get_executions_by_id([evaluator.execution_id])[0])
        metrics, baseline = _overall_metrics(evaluation.uri)
        validation = tfma.load_validation_result(evaluation.uri)
        blessed = validation.validation_ok
        failures = [f"{f.metric_key.name}: {f.message}" for per_slice in validation.metric_validations_per_slice
                    for f in per_slice.failures]
    snapshot = _first(outputs.get("Snapshot", []), DatasetSnapshot.TYPE_NAME, store)
    gate = next((c for c in components if c.name == "DataGate"), None)
    gate_anomalies = []
    if gate is not None and gate.state == "failed":
        gate_anomalies = [str(a) for a in anomalies_of(_first(outputs.get("ExampleValidator", []),
                                                            "ExampleAnomalies", store))]
    pushed = _first(outputs.get("Pusher", []), "PushedModel", store)
    pushed_ok = pushed is not None and pushed.custom_properties["pushed"].int_value == 1
    return RunSummary(
        run_id=run.name, components=components, metrics=metrics, baseline_metrics=baseline,
        blessed=blessed, validation_failures=failures,
        pushed_path=pushed.custom_properties["pushed_destination"].string_value if pushed_ok else None,
        pushed_version=pushed.custom_properties["pushed_version"].string_value if pushed_ok else None,
        outputs={name: [_artifact_info(a, store) for a in arts] for name, arts in outputs.items()},
        thresholds=thresholds, inputs=inputs,
        snapshot_digest=snapshot.custom_properties["digest"].string_value if snapshot else None,
        snapshot_rows=snapshot.custom_properties["rows"].int_value if snapshot else None,
        gate_anomalies=gate_anomalies)


def _thresholds(execution: metadata_store_pb2.Execution) -> dict[str, dict[str, float]]:
    """The thresholds the Evaluator applied, from the eval_config it recorded in MLMD."""
    raw = execution.custom_properties.get("eval_config")
    if raw is None or not raw.string_value:
        return {}
    eval_config = json_format.Parse(raw.string_value, tfma.EvalConfig(), ignore_unknown_fields=True)
    result: dict[str, dict[str, float]] = {}
    for spec in eval_config.metrics_specs:
        for metric in spec.metrics:
            value, change = metric.threshold.value_threshold, metric.threshold.change_threshold
            bounds = {}
            if value.HasField("lower_bound"):
                bounds["lower_bound"] = value.lower_bound.value
            if value.HasField("upper_bound"):
                bounds["upper_bound"] = value.upper_bound.value
            if change.HasField("absolute"):
                bounds["change_absolute"] = change.absolute.value
            if bounds:
                # Results are keyed by the metric's name: snake_case of its class unless renamed.
                name = json.loads(metric.config or "{}").get("name") or re.sub(
                    r"(?<=[a-z0-9])(?=[A-Z])", "_", metric.class_name).lower()
                result[name] = bounds
    return result


def _artifact_info(artifact: metadata_store_pb2.Artifact, store) -> ArtifactInfo:
    type_name = store.get_artifact_types_by_id([artifact.type_id])[0].name
    props = {**artifact.properties, **artifact.custom_properties}
    return ArtifactInfo(artifact.id, type_name, artifact.uri,
                        {k: getattr(v, v.WhichOneof("value")) for k, v in props.items() if v.WhichOneof("value")})


def anomalies_of(artifact: Optional[metadata_store_pb2.Artifact]) -> list:
    if artifact is None:
        return []
    from tfx.types.standard_artifacts import ExampleAnomalies

    from components.data_gate import read_anomalies

    anomalies = ExampleAnomalies()
    anomalies.set_mlmd_artifact(artifact)
    return read_anomalies(anomalies)


def _first(artifacts, type_name, store) -> Optional[metadata_store_pb2.Artifact]:
    type_ids = {t.id for t in store.get_artifact_types() if t.name == type_name}
    return next((a for a in artifacts if a.type_id in type_ids), None)


def _overall_metrics(uri: str) -> tuple[dict[str, float], dict[str, float]]:
    candidate, baseline = {}, {}
    for per_slice in tfma.load_metrics(uri):
        if per_slice.slice_key.single_slice_keys:
            continue
        for kv in per_slice.metric_keys_and_values:
            if kv.key.is_diff:
                continue
            target = baseline if kv.key.model_name == "baseline" else candidate
            target[kv.key.name] = kv.value.double_value.value
    return candidate, baseline


def format_summary(summary: RunSummary, config: Config, log_file: Optional[str] = None) -> str:
    lines = [f"run {summary.run_id}", "components:"]
    for c in summary.components:
        lines.append(f"  {c.name:<32} {c.state:<7} {c.seconds:7.1f}s")
    lines.append(f"  {'total':<32} {'':<7} {sum(c.seconds for c in summary.components):7.1f}s")
    if summary.snapshot_digest:
        lines.append(f"data snapshot: {summary.snapshot_digest} ({summary.snapshot_rows} rows)")
    if summary.gate_anomalies:
        lines.append("data gate: STOPPED the run before Transform; anomalies:")
        lines.extend(f"  {a}" for a in summary.gate_anomalies)
    acc = summary.metrics.get(ACCURACY)
    if acc is not None:
        base = summary.baseline_metrics.get(ACCURACY)
        lines.append(f"eval accuracy: {acc:.4f} (lower bound {config.evaluator.accuracy_lower_bound}; "
                     + (f"baseline {base:.4f}, allowed regression {config.evaluator.max_accuracy_regression})"
                        if base is not None else "no blessed baseline yet)"))
        lines.append(f"eval examples: {summary.metrics.get('example_count', 0):.0f}")
    if summary.blessed is not None:
        lines.append("blessed: yes" if summary.blessed else "blessed: NO")
        lines.extend(f"  why: {f}" for f in summary.validation_failures)
    lines.append(f"pushed: {summary.pushed_path} (version {summary.pushed_version})" if summary.pushed_path
                 else "pushed: nothing (the model serving now, if any, is unchanged)")
    lines.append(f"artifacts: {config.pipeline.pipeline_root}")
    lines.append(f"metadata:  {config.pipeline.metadata_path}")
    if log_file:
        lines.append(f"log:       {log_file}")
    return "\n".join(lines)

"""Vertex AI Pipelines' cache rule, modelled from the KFP v2 backend so tests can hold our spec to it.
Why and sources: docs/internals.md."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterator, Mapping, Optional, Sequence


def cache_key(*, input_artifact_names: Mapping[str, Sequence[str]], input_parameter_values: Mapping[str, Any],
              output_artifacts: Mapping[str, Mapping[str, Any]], output_parameter_types: Mapping[str, str],
              image: str, command: Sequence[str], args: Sequence[str]) -> dict[str, Any]:
    """The CacheKey message as JSON, field for field as GenerateCacheKey fills it.

    `output_artifacts` maps an output name to its RuntimeArtifact (as JSON);
    only its name, type and metadata count, as in the Go code.
    """
    key = {
        "inputArtifactNames": {k: {"artifactNames": list(v)} for k, v in input_artifact_names.items()},
        "inputParameterValues": dict(input_parameter_values),
        "outputArtifactsSpec": {k: {f: a[f] for f in ("name", "type", "metadata") if a.get(f)}
                                for k, a in output_artifacts.items()},
        "outputParametersSpec": dict(output_parameter_types),
        "containerSpec": {"image": image, "cmdArgs": [*command, *args]},
    }
    # protojson leaves empty maps out of the JSON.
    return {k: v for k, v in key.items() if v}


def fingerprint(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(_go_numbers(key), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _go_numbers(value: Any) -> Any:
    """protobuf numbers are doubles, and Go's json.Marshal writes 5.0 as 5."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def caching_enabled(task: Mapping[str, Any], run_enable_caching: bool | None = None) -> bool:
    """Whether Vertex looks this task up in the cache: the run-level override
    (PipelineJob enable_caching) wins over the task's compiled option."""
    if run_enable_caching is not None:
        return run_enable_caching
    return bool(task.get("cachingOptions", {}).get("enableCache", False))


def _mutable_readers() -> dict[str, str]:
    """Executor class path (as in the spec's --executor_class_path) -> what it reads behind a fixed parameter."""
    from tfx.utils import name_utils
    from tfx.v1.components import ImportSchemaGen

    from components.coordination.run_lease import ReleaseRunLease, RunLease
    from components.data.drift_gate import DriftGate
    from components.data.snapshot.component import Snapshot
    from components.serving.canary_check_component import CanaryCheck
    from components.serving.serving_model import ServingModel
    from components.tuner.component import LatestTuning

    return {
        name_utils.get_full_name(RunLease.EXECUTOR_SPEC.executor_class):
            "takes the run lease: a cached hit would start the run without holding it",
        name_utils.get_full_name(ReleaseRunLease.EXECUTOR_SPEC.executor_class):
            "releases the run lease: a cached hit would leave it held",
        name_utils.get_full_name(CanaryCheck.EXECUTOR_SPEC.executor_class):
            "decides on the metrics recorded up to now and moves labels: a cached hit would decide nothing",
        name_utils.get_full_name(DriftGate.EXECUTOR_SPEC.executor_class):
            "reads the serving model's training-data record in pipeline.serving_dir, which every push changes",
        name_utils.get_full_name(ServingModel.EXECUTOR_SPEC.executor_class):
            "copies the model serving now from pipeline.serving_dir, which every push changes",
        name_utils.get_full_name(LatestTuning.EXECUTOR_SPEC.executor_class):
            "reads the last search's result under pipeline.root/tuning, which every search replaces",
        name_utils.get_full_name(Snapshot.EXECUTOR_SPEC.executor_class):
            "reads its source (data.input_dir, or inference.input_dir), which changes behind the same URI",
        name_utils.get_full_name(ImportSchemaGen.EXECUTOR_SPEC.executor_class):
            "reads data.schema_file, which can be replaced in place",
    }


def task_executor(pipeline_spec: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    """The deploymentSpec executor of a task (container, resolver or importer); {} for a sub-DAG task."""
    component = pipeline_spec["components"][task["componentRef"]["name"]]
    if "executorLabel" not in component:
        return {}
    return pipeline_spec["deploymentSpec"]["executors"][component["executorLabel"]]


def never_cached(pipeline_spec: Mapping[str, Any], task: Mapping[str, Any]) -> Optional[str]:
    """Why this task must never be a cache hit, or None if its cache key covers everything it reads."""
    executor = task_executor(pipeline_spec, task)
    if "resolver" in executor or "importer" in executor:
        return "queries ML Metadata at run time"
    args = executor.get("container", {}).get("args", [])
    if "--executor_class_path" in args:
        return _mutable_readers().get(args[args.index("--executor_class_path") + 1])
    return None


def dag_tasks(pipeline_spec: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, task) for every task in the root DAG and in sub-DAGs, as aiplatform walks them."""
    for component in [pipeline_spec["root"], *pipeline_spec["components"].values()]:
        yield from component.get("dag", {}).get("tasks", {}).items()


def apply(pipeline_spec: dict[str, Any], enable_cache: bool) -> dict[str, str]:
    """Set every task's cachingOptions by the rule, in place; returns the never-cached tasks and why."""
    never: dict[str, str] = {}
    for name, task in dag_tasks(pipeline_spec):
        reason = never_cached(pipeline_spec, task)
        if reason:
            never[name] = reason
        task["cachingOptions"] = {"enableCache": enable_cache and reason is None}
    return never

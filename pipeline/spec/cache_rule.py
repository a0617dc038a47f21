"""Vertex AI Pipelines' cache rule, modelled from the KFP v2 backend so tests can hold our spec to it.

Source (kubeflow/pipelines, read at commit 7b70c7b, Aug 2026):
- backend/src/v2/driver/cache.go, `getFingerPrintsAndID`: a task is looked up
  in the cache only when caching is not disabled for the run and the task's
  `cachingOptions.enableCache` is true.
- same file, `getFingerPrint`: the key is built from the task's executor input,
  its output parameter types, the container's image and its *unresolved*
  `command` + `args` as written in the spec (and PVC names, which Vertex does
  not use).
- backend/src/v2/cacheutils/cache.go, `GenerateCacheKey` / `GenerateFingerPrint`,
  and api/v2alpha1/cache_key.proto: the CacheKey message holds
    inputArtifactNames    input name -> the *names* of the bound artifacts
                          (a fresh upstream execution makes new artifacts,
                          so every reader of it misses),
    inputParameterValues  input name -> the resolved value,
    outputArtifactsSpec   output name -> {name, type, metadata}, URI wiped,
    outputParametersSpec  output name -> parameter type,
    containerSpec         {image, cmdArgs};
  the fingerprint is the sha256 hex of its JSON (protojson, then Go's
  json.Marshal: keys sorted, no spaces).
What is *behind* a URI or a path never enters the key: a task that reads a
mutable source through a fixed parameter is a cache hit forever once caching
is on. That is why such tasks must be compiled with caching off, and why
`aiplatform.PipelineJob(enable_caching=True|False)`, which overwrites every
task's option (google/cloud/aiplatform/pipeline_jobs.py, `_set_enable_caching_value`),
is not used by submit or schedule unless the user asks for it.

The rule (`never_cached`, applied by pipeline/vertex/compile.py to every task
of the compiled spec):
- Snapshot reads data.input_dir and ImportSchemaGen reads data.schema_file:
  both are fixed parameters in front of data that changes, so they run every
  time. Vertex does not run TFX's custom drivers (TFX 1.16's KubeflowV2
  compiler attaches a pre-cache-check driver only to file-based ExampleGen,
  tfx/orchestration/kubeflow/v2/step_builder.py), so the Snapshot driver that
  keys the local cache by a source fingerprint does nothing there.
- DriftGate reads the training-data record of the version serving now in
  pipeline.serving_dir (components/training_record.py), a fixed parameter in
  front of a directory every push changes; locally its driver keys the cache
  by the serving version, which Vertex would not run. A cached gate would
  judge new data against a model that no longer serves, so it runs every time
  (its work is one span's statistics). Its snapshot input is new on every
  run anyway, but the rule must not rest on that.
- ServingModel copies the version serving now in pipeline.serving_dir
  (components/serving_model.py): the Evaluator's baseline and the warm-start
  base. Same fixed parameter in front of the same changing directory as the
  DriftGate, and a driver keying the local cache that Vertex would not run;
  a cached copy would judge candidates against a model that no longer serves.
- Resolver and importer tasks would query ML Metadata at run time; the DAG
  has none (the baseline is the ServingModel), but should one appear it is
  never cached: a resolver has no inputs and no container, so the container
  rule would give it one constant key, a hit forever.
- Everything else is cached when pipeline.enable_cache is true.

What that reuses: Snapshot executes every run, so its output *artifacts* are
new each time and every reader of them misses. That includes CsvExampleGen:
it takes the DatasetSnapshot as its input artifact (components/example_gen.py;
TFX's `input_base` parameter would have to be a dynamic execution property,
which TFX 1.16 compiles into a reference to a task that does not exist), so on
unchanged data ExampleGen and StatisticsGen run again on Vertex, where they
used to be cache hits (their key was the content-addressed data dir). That
costs little next to what reruns anyway: ImportSchemaGen's new Schema artifact
already makes everything after them (ExampleValidator, Transform, the
Trainer, the Evaluator, the Pusher) rerun every time, the Trainer being the
bulk of a run; with Dataflow on, it is two more Beam jobs, each with its
worker start-up. (With spans and data.skip_when_no_new_span, every task after
the Snapshot read its DatasetSnapshot already, for its trigger condition.)
Locally the Snapshot's driver keeps the snapshot a cache hit while the
source is unchanged, so there ExampleGen and StatisticsGen are hits.
"""

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

    from components.drift_gate import DriftGate
    from components.run_lease import ReleaseRunLease, RunLease
    from components.serving_model import ServingModel
    from components.snapshot.component import Snapshot

    return {
        name_utils.get_full_name(RunLease.EXECUTOR_SPEC.executor_class):
            "takes the run lease: a cached hit would start the run without holding it",
        name_utils.get_full_name(ReleaseRunLease.EXECUTOR_SPEC.executor_class):
            "releases the run lease: a cached hit would leave it held",
        name_utils.get_full_name(DriftGate.EXECUTOR_SPEC.executor_class):
            "reads the serving model's training-data record in pipeline.serving_dir, which every push changes",
        name_utils.get_full_name(ServingModel.EXECUTOR_SPEC.executor_class):
            "copies the model serving now from pipeline.serving_dir, which every push changes",
        name_utils.get_full_name(Snapshot.EXECUTOR_SPEC.executor_class):
            "reads data.input_dir, which changes behind the same URI",
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

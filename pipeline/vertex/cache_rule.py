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
task's option (google/cloud/aiplatform/pipeline_jobs.py), must not be used by
submit or schedule.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence


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

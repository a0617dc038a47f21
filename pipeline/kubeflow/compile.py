"""The pipeline compiled for the open-source KFP backend: the package kfp.Client submits.

The same DAG and the same TFX v2 compiler as for Vertex (pipeline/vertex/compile.py), with
three differences the open-source backend needs:
- pipeline spec schema 2.1.0: the API server refuses any other ("KFP only supports schema
  version 2.1.0", backend/src/apiserver/template/v2_template.go, NewV2SpecTemplate). TFX
  writes it with use_pipeline_spec_2_1, which also passes each component's inputs spec to
  its executor (step_builder.py, _build_container_spec: --json_serialized_inputs_spec_args);
- every container runs our entrypoint (entrypoint.py), which repairs what the open-source
  launcher hands TFX's (artifact types; GCS directory markers);
- the file is the IR as YAML, the package format kfp.Client.create_run_from_pipeline_package
  reads (kfp/client/client.py, _extract_pipeline_yaml: .yaml/.yml/.zip/.tar.gz, not .json).
Each task's caching option is set by the same rule as on Vertex (pipeline/spec/cache_rule.py).

The open-source backend's cache (kubeflow/pipelines at 7b70c7b, the source cache_rule.py models
Vertex's from) against that model:
- The same key. The driver fingerprints the executor input, output specs and the container's
  unresolved image + command + args (backend/src/v2/driver/cache.go, getFingerPrint;
  backend/src/v2/cacheutils/cache.go, GenerateCacheKey) and looks it up only when the task's
  cachingOptions.enableCache is true (cache.go, getFingerPrintsAndID; container.go, Container).
  So the per-task rule keeps a task that reads mutable state from ever being a hit here too,
  and the compiled spec needs no change for this backend.
- Scope. An entry is found only within the pipeline name (pipelineInfo.name = pipeline.name) and
  the run's namespace (cache.go: GetExecutionCache(fingerPrint, "pipeline/"+PipelineName,
  Namespace)); two configs with one pipeline.name in one namespace share entries, which is
  harmless because the key holds every input.
- Keys differ between targets: our command (pipeline.kubeflow.entrypoint) and the spec-2.1
  --json_serialized_inputs_spec_args argument are part of cmdArgs, so nothing cached on one
  target or by one release of this entrypoint is a hit for another.
- A cluster-wide switch: the API server's CacheDisabled option reaches every driver as
  --cache_disabled (backend/src/apiserver/resource/resource_manager.go;
  backend/src/v2/compiler/argocompiler/container.go) and turns every lookup off whatever the spec
  says. Vertex has no such switch.
- `--cache`/`--no-cache`: kfp.Client's override reaches root-DAG tasks only
  (kfp/client/client.py, _override_caching_options), and the no-new-span condition puts most
  tasks in a sub-DAG (pipeline/spec/condition_group.py); `with_caching` writes the override
  into every task instead, as aiplatform's does on Vertex.
- Cached outputs are re-published from ML Metadata (driver/container.go, reuseCachedOutputs);
  KFP is removing MLMD (kubeflow/pipelines#11760, KEP 12147), which will move this. Our history,
  lineage and drift baseline read our own records and the serving directory, never KFP's MLMD.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import yaml

from pipeline.config import Config
from pipeline.errors import EXIT_OK, ConfigError
from pipeline.spec import cache_rule
from pipeline.spec.compile import compile_job, output_path

DEFAULT_OUTPUT = "output/kubeflow/pipeline.yaml"
ENTRYPOINT = ["python", "-m", "pipeline.kubeflow.entrypoint"]
SCHEMA_VERSION = "2.1.0"


def compile_pipeline(config: Config, output: str | os.PathLike = DEFAULT_OUTPUT) -> Path:
    """Write the pipeline spec (IR) YAML for `config` to `output` and return its path."""
    if config.kubeflow is None:
        raise ConfigError("this command needs a kubeflow section in the config (see configs/kubeflow.yaml)")
    if Path(output).suffix not in (".yaml", ".yml"):
        raise ConfigError(f"-o {str(output)!r}: kfp.Client reads a pipeline package ending in .yaml or .yml")
    out = output_path(output, ".yaml")
    spec = compile_job(config, config.kubeflow.pipeline_image, list(ENTRYPOINT), spec_2_1=True)["pipelineSpec"]
    if spec.get("schemaVersion") != SCHEMA_VERSION:
        raise ConfigError(f"TFX wrote pipeline spec schema {spec.get('schemaVersion')!r}; the KFP API server "
                          f"accepts only {SCHEMA_VERSION}")
    out.write_text(yaml.safe_dump(spec, sort_keys=True))
    return out


def with_caching(package: Path, enable_caching: Optional[bool]) -> Path:
    """The package with --cache/--no-cache written into every task's cachingOptions (a copy beside it).

    kfp.Client's own enable_caching overrides only the root DAG's tasks (kfp/client/client.py,
    _override_caching_options), and with spans most tasks sit in the condition's sub-DAG
    (pipeline/spec/condition_group.py); so the override is made here and kfp.Client gets None."""
    if enable_caching is None:
        return package
    spec = load_spec(package)
    for _, task in cache_rule.dag_tasks(spec):
        task["cachingOptions"] = {"enableCache": enable_caching}
    out = package.with_name(f"{package.stem}-{'cache' if enable_caching else 'no-cache'}{package.suffix}")
    out.write_text(yaml.safe_dump(spec, sort_keys=True))
    return out


def load_spec(package: str | os.PathLike) -> dict:
    return yaml.safe_load(Path(package).read_text())


def cmd_compile(config: Config, args) -> int:
    out = compile_pipeline(config, args.output)
    spec = load_spec(out)
    tasks = dict(cache_rule.dag_tasks(spec))
    print(f"wrote {out} ({len(tasks)} tasks, image {config.kubeflow.pipeline_image}, "
          f"pipeline spec {spec['schemaVersion']})")
    cached = sorted(name for name, task in tasks.items() if cache_rule.caching_enabled(task))
    print(f"cache: looked up when the inputs repeat: {', '.join(cached) or 'none (pipeline.enable_cache is false)'}")
    return EXIT_OK

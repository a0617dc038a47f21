"""The pipeline compiled for the open-source KFP backend: the package kfp.Client submits.
Why and sources: docs/internals.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import yaml

from pipeline.config import Config
from pipeline.errors import EXIT_OK, ConfigError
from pipeline.spec import cache_rule
from pipeline.spec.backends import ACCESS_ML_PIPELINE
from pipeline.spec.compile import compile_job, output_path

DEFAULT_OUTPUT = "output/kubeflow/pipeline.yaml"
ENTRYPOINT = ["python", "-m", "pipeline.kubeflow.entrypoint"]
SCHEMA_VERSION = "2.1.0"
# On multi-user Kubeflow the API token the run's own calls send (kubeflow.in_cluster_token_file) is projected only
# into pods with this label (backends.ACCESS_ML_PIPELINE says where). On every executor's pod: it selects nothing on
# standalone KFP.
POD_LABELS = ACCESS_ML_PIPELINE


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
    set_resources(spec, config.kubeflow)
    write_package(out, spec, platform_spec(spec))
    return out


def platform_spec(spec: dict) -> dict:
    """The Kubernetes platform spec: POD_LABELS on every container executor's pod, in the form kfp-kubernetes'
    add_pod_label writes (kubeflow/pipelines kubernetes_platform/python/kfp/kubernetes/pod_metadata.py; the
    executor's KubernetesExecutorConfig.pod_metadata, kubernetes_platform/proto/kubernetes_executor_config.proto, as
    its JSON under platforms.kubernetes.deploymentSpec.executors, test_pod_metadata.py). The backend puts those labels
    on the executor's pod (backend/src/v2/compiler/argocompiler/container.go, extendPodMetadata, from 2.1.0)."""
    executors = {name: {"podMetadata": {"labels": dict(POD_LABELS)}}
                 for name, executor in spec.get("deploymentSpec", {}).get("executors", {}).items()
                 if "container" in executor}
    return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}


def write_package(out: Path, spec: dict, platform: dict) -> None:
    """The package as the KFP SDK writes one with a platform spec: the pipeline spec, then the platform spec, two
    YAML documents (kfp.Client reads the second as the platform spec, client.py _extract_pipeline_yaml)."""
    out.write_text(yaml.safe_dump_all([spec, platform] if platform else [spec], sort_keys=True))


# The spec's names for Resources' fields, as the KFP SDK writes them (kfp 2.5: memory in GB); the backend's
# driver reads them into the pod's requests and limits (backend/src/v2/driver/driver.go, initPodSpecPatch,
# from 2.0; the string resource* fields it prefers exist only from 2.4).
_RESOURCE_FIELDS = {"cpu_request": "cpuRequest", "cpu_limit": "cpuLimit", "memory_request": "memoryRequest",
                    "memory_limit": "memoryLimit"}


def set_resources(spec: dict, kubeflow) -> None:
    """Every container executor's resources from kubeflow.resources, by the task that runs it; a task named there
    that the DAG does not have is a config error (a typo would silently leave the default)."""
    tasks = dict(cache_rule.dag_tasks(spec))
    unknown = sorted(set(kubeflow.resources) - set(tasks) - {"default"})
    if unknown:
        known = sorted(n for n, t in tasks.items() if cache_rule.task_executor(spec, t))
        raise ConfigError(f"kubeflow.resources names {', '.join(unknown)}, which the pipeline has no task of; its "
                          f"tasks: {', '.join(known)}")
    for name, task in tasks.items():
        container = cache_rule.task_executor(spec, task).get("container")
        if container is not None:
            wanted = kubeflow.resources_of(name).model_dump(exclude_none=True)
            container["resources"] = {_RESOURCE_FIELDS[k]: float(v) for k, v in wanted.items()}


def with_caching(package: Path, enable_caching: Optional[bool]) -> Path:
    """The package with --cache/--no-cache written into every task's cachingOptions (a copy beside it).

    kfp.Client's own enable_caching overrides only the root DAG's tasks (kfp/client/client.py,
    _override_caching_options), and with spans most tasks sit in the condition's sub-DAG
    (pipeline/spec/condition_group.py); so the override is made here and kfp.Client gets None."""
    if enable_caching is None:
        return package
    spec, platform = load_package(package)
    for _, task in cache_rule.dag_tasks(spec):
        task["cachingOptions"] = {"enableCache": enable_caching}
    out = package.with_name(f"{package.stem}-{'cache' if enable_caching else 'no-cache'}{package.suffix}")
    write_package(out, spec, platform)
    return out


def load_package(package: str | os.PathLike) -> tuple[dict, dict]:
    """The pipeline spec (the package's first document) and the platform spec (the second, {} without one), from
    one read of the package."""
    documents = list(yaml.safe_load_all(Path(package).read_text()))
    return documents[0], (documents[1] if len(documents) > 1 and documents[1] else {})


def load_spec(package: str | os.PathLike) -> dict:
    """The pipeline spec: the package's first document."""
    return load_package(package)[0]


def load_platform_spec(package: str | os.PathLike) -> dict:
    """The platform spec: the second document, {} without one."""
    return load_package(package)[1]


def cmd_compile(config: Config, args) -> int:
    out = compile_pipeline(config, args.output)
    spec = load_spec(out)
    tasks = dict(cache_rule.dag_tasks(spec))
    print(f"wrote {out} ({len(tasks)} tasks, image {config.kubeflow.pipeline_image}, "
          f"pipeline spec {spec['schemaVersion']})")
    cached = sorted(name for name, task in tasks.items() if cache_rule.caching_enabled(task))
    print(f"cache: looked up when the inputs repeat: {', '.join(cached) or 'none (pipeline.enable_cache is false)'}")
    return EXIT_OK

"""The PipelineJob as submit would send it, read as Vertex Pipelines reads it.

The job body comes from submit's own code (compile_pipeline, then
client.build_job, which may rewrite every task's caching option), only never
sent. Before anything runs, every task is checked for what the dry run can
execute; whatever it cannot is a SpecError naming the field, never skipped.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any, Optional

import yaml

from pipeline.config import Config
from pipeline.errors import CommandFailed

ROOT = "pipelineSpec.root.dag.tasks"
# What a task may say and the dry run still runs it as Vertex would.
_TASK_FIELDS = {"taskInfo", "componentRef", "dependentTasks", "inputs", "cachingOptions", "triggerPolicy"}
_CONTAINER_FIELDS = {"image", "command", "args", "lifecycle", "env"}
_PARAMETER_SOURCES = ("runtimeValue", "taskOutputParameter", "componentInputParameter")
# The flags of TFX's Vertex entrypoint and ExampleGen driver that take a value; the rest are Beam's.
ENTRYPOINT_FLAGS = ("--executor_class_path", "--json_serialized_invocation_args", "--json_serialized_inputs_spec_args")
PYTHON = ("python", "python3")


class SpecError(CommandFailed):
    """The spec asks for something the dry run cannot execute as Vertex would; names the field."""


@dataclasses.dataclass(frozen=True)
class Job:
    job_id: str
    spec: dict[str, Any]      # pipelineSpec
    runtime: dict[str, Any]   # runtimeConfig


@dataclasses.dataclass(frozen=True)
class Task:
    name: str                          # the DAG key
    spec: dict[str, Any]
    component: dict[str, Any]
    executor_label: str
    executor: dict[str, Any]
    upstream: tuple[str, ...]

    def field(self, *parts: str) -> str:
        return ".".join((ROOT, self.name, *parts))

    def executor_field(self, *parts: str) -> str:
        return ".".join(("pipelineSpec.deploymentSpec.executors", self.executor_label, *parts))

    def component_field(self, *parts: str) -> str:
        return ".".join(("pipelineSpec.components", self.spec["componentRef"]["name"], *parts))

    @property
    def container(self) -> Optional[dict[str, Any]]:
        return self.executor.get("container")


def submitted_job(config: Config, template: Path) -> Job:
    """The body submit() would POST: built by client.build_job, offline (anonymous credentials, no call made)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.protobuf import json_format

    from pipeline.vertex.client import build_job

    aiplatform.init(project=config.vertex.project, location=config.vertex.region, credentials=AnonymousCredentials())
    job = build_job(config, str(template))
    # The public gca_resource refuses until the job exists on Vertex; _gca_resource is the request body.
    body = json_format.MessageToDict(job._gca_resource._pb)
    return Job(job.job_id, body["pipelineSpec"], body.get("runtimeConfig", {}))


def read_tasks(spec: dict[str, Any], notes: list[str]) -> list[Task]:
    """Every task of the root DAG, checked, in an order Vertex could run them (upstream first)."""
    tasks_spec = spec.get("root", {}).get("dag", {}).get("tasks")
    if not tasks_spec:
        raise SpecError("pipelineSpec.root.dag.tasks: no tasks to run")
    names = set(tasks_spec)
    tasks = {}
    for name, task_spec in tasks_spec.items():
        extra = sorted(set(task_spec) - _TASK_FIELDS)
        if extra:
            raise SpecError(f"{ROOT}.{name}.{extra[0]}: not emulated by the dry run")
        try:
            tasks[name] = _task(spec, name, task_spec, names, notes)
        except SpecError as e:
            raise SpecError(f"task {name}: {e}") from None
    return _in_order(tasks)


def _task(spec: dict, name: str, task_spec: dict, names: set[str], notes: list[str]) -> Task:
    component_name = task_spec.get("componentRef", {}).get("name", "")
    component = spec.get("components", {}).get(component_name)
    if component is None:
        raise SpecError(f"{ROOT}.{name}.componentRef.name: no component {component_name!r} in pipelineSpec.components")
    if "executorLabel" not in component:
        raise SpecError(f"pipelineSpec.components.{component_name}: nested DAGs are not emulated by the dry run")
    label = component["executorLabel"]
    executor = spec.get("deploymentSpec", {}).get("executors", {}).get(label)
    if executor is None:
        raise SpecError(f"pipelineSpec.components.{component_name}.executorLabel: no executor {label!r} "
                        "in pipelineSpec.deploymentSpec.executors")
    upstream = set(task_spec.get("dependentTasks", []))
    inputs = task_spec.get("inputs", {})
    for key, source in inputs.get("parameters", {}).items():
        kind = next((k for k in _PARAMETER_SOURCES if k in source), None)
        if kind is None:
            raise SpecError(f"{ROOT}.{name}.inputs.parameters.{key}: only {', '.join(_PARAMETER_SOURCES)} "
                            f"are emulated, got {sorted(source)}")
        if kind == "taskOutputParameter":
            field = f"{ROOT}.{name}.inputs.parameters.{key}.taskOutputParameter.producerTask"
            upstream.add(producer(source[kind]["producerTask"], names, field, notes))
    for key, source in inputs.get("artifacts", {}).items():
        if "taskOutputArtifact" not in source:
            raise SpecError(f"{ROOT}.{name}.inputs.artifacts.{key}: only taskOutputArtifact is emulated, "
                            f"got {sorted(source)}")
        field = f"{ROOT}.{name}.inputs.artifacts.{key}.taskOutputArtifact.producerTask"
        upstream.add(producer(source["taskOutputArtifact"]["producerTask"], names, field, notes))
    for dep in upstream:
        if dep not in names:
            raise SpecError(f"{ROOT}.{name}.dependentTasks: {dep!r} is not a task of the DAG")
    task = Task(name, task_spec, component, label, executor, tuple(sorted(upstream)))
    _check_trigger_policy(task)
    _check_executor(task)
    _check_artifact_types(task)
    return task


def producer(ref: str, names: set[str], field: str, notes: list[str]) -> str:
    """The DAG task a producerTask names, as the KFP backend and kfp.local look it up: by DAG key.

    TFX 1.16 writes `<id>_task` for dynamic execution properties
    (step_builder.py) while keying the task `<id>`; whether Vertex resolves
    that form is unverified, so it is accepted with a warning, never silently.
    """
    if ref in names:
        return ref
    if ref.endswith("_task") and ref[:-len("_task")] in names:
        notes.append(f"WARNING {field}: {ref!r} is not a DAG task key; read as {ref[:-len('_task')]!r} "
                     "(TFX 1.16 writes '<id>_task' here; whether Vertex resolves it is unverified)")
        return ref[:-len("_task")]
    raise SpecError(f"{field}: {ref!r} is not a task of the DAG")


def _check_trigger_policy(task: Task) -> None:
    """Only a condition (dryrun/condition.py), on a container task, with the default strategy."""
    policy = task.spec.get("triggerPolicy")
    if policy is None:
        return
    extra = sorted(set(policy) - {"condition", "strategy"})
    if extra or policy.get("strategy", "ALL_UPSTREAM_TASKS_SUCCEEDED") != "ALL_UPSTREAM_TASKS_SUCCEEDED":
        raise SpecError(f"{task.field('triggerPolicy', (extra or ['strategy'])[0])}: not emulated by the dry run")
    if policy.get("condition") and "resolver" in task.executor:
        raise SpecError(f"{task.field('triggerPolicy.condition')}: a condition on a resolver task is not emulated")


def _check_executor(task: Task) -> None:
    if "resolver" in task.executor:
        return
    container = task.container
    if container is None:
        raise SpecError(f"{task.executor_field()}: only container and resolver executors are emulated, "
                        f"got {sorted(task.executor)}")
    extra = sorted(set(container) - _CONTAINER_FIELDS)
    if extra:
        raise SpecError(f"{task.executor_field('container', extra[0])}: not emulated by the dry run")
    lifecycle = container.get("lifecycle", {})
    if set(lifecycle) - {"preCacheCheck"}:
        raise SpecError(f"{task.executor_field('container.lifecycle')}: only preCacheCheck is emulated")
    check_command(task, container.get("command", []), container.get("args", []), "container")
    if "preCacheCheck" in lifecycle:
        pre = lifecycle["preCacheCheck"]
        check_command(task, pre.get("command", []), pre.get("args", []), "container.lifecycle.preCacheCheck")


def check_command(task: Task, command: list[str], args: list[str], where: str) -> None:
    """The command must be Python (it runs in this environment instead of the image) and what it names must import."""
    if not command or command[0] not in PYTHON:
        raise SpecError(f"{task.executor_field(where, 'command')}: {command[:1]} cannot run here; the dry run "
                        "runs `python ...` commands in this environment instead of the image")
    if len(command) >= 3 and command[1] == "-m" and importlib.util.find_spec(command[2]) is None:
        raise SpecError(f"{task.executor_field(where, 'command')}[2]: module {command[2]!r} is not importable "
                        "(it would be missing from the image too)")
    if "--executor_class_path" in args:
        i = args.index("--executor_class_path")
        path = args[i + 1] if i + 1 < len(args) else ""
        _importable(path, f"{task.executor_field(where, 'args')}[{i + 1}] (--executor_class_path)")


def _importable(class_path: str, field: str) -> type:
    from tfx.utils import import_utils

    try:
        return import_utils.import_class_by_path(class_path)
    except (ImportError, ValueError) as e:
        cause = e.__cause__ or e
        raise SpecError(f"{field}: {class_path!r} does not import ({type(cause).__name__}: {cause})") from None


def schema_title(type_schema: dict[str, Any]) -> str:
    return type_schema.get("schemaTitle") or yaml.safe_load(type_schema.get("instanceSchema", "")).get("title", "")


def artifact_class(type_schema: dict[str, Any], field: str) -> type:
    """The TFX class of an artifact type, found the way TFX's Vertex entrypoint finds it
    (kubeflow_v2_entrypoint_utils._retrieve_class_path): standard titles by table, others imported by title."""
    from tfx.orchestration.kubeflow.v2 import compiler_utils

    title = schema_title(type_schema)
    if not title:
        raise SpecError(f"{field}: artifact type has no schema title")
    path = compiler_utils.TITLE_TO_CLASS_PATH.get(title, title)
    return _importable(path, f"{field} (title {title!r}; TFX's Vertex entrypoint imports a custom type by its title)")


def _check_artifact_types(task: Task) -> None:
    for side in ("inputDefinitions", "outputDefinitions"):
        for key, definition in task.component.get(side, {}).get("artifacts", {}).items():
            artifact_class(definition.get("artifactType", {}), task.component_field(side, "artifacts", key,
                                                                                    "artifactType"))


def _in_order(tasks: dict[str, Task]) -> list[Task]:
    """Upstream first; ties by name, so every dry run of a spec runs in the same order."""
    done: list[Task] = []
    placed: set[str] = set()
    while len(done) < len(tasks):
        ready = sorted(n for n, t in tasks.items() if n not in placed and set(t.upstream) <= placed)
        if not ready:
            stuck = sorted(set(tasks) - placed)
            raise SpecError(f"{ROOT}: the tasks {stuck} depend on each other in a cycle")
        done.append(tasks[ready[0]])
        placed.add(ready[0])
    return done

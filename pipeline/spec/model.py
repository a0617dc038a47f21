"""The submitted PipelineJob as a model: its DAGs, their tasks, each task's component and executor.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterator, Optional

import yaml

from pipeline.errors import SpecError

ROOT = "root"
# The flags of TFX's Vertex entrypoint and ExampleGen driver that take a value; the rest are Beam's.
ENTRYPOINT_FLAGS = ("--executor_class_path", "--json_serialized_invocation_args", "--json_serialized_inputs_spec_args")
PYTHON = ("python", "python3")
# Where a task input comes from (api/v2alpha1/pipeline_spec.proto, TaskInputsSpec).
UPSTREAM_ARTIFACT, UPSTREAM_PARAMETER = "taskOutputArtifact", "taskOutputParameter"
PARENT_ARTIFACT, PARENT_PARAMETER = "componentInputArtifact", "componentInputParameter"
# A KFP placeholder in a command, an argument or a constant: {{$...}}.
PLACEHOLDER = re.compile(r"\{\{\$[^}]*\}\}")
# An exit task's input of the final status of the task it follows (PipelineTaskFinalStatus).
FINAL_STATUS = "taskFinalStatus"
# The placeholders the driver replaces in a constant input parameter, when the whole constant is one
# (backend/src/v2/driver/resolve.go, resolveInputParameter, RuntimeValue_Constant); any other text is kept.
RUN_PLACEHOLDERS = ("{{$.pipeline_job_name}}", "{{$.pipeline_job_resource_name}}", "{{$.pipeline_job_uuid}}")


@dataclasses.dataclass(frozen=True)
class Job:
    job_id: str
    spec: dict[str, Any]      # pipelineSpec
    runtime: dict[str, Any]   # runtimeConfig
    platform: dict[str, Any] = dataclasses.field(default_factory=dict)  # a Kubeflow package's platform spec


@dataclasses.dataclass(frozen=True)
class Task:
    name: str                          # the key in its DAG
    spec: dict[str, Any]               # the PipelineTaskSpec
    dag_field: str                     # where its DAG's tasks are, e.g. pipelineSpec.root.dag.tasks
    component_name: str
    component: Optional[dict[str, Any]]
    executor_label: str
    executor: Optional[dict[str, Any]]

    def field(self, *parts: str) -> str:
        return ".".join((self.dag_field, self.name, *parts))

    def executor_field(self, *parts: str) -> str:
        return ".".join(("pipelineSpec.deploymentSpec.executors", self.executor_label, *parts))

    def component_field(self, *parts: str) -> str:
        return ".".join(("pipelineSpec.components", self.component_name, *parts))

    @property
    def kind(self) -> str:
        """dag | container | importer | resolver | ... (the executor's oneof), or missing."""
        if self.component is not None and "dag" in self.component:
            return "dag"
        if not self.executor:
            return "missing"
        return next(iter(self.executor))

    @property
    def container(self) -> dict[str, Any]:
        return (self.executor or {}).get("container", {})

    @property
    def condition(self) -> str:
        return self.spec.get("triggerPolicy", {}).get("condition", "")

    @property
    def executor_class_path(self) -> Optional[str]:
        """The TFX executor class a container task runs (TFX's entrypoint flag), if it names one."""
        args = self.container.get("args", [])
        if "--executor_class_path" in args and args.index("--executor_class_path") + 1 < len(args):
            return args[args.index("--executor_class_path") + 1]
        return None

    def inputs(self, kind: str) -> dict[str, dict[str, Any]]:
        """The task's input specs of one kind: 'artifacts' or 'parameters'."""
        return self.spec.get("inputs", {}).get(kind, {})

    def declared(self, side: str, kind: str) -> dict[str, Any]:
        """What the component declares; side: inputDefinitions | outputDefinitions, kind: artifacts | parameters."""
        return (self.component or {}).get(side, {}).get(kind, {})

    def producers(self) -> dict[str, str]:
        """field of each upstream reference -> the producer task it names."""
        found = {}
        for kind, source_field in (("artifacts", UPSTREAM_ARTIFACT), ("parameters", UPSTREAM_PARAMETER)):
            for key, source in self.inputs(kind).items():
                if source_field in source:
                    found[self.field("inputs", kind, key, source_field, "producerTask")] = \
                        source[source_field].get("producerTask", "")
        return found

    @property
    def upstream(self) -> tuple[str, ...]:
        """dependentTasks plus every producer it reads, as the backend's compiler adds them
        (backend/src/v2/compiler/argocompiler/dag.go, `addImplicitDependencies`)."""
        return tuple(sorted({*self.spec.get("dependentTasks", []), *self.producers().values()}))


@dataclasses.dataclass(frozen=True)
class Dag:
    component_name: str               # "root" for the pipeline's own DAG
    field: str                        # where its tasks are
    input_definitions: dict[str, Any]
    tasks: dict[str, Task]


@dataclasses.dataclass(frozen=True)
class Pipeline:
    spec: dict[str, Any]
    root: Dag
    platform: dict[str, Any] = dataclasses.field(default_factory=dict)  # PlatformSpec (pipeline_spec.proto)

    def dags(self) -> Iterator[Dag]:
        """The root DAG and every sub-DAG a task of it runs, depth first."""
        pending, seen = [self.root], set()
        while pending:
            dag = pending.pop()
            if dag.component_name in seen:
                continue
            seen.add(dag.component_name)
            yield dag
            pending.extend(self.sub_dag(t) for t in dag.tasks.values() if t.kind == "dag")

    def sub_dag(self, task: Task) -> Dag:
        return _dag(self.spec, task.component_name, task.component_field("dag.tasks"), task.component)

    def tasks(self) -> Iterator[Task]:
        for dag in self.dags():
            yield from dag.tasks.values()


def read(spec: dict[str, Any], platform: Optional[dict[str, Any]] = None) -> Pipeline:
    """The model of a pipelineSpec and its platform spec, unchecked (rules.py checks it)."""
    return Pipeline(spec, _dag(spec, ROOT, "pipelineSpec.root.dag.tasks", spec.get("root", {})), platform or {})


def _dag(spec: dict[str, Any], name: str, field: str, component: dict[str, Any]) -> Dag:
    tasks = {}
    for key, task_spec in component.get("dag", {}).get("tasks", {}).items():
        component_name = task_spec.get("componentRef", {}).get("name", "")
        task_component = spec.get("components", {}).get(component_name)
        label = (task_component or {}).get("executorLabel", "")
        executor = spec.get("deploymentSpec", {}).get("executors", {}).get(label) if label else None
        tasks[key] = Task(key, task_spec, field, component_name, task_component, label, executor)
    return Dag(name, field, component.get("inputDefinitions", {}), tasks)


EXIT_STRATEGY = "ALL_UPSTREAM_TASKS_COMPLETED"


def exit_task(task: Task) -> bool:
    """An exit handler's task: it runs once its upstream tasks completed, whether they succeeded or failed."""
    return task.spec.get("triggerPolicy", {}).get("strategy") == EXIT_STRATEGY


def in_order(dag: Dag) -> list[Task]:
    """Upstream first; ties by name, so every dry run of a spec runs in the same order (rules.py: acyclic)."""
    done: list[Task] = []
    placed: set[str] = set()
    while len(done) < len(dag.tasks):
        ready = sorted(n for n, t in dag.tasks.items() if n not in placed and set(t.upstream) <= placed)
        if not ready:
            raise SpecError(f"{dag.field}: the tasks {sorted(set(dag.tasks) - placed)} depend on each other in a cycle")
        done.append(dag.tasks[ready[0]])
        placed.add(ready[0])
    return done


def schema_title(type_schema: dict[str, Any]) -> str:
    return type_schema.get("schemaTitle") or yaml.safe_load(type_schema.get("instanceSchema", "") or "{}").get(
        "title", "")


def import_class(class_path: str, field: str) -> type:
    """The class a spec names, imported as the image would import it; a SpecError naming the field if it can't."""
    from tfx.utils import import_utils

    try:
        return import_utils.import_class_by_path(class_path)
    except (ImportError, ValueError) as e:
        cause = e.__cause__ or e
        raise SpecError(f"{field}: {class_path!r} does not import ({type(cause).__name__}: {cause})") from None


def artifact_class(type_schema: dict[str, Any], field: str) -> type:
    """The TFX class of an artifact type, found the way TFX's Vertex entrypoint finds it
    (kubeflow_v2_entrypoint_utils._retrieve_class_path): standard titles by table, others imported by title."""
    from tfx.orchestration.kubeflow.v2 import compiler_utils

    title = schema_title(type_schema)
    if not title:
        raise SpecError(f"{field}: artifact type has no schema title")
    path = compiler_utils.TITLE_TO_CLASS_PATH.get(title, title)
    return import_class(path, f"{field} (title {title!r}; TFX's Vertex entrypoint imports a custom type by its title)")

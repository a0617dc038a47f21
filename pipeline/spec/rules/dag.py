"""The rules on a spec's DAGs, tasks and their inputs: what the backend's compiler and driver refuse."""

from __future__ import annotations

from typing import Iterator

from pipeline.spec import condition
from pipeline.spec.backends import Backend
from pipeline.spec.model import (
    FINAL_STATUS,
    PARENT_ARTIFACT,
    PARENT_PARAMETER,
    PLACEHOLDER,
    RUN_PLACEHOLDERS,
    UPSTREAM_ARTIFACT,
    UPSTREAM_PARAMETER,
    Dag,
    Pipeline,
    SpecError,
    exit_task,
)
from pipeline.spec.rules.violation import Violation

_TASK_FIELDS = {"taskInfo", "componentRef", "dependentTasks", "inputs", "cachingOptions", "triggerPolicy"}
_INPUT_SOURCES = {"artifacts": (UPSTREAM_ARTIFACT, PARENT_ARTIFACT),
                  "parameters": ("runtimeValue", UPSTREAM_PARAMETER, PARENT_PARAMETER, FINAL_STATUS)}



def task_fields(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        for extra in sorted(set(task.spec) - _TASK_FIELDS):
            yield Violation("task-fields", task.field(extra), "not emulated by the dry run")


def components_exist(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.component is None:
            yield Violation("component-exists", task.field("componentRef.name"),
                            f"no component {task.component_name!r} in pipelineSpec.components")
        elif "dag" not in task.component and "executorLabel" not in task.component:
            yield Violation("component-exists", task.component_field(), "neither an executorLabel nor a dag",
                            task.name)


def executors_exist(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.component is not None and task.executor_label and task.executor is None:
            yield Violation("executor-exists", task.component_field("executorLabel"),
                            f"no executor {task.executor_label!r} in pipelineSpec.deploymentSpec.executors", task.name)


def executor_kinds(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind not in ("dag", "container", "missing"):
            yield Violation("executor-kind", task.executor_field(task.kind), backend.refuses_executor(task.kind),
                            task.name)


def producers_in_dag(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            for field, producer in task.producers().items():
                if producer not in dag.tasks:
                    yield Violation("producer-in-dag", field, f"{producer!r} is not a task of this DAG "
                                    f"(its tasks: {', '.join(sorted(dag.tasks))})")


def outputs_declared(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            for kind, source_field, key_field in (("artifacts", UPSTREAM_ARTIFACT, "outputArtifactKey"),
                                                  ("parameters", UPSTREAM_PARAMETER, "outputParameterKey")):
                for key, source in task.inputs(kind).items():
                    ref = source.get(source_field)
                    producer = dag.tasks.get((ref or {}).get("producerTask", ""))
                    if ref is None or producer is None or producer.component is None:
                        continue
                    declared = producer.declared("outputDefinitions", kind)
                    if ref.get(key_field) not in declared:
                        yield Violation("output-declared", task.field("inputs", kind, key, source_field, key_field),
                                        f"{producer.name}'s component {producer.component_name} declares no output "
                                        f"{kind[:-1]} {ref.get(key_field)!r} (it has {sorted(declared)})")


def inputs_declared(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            if task.component is None:
                continue
            for kind, sources in _INPUT_SOURCES.items():
                declared = task.declared("inputDefinitions", kind)
                for key, source in task.inputs(kind).items():
                    field = task.field("inputs", kind, key)
                    if key not in declared:
                        yield Violation("input-declared", field, f"{task.component_name} declares no input "
                                        f"{kind[:-1]} {key!r}")
                    kinds = [s for s in sources if s in source]
                    if len(kinds) != 1:
                        yield Violation("input-declared", field, f"exactly one of {', '.join(sources)} expected, "
                                        f"got {sorted(source)}")
                    parent = source.get(PARENT_ARTIFACT if kind == "artifacts" else PARENT_PARAMETER)
                    if parent is not None and parent not in dag.input_definitions.get(kind, {}):
                        yield Violation("input-declared", field, f"the enclosing DAG {dag.component_name} has no "
                                        f"input {kind[:-1]} {parent!r}")
            for key, definition in task.declared("inputDefinitions", "parameters").items():
                if (key not in task.inputs("parameters") and not definition.get("isOptional")
                        and "defaultValue" not in definition):
                    yield Violation("input-declared", task.field("inputs.parameters", key),
                                    "a required parameter without a value or a default")


def dependencies(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            for dep in task.spec.get("dependentTasks", []):
                if dep not in dag.tasks:
                    yield Violation("dependency-in-dag", task.field("dependentTasks"),
                                    f"{dep!r} is not a task of this DAG")


def acyclic(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for dag in pipeline.dags():
        cycle = _cycle(dag)
        if cycle:
            yield Violation("acyclic", dag.field, "the tasks depend on each other in a cycle: " + " -> ".join(cycle))


def _cycle(dag: Dag) -> list[str]:
    """One dependency cycle among the DAG's tasks (explicit and implicit dependencies), or []."""
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> list[str]:
        state[name] = "open"
        for dep in dag.tasks[name].upstream:
            if dep not in dag.tasks:
                continue
            if state.get(dep) == "open":
                return [*path[path.index(dep):], dep] if dep in path else [name, dep]
            if dep not in state:
                found = visit(dep, [*path, dep])
                if found:
                    return found
        state[name] = "done"
        return []

    for name in sorted(dag.tasks):
        if name not in state:
            found = visit(name, [name])
            if found:
                return found
    return []


def trigger_policies(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        policy = task.spec.get("triggerPolicy", {})
        for extra in sorted(set(policy) - {"condition", "strategy"}):
            yield Violation("trigger-policy", task.field("triggerPolicy", extra), "not emulated by the dry run")
        if policy.get("strategy", "ALL_UPSTREAM_TASKS_SUCCEEDED") not in ("ALL_UPSTREAM_TASKS_SUCCEEDED",
                                                                          "TRIGGER_STRATEGY_UNSPECIFIED",
                                                                          "ALL_UPSTREAM_TASKS_COMPLETED"):
            yield Violation("trigger-policy", task.field("triggerPolicy.strategy"),
                            f"{policy['strategy']} is not emulated by the dry run")


def exit_tasks(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    """The exit task the dry run runs is the one TFX compiles (step_builder.py, is_exit_handler): a container
    after exactly one task, reading nothing of it but its final status, with nothing after it and no condition.
    The backend makes it the Argo exit hook of the task it depends on (argocompiler/dag.go, DAG), which has no
    downstream task and runs after that task whatever its outcome; anything else is refused (fail closed)."""
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            if not exit_task(task):
                continue
            field = task.field("triggerPolicy.strategy")
            problems = []
            if task.kind != "container":
                problems.append(f"it is a {task.kind} task, not a container")
            if len(task.spec.get("dependentTasks", [])) != 1:
                problems.append(f"it depends on {task.spec.get('dependentTasks', [])}, not on exactly one task")
            if task.producers():
                problems.append(f"it reads outputs of {sorted(set(task.producers().values()))}")
            if task.condition:
                problems.append("it has a condition")
            after = sorted(t.name for t in dag.tasks.values() if task.name in t.upstream)
            if after:
                problems.append(f"{', '.join(after)} depend on it")
            if problems:
                yield Violation("exit-task", field, "ALL_UPSTREAM_TASKS_COMPLETED (an exit handler's task): "
                                + "; ".join(problems) + " (not emulated by the dry run)")


def final_status(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        for key, source in task.inputs("parameters").items():
            if FINAL_STATUS not in source:
                continue
            field = task.field("inputs.parameters", key, FINAL_STATUS, "producerTask")
            depends = task.spec.get("dependentTasks", [])
            if not exit_task(task):
                yield Violation("final-status", field, "only an exit handler's task "
                                "(triggerPolicy.strategy ALL_UPSTREAM_TASKS_COMPLETED) reads a final status")
            elif not depends or source[FINAL_STATUS].get("producerTask") != depends[0]:
                yield Violation("final-status", field, f"{source[FINAL_STATUS].get('producerTask')!r}: the "
                                f"backend reports the final status of the first dependent task "
                                f"({depends[0] if depends else 'none'}), whatever this names")


def runtime_values(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        for key, source in task.inputs("parameters").items():
            value = source.get("runtimeValue")
            if value is None:
                continue
            field = task.field("inputs.parameters", key, "runtimeValue")
            if "constantValue" in value and backend.name == "kubeflow":
                yield Violation("runtime-value", field + ".constantValue", "the backend's driver resolves only "
                                "`constant` (schema 2.1): a constantValue fails the task")
            text = value.get("constant", value.get("constantValue", {}).get("stringValue"))
            if isinstance(text, str) and PLACEHOLDER.search(text) and text not in RUN_PLACEHOLDERS:
                yield Violation("runtime-value", field, f"{text!r}: the driver replaces a placeholder only when "
                                f"it is the whole constant, and the dry run fills only {', '.join(RUN_PLACEHOLDERS)}")


def conditions(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if not task.condition:
            continue
        field = task.field("triggerPolicy.condition")
        try:
            tree = condition.parse(task.condition, field)
        except SpecError as e:
            yield Violation("condition", field, str(e).split(": ", 1)[-1])
            continue
        for path in condition.paths(tree):
            ref = path.input_ref()
            kind = {"artifacts": "artifacts", "parameter_values": "parameters"}.get(ref[0]) if ref else None
            if kind is None:
                yield Violation("condition", field, f"{path.text()}: only inputs.artifacts['<key>'] and "
                                "inputs.parameter_values['<key>'] are read by the conditions TFX writes")
            elif ref[1] not in task.inputs(kind):
                yield Violation("condition", field, f"{path.text()}: the task has no input {kind[:-1]} {ref[1]!r}")
            if task.kind == "dag" and kind != "parameters":
                yield Violation("dag-condition", field, f"{path.text()}: a DAG task's condition reads only "
                                "inputs.parameter_values, the form the KFP SDK compiles dsl.If into; no precedent "
                                "was found for a backend evaluating an artifact condition on a DAG task")

"""The rules a pipeline backend applies to a spec, checked before any task runs, all reported at once.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from typing import Callable, Iterator

from pipeline.spec import condition
from pipeline.spec.backends import Backend
from pipeline.spec.model import (
    FINAL_STATUS,
    PARENT_ARTIFACT,
    PARENT_PARAMETER,
    PYTHON,
    RUN_PLACEHOLDERS,
    UPSTREAM_ARTIFACT,
    UPSTREAM_PARAMETER,
    Dag,
    Pipeline,
    SpecError,
    Task,
    artifact_class,
    exit_task,
    import_class,
)

_PLACEHOLDER = re.compile(r"\{\{\$[^}]*\}\}")
# The placeholders the open-source launcher replaces (backend/src/v2/component/launcher_v2.go,
# `compileCmdAndArgs` and `getPlaceholders`); it leaves any other text as it is.
_LAUNCHER_PLACEHOLDERS = (
    (re.compile(r"\{\{\$\}\}"), None),
    (re.compile(r"\{\{\$\.inputs\.artifacts\['([^']+)'\]\.(?:uri|path)\}\}"), ("inputDefinitions", "artifacts")),
    (re.compile(r"\{\{\$\.outputs\.artifacts\['([^']+)'\]\.(?:uri|path)\}\}"), ("outputDefinitions", "artifacts")),
    (re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}"), ("inputDefinitions", "parameters")),
    (re.compile(r"\{\{\$\.outputs\.parameters\['([^']+)'\]\.output_file\}\}"), ("outputDefinitions", "parameters")),
)
_TASK_FIELDS = {"taskInfo", "componentRef", "dependentTasks", "inputs", "cachingOptions", "triggerPolicy"}
_CONTAINER_FIELDS = {"image", "command", "args", "lifecycle", "env"}
_INPUT_SOURCES = {"artifacts": (UPSTREAM_ARTIFACT, PARENT_ARTIFACT),
                  "parameters": ("runtimeValue", UPSTREAM_PARAMETER, PARENT_PARAMETER, FINAL_STATUS)}


@dataclasses.dataclass(frozen=True)
class Violation:
    rule: str
    field: str
    message: str
    task: str = ""   # named when the field is not under the task itself (its executor or component)

    def __str__(self) -> str:
        return f"[{self.rule}] {f'task {self.task}: ' if self.task else ''}{self.field}: {self.message}"


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    source: str     # where the backend applies it, or why the dry run refuses
    check: Callable[[Pipeline, Backend], Iterator[Violation]]


def check(pipeline: Pipeline, backend: Backend) -> list[Violation]:
    """Every violation of every rule, in rule order."""
    return [v for rule in RULES for v in rule.check(pipeline, backend)]


def enforce(pipeline: Pipeline, backend: Backend) -> None:
    """Raise one SpecError listing every violation, or return when the spec keeps every rule."""
    violations = check(pipeline, backend)
    if violations:
        sources = {r.id: r.source for r in RULES}
        lines = [f"  {v}\n      ({sources[v.rule]})" for v in violations]
        raise SpecError(f"the spec breaks {len(violations)} rule(s) that {backend.title} applies, found before any "
                        "task ran:\n" + "\n".join(lines))


# -- the rules ---------------------------------------------------------------------

def _task_fields(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        for extra in sorted(set(task.spec) - _TASK_FIELDS):
            yield Violation("task-fields", task.field(extra), "not emulated by the dry run")


def _components_exist(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.component is None:
            yield Violation("component-exists", task.field("componentRef.name"),
                            f"no component {task.component_name!r} in pipelineSpec.components")
        elif "dag" not in task.component and "executorLabel" not in task.component:
            yield Violation("component-exists", task.component_field(), "neither an executorLabel nor a dag",
                            task.name)


def _executors_exist(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.component is not None and task.executor_label and task.executor is None:
            yield Violation("executor-exists", task.component_field("executorLabel"),
                            f"no executor {task.executor_label!r} in pipelineSpec.deploymentSpec.executors", task.name)


def _executor_kinds(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind not in ("dag", "container", "missing"):
            yield Violation("executor-kind", task.executor_field(task.kind), backend.refuses_executor(task.kind),
                            task.name)


def _producers_in_dag(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            for field, producer in task.producers().items():
                if producer not in dag.tasks:
                    yield Violation("producer-in-dag", field, f"{producer!r} is not a task of this DAG "
                                    f"(its tasks: {', '.join(sorted(dag.tasks))})")


def _outputs_declared(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
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


def _inputs_declared(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
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


def _dependencies(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for dag in pipeline.dags():
        for task in dag.tasks.values():
            for dep in task.spec.get("dependentTasks", []):
                if dep not in dag.tasks:
                    yield Violation("dependency-in-dag", task.field("dependentTasks"),
                                    f"{dep!r} is not a task of this DAG")


def _acyclic(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
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


def _trigger_policies(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        policy = task.spec.get("triggerPolicy", {})
        for extra in sorted(set(policy) - {"condition", "strategy"}):
            yield Violation("trigger-policy", task.field("triggerPolicy", extra), "not emulated by the dry run")
        if policy.get("strategy", "ALL_UPSTREAM_TASKS_SUCCEEDED") not in ("ALL_UPSTREAM_TASKS_SUCCEEDED",
                                                                          "TRIGGER_STRATEGY_UNSPECIFIED",
                                                                          "ALL_UPSTREAM_TASKS_COMPLETED"):
            yield Violation("trigger-policy", task.field("triggerPolicy.strategy"),
                            f"{policy['strategy']} is not emulated by the dry run")


def _exit_tasks(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
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


def _final_status(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
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


def _runtime_values(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
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
            if isinstance(text, str) and _PLACEHOLDER.search(text) and text not in RUN_PLACEHOLDERS:
                yield Violation("runtime-value", field, f"{text!r}: the driver replaces a placeholder only when "
                                f"it is the whole constant, and the dry run fills only {', '.join(RUN_PLACEHOLDERS)}")


def _conditions(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
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


def _placeholders(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind != "container":
            continue
        for where, command, args in _commands(task):
            for part, items in (("command", command), ("args", args)):
                for i, text in enumerate(items):
                    for placeholder in _PLACEHOLDER.findall(text):
                        why = _placeholder_problem(task, placeholder)
                        if why:
                            yield Violation("placeholders", task.executor_field(where, part) + f"[{i}]",
                                            f"{placeholder} {why}", task.name)


def _placeholder_problem(task: Task, placeholder: str) -> str:
    for pattern, declared_in in _LAUNCHER_PLACEHOLDERS:
        match = pattern.fullmatch(placeholder)
        if match is None:
            continue
        if declared_in is None or match[1] in task.declared(*declared_in):
            return ""
        return f"names {match[1]!r}, which {task.component_name} does not declare in {'.'.join(declared_in)}"
    return "is not a placeholder the launcher replaces (it would reach the program as literal text)"


def _commands(task: Task) -> list[tuple[str, list[str], list[str]]]:
    container = task.container
    found = [("container", container.get("command", []), container.get("args", []))]
    pre = container.get("lifecycle", {}).get("preCacheCheck")
    if pre is not None:
        found.append(("container.lifecycle.preCacheCheck", pre.get("command", []), pre.get("args", [])))
    return found


def _containers(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind != "container":
            continue
        for extra in sorted(set(task.container) - _CONTAINER_FIELDS):
            yield Violation("container", task.executor_field("container", extra), "not emulated by the dry run",
                            task.name)
        for hook in sorted(set(task.container.get("lifecycle", {})) - backend.lifecycle_hooks):
            yield Violation("container", task.executor_field("container.lifecycle", hook),
                            f"{backend.title} does not run this hook", task.name)
        for where, command, args in _commands(task):
            yield from _command(task, where, command, args)


def _command(task: Task, where: str, command: list[str], args: list[str]) -> Iterator[Violation]:
    field = task.executor_field(where, "command")
    if not command or command[0] not in PYTHON:
        yield Violation("container", field, f"{command[:1]} cannot run here; the dry run runs `python ...` "
                        "commands in this environment instead of the image", task.name)
        return
    if len(command) >= 3 and command[1] == "-m" and importlib.util.find_spec(command[2]) is None:
        yield Violation("container", field + "[2]", f"module {command[2]!r} is not importable "
                        "(it would be missing from the image too)", task.name)
    if "--executor_class_path" in args:
        i = args.index("--executor_class_path")
        try:
            import_class(args[i + 1] if i + 1 < len(args) else "", "")
        except SpecError as e:
            yield Violation("container", task.executor_field(where, "args") + f"[{i + 1}]",
                            "--executor_class_path " + str(e).lstrip(": "), task.name)


def _artifact_types(pipeline: Pipeline, backend: Backend) -> Iterator[Violation]:
    for task in pipeline.tasks():
        if task.kind != "container":
            continue
        for side in ("inputDefinitions", "outputDefinitions"):
            for key, definition in task.declared(side, "artifacts").items():
                field = task.component_field(side, "artifacts", key, "artifactType")
                try:
                    artifact_class(definition.get("artifactType", {}), field)
                except SpecError as e:
                    yield Violation("artifact-types", field, str(e).split(": ", 1)[-1], task.name)


_KFP = "kubeflow/pipelines backend/src/v2"
RULES = (
    Rule("task-fields", "fail closed: the dry run executes only the task fields it models", _task_fields),
    Rule("component-exists", f"{_KFP}/compiler/visitor.go, dfs: \"cannot find component ref name\"; "
         "argocompiler/dag.go, task: \"component spec for %q not found\"", _components_exist),
    Rule("executor-exists", f"{_KFP}/compiler/visitor.go, dfs: \"executor(label=%q) not found in deployment "
         "config\"; argocompiler/dag.go, task: \"executor with label %q not found\"", _executors_exist),
    Rule("executor-kind", f"{_KFP}/compiler/visitor.go, dfs: \"non-container and non-importer executor not "
         "implemented\"; argocompiler/argo.go, Resolver: \"resolver not implemented yet\"; the dry run also "
         "refuses what it does not emulate", _executor_kinds),
    Rule("producer-in-dag", f"{_KFP}/compiler/argocompiler/dag.go, addImplicitDependencies: \"unknown producer "
         "task %q in DAG\"; driver/resolve.go, resolveUpstreamArtifacts / resolveUpstreamParameters: \"cannot "
         "find producer task\" / \"producer task, %v, not in tasks\"; Vertex: \"Can't find producer subtask\" "
         "(kubeflow/pipelines#9681)", _producers_in_dag),
    Rule("output-declared", f"{_KFP}/driver/resolve.go, resolveUpstreamArtifacts: \"cannot find output artifact "
         "key %q in producer task %q\"; an undeclared output parameter resolves to nothing "
         "(resolveUpstreamParameters)", _outputs_declared),
    Rule("input-declared", f"{_KFP}/driver/resolve.go, resolveInputs: \"parent DAG does not have input "
         "parameter/artifact\", \"neither value nor default value provided for non-optional parameter\"; an input "
         "the component does not declare is not checked there (a TODO), so the dry run fails closed",
         _inputs_declared),
    Rule("dependency-in-dag", "argo-workflows workflow/validate/validate.go, validateDAG: \"dependency '%s' not "
         f"defined\" (dependentTasks become Argo `depends`, {_KFP}/compiler/argocompiler/dag.go, depends)",
         _dependencies),
    Rule("acyclic", "argo-workflows workflow/validate/validate.go, verifyNoCycles: \"dependency cycle detected\"",
         _acyclic),
    Rule("trigger-policy", "api/v2alpha1/pipeline_spec.proto, TriggerPolicy.TriggerStrategy: "
         "ALL_UPSTREAM_TASKS_SUCCEEDED (the default) or ALL_UPSTREAM_TASKS_COMPLETED (an exit handler's task, "
         "exit-task); others are not emulated", _trigger_policies),
    Rule("exit-task", f"{_KFP}/compiler/argocompiler/dag.go, DAG: an ALL_UPSTREAM_TASKS_COMPLETED task becomes the "
         "Argo exit hook (`hooks: exit`) of each task it depends on, run when that task ends, succeeded or "
         "failed; TFX compiles one such task after `tfx-dag` (tfx/orchestration/kubeflow/v2/pipeline_builder.py, "
         "build; step_builder.py, is_exit_handler); the dry run runs only that form", _exit_tasks),
    Rule("final-status", f"{_KFP}/driver/resolve.go, resolveInputParameter, TaskFinalStatus: the state of the "
         "task's first dependent task (\"task %v has no dependent tasks\"); kfp/dsl/task_final_status.py: "
         "Vertex's states SUCCEEDED, FAILED, CANCELLED", _final_status),
    Rule("runtime-value", f"{_KFP}/driver/resolve.go, resolveInputParameter, RuntimeValue: only the `constant` "
         "form (\"param runtime value spec of type %T not implemented\"), with {{$.pipeline_job_name}}, "
         "{{$.pipeline_job_resource_name}}, {{$.pipeline_job_uuid}} ... replaced when they are the whole "
         "constant; Vertex reads schema 2.0's constantValue (TFX's Vertex compile) and is assumed to replace "
         "the same placeholders there (not documented: RunLease refuses an owner left unreplaced)",
         _runtime_values),
    Rule("condition", f"{_KFP}/expression/expression.go, Condition (CEL compiled before it runs; a compile "
         "error fails the driver, driver/container.go); the dry run knows the CEL TFX writes "
         "(dryrun/condition.py)", _conditions),
    Rule("placeholders", f"{_KFP}/component/launcher_v2.go, compileCmdAndArgs / getPlaceholders replace only "
         "{{$}} and inputs/outputs the ExecutorInput has, and leave other text as it is; fail closed",
         _placeholders),
    Rule("container", "fail closed: the dry run runs each container's python command in this environment "
         "and models only these container fields; TFX's entrypoint imports --executor_class_path "
         "(tfx/orchestration/kubeflow/v2/container/kubeflow_v2_run_executor.py)", _containers),
    Rule("artifact-types", "TFX's Vertex entrypoint finds each artifact class by its schema title "
         "(tfx/orchestration/kubeflow/v2/container/kubeflow_v2_entrypoint_utils.py, _retrieve_class_path)",
         _artifact_types),
)

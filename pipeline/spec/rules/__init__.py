"""The rules a pipeline backend applies to a spec, checked before any task runs, all reported at once.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

from pipeline.spec.backends import Backend
from pipeline.spec.model import Pipeline, SpecError
from pipeline.spec.rules.container import artifact_types, containers, placeholders
from pipeline.spec.rules.dag import (
    acyclic,
    components_exist,
    conditions,
    dependencies,
    executor_kinds,
    executors_exist,
    exit_tasks,
    final_status,
    inputs_declared,
    outputs_declared,
    producers_in_dag,
    runtime_values,
    task_fields,
    trigger_policies,
)
from pipeline.spec.rules.platform import platform_spec, pod_labels
from pipeline.spec.rules.violation import Violation

__all__ = ["RULES", "Rule", "Violation", "check", "enforce"]


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


def _only(rule: str, check: Callable[[Pipeline, Backend], Iterator[Violation]]):
    """The violations of one rule among those a check that reads the same fields finds."""
    return lambda pipeline, backend: (v for v in check(pipeline, backend) if v.rule == rule)


_KFP = "kubeflow/pipelines backend/src/v2"
RULES = (
    Rule("task-fields", "fail closed: the dry run executes only the task fields it models", task_fields),
    Rule("component-exists", f"{_KFP}/compiler/visitor.go, dfs: \"cannot find component ref name\"; "
         "argocompiler/dag.go, task: \"component spec for %q not found\"", components_exist),
    Rule("executor-exists", f"{_KFP}/compiler/visitor.go, dfs: \"executor(label=%q) not found in deployment "
         "config\"; argocompiler/dag.go, task: \"executor with label %q not found\"", executors_exist),
    Rule("executor-kind", f"{_KFP}/compiler/visitor.go, dfs: \"non-container and non-importer executor not "
         "implemented\"; argocompiler/argo.go, Resolver: \"resolver not implemented yet\"; the dry run also "
         "refuses what it does not emulate", executor_kinds),
    Rule("producer-in-dag", f"{_KFP}/compiler/argocompiler/dag.go, addImplicitDependencies: \"unknown producer "
         "task %q in DAG\"; driver/resolve.go, resolveUpstreamArtifacts / resolveUpstreamParameters: \"cannot "
         "find producer task\" / \"producer task, %v, not in tasks\"; Vertex: \"Can't find producer subtask\" "
         "(kubeflow/pipelines#9681)", producers_in_dag),
    Rule("output-declared", f"{_KFP}/driver/resolve.go, resolveUpstreamArtifacts: \"cannot find output artifact "
         "key %q in producer task %q\"; an undeclared output parameter resolves to nothing "
         "(resolveUpstreamParameters)", outputs_declared),
    Rule("input-declared", f"{_KFP}/driver/resolve.go, resolveInputs: \"parent DAG does not have input "
         "parameter/artifact\", \"neither value nor default value provided for non-optional parameter\"; an input "
         "the component does not declare is not checked there (a TODO), so the dry run fails closed",
         inputs_declared),
    Rule("dependency-in-dag", "argo-workflows workflow/validate/validate.go, validateDAG: \"dependency '%s' not "
         f"defined\" (dependentTasks become Argo `depends`, {_KFP}/compiler/argocompiler/dag.go, depends)",
         dependencies),
    Rule("acyclic", "argo-workflows workflow/validate/validate.go, verifyNoCycles: \"dependency cycle detected\"",
         acyclic),
    Rule("trigger-policy", "api/v2alpha1/pipeline_spec.proto, TriggerPolicy.TriggerStrategy: "
         "ALL_UPSTREAM_TASKS_SUCCEEDED (the default) or ALL_UPSTREAM_TASKS_COMPLETED (an exit handler's task, "
         "exit-task); others are not emulated", trigger_policies),
    Rule("exit-task", f"{_KFP}/compiler/argocompiler/dag.go, DAG: an ALL_UPSTREAM_TASKS_COMPLETED task becomes the "
         "Argo exit hook (`hooks: exit`) of each task it depends on, run when that task ends, succeeded or "
         "failed; TFX compiles one such task after `tfx-dag` (tfx/orchestration/kubeflow/v2/pipeline_builder.py, "
         "build; step_builder.py, is_exit_handler); the dry run runs only that form", exit_tasks),
    Rule("final-status", f"{_KFP}/driver/resolve.go, resolveInputParameter, TaskFinalStatus: the state of the "
         "task's first dependent task (\"task %v has no dependent tasks\"); kfp/dsl/task_final_status.py: "
         "Vertex's states SUCCEEDED, FAILED, CANCELLED", final_status),
    Rule("runtime-value", f"{_KFP}/driver/resolve.go, resolveInputParameter, RuntimeValue: only the `constant` "
         "form (\"param runtime value spec of type %T not implemented\"), with {{$.pipeline_job_name}}, "
         "{{$.pipeline_job_resource_name}}, {{$.pipeline_job_uuid}} ... replaced when they are the whole "
         "constant; Vertex reads schema 2.0's constantValue (TFX's Vertex compile) and is assumed to replace "
         "the same placeholders there (not documented: RunLease refuses an owner left unreplaced)",
         runtime_values),
    Rule("condition", f"{_KFP}/expression/expression.go, Condition (CEL compiled before it runs; a compile "
         "error fails the driver, driver/container.go); the dry run knows the CEL TFX and the KFP SDK write "
         "(spec/condition.py)", _only("condition", conditions)),
    Rule("dag-condition", "sdk/python/kfp/compiler/pipeline_spec_builder.py, _update_task_spec_for_condition_group: "
         "dsl.If compiles into a DAG task whose condition reads inputs.parameter_values only (around line 1093 at "
         "7b70c7b); TFX writes artifact conditions on container tasks only; fail closed on any other form",
         _only("dag-condition", conditions)),
    Rule("placeholders", f"{_KFP}/component/launcher_v2.go, compileCmdAndArgs / getPlaceholders replace only "
         "{{$}} and inputs/outputs the ExecutorInput has, and leave other text as it is; fail closed",
         placeholders),
    Rule("container", "fail closed: the dry run runs each container's python command in this environment "
         "and models only these container fields; TFX's entrypoint imports --executor_class_path "
         "(tfx/orchestration/kubeflow/v2/container/kubeflow_v2_run_executor.py)", containers),
    Rule("artifact-types", "TFX's Vertex entrypoint finds each artifact class by its schema title "
         "(tfx/orchestration/kubeflow/v2/container/kubeflow_v2_entrypoint_utils.py, _retrieve_class_path)",
         artifact_types),
    Rule("platform-spec", f"{_KFP}/compiler/argocompiler/container.go: each executor's KubernetesExecutorConfig "
         "(kubernetes_platform/proto/kubernetes_executor_config.proto) unmarshalled strictly, and ignored when it "
         "does not parse (extendPodMetadata only `if err == nil`, 2.5.0); the dry run models pod_metadata alone "
         "and fails closed on the rest", platform_spec),
    Rule("pod-labels", "multi-user Kubeflow projects the pipelines API token only into pods labelled "
         "access-ml-pipeline: \"true\" (the access-ml-pipeline PodDefault; Kubeflow, \"Connect the Pipelines SDK to "
         f"Kubeflow Pipelines\"); the backend labels an executor's pod from its podMetadata ({_KFP}/compiler/"
         "argocompiler/container.go, extendPodMetadata)", pod_labels),
)

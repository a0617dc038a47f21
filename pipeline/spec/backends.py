"""What differs between the backends a dry run models: Vertex AI Pipelines and self-hosted Kubeflow Pipelines.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Backend:
    name: str
    title: str
    # Container lifecycle hooks the backend runs (before its cache lookup); any other is refused.
    lifecycle_hooks: frozenset[str]
    # executor kind -> why a task of that kind is refused (container and DAG tasks run).
    refused_executors: dict[str, str]
    # Whether its driver hands the executor input artifacts with their type (Vertex) or untyped.
    types_input_artifacts: bool = True
    # Outputs its launcher adds to every container's ExecutorInput and manages itself: key -> artifact type.
    launcher_outputs: dict[str, dict] = dataclasses.field(default_factory=dict)
    # The state an exit task's PipelineTaskFinalStatus names for a task that succeeded / failed.
    final_states: tuple[str, str] = ("SUCCEEDED", "FAILED")
    # Labels every container executor's pod must carry (the Kubernetes platform spec's podMetadata).
    pod_labels: dict[str, str] = dataclasses.field(default_factory=dict)

    def final_state(self, succeeded: bool) -> str:
        return self.final_states[0 if succeeded else 1]

    def refuses_executor(self, kind: str) -> str:
        return self.refused_executors.get(kind, f"a {kind!r} executor is not emulated by the dry run")


_RESOLVERS_REFUSED = ("the open-source KFP backend refuses resolver executors (backend/src/v2/compiler/visitor.go, "
                      "dfs: \"non-container and non-importer executor not implemented\"; argocompiler/dag.go, "
                      "task: \"resolver executors not implemented\")")

VERTEX = Backend(
    "vertex", "Vertex AI Pipelines",
    # TFX's KubeflowV2 compiler attaches the ExampleGen driver as this hook, and Vertex runs it
    # (tfx/orchestration/kubeflow/v2/step_builder.py); the open-source backend does not.
    lifecycle_hooks=frozenset({"preCacheCheck"}),
    # kfp/dsl/task_final_status.py, PipelineTaskFinalStatus.state: "SUCCEEDED, FAILED or CANCELLED".
    final_states=("SUCCEEDED", "FAILED"),
    refused_executors={
        "resolver": "Vertex runs resolver executors (metadata queries), but the dry run does not emulate them "
                    "(it fails closed); " + _RESOLVERS_REFUSED,
        "importer": "importer executors are not emulated by the dry run (it fails closed)"})

# kubeflow/pipelines backend/src/v2 at 7b70c7b (pipeline/kubeflow/entrypoint.py cites the launcher side).
KUBEFLOW = Backend(
    "kubeflow", "the open-source Kubeflow Pipelines backend",
    # Its driver and launcher run no lifecycle hook: a spec relying on preCacheCheck would silently lose it.
    lifecycle_hooks=frozenset(),
    refused_executors={
        "resolver": _RESOLVERS_REFUSED,
        "importer": "importer executors are not emulated by the dry run (it fails closed); the backend refuses "
                    "a condition on one (argocompiler/dag.go, task)"},
    # metadata/client.go, GetOutputArtifactsByExecutionId: upstream outputs come back with Schema "" and
    # ToRuntimeArtifact turns that into type {instanceSchema: ""}; driver/resolve.go passes it on.
    types_input_artifacts=False,
    # driver/driver.go, provisionOutputs (--publish_logs defaults to true, cmd/driver/main.go).
    launcher_outputs={"executor-logs": {"schemaTitle": "system.Artifact"}},
    # driver/resolve.go, resolveInputParameter, TaskFinalStatus: the producer's MLMD execution state
    # (GetLastKnownState().String()): COMPLETE or FAILED.
    final_states=("COMPLETE", "FAILED"))

BACKENDS = {b.name: b for b in (VERTEX, KUBEFLOW)}

# Multi-user Kubeflow projects the API token (/var/run/secrets/kubeflow/pipelines/token) only into pods labelled so,
# by the access-ml-pipeline PodDefault of the profile namespace (Kubeflow, "Connect the Pipelines SDK to Kubeflow
# Pipelines"; kubeflow/manifests tests/poddefaults.access-ml-pipeline.kubeflow-user-example-com.yaml, selector
# matchLabels). A run's own API calls (the run lease's takeover, the exit handler's task list) need it.
ACCESS_ML_PIPELINE = {"access-ml-pipeline": "true"}


def multi_user(backend: Backend) -> Backend:
    """The open-source backend of a multi-user Kubeflow: every executor's pod carries ACCESS_ML_PIPELINE."""
    return dataclasses.replace(backend, title="multi-user Kubeflow Pipelines", pod_labels=dict(ACCESS_ML_PIPELINE))

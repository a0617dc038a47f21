"""What differs between the backends a dry run models; Vertex AI Pipelines is the first.

The rules (rules.py), the driver (driver.py) and the launcher (launcher.py)
follow the open-source KFP backend's source wherever Vertex runs the same
spec the same way; a Backend names what is particular to one of them, so a
second one (self-hosted Kubeflow Pipelines) is a second instance, not a
second dry run.
"""

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

    def refuses_executor(self, kind: str) -> str:
        return self.refused_executors.get(kind, f"a {kind!r} executor is not emulated by the dry run")


VERTEX = Backend(
    "vertex", "Vertex AI Pipelines",
    # TFX's KubeflowV2 compiler attaches the ExampleGen driver as this hook, and Vertex runs it
    # (tfx/orchestration/kubeflow/v2/step_builder.py); the open-source backend does not.
    lifecycle_hooks=frozenset({"preCacheCheck"}),
    refused_executors={
        "resolver": "Vertex runs resolver executors (metadata queries), but the dry run does not emulate them "
                    "(it fails closed); the open-source KFP backend refuses them (backend/src/v2/compiler/"
                    "visitor.go, dfs: \"non-container and non-importer executor not implemented\")",
        "importer": "importer executors are not emulated by the dry run (it fails closed)"})

BACKENDS = {VERTEX.name: VERTEX}

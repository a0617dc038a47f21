"""The run lease in a compiled pipeline (Vertex AI, Kubeflow Pipelines): a first task and an exit handler.
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Iterable

from tfx.dsl.components.base.base_node import BaseNode
from tfx.orchestration.kubeflow.decorators import FinalStatusStr

from components.coordination.run_lease import (
    OWNER_PLACEHOLDER,
    RELEASE_ID,
    RUN_ID_PLACEHOLDER,
    RUN_LEASE_ID,
    ReleaseRunLease,
    RunLease,
)
from pipeline.config import Config


def _backend(config: Config) -> dict[str, str]:
    """Who the run lease and the exit handler ask about runs: Vertex AI by the job's resource name (Google's
    endpoint), or the KFP API server from inside the cluster by the run's id."""
    if config.pipeline.target == "kubeflow":
        kf = config.kubeflow
        return {"backend": "kubeflow", "jobs_api": kf.in_cluster_host, "jobs_token_file": kf.in_cluster_token_file,
                "run_id": RUN_ID_PLACEHOLDER}
    return {"backend": "vertex"}


def first_task(config: Config) -> BaseNode:
    return RunLease(root=config.pipeline.root_uri, owner=OWNER_PLACEHOLDER,
                    wait_seconds=float(config.pipeline.lock_wait_seconds),
                    ttl_seconds=float(config.pipeline.run_lease_ttl_seconds), **_backend(config)).with_id(RUN_LEASE_ID)


def lease_everything(lease: BaseNode, components: Iterable[BaseNode]) -> None:
    """Make every component wait for the lease, directly: no task starts before the run holds it."""
    for node in list(components):
        if node is not lease:
            node.add_upstream_node(lease)


def exit_handler(config: Config) -> BaseNode:
    """ReleaseRunLease, which then notifies (the notify section). On Vertex it takes the run's
    PipelineTaskFinalStatus; on Kubeflow none, which the API server refuses before KFP 2.14
    (pipeline/kubeflow/client.py): the exit handler asks the run's API instead."""
    final_status = {"final_status": FinalStatusStr()} if config.pipeline.target == "vertex" else {}
    return ReleaseRunLease(root=config.pipeline.root_uri, owner=OWNER_PLACEHOLDER, pipeline_name=config.pipeline.name,
                           serving_dir=config.pipeline.serving_dir, console=_console(config),
                           notify_settings=config.notify.model_dump_json(), **final_status,
                           **_backend(config)).with_id(RELEASE_ID)


def _console(config: Config) -> str:
    """The run's page, with {job} (Vertex: the job id) or {run_id} (Kubeflow) for the exit handler to fill in."""
    if config.pipeline.target == "kubeflow":
        return f"{config.kubeflow.host}/#/runs/details/{{run_id}}"
    return (f"https://console.cloud.google.com/vertex-ai/locations/{config.vertex.region}/pipelines/runs/{{job}}"
            f"?project={config.vertex.project}")

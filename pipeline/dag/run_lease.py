"""The run lease in a compiled pipeline (Vertex AI, Kubeflow Pipelines): a first task and an exit handler.
Why and sources: docs/internals.md."""

from __future__ import annotations

from typing import Iterable

from tfx.dsl.components.base.base_node import BaseNode
from tfx.orchestration.kubeflow.decorators import FinalStatusStr

from components.run_lease import OWNER_PLACEHOLDER, RELEASE_ID, RUN_LEASE_ID, ReleaseRunLease, RunLease
from pipeline.config import Config


def first_task(config: Config) -> BaseNode:
    return RunLease(root=config.pipeline.root_uri, owner=OWNER_PLACEHOLDER,
                    wait_seconds=float(config.pipeline.lock_wait_seconds),
                    ttl_seconds=float(config.pipeline.run_lease_ttl_seconds)).with_id(RUN_LEASE_ID)


def lease_everything(lease: BaseNode, components: Iterable[BaseNode]) -> None:
    """Make every component wait for the lease, directly: no task starts before the run holds it."""
    for node in list(components):
        if node is not lease:
            node.add_upstream_node(lease)


def exit_handler(config: Config) -> BaseNode:
    return ReleaseRunLease(final_status=FinalStatusStr(), root=config.pipeline.root_uri,
                           owner=OWNER_PLACEHOLDER).with_id(RELEASE_ID)

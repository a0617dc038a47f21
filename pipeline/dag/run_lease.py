"""The run lease in a compiled pipeline (Vertex AI, Kubeflow Pipelines): a first task and an exit handler.

Two runs on one gs:// root would train, decide against the same serving
model and push; a local run holds the root's lease in its own process
(pipeline/local/lock.py). A compiled run has no process that lives through it,
so the lease is held by the run itself (components/run_lease.py):
- `first_task`: RunLease, upstream of every other task (`lease_everything`),
  takes `<pipeline.root>/run.lock` for the run, waiting up to
  pipeline.lock_wait_seconds; it fails with the same "another run holds ..."
  message as a local run, naming the holder;
- `exit_handler`: ReleaseRunLease, which KubeflowV2DagRunner.set_exit_handler
  compiles into a task of the root DAG with trigger strategy
  ALL_UPSTREAM_TASKS_COMPLETED after a `tfx-dag` task that holds every other
  task (tfx/orchestration/kubeflow/v2/pipeline_builder.py, build, and
  step_builder.py, is_exit_handler): the backend runs it once the run's tasks
  completed, failed or not (kubeflow/pipelines backend/src/v2/compiler/
  argocompiler/dag.go, DAG: an exit task becomes the Argo exit hook of the
  tasks it depends on), and it releases the lease.

The lease's ttl is pipeline.run_lease_ttl_seconds (config.py says why it is
long); the Pusher renews it as the run's owner before it claims a version
and heartbeats it while it pushes, and fails (LeaseLost, nothing pushed) when
the run no longer holds it.
"""

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

"""The run lease of a run on Vertex AI or Kubeflow Pipelines: taken by its first task, released by its exit handler.
Why and sources: docs/internals.md."""

# No `from __future__ import annotations`: TFX reads these functions' annotations as types.
import logging

from tfx.dsl.component.experimental.annotations import Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.orchestration.kubeflow.decorators import exit_handler

from components import lease

# KFP's dsl.PIPELINE_JOB_RESOURCE_NAME_PLACEHOLDER (kfp/dsl/__init__.py); TFX compiles a str exec property
# into a task input parameter's runtimeValue constant, where the backend's driver replaces it.
OWNER_PLACEHOLDER = "{{$.pipeline_job_resource_name}}"
RUN_LEASE_ID = "RunLease"
RELEASE_ID = "ReleaseRunLease"


@component
def RunLease(root: Parameter[str], owner: Parameter[str], wait_seconds: Parameter[float],
             ttl_seconds: Parameter[float]) -> None:
    """Take the root's run lease for this run and leave it held (its exit handler releases it)."""
    if owner == OWNER_PLACEHOLDER:
        raise ValueError(f"owner is still the placeholder {OWNER_PLACEHOLDER}: the backend did not fill it in")
    held = lease.take_for_run(root, owner, wait_seconds, ttl_seconds, say=logging.info)
    logging.info("run %s holds the run lease %s until its exit handler releases it (expiry renewed by its "
                 "Pusher; %g s without renewal and it is stale)", owner, held.uri, ttl_seconds)


@exit_handler
def ReleaseRunLease(final_status: Parameter[str], root: Parameter[str], owner: Parameter[str]) -> None:
    """The exit handler: release this run's lease, whatever the run's outcome."""
    logging.info("the run's tasks ended: %s", final_status)
    logging.info("%s", lease.release_for_run(root, owner))

"""The run lease of a run on Vertex AI or Kubeflow Pipelines: taken by its first task, released by its exit handler.

A local run holds its root's lease in its own process for its whole duration
(pipeline/local/lock.py). A run on a backend has no such process: its tasks
are containers that come and go. So (components/lease.py, "a run on Vertex
or Kubeflow Pipelines"):
- `RunLease` is the first task of the run; every other task is downstream of
  it. It takes `<pipeline root>/run.lock` for the run, waiting up to
  pipeline.lock_wait_seconds for another run, and fails naming the holder
  (LeaseBusy: "another run holds ...") when it is still held;
- `ReleaseRunLease` is the pipeline's exit handler
  (KubeflowV2DagRunner.set_exit_handler): the backend runs it after the
  run's tasks have all completed, succeeded or failed, and it releases the
  lease if this run holds it (a run that failed waiting leaves the other
  run's lease alone). Its `final_status` is the backend's
  PipelineTaskFinalStatus of the run's tasks, logged.

`owner` is the run: OWNER_PLACEHOLDER, which the backend's driver replaces in
a task's constant input parameter by the pipeline job's resource name
(kubeflow/pipelines backend/src/v2/driver/resolve.go, resolveInputParameter:
"{{$.pipeline_job_resource_name}}" -> the run's name; on Vertex
projects/<p>/locations/<r>/pipelineJobs/<job id>), the same in every task of
one run and different in every run.
"""

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

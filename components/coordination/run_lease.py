"""The run lease of a run on Vertex AI or Kubeflow Pipelines: taken by its first task, released by its exit handler,
which also tells a person how the run ended (components/coordination/notify.py). Why and sources: docs/internals.md."""

# No `from __future__ import annotations`: TFX reads these functions' annotations as types.
import json
import logging

from tfx.dsl.component.experimental.annotations import Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.orchestration.kubeflow.decorators import exit_handler

from components.coordination import lease, notify, run_outcome

# KFP's dsl.PIPELINE_JOB_RESOURCE_NAME_PLACEHOLDER and PIPELINE_JOB_ID_PLACEHOLDER (kfp/dsl/__init__.py); TFX
# compiles a str exec property into a task input parameter's runtimeValue constant, where the driver replaces it.
OWNER_PLACEHOLDER = "{{$.pipeline_job_resource_name}}"
RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
RUN_LEASE_ID = "RunLease"
RELEASE_ID = "ReleaseRunLease"


@component
def RunLease(root: Parameter[str], owner: Parameter[str], wait_seconds: Parameter[float],
             ttl_seconds: Parameter[float], backend: Parameter[str], jobs_api: Parameter[str] = None,
             jobs_token_file: Parameter[str] = None, run_id: Parameter[str] = None) -> None:
    """Take the root's run lease for this run and leave it held (its exit handler releases it); a holder whose
    run its backend says is over is taken over at once."""
    for name, value, placeholder in (("owner", owner, OWNER_PLACEHOLDER), ("run_id", run_id, RUN_ID_PLACEHOLDER)):
        if value == placeholder:
            raise ValueError(f"{name} is still the placeholder {placeholder}: the backend did not fill it in")
    held = lease.take_for_run(root, owner, wait_seconds, ttl_seconds, say=logging.info, run_id=run_id or "",
                              jobs=run_outcome.job_states(backend, jobs_api or "", jobs_token_file or ""))
    logging.info("run %s holds the run lease %s until its exit handler releases it (expiry renewed by its "
                 "Pusher; %g s without renewal and it is stale)", owner, held.uri, ttl_seconds)


@exit_handler
def ReleaseRunLease(root: Parameter[str], owner: Parameter[str], backend: Parameter[str],
                    pipeline_name: Parameter[str], serving_dir: Parameter[str], final_status: Parameter[str] = None,
                    run_id: Parameter[str] = None, jobs_api: Parameter[str] = None,
                    jobs_token_file: Parameter[str] = None, console: Parameter[str] = None,
                    notify_settings: Parameter[str] = None) -> None:
    """The exit handler: release this run's lease, whatever the run's outcome, then notify (notify_settings:
    JSON of the config's notify section). On Vertex `final_status` is the backend's PipelineTaskFinalStatus;
    on Kubeflow there is none (it needs KFP 2.14, pipeline/kubeflow/client.py) and the run's API is asked."""
    logging.info("the run's tasks ended: %s", final_status or "(no final status on this backend)")
    logging.info("%s", lease.release_for_run(root, owner))
    settings = json.loads(notify_settings or "{}")
    if not (settings.get("pubsub_topic") or settings.get("webhook_url")):
        return
    outcome = run_outcome.of_compiled_run(
        pipeline_name, owner, run_id or "", final_status or "", serving_dir,
        run_outcome.job_states(backend, jobs_api or "", jobs_token_file or ""), console or "")
    if settings.get("on") == "failure" and outcome.state == notify.SUCCEEDED:
        return
    for line in notify.send(outcome, settings.get("pubsub_topic") or "", settings.get("webhook_url") or ""):
        logging.info("%s", line)

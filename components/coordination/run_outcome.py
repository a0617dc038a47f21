"""How a compiled run ended, as its exit handler can tell: the backend's final status and task details, and the
version the run pushed (its record in the serving directory)."""

from __future__ import annotations

import json
import logging
from typing import Optional

from components import training_record
from components.coordination import notify
from components.coordination.job_state import JobStates, KubeflowRuns, VertexJobs

log = logging.getLogger(__name__)

# PipelineTaskFinalStatus.state on Vertex (kfp/dsl/task_final_status.py) -> ours.
_FINAL_STATES = {"SUCCEEDED": notify.SUCCEEDED, "FAILED": notify.FAILED, "CANCELLED": notify.CANCELLED}


def job_states(backend: str, api: str, token_file: str) -> Optional[JobStates]:
    """Who answers for a run of `backend`: Vertex AI (api: its endpoint, empty for Google's) or the KFP API
    server (api: its in-cluster address, with the pod's token)."""
    if backend == "vertex":
        return VertexJobs(api)
    if backend == "kubeflow":
        return KubeflowRuns(api, token_file) if api else None
    raise ValueError(f"backend {backend!r}: expected vertex or kubeflow")


def of_compiled_run(pipeline: str, owner: str, run_id: str, final_status: str, serving_dir: str,
                    jobs: Optional[JobStates], console: str) -> notify.Outcome:
    """The outcome of run `owner` from its exit handler. `final_status` (Vertex's PipelineTaskFinalStatus JSON)
    gives the state when there is one; the backend's task details name the task that failed, and with no final
    status (Kubeflow) decide the state too; `console` is the run's page, with {run_id} and {owner} filled in."""
    state = ""
    error = ""
    if final_status:
        try:
            status = json.loads(final_status)
            state = _FINAL_STATES.get(str(status.get("state", "")), "")
            error = str((status.get("error") or {}).get("message", ""))
        except (ValueError, AttributeError):
            log.warning("the final status is not the JSON of a PipelineTaskFinalStatus: %r", final_status[:200])
    failed = jobs.failures(owner, run_id) if jobs is not None else None
    if not state:
        state = notify.UNKNOWN if failed is None else notify.FAILED if failed else notify.SUCCEEDED
    failed_task, failed_error = (failed[0] if failed else ("", ""))
    record = training_record.pushed_by(serving_dir, owner) if serving_dir else None
    metric = record.metric if record is not None and record.metric else None
    return notify.Outcome(
        pipeline=pipeline, run=owner, state=state, failed_task=failed_task, error=failed_error or error,
        pushed_version=record.version if record is not None else "",
        metric=metric[0] if metric else "", metric_value=float(metric[1]) if metric else None,
        link=console.format(run_id=run_id, owner=owner, job=owner.rsplit("/", 1)[-1]) if console else "")

"""The Tuner on Vertex: a HyperparameterTuningJob whose trials are the Trainer's CustomJob running
components/tuner/trial.py, created and polled with aiplatform's JobServiceClient; its trials as our record.
Why and sources: docs/tuning.md."""

from __future__ import annotations

import copy
import json
import logging
import signal
import threading
import time
from typing import Any, Callable, Mapping, Optional

from google.api_core import retry as retries
from google.cloud.aiplatform_v1.services.job_service import JobServiceClient
from google.cloud.aiplatform_v1.types import HyperparameterTuningJob, JobState, Trial
from tfx.types import artifact_utils, standard_component_specs

from components.errors import TuningFailed
from components.tuner import TRIAL_JOB_KEY, record, space
from trainer import tuning

log = logging.getLogger(__name__)

TRIAL_MODULE = "components.tuner.trial"
# As TFX polls the Trainer's CustomJob (tfx/extensions/google_cloud_ai_platform/runner.py): a trial takes minutes.
POLL_SECONDS = 30.0
# JobState (aiplatform_v1 job_state.proto): SUCCEEDED, FAILED and CANCELLED end a job ("end_time: ... entered any
# of"); EXPIRED and PARTIALLY_SUCCEEDED are documented states no further transition leaves either.
_DONE = {JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED, JobState.JOB_STATE_CANCELLED,
         JobState.JOB_STATE_EXPIRED, JobState.JOB_STATE_PARTIALLY_SUCCEEDED}


def job_client(region: str, endpoint: Optional[str] = None, transport: Optional[str] = None,
               credentials=None) -> JobServiceClient:
    """The regional JobService, as TFX's Vertex training client builds it (training_clients.py VertexJobClient)."""
    return JobServiceClient(client_options={"api_endpoint": endpoint or f"{region}-aiplatform.googleapis.com"},
                            transport=transport, credentials=credentials)


def build_job(input_dict: Mapping[str, list], exec_properties: Mapping[str, Any],
              custom: Mapping[str, Any]) -> dict[str, Any]:
    """The HyperparameterTuningJob, in the proto's field names (aiplatform_v1 hyperparameter_tuning_job.proto).

    The trials' spec is the Trainer's CustomJob spec (custom[TRIAL_JOB_KEY], pipeline/dag/tuning.py: its image,
    machine, PJRT env, service account, scheduling) with our trial command in every pool, as TFX's Vertex client
    puts run_executor there; no args of ours, so Vertex's --<parameter_id>=<value> are the container's args
    (jobs.py HyperparameterTuningJob: each parameter id "is passed into your training job as a command line key
    word argument"). The objective is the task's main metric, reported by name (components/tuner/trial.py)."""
    tuning_cfg, _ = space.section(custom)
    goal = space.objective(custom)
    trial = custom[TRIAL_JOB_KEY]
    job_spec = copy.deepcopy(trial["job_spec"])
    command = trial_command(input_dict, exec_properties)
    for pool in job_spec["worker_pool_specs"]:
        pool.setdefault("container_spec", {})["command"] = command
        pool["container_spec"].pop("args", None)
    return {
        "display_name": f"tuning-{time.strftime('%Y%m%d%H%M%S')}",
        "study_spec": {
            "metrics": [{"metric_id": goal.metric, "goal": "MAXIMIZE" if goal.higher_is_better else "MINIMIZE"}],
            "parameters": space.parameter_specs(tuning_cfg.search_space),
            # ALGORITHM_UNSPECIFIED: "The default algorithm used by Vertex AI for hyperparameter tuning"
            # (study.proto), Bayesian optimization (aiplatform's HyperparameterTuningJob, search_algorithm=None).
            "algorithm": "RANDOM_SEARCH" if tuning_cfg.algorithm == "random" else "ALGORITHM_UNSPECIFIED",
            # A trial reports once, at the step the Trainer would export: that report is the measurement.
            "measurement_selection_type": "LAST_MEASUREMENT",
        },
        "max_trial_count": tuning_cfg.trials,
        "parallel_trial_count": tuning_cfg.parallel_trials,
        "max_failed_trial_count": tuning_cfg.max_failed_trials,
        "trial_job_spec": job_spec,
        "labels": dict(trial.get("labels", {})),
    }


def trial_command(input_dict: Mapping[str, list], exec_properties: Mapping[str, Any]) -> list[str]:
    """`python -m components.tuner.trial --inputs ... --exec-properties ...`, the two JSON arguments as TFX's
    Vertex client writes them for run_executor (training_clients.py generate_container_command), less the trial
    job itself."""
    props = dict(exec_properties)
    custom = json.loads(props.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "{}")
    custom.pop(TRIAL_JOB_KEY, None)
    props[standard_component_specs.CUSTOM_CONFIG_KEY] = json.dumps(custom, sort_keys=True)
    return ["python", "-m", TRIAL_MODULE, "--inputs", artifact_utils.jsonify_artifact_dict(dict(input_dict)),
            "--exec-properties", json.dumps(props, sort_keys=True)]


def tune(input_dict: Mapping[str, list], exec_properties: Mapping[str, Any], custom: Mapping[str, Any],
         client: Optional[JobServiceClient] = None, poll_seconds: float = POLL_SECONDS) -> record.TuningRecord:
    """Create the job, wait for it (cancelling it if this task is told to stop), and read its trials."""
    trial = custom[TRIAL_JOB_KEY]
    client = client or job_client(trial["region"])
    parent = f"projects/{trial['project']}/locations/{trial['region']}"
    job = build_job(input_dict, exec_properties, custom)
    created = client.create_hyperparameter_tuning_job(parent=parent, hyperparameter_tuning_job=job)
    log.info("HyperparameterTuningJob %s: %d trials, %d at once", created.name, job["max_trial_count"],
             job["parallel_trial_count"])
    with _stop_on_sigterm() as stopping:
        done = wait(client, created.name, poll_seconds, stopping)
    tuning_cfg, _ = space.section(custom)
    replicas = sum(int(p.get("replica_count", 1)) for p in job["trial_job_spec"]["worker_pool_specs"])
    return to_record(done, tuning_cfg, space.objective(custom), replicas)


def wait(client: JobServiceClient, name: str, poll_seconds: float,
         stopping: Callable[[], bool] = lambda: False) -> HyperparameterTuningJob:
    """Poll until the job ends; when `stopping()`, cancel it first (a cancelled pipeline task must not leave
    trials running on accelerators, tensorflow/tfx#5607). Raise TuningFailed unless it succeeded."""
    cancelled = False
    while True:
        job = client.get_hyperparameter_tuning_job(name=name, retry=retries.Retry())
        if job.state in _DONE:
            break
        if stopping() and not cancelled:
            log.warning("stopping: cancelling HyperparameterTuningJob %s", name)
            client.cancel_hyperparameter_tuning_job(name=name)
            cancelled = True
        time.sleep(poll_seconds)
    succeeded = [t for t in job.trials if t.state == Trial.State.SUCCEEDED]
    if job.state == JobState.JOB_STATE_SUCCEEDED or (job.state == JobState.JOB_STATE_PARTIALLY_SUCCEEDED
                                                     and succeeded):
        return job
    failures = "; ".join(f"trial {t.id}: {t.infeasible_reason}" for t in job.trials if t.infeasible_reason)
    error = f": {job.error.message}" if job.error.message else ""
    raise TuningFailed(f"HyperparameterTuningJob {name} ended {job.state.name}{error}"
                       + (f" ({failures})" if failures else ""))


class _stop_on_sigterm:
    """While waiting, SIGTERM (a cancelled or preempted pipeline task) asks the loop to cancel the job."""

    def __enter__(self) -> Callable[[], bool]:
        self.asked, self.previous = False, None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._ask)
        return lambda: self.asked

    def _ask(self, signum, frame) -> None:
        self.asked = True

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def to_record(job: HyperparameterTuningJob, tuning_cfg: tuning.TuningConfig, goal: tuning.Objective,
              replicas: int) -> record.TuningRecord:
    """The job's trials as our record: SUCCEEDED ones with their final measurement of the objective, the rest
    failed with their infeasible_reason; hours are each trial's wall time times the trial pool's replicas."""
    trials, seconds = [], 0.0
    for t in job.trials:
        values = {p.parameter_id: _value(p.parameter_id, p.value) for p in t.parameters}  # proto-plus: a number or text
        metric = next((m for m in t.final_measurement.metrics if m.metric_id == goal.metric), None)
        took = (t.end_time - t.start_time).total_seconds() if t.end_time and t.start_time else None
        seconds += took or 0.0
        ok = t.state == Trial.State.SUCCEEDED and metric is not None
        trials.append(record.Trial(t.id, record.COMPLETED if ok else record.FAILED, values,
                                   metric.value if ok else None, int(t.final_measurement.step_count) if ok else None,
                                   took, "" if ok else (t.infeasible_reason or f"trial state {t.state.name}")))
    best = None
    for t in trials:
        if t.state == record.COMPLETED and (best is None or goal.better(t.objective, best.objective)):
            best = t
    return record.TuningRecord(goal.metric, goal.higher_is_better, tuning_cfg.algorithm, job.name, tuple(trials),
                               best.id if best else None, hours=seconds * replicas / 3600, hours_are="pool-hours",
                               replicas=replicas,
                               space={k: v.model_dump() for k, v in tuning_cfg.search_space.items()})


def _value(key: str, value: Any) -> Any:
    """A trial parameter (a google.protobuf.Value, which proto-plus hands over as a number or a string) as our
    search value."""
    return tuning.encode(key, tuning.decode(key, value)) if key in tuning.TUNABLE else value

"""A stand-in for Vertex AI's HyperparameterTuningJob: the request held to the documented rules, then its trials run
as CustomJobs (the dry run's, workers.py), their objective read from cloudml-hypertune's file. docs/tuning.md."""

from __future__ import annotations

import datetime
import itertools
import json
import math
import random
import re
import threading
from pathlib import Path
from typing import Any, Callable, Optional

from pipeline.errors import JobRefused

# Each rule names its source; "aiplatform_v1" is google/cloud/aiplatform_v1/types (the protos' documentation).
_HPT, _STUDY = "aiplatform_v1 hyperparameter_tuning_job.proto", "aiplatform_v1 study.proto"
_VALUE_SPECS = ("double_value_spec", "integer_value_spec", "categorical_value_spec", "discrete_value_spec")
_LABEL = re.compile(r"^[\w-]{0,64}$")
# cloudml-hypertune's metric file (hypertune/hypertune.py): $CLOUD_ML_HP_METRIC_FILE, else this, per container.
METRIC_FILE_ENV, TRIAL_ID_ENV = "CLOUD_ML_HP_METRIC_FILE", "CLOUD_ML_TRIAL_ID"
DONE = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


def check(job: dict[str, Any]) -> list[str]:
    """Every way `job` (proto field names) breaks a documented rule, each as `field: problem (source)`."""
    problems = []

    def refuse(field: str, problem: str, source: str) -> None:
        problems.append(f"{field}: {problem} ({source})")

    name = job.get("display_name", "")
    if not name or len(name) > 128:
        refuse("display_name", "required, at most 128 characters", _HPT)
    for field in ("max_trial_count", "parallel_trial_count"):
        if int(job.get(field, 0)) < 1:
            refuse(field, "required: a positive count", _HPT)
    if int(job.get("parallel_trial_count", 0)) > int(job.get("max_trial_count", 0)) >= 1:
        refuse("parallel_trial_count", "above max_trial_count (not documented; refused here, stricter)", _HPT)
    if int(job.get("max_failed_trial_count", 0)) < 0:
        refuse("max_failed_trial_count", "must not be negative", _HPT)
    if not job.get("trial_job_spec", {}).get("worker_pool_specs"):
        refuse("trial_job_spec.worker_pool_specs", "required: the trials' CustomJobSpec", _HPT)
    for key, value in job.get("labels", {}).items():
        if not _LABEL.match(key) or not _LABEL.match(value) or key.lower() != key or value.lower() != value:
            refuse(f"labels.{key}", "keys and values: at most 64 lower-case letters, digits, _ and -", _HPT)
    study = job.get("study_spec") or {}
    metrics = study.get("metrics") or []
    if not metrics:
        refuse("study_spec.metrics", "required", _STUDY)
    _unique_ids(refuse, "study_spec.metrics", [m.get("metric_id", "") for m in metrics], "metric_id")
    for i, metric in enumerate(metrics):
        if metric.get("goal") not in ("MAXIMIZE", "MINIMIZE"):
            refuse(f"study_spec.metrics[{i}].goal", "required: MAXIMIZE or MINIMIZE", _STUDY)
    parameters = study.get("parameters") or []
    if not parameters:
        refuse("study_spec.parameters", "required: the set of parameters to tune", _STUDY)
    _unique_ids(refuse, "study_spec.parameters", [p.get("parameter_id", "") for p in parameters], "parameter_id")
    for i, parameter in enumerate(parameters):
        _check_parameter(refuse, f"study_spec.parameters[{i}]", parameter)
    if study.get("algorithm") == "GRID_SEARCH" and any("double_value_spec" in p for p in parameters):
        refuse("study_spec.algorithm", "GRID_SEARCH needs every parameter INTEGER, CATEGORICAL or DISCRETE", _STUDY)
    for field in ("observation_noise",):
        if study.get(field) not in (None, "OBSERVATION_NOISE_UNSPECIFIED"):
            refuse(f"study_spec.{field}", "not supported by HyperparameterTuningJob", _STUDY)
    for field in ("decay_curve_stopping_spec", "median_automated_stopping_spec", "convex_automated_stopping_spec",
                  "study_stopping_config"):
        if field in study:
            refuse(f"study_spec.{field}", "not emulated by the dry run (it fails closed)", "the dry run")
    return problems


def _unique_ids(refuse, field: str, ids: list[str], what: str) -> None:
    for i, value in enumerate(ids):
        if not value or re.search(r"\s", value):
            refuse(f"{field}[{i}].{what}", "required, without whitespace", _STUDY)
        elif value in ids[:i]:
            refuse(f"{field}[{i}].{what}", f"{value!r} repeats: must be unique", _STUDY)


def _check_parameter(refuse, field: str, p: dict[str, Any]) -> None:
    kinds = [k for k in _VALUE_SPECS if k in p]
    if len(kinds) != 1:
        refuse(field, f"exactly one of {', '.join(_VALUE_SPECS)} (the parameter_value_spec oneof)", _STUDY)
        return
    kind, spec, scale = kinds[0], p[kinds[0]], p.get("scale_type", "SCALE_TYPE_UNSPECIFIED")
    if "default_value" in spec:
        refuse(f"{field}.{kind}.default_value", "not supported by HyperparameterTuningJob", _STUDY)
    if p.get("conditional_parameter_specs"):
        refuse(f"{field}.conditional_parameter_specs", "not emulated by the dry run (it fails closed)", "the dry run")
    if kind in ("double_value_spec", "integer_value_spec"):
        low, high = float(spec.get("min_value", 0)), float(spec.get("max_value", 0))
        if not low < high:
            refuse(f"{field}.{kind}", f"min_value {low} must be below max_value {high} (inclusive bounds; an empty "
                   "or one-point range is refused here, stricter)", _STUDY)
        values = [low, high]
    elif kind == "discrete_value_spec":
        values = [float(v) for v in spec.get("values", [])]
        if not values or len(values) > 1000:
            refuse(f"{field}.{kind}.values", "required, at most 1,000 values", _STUDY)
        if any(b - a < 1e-10 for a, b in zip(values, values[1:])):
            refuse(f"{field}.{kind}.values", "must increase, at least 1e-10 apart", _STUDY)
    else:
        if not spec.get("values"):
            refuse(f"{field}.{kind}.values", "required: the list of possible categories", _STUDY)
        if scale != "SCALE_TYPE_UNSPECIFIED":
            refuse(f"{field}.scale_type", "leave unset for CATEGORICAL parameters", _STUDY)
        return
    if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and values and min(values) <= 0:
        refuse(f"{field}.scale_type", f"{scale}: the entire feasible space must be strictly positive", _STUDY)


class TuningService:
    """The jobs of one dry run (or test): create checks and starts the trials, get answers what Vertex would.

    `start_trial(name, custom_job)` starts one trial's CustomJob and returns its run (workers.JobRun: done,
    state, error, stop). Suggestions are random points of the space, seeded, for every algorithm: Vizier's
    default (Bayesian) algorithm is not emulated, and the run says so."""

    def __init__(self, parent: str, start_trial: Callable[[str, dict], Any], workdir: Path,
                 report: Callable[[str], None], seed: int = 0):
        self.parent, self.start_trial, self.workdir, self.report, self.seed = parent, start_trial, workdir, report, seed
        self.jobs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def create(self, parent: str, job: dict[str, Any]) -> dict[str, Any]:
        if parent != self.parent:
            raise JobRefused(f"CreateHyperparameterTuningJob parent {parent!r}: the dry run emulates {self.parent} "
                             "(vertex.project/region)")
        problems = check(job)
        if problems:
            raise JobRefused("HyperparameterTuningJob refused: " + "; ".join(problems))
        with self._lock:
            name = f"{self.parent}/hyperparameterTuningJobs/{len(self.jobs) + 1}"
            stored = {**job, "name": name, "state": "JOB_STATE_PENDING", "create_time": _now(), "trials": []}
            self.jobs[name] = stored
        if job["study_spec"].get("algorithm", "ALGORITHM_UNSPECIFIED") != "RANDOM_SEARCH":
            self.report(f"  HyperparameterTuningJob {name}: algorithm "
                        f"{job['study_spec'].get('algorithm', 'ALGORITHM_UNSPECIFIED')} NOT EMULATED: its trials "
                        "take random points of the space here")
        stored["_cancel"] = threading.Event()
        threading.Thread(target=self._guarded, args=(stored,), daemon=True).start()
        return self.get(name)

    def get(self, name: str) -> dict[str, Any]:
        if name not in self.jobs:
            raise KeyError(f"HyperparameterTuningJob {name} not found")
        with self._lock:
            return json.loads(json.dumps({k: v for k, v in self.jobs[name].items() if not k.startswith("_")}))

    def cancel(self, name: str) -> None:
        job = self.jobs.get(name)
        if job is None:
            raise KeyError(f"HyperparameterTuningJob {name} not found")
        if job["state"] not in DONE:
            job["state"] = "JOB_STATE_CANCELLING"
            job["_cancel"].set()

    def _guarded(self, job: dict[str, Any]) -> None:
        """_run, and a failure of the stand-in itself fails the job (instead of leaving it running forever)."""
        try:
            self._run(job)
        except Exception as e:  # noqa: BLE001 - reported on the job, which the client then raises
            with self._lock:
                job.update(state="JOB_STATE_FAILED", end_time=_now(),
                           error={"code": 13, "message": f"the dry run's stand-in failed: {type(e).__name__}: {e}"})
            self.report(f"  HyperparameterTuningJob {job['name']}: the stand-in failed: {e}")

    def _run(self, job: dict[str, Any]) -> None:
        """Trials `parallel_trial_count` at a time until max_trial_count; the job fails once
        max_failed_trial_count trials failed (0: "Vertex AI decides", taken here as: only when every one did)."""
        points = _points(job["study_spec"], random.Random(self.seed))
        metric = job["study_spec"]["metrics"][0]["metric_id"]
        running: list[tuple[dict, Any, Path]] = []
        failed, limit = 0, int(job.get("max_failed_trial_count", 0))
        job.update(state="JOB_STATE_RUNNING", start_time=_now())
        def stopped() -> bool:  # cancelled, or failed too often
            return job["_cancel"].is_set() or bool(limit and failed >= limit)

        for number in itertools.count(1):
            while running and (stopped() or number > job["max_trial_count"]
                               or len(running) >= int(job["parallel_trial_count"])):
                running, ended = _wait_one(running, stopped)
                failed += self._finish(ended, metric, job)
            if stopped() or number > job["max_trial_count"]:
                break
            running.append(self._start(job, number, next(points)))
        cancelled, with_metric = job["_cancel"].is_set(), [t for t in job["trials"] if t["state"] == "SUCCEEDED"]
        if cancelled:
            state, error = "JOB_STATE_CANCELLED", {"code": 1, "message": "the job was cancelled"}
        elif (limit and failed >= limit) or not with_metric:
            last = job["trials"][-1].get("infeasible_reason") if job["trials"] else "no trial ran"
            state, error = "JOB_STATE_FAILED", {"code": 9, "message": f"{failed} trial(s) failed "
                                                f"(max_failed_trial_count {limit}); the last: {last}"}
        else:
            state, error = "JOB_STATE_SUCCEEDED", None
        with self._lock:
            job.update(state=state, end_time=_now(), **({"error": error} if error else {}))
        self.report(f"  HyperparameterTuningJob {job['name']}: {state} after {len(job['trials'])} trial(s)")

    def _start(self, job: dict[str, Any], number: int, values: dict[str, Any]) -> tuple[dict, Any, Path]:
        metrics = self.workdir / job["name"].rsplit("/", 1)[-1] / f"trial-{number}.metrics"
        metrics.parent.mkdir(parents=True, exist_ok=True)
        spec = json.loads(json.dumps(job["trial_job_spec"]))
        args = [f"--{k}={v}" for k, v in values.items()]
        for pool in spec["worker_pool_specs"]:
            container = pool.setdefault("container_spec", {})
            container["args"] = [*container.get("args", []), *args]
            # Trials share this machine: each gets its own metric file (on Vertex each container has its own
            # /tmp/hypertune/output.metrics).
            container["env"] = [*container.get("env", []), {"name": METRIC_FILE_ENV, "value": str(metrics)},
                                {"name": TRIAL_ID_ENV, "value": str(number)}]
        name = f"{job['name']}-trial-{number}"
        self.report(f"  HyperparameterTuningJob trial {number}: {' '.join(args)}")
        try:
            run = self.start_trial(name, {"display_name": name, "job_spec": spec})
        except JobRefused as e:  # what CreateCustomJob would refuse fails the trial
            run = _Refused(f"CustomJob refused: {e}")
        trial = {"id": str(number), "state": "ACTIVE", "start_time": _now(), "custom_job": name,
                 "parameters": [{"parameter_id": k, "value": v} for k, v in values.items()]}
        with self._lock:
            job["trials"].append(trial)
        return trial, run, metrics

    def _finish(self, ended: tuple[dict, Any, Path], metric: str, job: dict) -> int:
        """Record an ended trial: SUCCEEDED with its last report, else INFEASIBLE ("done but missing the
        final_measurement", study.proto Trial.State); 1 if it failed."""
        trial, run, metrics = ended
        value = _last_report(metrics, metric)
        with self._lock:
            trial["end_time"] = _now()
            if run.state == "SUCCEEDED" and value is not None:
                measured = {"step_count": str(value[1]), "metrics": [{"metric_id": metric, "value": value[0]}]}
                trial.update(state="SUCCEEDED", final_measurement=measured)
                return 0
            why = run.error or f"the trial reported no {metric!r} to {METRIC_FILE_ENV}"
            trial.update(state="INFEASIBLE", infeasible_reason=why)
        return 0 if job["_cancel"].is_set() else 1


    def stop(self) -> None:
        """Cancel every job still running (the dry run is over)."""
        for name in list(self.jobs):
            self.cancel(name)


class _Refused:
    """A trial whose CustomJob could not start: ended, failed."""

    def __init__(self, error: str):
        self.state, self.error, self.done = "FAILED", error, threading.Event()
        self.done.set()

    def stop(self) -> None:
        pass


def _wait_one(running: list, stopped: Callable[[], bool]) -> tuple[list, tuple]:
    """The next trial to end; once `stopped()` (cancelled, or failed too often) every trial is stopped."""
    while True:
        if stopped():
            for _, run, _ in running:  # stops the trial's replicas
                run.stop()
        for i, item in enumerate(running):
            if item[1].done.wait(0.05 / len(running)):
                return running[:i] + running[i + 1:], item


def _last_report(path: Path, metric: str) -> Optional[tuple[float, int]]:
    """The trial's last report of `metric` (LAST_MEASUREMENT) from cloudml-hypertune's JSON lines."""
    if not path.exists():
        return None
    reports = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    found = [r for r in reports if metric in r]
    return (float(found[-1][metric]), int(found[-1].get("global_step") or 0)) if found else None


def _points(study: dict[str, Any], rng: random.Random):
    """Endless random points of the space (log-uniform on UNIT_LOG_SCALE), values as Vertex passes them; the
    same points for the same seed."""
    while True:
        point = {}
        for p in study["parameters"]:
            log = p.get("scale_type") == "UNIT_LOG_SCALE"
            if "double_value_spec" in p or "integer_value_spec" in p:
                spec = p.get("double_value_spec") or p["integer_value_spec"]
                # proto3 JSON leaves out zeros: a missing bound is 0.
                low, high = float(spec.get("min_value", 0)), float(spec.get("max_value", 0))
                x = math.exp(rng.uniform(math.log(low), math.log(high))) if log else rng.uniform(low, high)
                point[p["parameter_id"]] = round(x) if "integer_value_spec" in p else x
            else:
                point[p["parameter_id"]] = rng.choice((p.get("discrete_value_spec") or
                                                       p["categorical_value_spec"])["values"])
        yield point


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")

"""The HyperparameterTuningJob routes on 127.0.0.1 in Vertex's REST form, for the real aiplatform JobServiceClient
(transport rest): the dry run's own stand-in (pipeline/dryrun/training/tuning.py, its rules and states) behind
Google's JSON, with trials that train nothing: each reports `objective(values)` through cloudml-hypertune's writer."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from google.cloud.aiplatform_v1.types import HyperparameterTuningJob
from google.protobuf import json_format

from pipeline.dryrun.training.tuning import METRIC_FILE_ENV, TRIAL_ID_ENV, TuningService
from pipeline.errors import JobRefused
from tests.fake_http import JsonServer, Request
from trainer.environment import overriding

PROJECT, REGION = "test-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{REGION}"
_HYPERTUNE_ENV = (METRIC_FILE_ENV, TRIAL_ID_ENV)
_MAKING = threading.Lock()


def _reporter(env: dict):
    """cloudml-hypertune's HyperTune for a trial whose container has `env`. Its __init__ reads the metric file and
    trial id from the process environment and makes the file's directory (an exists check, then os.makedirs): as
    components/tuner/trial.py has them set before it constructs one, so is it here, one trial thread at a time, so
    no trial falls back to /tmp/hypertune (where two threads making it at once race, and one trial fails)."""
    import hypertune

    with _MAKING, overriding({name: env[name] for name in _HYPERTUNE_ENV if name in env}):
        return hypertune.HyperTune()


class _Trial:
    """A trial's CustomJob that trains nothing: after `seconds`, it reports objective(values) (None: reports
    nothing and exits 0; an exception: fails)."""

    def __init__(self, job: dict, metric: str, objective: Callable[[dict], Optional[float]], seconds: float):
        pool = job["job_spec"]["worker_pool_specs"][0]["container_spec"]
        self.args = pool.get("args", [])
        self.values = dict(a[2:].split("=", 1) for a in self.args)
        self.env = {e["name"]: e["value"] for e in pool.get("env", [])}
        self.state, self.error, self.done, self._stop = "RUNNING", "", threading.Event(), threading.Event()
        threading.Thread(target=self._run, args=(metric, objective, seconds), daemon=True).start()

    def _run(self, metric, objective, seconds) -> None:
        try:
            if self._stop.wait(seconds):
                self.state, self.error = "FAILED", "stopped"
                return
            value = objective(self.values)
            if value is not None:
                # Into the file the stand-in gave this trial (its env's CLOUD_ML_HP_METRIC_FILE).
                _reporter(self.env).report_hyperparameter_tuning_metric(metric, value, global_step=40)
            self.state = "SUCCEEDED"
        except Exception as e:  # noqa: BLE001 - a trial's failure is the job's to record
            self.state, self.error = "FAILED", f"The replica workerpool0-0 exited with a non-zero status of 1: {e}"
        finally:
            self.done.set()

    def stop(self) -> None:
        self._stop.set()


@dataclass
class FakeTuning(JsonServer):
    workdir: Path
    metric: str = "auc"
    objective: Callable[[dict], Optional[float]] = lambda values: 0.5
    trial_seconds: float = 0.0
    requests: list[Request] = field(default_factory=list)
    trials: list[_Trial] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.service = TuningService(PARENT, self._start_trial, self.workdir, self.log.append, seed=1)

    def _start_trial(self, name: str, job: dict) -> _Trial:
        trial = _Trial(job, self.metric, self.objective, self.trial_seconds)
        self.trials.append(trial)
        return trial

    def _serve(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        self.requests.append(Request(method, path, query, body))
        try:
            if method == "POST" and (m := re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+)/hyperparameterTuningJobs",
                                                        path)):
                job = json_format.MessageToDict(json_format.ParseDict(body, HyperparameterTuningJob.pb()()),
                                                preserving_proto_field_name=True)
                return 200, self._public(self.service.create(m[1], job))
            if method == "GET" and (m := re.fullmatch(r"/v1/(.+/hyperparameterTuningJobs/[^/:]+)", path)):
                return 200, self._public(self.service.get(m[1]))
            if method == "POST" and (m := re.fullmatch(r"/v1/(.+/hyperparameterTuningJobs/[^/:]+):cancel", path)):
                self.service.cancel(m[1])
                return 200, {}
        except JobRefused as e:
            return self.error(400, str(e))
        except KeyError as e:
            return self.error(404, str(e.args[0]))
        return self.error(404, f"fake_tuning has no route for {method} {path}")

    @staticmethod
    def _public(job: dict) -> dict:
        """The stored job (proto field names) as Vertex's REST JSON."""
        return json_format.MessageToDict(json_format.ParseDict(job, HyperparameterTuningJob.pb()()))

    def wait_done(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while any(j["state"] not in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
                  for j in self.service.jobs.values()):
            if time.monotonic() > deadline:
                raise TimeoutError("the stand-in's jobs did not end")
            time.sleep(0.02)

"""What a search did, trial by trial, as the Tuner writes it beside TFX's tuner_results.json and on the root for
`tuning.reuse: latest`; the report, `history` and the cost read it back. (docs/tuning.md)"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional

from tfx.dsl.io import fileio

# In the Tuner's TunerResults artifact (beside TFX's tuner_results.json) and in LatestTuning's.
RECORD_FILE = "tuning_record.json"
# The Trainer's input: TFX's Trainer reads the one file in the HyperParameters artifact's directory
# (tfx/components/trainer/executor.py, io_utils.get_only_uri_in_dir) as KerasTuner's HyperParameters config.
BEST_FILE = "best_hyperparameters.txt"
# TFX's tuner_results.json (tfx/components/tuner/executor.py, write_best_hyperparameters): completed trials as
# pandas records, {trial_id, score, **values}; written on Vertex too, so both paths leave the same artifact.
RESULTS_FILE = "tuner_results.json"
# The last search on a root, for tuning.reuse: latest (pipeline.root/tuning/<pipeline>/LATEST_FILE).
LATEST_FILE = "latest.json"
COMPLETED, FAILED = "COMPLETED", "FAILED"


@dataclasses.dataclass(frozen=True)
class Trial:
    id: str
    state: str  # COMPLETED | FAILED (locally KerasTuner's states; on Vertex SUCCEEDED -> COMPLETED, else FAILED)
    values: dict[str, Any]  # the search values (trainer/tuning.py encode)
    objective: Optional[float] = None
    step: Optional[int] = None  # the step whose evaluation scored `objective`
    seconds: Optional[float] = None  # wall time
    error: str = ""


@dataclasses.dataclass(frozen=True)
class TuningRecord:
    metric: str  # the task's main metric label on the eval split
    higher_is_better: bool
    algorithm: str  # random | bayesian
    where: str  # "local", or the HyperparameterTuningJob's resource name
    trials: tuple[Trial, ...]
    best: Optional[str]  # the best trial's id
    # The accelerator time the trials took: locally the Tuner's CPU-hours; on Vertex each trial's wall time times
    # the trial pool's replicas (pipeline/runs/cost.py prices it like the Trainer's pool-hours).
    hours: float = 0.0
    hours_are: str = "CPU-hours"  # or "pool-hours"
    replicas: int = 1
    space: dict = dataclasses.field(default_factory=dict)  # the searched space, as the config gave it
    run: str = ""  # the run whose Tuner searched (set by LatestTuning when reused)
    reused: bool = False  # LatestTuning's: this run reused the last search instead of searching

    @property
    def best_trial(self) -> Optional[Trial]:
        return next((t for t in self.trials if t.id == self.best), None)

    @property
    def completed(self) -> list[Trial]:
        return [t for t in self.trials if t.state == COMPLETED]

    def describe(self) -> str:
        best = self.best_trial
        text = (f"{len(self.trials)} trials ({len(self.completed)} completed), {self.algorithm}, "
                f"{self.hours:.4f} {self.hours_are}")
        if best is not None:
            values = ", ".join(f"{k}={v}" for k, v in sorted(best.values.items()))
            text += f"; best trial {best.id}: eval {self.metric} {best.objective:.4f} ({values})"
        return ("reused the search of run " + (self.run or "?") + ": " if self.reused else "") + text

    def results(self) -> list[dict[str, Any]]:
        """TFX's tuner_results.json rows: the completed trials, best first."""
        ordered = sorted(self.completed, key=lambda t: t.objective, reverse=self.higher_is_better)
        return [{"trial_id": t.id, "score": t.objective, **t.values} for t in ordered]


def to_json(record: TuningRecord) -> str:
    return json.dumps(dataclasses.asdict(record), indent=1, sort_keys=True)


def from_json(text: str) -> TuningRecord:
    raw = json.loads(text)
    return TuningRecord(**{**raw, "trials": tuple(Trial(**t) for t in raw["trials"])})


def write(directory: str, record: TuningRecord) -> None:
    with fileio.open(os.path.join(directory, RECORD_FILE), "w") as f:
        f.write(to_json(record))
    with fileio.open(os.path.join(directory, RESULTS_FILE), "w") as f:
        f.write(json.dumps(record.results()))


def read(directory: str) -> Optional[TuningRecord]:
    """The record in a TunerResults artifact's directory; None when there is none (TFX's own Tuner's)."""
    path = os.path.join(directory, RECORD_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path) as f:
        return from_json(f.read())


def publish_latest(tuning_dir: str, record: TuningRecord, best_hyperparameters: dict) -> str:
    """Keep the search's result on the root for tuning.reuse: latest: one object, written whole."""
    fileio.makedirs(tuning_dir)
    path = os.path.join(tuning_dir, LATEST_FILE)
    with fileio.open(path, "w") as f:
        f.write(json.dumps({"record": json.loads(to_json(record)), "best_hyperparameters": best_hyperparameters},
                           sort_keys=True))
    return path


def latest(tuning_dir: str) -> Optional[tuple[TuningRecord, dict]]:
    """(the last search's record, its best hyperparameters config) on the root; None before any search."""
    path = os.path.join(tuning_dir, LATEST_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open(path) as f:
        raw = json.loads(f.read())
    return from_json(json.dumps(raw["record"])), raw["best_hyperparameters"]


def latest_key(tuning_dir: str) -> str:
    """What identifies the last search on the root (its file's content), for LatestTuning's local cache key."""
    path = os.path.join(tuning_dir, LATEST_FILE)
    if not fileio.exists(path):
        return ""
    import hashlib

    with fileio.open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()

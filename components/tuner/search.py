"""The local search: TFX's Tuner calls tuner_fn, KerasTuner's oracle picks the values and LoopTuner.run_trial
trains each trial with our loop (trainer/trial.py). (docs/tuning.md)"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Optional

import keras_tuner
from keras_tuner.engine import base_tuner
from keras_tuner.engine import trial as trial_module
from tfx.components.tuner.component import TunerFnResult

from components.errors import TuningFailed
from components.tuner import record, space
from trainer.config import TrainerConfig
from trainer.run_fn import trainer_config
from trainer.strategy import make_strategy
from trainer.trial import TrialResult, run_trial
from trainer.tuning import TuningConfig

log = logging.getLogger(__name__)


class _ConfiguredFirst:
    """The first trial takes every hyperparameter's default: the trainer section's own values where they lie in
    the space (space.hyperparameters). So the search returns the configured model unless a trial beats it on
    the objective; KerasTuner's oracles would otherwise start at a random point."""

    def populate_space(self, trial_id):
        if not self.trials:
            return {"status": trial_module.TrialStatus.RUNNING, "values": self.hyperparameters.values}
        return super().populate_space(trial_id)


class RandomOracle(_ConfiguredFirst, keras_tuner.oracles.RandomSearchOracle):
    pass


class BayesianOracle(_ConfiguredFirst, keras_tuner.oracles.BayesianOptimizationOracle):
    pass


ORACLES = {"random": RandomOracle, "bayesian": BayesianOracle}


class LoopTuner(base_tuner.BaseTuner):
    """A KerasTuner tuner whose trials are our training loop, not model.fit: run_trial trains the Trainer's model
    with the trial's values and returns the objective."""

    def __init__(self, tuning: TuningConfig, cfg: TrainerConfig, objective_metric: str, higher_is_better: bool,
                 directory: str):
        self.tuning, self.cfg, self.results = tuning, cfg, {}
        oracle = ORACLES[tuning.algorithm](
            objective=keras_tuner.Objective(objective_metric, "max" if higher_is_better else "min"),
            max_trials=tuning.trials, hyperparameters=space.hyperparameters(tuning.search_space, cfg),
            allow_new_entries=False, tune_new_entries=False, seed=cfg.seed,
            # on_trial_end counts every failure (max_failed_trials, as Vertex's max_failed_trial_count) and stops
            # first: KerasTuner's own count is of consecutive failures, which never exceeds ours.
            max_consecutive_failed_trials=tuning.max_failed_trials + 1)
        super().__init__(oracle, hypermodel=None, directory=directory, project_name="search", overwrite=True)
        self.objective_metric, self.higher_is_better = objective_metric, higher_is_better
        self.started = time.process_time()

    def run_trial(self, trial, fn_args, strategy):
        result = run_trial(fn_args, self.cfg, trial.hyperparameters.values,
                           os.path.join(self.project_dir, f"trial_{trial.trial_id}"), strategy)
        self.results[trial.trial_id] = result
        return {self.objective_metric: result.objective}

    def on_trial_end(self, trial):
        super().on_trial_end(trial)
        failed = [t for t in self.oracle.trials.values() if t.status == trial_module.TrialStatus.FAILED]
        if len(failed) >= self.tuning.max_failed_trials:
            raise TuningFailed(f"{len(failed)} trial(s) failed (tuning.max_failed_trials "
                               f"{self.tuning.max_failed_trials}); the last: {_last_line(failed[-1].message)}")

    def record(self) -> record.TuningRecord:
        trials = []
        for trial_id in self.oracle.start_order:
            t = self.oracle.trials[trial_id]
            done: Optional[TrialResult] = self.results.get(trial_id)
            completed = t.status == trial_module.TrialStatus.COMPLETED and done is not None
            trials.append(record.Trial(
                trial_id, record.COMPLETED if completed else record.FAILED, dict(t.hyperparameters.values),
                done.objective if completed else None, done.step if completed else None,
                done.seconds if done else None, "" if completed else _last_line(t.message)))
        best = max((t for t in trials if t.state == record.COMPLETED), default=None,
                   key=lambda t: t.objective if self.higher_is_better else -t.objective)
        return record.TuningRecord(self.objective_metric, self.higher_is_better, self.tuning.algorithm, "local",
                                   tuple(trials), best.id if best else None,
                                   hours=(time.process_time() - self.started) / 3600, hours_are="CPU-hours",
                                   space={k: v.model_dump() for k, v in self.tuning.search_space.items()})


def _last_line(message: Optional[str]) -> str:
    lines = [line for line in (message or "").splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def tuner_fn(fn_args) -> TunerFnResult:
    """TFX's Tuner calls this (tfx/components/tuner/executor.py, search): the tuner and what its run_trial takes.
    One strategy for every trial, built before anything else uses TensorFlow (trainer/fit.py)."""
    tuning, _ = space.section(fn_args.custom_config)
    cfg = trainer_config(fn_args)
    goal = space.objective(fn_args.custom_config)
    strategy = make_strategy(cfg.strategy, cfg.tpu, cfg.require_accelerator)
    tuner = LoopTuner(tuning, cfg, goal.metric, goal.higher_is_better, fn_args.working_dir)
    return TunerFnResult(tuner=tuner, fit_kwargs={"fn_args": fn_args, "strategy": strategy})


def best_values(tuner: LoopTuner) -> dict[str, Any]:
    """The best trial's values; TuningFailed when no trial completed."""
    rec = tuner.record()
    if rec.best_trial is None:
        raise TuningFailed("no trial completed, so there is nothing to train with; see the trials above")
    return rec.best_trial.values


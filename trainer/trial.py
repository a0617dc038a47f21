"""One tuning trial: the Trainer's own training (run_fn's data, trainer/fit.py's loop) with a trial's values, no
export, and its objective. The local search and a Vertex trial both run it (components/tuner/)."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from typing import Any, Mapping, Optional

import tensorflow as tf

from trainer import tuning
from trainer.config import TrainerConfig
from trainer.errors import PreemptedError, TrainerError
from trainer.fit import fit_and_export
from trainer.run_fn import FnArgsData

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrialResult:
    objective: float  # the task's main metric on the eval split at the step the Trainer would export
    metric: str  # its label (auc, accuracy, rmse)
    higher_is_better: bool
    step: int  # that step
    seconds: float  # the trial's wall time, set-up and evaluations included
    cpu_seconds: float  # this process's CPU time during the trial (all threads)


def run_trial(fn_args, cfg: TrainerConfig, values: Mapping[str, Any], working_dir: str,
              strategy: Optional[tf.distribute.Strategy] = None) -> TrialResult:
    """Train as the Trainer would with `values` set in `cfg`, in `working_dir` (its checkpoints).

    The same data (FnArgsData, as run_fn reads it), the same loop and export choice, so the objective is what
    the Trainer's model would score with these values. What differs, and why: no input check
    (trainer.check_input; it measures the input pipeline, not the model), no TensorBoard summaries, no warm
    start (the trial's values may change the model's shapes), and the trial's own checkpoints (another
    trial's must never be resumed)."""
    start, cpu = time.perf_counter(), time.process_time()
    trial_cfg = tuning.apply(cfg, values).model_copy(
        update={"check_input": False, "checkpoint_dir": None, "warm_start": False})
    log.info("trial: %s", ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "the trainer's own values")
    fitted = fit_and_export(trial_cfg, FnArgsData(fn_args, trial_cfg),
                            checkpoint_dir=os.path.join(working_dir, "checkpoints"), logdir=None,
                            export_dir=None, export=_no_export, strategy=strategy)
    result = fitted.result
    if result.preempted:
        raise PreemptedError(f"trial preempted at step {result.step}; restart it to resume")
    choice = result.exported
    if choice.value is None or math.isnan(choice.value):
        raise TrainerError(f"trial: no eval {choice.metric} at the step it would export ({choice.describe()}); "
                           "tuning needs an eval split and a finite metric")
    log.info("trial objective: eval %s %.4f at step %d", choice.metric, choice.value, choice.step)
    return TrialResult(choice.value, choice.metric, choice.higher_is_better, choice.step,
                       time.perf_counter() - start, time.process_time() - cpu)


def _no_export(model, directory) -> None:
    raise AssertionError("a trial exports nothing")  # fit_and_export calls it only with an export_dir

"""What a training job tells the run summary and the report: which step's weights it exported and why,
whether its input kept up with training (trainer/input_check.py), whether it overfitted (trainer/overfit.py),
and the time it took. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

import tensorflow as tf

from trainer.budget import Budget
from trainer.input_check import InputDiagnosis
from trainer.overfit import OverfitDiagnosis

OUTCOME_FILE = "trainer_outcome.json"


@dataclasses.dataclass(frozen=True)
class ExportChoice:
    policy: str  # trainer.export: best | last
    step: int  # the step whose weights were exported
    metric: str  # the task's main metric (trainer/tasks.py MAIN_METRICS label), on the eval split
    higher_is_better: bool
    value: Optional[float]  # the metric at `step`; None when that step was not evaluated
    best_step: Optional[int] = None  # the best evaluation of the run; None: nothing evaluated
    best_value: Optional[float] = None
    why: str = ""  # set when the policy could not be followed

    def describe(self) -> str:
        value = f"eval {self.metric} {self.value:.4f}" if self.value is not None else f"eval {self.metric} not measured"
        text = f"step {self.step} ({value}; trainer.export={self.policy}"
        if self.why:
            text += f": {self.why}"
        elif self.policy == "last" and self.best_step is not None and self.best_step != self.step:
            text += f"; the best evaluation was step {self.best_step}, {self.metric} {self.best_value:.4f}"
        return text + ")"


@dataclasses.dataclass(frozen=True)
class Outcome:
    export: ExportChoice
    input: Optional[InputDiagnosis]  # None: not measured (trainer.check_input off, or no training steps ran)
    # The trainer's own time: the training loop, and the process's CPU seconds (all threads) up to the record.
    loop_seconds: float = 0.0
    cpu_seconds: float = 0.0
    overfit: Optional[OverfitDiagnosis] = None  # None: a record from before the check
    budget: Optional[Budget] = None  # how much it trained and why it stopped; None: a record from before budgets
    model: str = ""  # the model's size and why (trainer/sizing.py); empty: a record from before


def write(directory: str, record: Outcome) -> str:
    path = os.path.join(directory, OUTCOME_FILE)
    with tf.io.gfile.GFile(path, "w") as f:
        json.dump(dataclasses.asdict(record), f, indent=1, sort_keys=True)
    return path


def read(directory: str) -> Optional[Outcome]:
    """The record in a model run directory; None when the trainer wrote none (an older run)."""
    path = os.path.join(directory, OUTCOME_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        raw = json.load(f)
    try:
        return Outcome(export=ExportChoice(**raw["export"]),
                       input=InputDiagnosis(**raw["input"]) if raw.get("input") else None,
                       loop_seconds=raw.get("loop_seconds", 0.0), cpu_seconds=raw.get("cpu_seconds", 0.0),
                       overfit=OverfitDiagnosis(**raw["overfit"]) if raw.get("overfit") else None,
                       budget=Budget(**raw["budget"]) if raw.get("budget") else None, model=raw.get("model", ""))
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a trainer outcome record ({type(e).__name__}: {e})") from None

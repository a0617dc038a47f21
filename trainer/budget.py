"""The training budget: the batch, how many steps at most, how often to evaluate, when to stop and the learning rate's
course, from the size of the training split unless `trainer.train_steps` fixes the steps. Every constant is here and
in docs/trainer.md (the training budget), with the measurements behind it."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

from trainer.config import TrainerConfig

# The pass budget (trainer.train_steps empty). The global batch is about the square root of the training rows, so a
# pass is about as many steps as a step has examples: a small table still gets enough steps a pass to learn from,
# a large one a batch that keeps the device busy. Between these bounds, rounded to whole per-replica batches.
MIN_BATCH, MAX_BATCH = 32, 2048
# Per-replica batches are multiples of this: a TPU's tiles are 8 rows (x 128), and every shape stays static.
BATCH_MULTIPLE = 8
# At most this many passes over the training split (trainer.max_passes), and at least MIN_STEPS steps in all: a
# small table takes more passes, each of few steps. Early stopping usually ends the run long before.
MAX_PASSES = 30
MIN_STEPS = 2000
# Evaluate once a pass, or every few passes so that the whole budget holds at most this many evaluations.
MAX_EVALS = 50
# Stop once eval loss has not improved for this many evaluations; halve the learning rate each time it has not
# for DECAY_AFTER of them (decay: plateau).
PATIENCE = 5
DECAY_AFTER = 2
DECAY_FACTOR = 0.5
# Adam's peak rate for one replica, reached by a linear warm-up over one pass (at most WARMUP_SHARE of the budget).
LEARNING_RATE = 0.01
WARMUP_SHARE = 0.05

# trainer.train_steps set: the step budget as it always was; the keys left empty take these.
STEP_BUDGET = {"global_batch_size": 32, "eval_every_steps": 100, "checkpoint_every_steps": 100,
               "early_stopping_patience": 0, "warmup_steps": 0, "learning_rate": LEARNING_RATE, "decay": "none"}

STOP_REASONS = {
    "budget": "the budget ran out",
    "early": "eval loss no better for {patience} evaluations",
    "time": "the wall-clock cap (trainer.max_train_seconds {seconds:g}) ran out",
    "preempted": "preempted (a restart resumes)",
}


@dataclasses.dataclass(frozen=True)
class Budget:
    """The budget a run trained under and how it ended, as the summary and the report say it."""
    by_passes: bool  # False: trainer.train_steps
    rows: int  # training rows (every worker's); 0 when not counted (a step budget)
    global_batch_size: int
    max_steps: int
    eval_every_steps: int
    patience: int  # 0: no early stopping
    max_seconds: Optional[float] = None
    steps: int = 0  # trained, when the run ended
    stop: str = ""  # STOP_REASONS key
    exported_step: Optional[int] = None

    @property
    def steps_per_pass(self) -> int:
        return math.ceil(self.rows / self.global_batch_size) if self.rows else 0

    @property
    def max_passes(self) -> float:
        return self.max_steps / self.steps_per_pass if self.steps_per_pass else 0.0

    def passes(self, step: int) -> float:
        return step / self.steps_per_pass if self.steps_per_pass else 0.0

    def ended(self, steps: int, stop: str, exported_step: Optional[int]) -> "Budget":
        return dataclasses.replace(self, steps=steps, stop=stop, exported_step=exported_step)

    def why(self) -> str:
        return STOP_REASONS.get(self.stop, self.stop).format(patience=self.patience, seconds=self.max_seconds or 0)

    def describe(self) -> str:
        """`stopped in pass 7 of at most 30: eval loss no better for 5 evaluations; exported pass 4 (1.2M
        examples)`, or for a step budget `trained 400 of 400 steps (trainer.train_steps) at batch 32: ...`."""
        exported, batch = self.exported_step, self.global_batch_size
        if self.by_passes:
            text = (f"stopped in pass {_count(self.passes(self.steps))} of at most {_count(self.max_passes)}: "
                    f"{self.why()}")
            if exported is not None:
                text += f"; exported pass {_count(self.passes(exported))} ({_examples(exported * batch)} examples)"
            return text + f"; batch {batch:,}, {self.steps_per_pass:,} steps a pass over {self.rows:,} rows"
        text = f"trained {self.steps:,} of {self.max_steps:,} steps (trainer.train_steps) at batch {batch:,}"
        if self.stop != "budget":
            text += f": {self.why()}"
        if exported is not None:
            text += f"; exported step {exported:,} ({_examples(exported * batch)} examples)"
        return text


def _count(passes: float) -> str:
    return f"{passes:.0f}" if abs(passes - round(passes)) < 0.05 else f"{passes:.1f}"


def _examples(n: int) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def plan(cfg: TrainerConfig, count_rows: Callable[[], int], replicas: int) -> tuple[TrainerConfig, Budget]:
    """`cfg` with every budget key set, for the loop, and the budget as the summary will describe it.

    `count_rows()` is called only for a pass budget; `replicas` (the strategy's replicas in sync) makes the batch
    a whole number of per-replica batches of BATCH_MULTIPLE. The same table and strategy give the same plan, so a
    resumed job and every worker of a cluster plan alike."""
    if cfg.train_steps is not None:
        resolved = _fill(cfg, STEP_BUDGET)
        return resolved, Budget(False, 0, resolved.global_batch_size, resolved.train_steps,
                                resolved.eval_every_steps, resolved.early_stopping_patience, cfg.max_train_seconds)
    rows = count_rows()
    if rows < 1:
        raise ValueError("the training split has no rows: nothing to plan a budget on")
    batch = cfg.global_batch_size or batch_size(rows, replicas * cfg.gradient_accumulation_steps)
    per_pass = math.ceil(rows / batch)
    max_passes = cfg.max_passes or max(MAX_PASSES, math.ceil(MIN_STEPS / per_pass))
    max_steps = max(1, math.ceil(max_passes * per_pass))
    passes_per_eval = max(1, math.ceil(max_passes / MAX_EVALS))
    eval_every = cfg.eval_every_steps or min(max_steps, passes_per_eval * per_pass)
    patience = PATIENCE if cfg.early_stopping_patience is None else cfg.early_stopping_patience
    resolved = _fill(cfg, {"train_steps": max_steps, "global_batch_size": batch, "eval_every_steps": eval_every,
                           "checkpoint_every_steps": eval_every, "early_stopping_patience": patience,
                           "warmup_steps": min(per_pass, math.ceil(WARMUP_SHARE * max_steps)),
                           "learning_rate": LEARNING_RATE, "decay": "plateau"})
    return resolved, Budget(True, rows, batch, max_steps, eval_every, patience, cfg.max_train_seconds)


def unplanned_default(key: str) -> Optional[float]:
    """The value a key left empty takes whatever the table and budget (the learning rate's); None for the keys
    planned from the data."""
    return LEARNING_RATE if key == "learning_rate" else None


def batch_size(rows: int, unit: int) -> int:
    """About sqrt(rows), within [MIN_BATCH, MAX_BATCH], a multiple of `unit` x BATCH_MULTIPLE (replicas x
    micro-batches x 8)."""
    step = unit * BATCH_MULTIPLE
    target = min(MAX_BATCH, max(MIN_BATCH, math.sqrt(rows)))
    return max(step, round(target / step) * step)


def _fill(cfg: TrainerConfig, defaults: dict) -> TrainerConfig:
    return cfg.model_copy(update={k: v for k, v in defaults.items() if getattr(cfg, k) is None})

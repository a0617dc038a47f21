"""The training loop, on one page. Why: docs/internals.md."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Callable, Optional

import tensorflow as tf
import tf_keras

from trainer import budget
from trainer.config import TrainerConfig
from trainer.data import DatasetFn, per_replica_batch_size, resumed
from trainer.hooks import Checkpointer, Preemption, Profiler, Summaries
from trainer.input_check import InputDiagnosis, check_input
from trainer.outcome import ExportChoice
from trainer.state import TrainState, build_state
from trainer.steps import make_evaluate, make_train_steps
from trainer.strategy import chief_or_temp_dir, is_chief
from trainer.tasks import Task

log = logging.getLogger(__name__)


@dataclasses.dataclass
class TrainResult:
    model: tf_keras.Model
    step: int
    initial_step: int  # > 0 when resumed from a checkpoint
    preempted: bool
    stopped_early: bool
    history: list[dict]  # one entry per evaluation
    # Wall-clock throughput after the first host call (which traces and compiles).
    examples_per_second: float
    # Which step's weights `model` holds for export (trainer.export); None when preempted.
    exported: Optional[ExportChoice] = None
    # Training alone: examples/s inside the host calls after the first (no eval, no checkpoints),
    # what the input pipeline must keep up with (trainer/input_check.py); 0.0 when there was none.
    step_examples_per_second: float = 0.0
    loop_seconds: float = 0.0  # the whole loop's wall time, evaluations and checkpoints included
    input: Optional[InputDiagnosis] = None  # input alone vs training (trainer.check_input); None: not measured
    stop: str = "budget"  # why the loop ended: budget | early | time | preempted (trainer/budget.py STOP_REASONS)


def train(strategy: tf.distribute.Strategy, cfg: TrainerConfig,
          model_fn: Callable[[], tf_keras.Model],
          train_dataset_fn: DatasetFn, eval_dataset_fn: Optional[DatasetFn],
          checkpoint_dir: str, logdir: Optional[str] = None, *, task: Task) -> TrainResult:
    """Train `model_fn()` under `strategy` for at most cfg.train_steps optimizer steps (a config planned by
    trainer/budget.py: every budget key set), resuming from the latest checkpoint in `checkpoint_dir` if there
    is one. `task` (trainer/tasks.py) gives the loss and the metric, logged under its name."""
    unplanned = [k for k in ("train_steps", *budget.STEP_BUDGET) if getattr(cfg, k) is None]
    if unplanned:
        raise ValueError(f"train() needs a planned config (trainer.budget.plan); unset: {', '.join(unplanned)}")
    global_batch = cfg.global_batch_size
    # Fail before any tracing if the batch doesn't divide.
    per_replica_batch_size(global_batch, strategy.num_replicas_in_sync, cfg.gradient_accumulation_steps)
    state = build_state(strategy, cfg, model_fn, task)
    metric = task.metric_name
    ckpt = Checkpointer(checkpoint_dir, chief_or_temp_dir(strategy, checkpoint_dir, "checkpoints"),
                        cfg.checkpoints_to_keep, **state.checkpointed())
    ckpt.restore()
    step = initial_step = int(state.optimizer.iterations.numpy())
    train_data = strategy.distribute_datasets_from_function(
        resumed(train_dataset_fn, step, cfg.gradient_accumulation_steps))
    train_iter = iter(train_data)
    eval_data = eval_dataset_fn and strategy.distribute_datasets_from_function(eval_dataset_fn)
    train_steps = make_train_steps(strategy, state, cfg)
    evaluate = None if eval_data is None else make_evaluate(strategy, state, eval_data)

    summaries = Summaries(logdir, is_chief(strategy))
    profiler = Profiler(cfg.profile_steps, logdir or checkpoint_dir)
    preemption = Preemption()
    history: list[dict] = []  # one record per evaluation
    preempted, stopped_early = False, state.patience_exhausted(cfg.early_stopping_patience)
    out_of_time = state.out_of_time(cfg.max_train_seconds)
    steady_start, steady_step = None, step
    step_seconds, loop_start = 0.0, time.perf_counter()
    try:
        while step < cfg.train_steps and not preempted and not stopped_early and not out_of_time:
            n = _steps_to_next_boundary(step, cfg)
            profiler.before(step)
            start = time.perf_counter()
            # Every worker stops after the same host call: the requests are summed across workers inside it.
            requests = tf.constant([float(preemption.requested), float(state.out_of_time(cfg.max_train_seconds))])
            loss, acc, stops = train_steps(train_iter, tf.constant(n), requests)
            loss, acc, (preempted, out_of_time) = float(loss), float(acc), (bool(x) for x in stops.numpy())
            step += n
            call_seconds = time.perf_counter() - start
            if state.trained_seconds is not None:  # decided on at the next call, by every worker alike
                state.trained_seconds.assign_add(call_seconds)
            examples_per_second = n * global_batch / call_seconds
            if steady_start is not None:
                step_seconds += call_seconds
            profiler.after(step)
            summaries.write(step, {"loss": loss, metric: acc, "learning_rate": float(state.schedule(step - 1)),
                                   "examples_per_second": examples_per_second})

            last = step == cfg.train_steps or (out_of_time and not preempted)
            if step % cfg.eval_every_steps == 0 or last:
                record = {"step": step, "loss": loss, metric: acc}
                if evaluate is not None:
                    record.update(_evaluate(evaluate, state, summaries, step))
                    stopped_early = state.patience_exhausted(cfg.early_stopping_patience)
                history.append(record)
                summaries.flush()
                log.info("step %d/%d %s (%.0f examples/s)", step, cfg.train_steps,
                         " ".join(f"{k}={v:.4f}" for k, v in record.items() if k not in _NOT_LOGGED),
                         examples_per_second)
            if step % cfg.checkpoint_every_steps == 0 or preempted or stopped_early or last:
                ckpt.save(step)
            if steady_start is None:  # the first host call traced and compiled: start the clock after it
                steady_start, steady_step = time.perf_counter(), step
    finally:
        preemption.close()
        profiler.close()
        summaries.flush()
        ckpt.close()
    loop_seconds = time.perf_counter() - loop_start
    steady = (step - steady_step) * global_batch / (time.perf_counter() - steady_start) if step > steady_step else 0.0
    stepping = (step - steady_step) * global_batch / step_seconds if step_seconds else 0.0
    exported = diagnosis = None
    if preempted:
        log.warning("preempted at step %d; checkpoint saved in %s", step, checkpoint_dir)
    else:
        # After the last checkpoint: it keeps the last weights, so a restart exports the same choice again.
        exported = _choose_export(cfg, state, step)
        log.info("export: %s", exported.describe())
        if cfg.check_input:  # on every worker: the check's reduce is a collective
            diagnosis = check_input(strategy, cfg, train_data, stepping, loop_seconds, step - initial_step)
    stop = ("preempted" if preempted else "early" if stopped_early else "time" if out_of_time and
            step < cfg.train_steps else "budget")
    return TrainResult(state.model, step, initial_step, preempted, stopped_early, history, steady, exported,
                       stepping, loop_seconds, diagnosis, stop)


def _choose_export(cfg: TrainerConfig, state: TrainState, step: int) -> ExportChoice:
    """Load the best evaluation's weights into the model when trainer.export=best, and say which step it is."""
    evals, main = state.evals, state.task.main
    best_step, last_step = int(evals.best_step.numpy()), int(evals.last_step.numpy())
    choice = ExportChoice(policy=cfg.export, step=step, metric=main.label, higher_is_better=main.higher_is_better,
                          value=None, best_step=best_step if best_step >= 0 else None,
                          best_value=float(evals.best_value.numpy()) if best_step >= 0 else None)
    if last_step == step:
        choice = dataclasses.replace(choice, value=float(evals.last_value.numpy()))
    if cfg.export == "best":
        if best_step < 0:
            return dataclasses.replace(choice, why="no evaluation ran (no eval split), so the last step")
        evals.load_best(state.model)
        return dataclasses.replace(choice, step=best_step, value=choice.best_value)
    return choice


def _steps_to_next_boundary(step: int, cfg: TrainerConfig) -> int:
    """Host calls end on a fixed grid of steps_per_execution, eval and checkpoint
    boundaries, so a resumed run makes the same calls and logs the same metrics."""
    return min(cfg.train_steps - step, *(every - step % every for every in
                                         (cfg.steps_per_execution, cfg.eval_every_steps,
                                          cfg.checkpoint_every_steps)))


# The record's keys the progress line leaves out: the step leads it, the eval loss's spread is for the verdict.
_NOT_LOGGED = ("step", "eval_loss_se", "eval_examples")


def _evaluate(evaluate: Callable, state: TrainState, summaries: Summaries, step: int) -> dict[str, float]:
    """One eval pass: its metrics, written to TensorBoard, counted for early stopping and the export choice."""
    eval_loss, squared, count, eval_metric, *main = (float(x) for x in evaluate())
    record = {"eval_loss": eval_loss, f"eval_{state.task.metric_name}": eval_metric}
    if main:
        record[f"eval_{state.task.main.label}"] = main[0]
    summaries.write(step, record)
    state.record_eval(step, eval_loss, main[0] if main else eval_metric)
    # How far the eval loss would move on other rows like these: the overfitting verdict's noise (trainer/overfit.py).
    record["eval_loss_se"] = math.sqrt(max(0.0, squared - eval_loss ** 2) / max(count, 1.0))
    record["eval_examples"] = int(count)
    return record

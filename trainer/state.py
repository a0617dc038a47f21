"""The training state: what the step functions update and a checkpoint restores (model, optimizer, early-stopping
counters), plus the metrics; built once, under the strategy's scope. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

import tensorflow as tf
import tf_keras

from trainer import budget
from trainer.config import TrainerConfig
from trainer.strategy import precision_policy
from trainer.tasks import Task


class WarmupSchedule(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak`, then `peak` times `scale`: a variable the loop lowers when eval loss stalls
    (trainer.decay plateau; TrainState.record_eval), kept in the checkpoint so a resumed run goes on alike."""

    def __init__(self, peak: float, warmup_steps: int, scale: Optional[tf.Variable] = None):
        self.peak, self.warmup_steps, self.scale = peak, warmup_steps, scale

    def __call__(self, step):
        rate = tf.constant(self.peak, tf.float32)
        if self.warmup_steps:
            rate *= tf.minimum(1.0, tf.cast(step + 1, tf.float32) / float(self.warmup_steps))
        return rate if self.scale is None else rate * tf.cast(self.scale, tf.float32)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


@dataclasses.dataclass
class TrainState:
    model: tf_keras.Model
    optimizer: tf_keras.optimizers.legacy.Optimizer  # or a LossScaleOptimizer around one
    schedule: WarmupSchedule
    task: Task  # the loss and the metric
    train_loss: tf_keras.metrics.Mean
    # The task's metric (accuracy, or rmse for regression) from the model's raw outputs;
    # it takes sample weights, which the padded eval batches need.
    train_acc: tf_keras.metrics.Metric
    eval_loss: tf_keras.metrics.Mean
    # The per-example eval loss squared: with eval_loss, the standard error the overfitting verdict weighs a rise
    # against (trainer/overfit.py).
    eval_loss_squared: tf_keras.metrics.Mean
    eval_acc: tf_keras.metrics.Metric
    # Early-stopping state lives in the checkpoint so a resumed run decides alike.
    best_eval_loss: tf.Variable
    evals_without_improvement: tf.Variable
    # The learning rate's factor after the warm-up (trainer.decay) and the loop's seconds so far (the wall-clock
    # cap, trainer.max_train_seconds): in the checkpoint, so a resumed job decays and stops alike.
    lr_scale: Optional[tf.Variable] = None
    trained_seconds: Optional[tf.Variable] = None
    # Halve the rate each time eval loss has gone this many evaluations without improving; 0: never.
    decay_after: int = 0
    # The Evaluator's main metric on the eval split, when the task's metric is not it (binary: AUC).
    eval_main: Optional[tf_keras.metrics.Metric] = None
    # The export choice (trainer.export): the best evaluation so far by the main metric and a copy of
    # its weights, and the last evaluation. All in the checkpoint, so a resumed run exports alike.
    evals: Optional["EvalRecord"] = None

    def checkpointed(self) -> dict:
        """What a checkpoint saves and restores (the metrics restart each host call)."""
        saved = {"model": self.model, "optimizer": self.optimizer, "best_eval_loss": self.best_eval_loss,
                 "evals_without_improvement": self.evals_without_improvement}
        if self.decay_after:  # only then: a step budget's checkpoint is what it always was
            saved["lr_scale"] = self.lr_scale
        if self.trained_seconds is not None:
            saved["trained_seconds"] = self.trained_seconds
        if self.evals is not None:
            saved["evals"] = self.evals
        return saved

    def record_eval(self, step: int, loss: float, main: float) -> None:
        if loss < float(self.best_eval_loss.numpy()):
            self.best_eval_loss.assign(loss)
            self.evals_without_improvement.assign(0)
        else:
            self.evals_without_improvement.assign_add(1)
            stalled = int(self.evals_without_improvement.numpy())
            if self.decay_after and stalled % self.decay_after == 0:
                self.lr_scale.assign(self.lr_scale * budget.DECAY_FACTOR)
        self.evals.record(step, main, self.model)

    def patience_exhausted(self, patience: int) -> bool:
        return bool(patience) and int(self.evals_without_improvement.numpy()) >= patience

    def out_of_time(self, max_seconds: Optional[float]) -> bool:
        return max_seconds is not None and float(self.trained_seconds.numpy()) >= max_seconds


class EvalRecord(tf.Module):
    """The best evaluation by the main metric (a copy of its weights) and the last one, as variables.

    A tie keeps the earlier step: fewer steps on the same score. The copy covers every model
    variable, so the exported model is exactly the one that was evaluated.
    """

    def __init__(self, model: tf_keras.Model, higher_is_better: bool, keep_weights: bool):
        super().__init__(name="evals")
        self.higher_is_better = higher_is_better
        self.best_step = tf.Variable(-1, trainable=False, dtype=tf.int64)
        self.best_value = tf.Variable(math.nan, trainable=False, dtype=tf.float32)  # TPUs hold no float64
        self.last_step = tf.Variable(-1, trainable=False, dtype=tf.int64)
        self.last_value = tf.Variable(math.nan, trainable=False, dtype=tf.float32)  # TPUs hold no float64
        # Created under the strategy's scope (build_state), so mirrored like the model's own.
        self.best_weights = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False) for v in model.weights
                             ] if keep_weights else []

    def record(self, step: int, value: float, model: tf_keras.Model) -> None:
        self.last_step.assign(step)
        self.last_value.assign(value)
        best = float(self.best_value.numpy())
        if math.isnan(value):
            return
        if math.isnan(best) or (value > best if self.higher_is_better else value < best):
            self.best_step.assign(step)
            self.best_value.assign(value)
            for copy, variable in zip(self.best_weights, model.weights):
                copy.assign(variable)

    def load_best(self, model: tf_keras.Model) -> None:
        """Put the best evaluation's weights into `model` (on every replica and worker alike)."""
        if int(self.best_step.numpy()) < 0 or not self.best_weights:
            raise ValueError("no best evaluation to export: the run evaluated nothing")
        for variable, copy in zip(model.weights, self.best_weights):
            variable.assign(copy)


def build_state(strategy: tf.distribute.Strategy, cfg: TrainerConfig,
                model_fn: Callable[[], tf_keras.Model], task: Task) -> TrainState:
    """Seed, then build `model_fn()` and the optimizer under the strategy and precision policy."""
    tf_keras.utils.set_random_seed(cfg.seed)
    if cfg.deterministic:
        tf.config.experimental.enable_op_determinism()
    policy = precision_policy(strategy, cfg.precision)
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        with strategy.scope():
            model = model_fn()
            peak_lr = cfg.learning_rate * (strategy.num_replicas_in_sync if cfg.scale_lr_with_replicas else 1)
            lr_scale = tf.Variable(1.0, trainable=False, dtype=tf.float32)
            decay_after = budget.DECAY_AFTER if cfg.decay == "plateau" else 0
            schedule = WarmupSchedule(peak_lr, cfg.warmup_steps, lr_scale if decay_after else None)
            # The legacy Adam updates each variable with one fused kernel; the new
            # one runs ~10 ops per variable, which made a small model's CPU step
            # 1.6x slower (bench/trainer_bench.py). Both work under every strategy.
            optimizer = tf_keras.optimizers.legacy.Adam(schedule)
            if policy == "mixed_float16":
                optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
            return TrainState(
                model, optimizer, schedule, task,
                train_loss=tf_keras.metrics.Mean("loss"),
                train_acc=task.metric(task.metric_name),
                eval_loss=tf_keras.metrics.Mean("eval_loss"),
                eval_loss_squared=tf_keras.metrics.Mean("eval_loss_squared"),
                eval_acc=task.metric(f"eval_{task.metric_name}"),
                best_eval_loss=tf.Variable(math.inf, trainable=False, dtype=tf.float32),
                evals_without_improvement=tf.Variable(0, trainable=False, dtype=tf.int64),
                lr_scale=lr_scale, decay_after=decay_after,
                trained_seconds=tf.Variable(0.0, trainable=False, dtype=tf.float32)
                if cfg.max_train_seconds is not None else None,
                eval_main=task.main_metric(f"eval_{task.main.label}"),
                evals=EvalRecord(model, task.main.higher_is_better, keep_weights=cfg.export == "best"))
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")  # don't leak into later components

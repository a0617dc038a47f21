"""The custom training loop.

Separate, swappable pieces in the spirit of tensorflow/models' orbit (the
strategy comes in from outside, checkpointing, summaries and preemption are
small classes), and a `train()` that reads top to bottom like nanoGPT's: one
optimizer step is `replica_step`, one host call runs `steps_per_execution` of
them, and the `while` loop around it is everything else that happens.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import signal
import tempfile
import threading
import time
from typing import Callable, Optional

import tensorflow as tf
import tf_keras

from trainer.config import TrainerConfig
from trainer.data import DatasetFn
from trainer.strategy import is_chief, precision_policy

log = logging.getLogger(__name__)


class WarmupSchedule(tf_keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak`, then constant."""

    def __init__(self, peak: float, warmup_steps: int):
        self.peak, self.warmup_steps = peak, warmup_steps

    def __call__(self, step):
        if not self.warmup_steps:
            return tf.constant(self.peak, tf.float32)
        ramp = tf.cast(step + 1, tf.float32) / float(self.warmup_steps)
        return self.peak * tf.minimum(1.0, ramp)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


class Preemption:
    """Turns SIGTERM (what Vertex sends before it preempts) into a flag the loop polls."""

    def __init__(self):
        self.requested = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        log.warning("SIGTERM received: saving a checkpoint after the current host call")
        self.requested = True

    def close(self):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


class Checkpointer:
    """Periodic checkpoints; every worker saves (it is a collective) but only the
    chief's files are kept, the others go to a temp dir. All restore from the chief's."""

    def __init__(self, directory: str, chief: bool, keep: int, **trackables):
        self.directory = directory
        self.checkpoint = tf.train.Checkpoint(**trackables)
        target = directory if chief else tempfile.mkdtemp(prefix="ckpt-worker-")
        self.manager = tf.train.CheckpointManager(self.checkpoint, target, max_to_keep=keep)

    def restore(self) -> Optional[str]:
        latest = tf.train.latest_checkpoint(self.directory)
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            log.info("restored %s", latest)
        return latest

    def save(self, step: int) -> str:
        return self.manager.save(checkpoint_number=step)


class Summaries:
    """TensorBoard scalars from the chief; a no-op writer elsewhere."""

    def __init__(self, logdir: Optional[str], chief: bool):
        self.writer = (tf.summary.create_file_writer(logdir) if logdir and chief
                       else tf.summary.create_noop_writer())

    def write(self, step: int, scalars: dict[str, float]):
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
        self.writer.flush()


@dataclasses.dataclass
class TrainResult:
    model: tf_keras.Model
    step: int
    preempted: bool
    stopped_early: bool
    history: list[dict]  # one entry per evaluation


def train(strategy: tf.distribute.Strategy, cfg: TrainerConfig,
          model_fn: Callable[[], tf_keras.Model],
          train_dataset_fn: DatasetFn, eval_dataset_fn: Optional[DatasetFn],
          checkpoint_dir: str, logdir: Optional[str] = None) -> TrainResult:
    """Train `model_fn()` under `strategy` for cfg.train_steps optimizer steps,
    resuming from the latest checkpoint in `checkpoint_dir` if there is one."""
    tf_keras.utils.set_random_seed(cfg.seed)
    if cfg.deterministic:
        tf.config.experimental.enable_op_determinism()
    policy = precision_policy(strategy, cfg.precision)
    tf_keras.mixed_precision.set_global_policy(policy)
    chief = is_chief(strategy)
    replicas = strategy.num_replicas_in_sync
    k = cfg.gradient_accumulation_steps
    global_batch = cfg.global_batch_size

    with strategy.scope():
        model = model_fn()
        peak_lr = cfg.learning_rate * (replicas if cfg.scale_lr_with_replicas else 1)
        schedule = WarmupSchedule(peak_lr, cfg.warmup_steps)
        optimizer = tf_keras.optimizers.Adam(schedule)
        if policy == "mixed_float16":
            optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
        train_loss = tf_keras.metrics.Mean("loss")
        train_acc = tf_keras.metrics.SparseCategoricalAccuracy("accuracy")
        eval_loss = tf_keras.metrics.Mean("eval_loss")
        eval_acc = tf_keras.metrics.SparseCategoricalAccuracy("eval_accuracy")
        # Early-stopping state lives in the checkpoint so a resumed run decides alike.
        best_eval_loss = tf.Variable(math.inf, trainable=False, dtype=tf.float32)
        evals_without_improvement = tf.Variable(0, trainable=False, dtype=tf.int64)
    tf_keras.mixed_precision.set_global_policy("float32")  # don't leak into later components

    ckpt = Checkpointer(checkpoint_dir, chief, cfg.checkpoints_to_keep, model=model, optimizer=optimizer,
                        best_eval_loss=best_eval_loss, evals_without_improvement=evals_without_improvement)
    ckpt.restore()
    step = int(optimizer.iterations.numpy())

    # Distributed iterators can't be checkpointed (tensorflow#56372): skip the
    # batches consumed before the checkpoint in the deterministic stream.
    def resumed_train_fn(ctx):
        return train_dataset_fn(ctx).skip(step * k * (ctx.num_replicas_in_sync // ctx.num_input_pipelines))
    train_iter = iter(strategy.distribute_datasets_from_function(resumed_train_fn))
    eval_data = eval_dataset_fn and strategy.distribute_datasets_from_function(eval_dataset_fn)

    def per_example_loss(labels, logits):
        return tf_keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)

    @tf.function(jit_compile=cfg.jit_compile)
    def gradients(micro_batches):
        """Forward and backward over k micro-batches: the part XLA/TPU compiles."""
        grads = [tf.zeros_like(v) for v in model.trainable_variables]
        outputs = []
        for features, labels in micro_batches:
            with tf.GradientTape() as tape:
                logits = model(features, training=True)
                losses = per_example_loss(labels, logits)
                loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch)
                if model.losses:
                    loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses)) / k
                if policy == "mixed_float16":
                    loss = optimizer.get_scaled_loss(loss)
            g = tape.gradient(loss, model.trainable_variables)
            if policy == "mixed_float16":
                g = optimizer.get_unscaled_gradients(g)
            grads = [a + b for a, b in zip(grads, g)]
            outputs.append((labels, logits, losses))
        return grads, outputs

    def replica_step(micro_batches):
        grads, outputs = gradients(micro_batches)
        # Sums gradients across replicas; each already divided by the global batch.
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        for labels, logits, losses in outputs:
            train_loss.update_state(losses)
            train_acc.update_state(labels, logits)

    @tf.function
    def train_steps(iterator, num_steps):
        for _ in tf.range(num_steps):
            micro_batches = tuple(next(iterator) for _ in range(k))
            strategy.run(replica_step, args=(micro_batches,))

    def eval_replica(batch):
        features, labels = batch
        logits = model(features, training=False)
        eval_loss.update_state(per_example_loss(labels, logits))
        eval_acc.update_state(labels, logits)

    @tf.function
    def evaluate():
        for batch in eval_data:
            strategy.run(eval_replica, args=(batch,))

    summaries = Summaries(logdir, chief)
    preemption = Preemption()
    history: list[dict] = []
    stopped_early = False
    profiling = False
    try:
        while step < cfg.train_steps and not preemption.requested and not stopped_early:
            # Host calls end on eval/checkpoint boundaries so both happen at
            # the same steps whatever step a run resumed from.
            n = min(cfg.steps_per_execution, cfg.train_steps - step,
                    cfg.eval_every_steps - step % cfg.eval_every_steps,
                    cfg.checkpoint_every_steps - step % cfg.checkpoint_every_steps)
            if cfg.profile_steps and not profiling and cfg.profile_steps[0] <= step < cfg.profile_steps[1]:
                tf.profiler.experimental.start(logdir or checkpoint_dir)
                profiling = True
            start = time.perf_counter()
            train_steps(train_iter, tf.constant(n))
            step += n
            loss, acc = float(train_loss.result()), float(train_acc.result())  # waits for the device
            elapsed = time.perf_counter() - start
            if profiling and step >= cfg.profile_steps[1]:
                tf.profiler.experimental.stop()
                profiling = False
            summaries.write(step, {"loss": loss, "accuracy": acc,
                                   "learning_rate": float(schedule(step - 1)),
                                   "examples_per_second": n * global_batch / elapsed})
            train_loss.reset_state()
            train_acc.reset_state()

            if step % cfg.eval_every_steps == 0 or step == cfg.train_steps:
                record = {"step": step, "loss": loss, "accuracy": acc}
                if eval_data is not None:
                    evaluate()
                    record.update(eval_loss=float(eval_loss.result()), eval_accuracy=float(eval_acc.result()))
                    eval_loss.reset_state()
                    eval_acc.reset_state()
                    summaries.write(step, {"eval_loss": record["eval_loss"],
                                           "eval_accuracy": record["eval_accuracy"]})
                    stopped_early = _early_stop(record["eval_loss"], best_eval_loss,
                                                evals_without_improvement, cfg.early_stopping_patience)
                history.append(record)
                log.info("step %d/%d %s (%.0f examples/s)", step, cfg.train_steps,
                         " ".join(f"{k_}={v:.4f}" for k_, v in record.items() if k_ != "step"),
                         n * global_batch / elapsed)
            if step % cfg.checkpoint_every_steps == 0 or preemption.requested or stopped_early \
                    or step == cfg.train_steps:
                ckpt.save(step)
    finally:
        preemption.close()
        if profiling:
            tf.profiler.experimental.stop()
    if preemption.requested:
        log.warning("preempted at step %d; checkpoint saved in %s", step, checkpoint_dir)
    return TrainResult(model, step, preemption.requested, stopped_early, history)


def _early_stop(loss: float, best: tf.Variable, bad: tf.Variable, patience: int) -> bool:
    if loss < float(best.numpy()):
        best.assign(loss)
        bad.assign(0)
        return False
    bad.assign_add(1)
    return bool(patience) and int(bad.numpy()) >= patience

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
import shutil
import signal
import threading
import time
from typing import Callable, Optional

import tensorflow as tf
import tf_keras

from trainer.config import TrainerConfig
from trainer.data import DatasetFn, per_replica_batch_size
from trainer.strategy import chief_or_temp_dir, is_chief, precision_policy
from trainer.tasks import Task

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
    """Periodic checkpoints. Every worker saves (a collective) into `save_dir`,
    which is `directory` only on the chief; all restore from `directory`."""

    def __init__(self, directory: str, save_dir: str, keep: int, **trackables):
        self.directory = directory
        self.checkpoint = tf.train.Checkpoint(**trackables)
        self.manager = tf.train.CheckpointManager(self.checkpoint, save_dir, max_to_keep=keep)

    def restore(self) -> Optional[str]:
        latest = tf.train.latest_checkpoint(self.directory)
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            log.info("restored %s", latest)
        return latest

    def save(self, step: int) -> str:
        return self.manager.save(checkpoint_number=step)

    def close(self):
        """Drop a non-chief's private copies: only the chief's are ever restored."""
        if self.manager.directory != self.directory:
            shutil.rmtree(self.manager.directory, ignore_errors=True)


class Summaries:
    """TensorBoard scalars from the chief; a no-op writer elsewhere."""

    def __init__(self, logdir: Optional[str], chief: bool):
        self.writer = (tf.summary.create_file_writer(logdir) if logdir and chief
                       else tf.summary.create_noop_writer())

    def write(self, step: int, scalars: dict[str, float]):
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)

    def flush(self):
        self.writer.flush()


class Profiler:
    """Captures a tf.profiler trace over the [start, stop) step window, at host-call granularity."""

    def __init__(self, window: list[int], logdir: str):
        self.window, self.logdir, self.active = window, logdir, False

    def before(self, step: int):
        if self.window and not self.active and self.window[0] <= step < self.window[1]:
            tf.profiler.experimental.start(self.logdir)
            self.active = True

    def after(self, step: int):
        if self.active and step >= self.window[1]:
            self.close()

    def close(self):
        if self.active:
            tf.profiler.experimental.stop()
            self.active = False


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


def per_example_loss(labels, logits):
    return tf_keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def make_gradient_fn(model: tf_keras.Model, optimizer, global_batch_size: int, jit_compile: bool,
                     loss_fn=per_example_loss):
    """Forward and backward over one step's micro-batches on one replica: the part XLA/TPU compiles.

    Returns the summed gradients and, per micro-batch, (labels, logits, losses)
    for the metrics. Each loss is divided by the global batch, so summing the
    gradients over micro-batches and replicas gives the global-batch mean.
    """
    loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)

    # No tensor-dependent Python control flow here: autograph would only spend
    # seconds converting Keras internals.
    @tf.function(jit_compile=jit_compile, autograph=False)
    def gradients(micro_batches):
        grads = [tf.zeros_like(v) for v in model.trainable_variables]
        outputs = []
        for features, labels in micro_batches:
            with tf.GradientTape() as tape:
                logits = model(features, training=True)
                losses = loss_fn(labels, logits)
                loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch_size)
                if model.losses:
                    loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses)) / len(micro_batches)
                if loss_scaling:
                    loss = optimizer.get_scaled_loss(loss)
            g = tape.gradient(loss, model.trainable_variables)
            if loss_scaling:
                g = optimizer.get_unscaled_gradients(g)
            grads = [a + b for a, b in zip(grads, g)]
            outputs.append((labels, logits, losses))
        return grads, outputs

    return gradients


def train(strategy: tf.distribute.Strategy, cfg: TrainerConfig,
          model_fn: Callable[[], tf_keras.Model],
          train_dataset_fn: DatasetFn, eval_dataset_fn: Optional[DatasetFn],
          checkpoint_dir: str, logdir: Optional[str] = None, *, task: Task) -> TrainResult:
    """Train `model_fn()` under `strategy` for cfg.train_steps optimizer steps,
    resuming from the latest checkpoint in `checkpoint_dir` if there is one."""
    replicas = strategy.num_replicas_in_sync
    k = cfg.gradient_accumulation_steps
    global_batch = cfg.global_batch_size
    per_replica_batch_size(global_batch, replicas, k)  # fail before any tracing if it doesn't divide
    tf_keras.utils.set_random_seed(cfg.seed)
    if cfg.deterministic:
        tf.config.experimental.enable_op_determinism()
    policy = precision_policy(strategy, cfg.precision)
    tf_keras.mixed_precision.set_global_policy(policy)
    try:
        with strategy.scope():
            model = model_fn()
            peak_lr = cfg.learning_rate * (replicas if cfg.scale_lr_with_replicas else 1)
            schedule = WarmupSchedule(peak_lr, cfg.warmup_steps)
            # The legacy Adam updates each variable with one fused kernel; the new
            # one runs ~10 ops per variable, which made a small model's CPU step
            # 1.6x slower (bench/trainer_bench.py). Both work under every strategy.
            optimizer = tf_keras.optimizers.legacy.Adam(schedule)
            if policy == "mixed_float16":
                optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
            train_loss = tf_keras.metrics.Mean("loss")
            # The task's metric (accuracy, or rmse for regression) from the model's raw outputs.
            metric = task.metric_name
            train_acc = task.metric(metric)
            eval_loss = tf_keras.metrics.Mean("eval_loss")
            eval_acc = task.metric(f"eval_{metric}")
            # Early-stopping state lives in the checkpoint so a resumed run decides alike.
            best_eval_loss = tf.Variable(math.inf, trainable=False, dtype=tf.float32)
            evals_without_improvement = tf.Variable(0, trainable=False, dtype=tf.int64)
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")  # don't leak into later components

    ckpt = Checkpointer(checkpoint_dir, chief_or_temp_dir(strategy, checkpoint_dir, "checkpoints"),
                        cfg.checkpoints_to_keep, model=model, optimizer=optimizer,
                        best_eval_loss=best_eval_loss, evals_without_improvement=evals_without_improvement)
    ckpt.restore()
    step = initial_step = int(optimizer.iterations.numpy())

    # Distributed iterators can't be checkpointed (tensorflow#56372): skip the
    # batches consumed before the checkpoint in the deterministic stream.
    def resumed_train_fn(ctx):
        return train_dataset_fn(ctx).skip(step * k * (ctx.num_replicas_in_sync // ctx.num_input_pipelines))
    train_iter = iter(strategy.distribute_datasets_from_function(resumed_train_fn))
    eval_data = eval_dataset_fn and strategy.distribute_datasets_from_function(eval_dataset_fn)

    # TPUStrategy compiles the whole replica step with XLA anyway.
    gradients = make_gradient_fn(model, optimizer, global_batch,
                                 cfg.jit_compile and not isinstance(strategy, tf.distribute.TPUStrategy),
                                 task.per_example_loss)

    # Autograph is needed only for the tf.range loops around these; converting
    # them (and the Keras metrics they call) took most of the ~9 s of tracing.
    @tf.autograph.experimental.do_not_convert
    def replica_step(micro_batches):
        grads, outputs = gradients(micro_batches)
        # Sums gradients across replicas; each already divided by the global batch.
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        for labels, logits, losses in outputs:
            train_loss.update_state(losses)
            train_acc.update_state(labels, logits)

    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)

    @tf.function
    def train_steps(iterator, num_steps, stop_requested):
        """One host call: `num_steps` optimizer steps. Returns the mean loss and
        accuracy over them, and whether any worker has asked to stop."""
        train_loss.reset_state()
        train_acc.reset_state()
        for _ in tf.range(num_steps):
            micro_batches = tuple(next(iterator) for _ in range(k))
            strategy.run(replica_step, args=(micro_batches,))
        if multi_worker:
            # SIGTERM may reach one worker only, or between calls: all must stop
            # after the same call or the others hang in their next collective.
            stop_requested = strategy.reduce("SUM", strategy.run(lambda: stop_requested), axis=None)
        return train_loss.result(), train_acc.result(), stop_requested > 0

    @tf.autograph.experimental.do_not_convert
    def eval_replica(batch):
        features, labels = batch
        logits = model(features, training=False)
        eval_loss.update_state(task.per_example_loss(labels, logits))
        eval_acc.update_state(labels, logits)

    @tf.function
    def evaluate():
        eval_loss.reset_state()
        eval_acc.reset_state()
        for batch in eval_data:
            strategy.run(eval_replica, args=(batch,))
        return eval_loss.result(), eval_acc.result()

    summaries = Summaries(logdir, is_chief(strategy))
    profiler = Profiler(cfg.profile_steps, logdir or checkpoint_dir)
    preemption = Preemption()
    history: list[dict] = []
    stopped_early = _patience_exhausted(evals_without_improvement, cfg.early_stopping_patience)
    preempted = False
    steady_start, steady_step = None, step
    try:
        while step < cfg.train_steps and not preempted and not stopped_early:
            n = _steps_to_next_boundary(step, cfg)
            profiler.before(step)
            start = time.perf_counter()
            loss, acc, preempted = train_steps(train_iter, tf.constant(n), tf.constant(float(preemption.requested)))
            loss, acc, preempted = float(loss), float(acc), bool(preempted)  # waits for the device
            step += n
            elapsed = time.perf_counter() - start
            profiler.after(step)
            summaries.write(step, {"loss": loss, metric: acc, "learning_rate": float(schedule(step - 1)),
                                   "examples_per_second": n * global_batch / elapsed})

            if step % cfg.eval_every_steps == 0 or step == cfg.train_steps:
                record = {"step": step, "loss": loss, metric: acc}
                if eval_data is not None:
                    record["eval_loss"], record[f"eval_{metric}"] = (float(x) for x in evaluate())
                    summaries.write(step, {"eval_loss": record["eval_loss"],
                                           f"eval_{metric}": record[f"eval_{metric}"]})
                    _record_eval(record["eval_loss"], best_eval_loss, evals_without_improvement)
                    stopped_early = _patience_exhausted(evals_without_improvement, cfg.early_stopping_patience)
                history.append(record)
                summaries.flush()
                log.info("step %d/%d %s (%.0f examples/s)", step, cfg.train_steps,
                         " ".join(f"{k_}={v:.4f}" for k_, v in record.items() if k_ != "step"),
                         n * global_batch / elapsed)
            if step % cfg.checkpoint_every_steps == 0 or preempted or stopped_early or step == cfg.train_steps:
                ckpt.save(step)
            if steady_start is None:  # the first host call traced and compiled: start the clock after it
                steady_start, steady_step = time.perf_counter(), step
    finally:
        preemption.close()
        profiler.close()
        summaries.flush()
        ckpt.close()
    steady = (step - steady_step) * global_batch / (time.perf_counter() - steady_start) if step > steady_step else 0.0
    if preempted:
        log.warning("preempted at step %d; checkpoint saved in %s", step, checkpoint_dir)
    return TrainResult(model, step, initial_step, preempted, stopped_early, history, steady)


def _steps_to_next_boundary(step: int, cfg: TrainerConfig) -> int:
    """Host calls end on a fixed grid of steps_per_execution, eval and checkpoint
    boundaries, so a resumed run makes the same calls and logs the same metrics."""
    return min(cfg.train_steps - step, *(every - step % every for every in
                                         (cfg.steps_per_execution, cfg.eval_every_steps,
                                          cfg.checkpoint_every_steps)))


def _record_eval(loss: float, best: tf.Variable, bad: tf.Variable) -> None:
    if loss < float(best.numpy()):
        best.assign(loss)
        bad.assign(0)
    else:
        bad.assign_add(1)


def _patience_exhausted(bad: tf.Variable, patience: int) -> bool:
    return bool(patience) and int(bad.numpy()) >= patience

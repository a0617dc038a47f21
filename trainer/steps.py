"""The compiled step functions: everything that runs inside a host call. Why: docs/internals.md."""

from __future__ import annotations

from typing import Callable

import tensorflow as tf
import tf_keras

from trainer.config import TrainerConfig
from trainer.state import TrainState


def make_gradient_fn(model: tf_keras.Model, optimizer, global_batch_size: int, jit_compile: bool,
                     loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]):
    """Forward and backward over one step's micro-batches on one replica: the part XLA/TPU compiles.

    `loss_fn(labels, logits)` is the task's per-example loss (trainer/tasks.py).
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


TrainSteps = Callable[[object, tf.Tensor, tf.Tensor], tuple[tf.Tensor, tf.Tensor, tf.Tensor]]


# Called from the autograph-converted host loops below: unwrapped, autograph
# would also transpile tf_keras's metric code (about a second per trace).
@tf.autograph.experimental.do_not_convert
def _reset(*metrics) -> None:
    for metric in metrics:
        metric.reset_state()


@tf.autograph.experimental.do_not_convert
def _results(*metrics) -> tuple:
    return tuple(metric.result() for metric in metrics)


def make_train_steps(strategy: tf.distribute.Strategy, state: TrainState, cfg: TrainerConfig) -> TrainSteps:
    """The host call `train_steps(iterator, num_steps, stop_requested)`: `num_steps`
    optimizer steps; returns their mean loss and task metric, and for each stop request
    ([preempted, out of time], floats) whether any worker has made it."""
    model, optimizer, k = state.model, state.optimizer, cfg.gradient_accumulation_steps
    train_loss, train_acc = state.train_loss, state.train_acc
    # TPUStrategy compiles the whole replica step with XLA anyway.
    gradients = make_gradient_fn(model, optimizer, cfg.global_batch_size,
                                 cfg.jit_compile and not isinstance(strategy, tf.distribute.TPUStrategy),
                                 state.task.per_example_loss)

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
        _reset(train_loss, train_acc)
        for _ in tf.range(num_steps):
            micro_batches = tuple(next(iterator) for _ in range(k))
            strategy.run(replica_step, args=(micro_batches,))
        if multi_worker:
            # SIGTERM (or the wall-clock cap) may reach one worker only, or between calls: all must
            # stop after the same call or the others hang in their next collective.
            stop_requested = strategy.reduce("SUM", strategy.run(lambda: stop_requested), axis=None)
        return (*_results(train_loss, train_acc), stop_requested > 0)

    return train_steps


def make_evaluate(strategy: tf.distribute.Strategy, state: TrainState,
                  eval_data: tf.distribute.DistributedDataset) -> Callable[[], tuple[tf.Tensor, ...]]:
    """`evaluate()`: over one pass of `eval_data`, the eval loss, the mean of its per-example values squared, the
    examples counted, the task metric and (when it differs) the main metric."""
    model, eval_loss, squared, eval_acc = state.model, state.eval_loss, state.eval_loss_squared, state.eval_acc
    metrics = [eval_acc] + ([state.eval_main] if state.eval_main is not None else [])

    @tf.autograph.experimental.do_not_convert
    def eval_replica(batch):
        # Padding rows (trainer/data.py) weigh 0: the metrics cover exactly the real rows.
        features, labels, weights = batch
        logits = model(features, training=False)
        losses = state.task.per_example_loss(labels, logits)
        eval_loss.update_state(losses, sample_weight=weights)
        squared.update_state(tf.square(losses), sample_weight=weights)
        for metric in metrics:
            metric.update_state(labels, logits, sample_weight=weights)

    @tf.function
    def evaluate():
        _reset(eval_loss, squared, *metrics)
        for batch in eval_data:
            strategy.run(eval_replica, args=(batch,))
        return (eval_loss.result(), squared.result(), eval_loss.count, *_results(*metrics))

    return evaluate

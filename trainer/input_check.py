"""Is training input-bound? The input pipeline alone, measured against training, on the run's own data and strategy.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import logging
import math
import time

import tensorflow as tf

from trainer.config import TrainerConfig

log = logging.getLogger("trainer.loop")

# The steps of input the check reads, as a fraction of the steps the loop trained, in host calls of
# steps_per_execution: the first traces and is not timed, and at least MIN_TIMED_CALLS are timed
# (one call is too short to measure on a busy host).
INPUT_CHECK_FRACTION = 0.03
MIN_TIMED_CALLS = 3
# Input alone at less than this multiple of training throughput: the device waits for input
# (the input and the step overlap, so a small margin is eaten by jitter).
INPUT_BOUND_BELOW = 1.2
# Below this multiple the input keeps up but has little room: a faster device would wait.
HEADROOM_BELOW = 2.0


@dataclasses.dataclass(frozen=True)
class InputDiagnosis:
    input_examples_per_second: float  # the input pipeline alone, steady (after its first call)
    train_examples_per_second: float  # training, steady (TrainResult.step_examples_per_second)
    ratio: float  # input / train
    verdict: str  # input-bound | little headroom | not input-bound
    advice: str  # the likely cause and the config knob; empty when not input-bound
    steps: int  # steps of input read, the first call included
    seconds: float  # the check's own wall time
    overhead: float  # seconds / the training loop's wall time

    def describe(self) -> str:
        text = (f"input pipeline alone {self.input_examples_per_second:,.0f} examples/s vs training "
                f"{self.train_examples_per_second:,.0f} examples/s: ratio {self.ratio:.2f}, {self.verdict}")
        if self.advice:
            text += f". {self.advice}"
        return text + f" (check: {self.steps} steps in {self.seconds:.1f}s, {self.overhead:.1%} of the training loop)"


def verdict(ratio: float, cfg: TrainerConfig, replicas: int) -> tuple[str, str]:
    """The verdict on an input/training ratio and, when input limits training, its likely cause and knob."""
    if ratio >= HEADROOM_BELOW:
        return "not input-bound", ""
    per_replica = cfg.global_batch_size // max(replicas * cfg.gradient_accumulation_steps, 1)
    # The shard is parsed once into host memory (trainer/data.py), so a steady batch costs a gather and
    # tf.data's fixed per-element work: small batches pay that work most often.
    cause = (f"Likely cause: tf.data's fixed cost per batch at {per_replica} examples per replica batch; raise "
             "trainer.global_batch_size (fewer, larger batches)" if per_replica < 256 else
             "Likely cause: the host's CPU gathering and handing batches to the devices; give the trainer a machine "
             "with more vCPUs (vertex.worker_pool.machine_type) or raise trainer.global_batch_size")
    if ratio < INPUT_BOUND_BELOW:
        return "input-bound", cause
    return "little headroom", cause.replace("Likely cause", "A faster device would wait for input; likely cause")


def check_input(strategy: tf.distribute.Strategy, cfg: TrainerConfig, data: tf.distribute.DistributedDataset,
                train_examples_per_second: float, loop_seconds: float, steps: int) -> InputDiagnosis | None:
    """Measure the input alone, for a share of the `steps` the loop trained; None when there is no training
    throughput to compare with."""
    if train_examples_per_second <= 0:
        return None
    calls = 1 + max(MIN_TIMED_CALLS, math.ceil(steps * INPUT_CHECK_FRACTION / cfg.steps_per_execution))
    measured = measure_input(strategy, cfg, data, calls)
    ratio = measured.examples_per_second / train_examples_per_second
    text, advice = verdict(ratio, cfg, strategy.num_replicas_in_sync)
    diagnosis = InputDiagnosis(measured.examples_per_second, train_examples_per_second, ratio, text, advice,
                               calls * cfg.steps_per_execution, measured.seconds,
                               measured.seconds / loop_seconds if loop_seconds else 0.0)
    log.info("input: %s", diagnosis.describe())
    return diagnosis


@dataclasses.dataclass(frozen=True)
class InputSpeed:
    examples_per_second: float  # steady: the calls after the first
    first_call_seconds: float  # tracing, the first steps (and reading and parsing the shard, unless cached)
    seconds: float  # everything


def measure_input(strategy: tf.distribute.Strategy, cfg: TrainerConfig, data: tf.distribute.DistributedDataset,
                  calls: int) -> InputSpeed:
    """Iterate `data` (distributed by `strategy`) as the loop's host calls do, without a model step."""
    spe, k = cfg.steps_per_execution, cfg.gradient_accumulation_steps
    start = time.perf_counter()
    iterator = iter(data)
    with strategy.scope():
        # Each replica adds up its labels here, so every batch reaches its device; on-read sync (like a
        # Keras metric) keeps the adds local: no collective per step, one reduce per call.
        sink = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.SUM, trainable=False)

    def touch(batch):
        _, labels = batch
        sink.assign_add(tf.reduce_sum(tf.cast(labels, tf.float32)))

    @tf.function
    def pull(iterator, num_steps):
        for _ in tf.range(num_steps):
            for _ in range(k):
                strategy.run(touch, args=(next(iterator),))
        return sink.read_value()

    float(pull(iterator, tf.constant(spe)))
    timed = time.perf_counter()
    for _ in range(calls - 1):
        float(pull(iterator, tf.constant(spe)))
    end = time.perf_counter()
    return InputSpeed((calls - 1) * spe * cfg.global_batch_size / (end - timed), timed - start, end - start)

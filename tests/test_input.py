"""The input pipeline's tf.data fixes change its speed, never its data; and the input-bound diagnosis."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf

from trainer import data, synthetic
from trainer.data import TUNED, UNTUNED, InputOptions, record_dataset_fn


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> str:
    return synthetic.write_examples(str(tmp_path_factory.mktemp("input")), 300, shards=3, seed=5)


def _dataset(files: str, options: InputOptions, training: bool, ctx: tf.distribute.InputContext):
    layout = synthetic.layout()
    return record_dataset_fn(files, synthetic.feature_spec(layout), 32, label=layout.label, training=training,
                             seed=3, options=options)(ctx)


def _read(ds: tf.data.Dataset, training: bool, n: int = 12) -> list:
    return [tf.nest.map_structure(lambda t: t.numpy(), b) for b in (ds.take(n) if training else ds)]


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("pipelines", [1, 2, 4], ids=["one-pipeline", "by-file", "by-record"])
def test_tuned_input_yields_exactly_the_untuned_batches(files, training, pipelines):
    ctx = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pipelines - 1,
                                     num_replicas_in_sync=pipelines)
    ds = _dataset(files, TUNED, training, ctx)
    tuned, untuned = _read(ds, training), _read(_dataset(files, UNTUNED, training, ctx), training)
    assert len(tuned) == len(untuned) > 0
    for a, b in zip(tuned, untuned):
        tf.nest.map_structure(np.testing.assert_array_equal, a, b)
    if not training:  # every evaluation reads the same dataset again: from the cache, the same batches
        tf.nest.map_structure(np.testing.assert_array_equal, _read(ds, training), tuned)


def _rows(batch) -> list[tuple]:
    features, label = batch
    columns = [features[k] for k in sorted(features)] + [label]
    return [tuple(tuple(np.asarray(c[i]).ravel().tolist()) for c in columns) for i in range(len(label))]


def test_a_shard_loaded_in_chunks_is_the_shard_loaded_whole(files, monkeypatch):
    """Loading the shard a chunk at a time bounds memory, nothing else: with 7-record chunks (the last
    one padded) the batches equal those of one chunk, and an epoch draws each real row once, never padding."""
    ctx = tf.distribute.InputContext()
    whole = _read(_dataset(files, TUNED, True, ctx), True, n=20)
    monkeypatch.setattr(data, "_PARSE_CHUNK", 7)  # 300 rows: 42 chunks of 7, then 6 rows and 1 padding
    chunked = _read(_dataset(files, TUNED, True, ctx), True, n=20)
    for a, b in zip(whole, chunked, strict=True):
        tf.nest.map_structure(np.testing.assert_array_equal, a, b)
    shard = _rows(next(iter(_dataset(files, TUNED, False, ctx).unbatch().batch(1000)))[:2])
    first_epoch = [row for batch in chunked[:300 // 32] for row in _rows(batch)]
    assert len(set(first_epoch)) == len(first_epoch) == 288 and set(first_epoch) <= set(shard)


def test_the_first_iterator_leaves_the_parsed_shard_in_memory_for_the_next(tmp_path):
    """The input check reads the training dataset again after training (trainer/input_check.py): from
    memory, even when training stopped inside its first draw (here 3 of a draw's 9 batches)."""
    layout = synthetic.layout()
    files = synthetic.write_examples(str(tmp_path / "data"), 300, shards=3, seed=5)
    ds = record_dataset_fn(files, synthetic.feature_spec(layout), 32, label=layout.label, training=True, seed=3)(
        tf.distribute.InputContext())
    first = iter(ds)
    batches = [tf.nest.map_structure(lambda t: t.numpy(), next(first)) for _ in range(3)]
    time.sleep(1.0)  # prefetch's thread completes the cache right after the first draw starts
    del first
    (tmp_path / "data").rename(tmp_path / "gone")  # a second parse would fail: no files
    again = _read(ds, True, n=3)
    for a, b in zip(batches, again, strict=True):
        tf.nest.map_structure(np.testing.assert_array_equal, a, b)


def _slow(dataset_fn, seconds: float):
    """dataset_fn whose every batch takes at least `seconds` more to make."""
    def slowed(ctx):
        def wait(*batch):
            tf.py_function(lambda: time.sleep(seconds), [], [])
            return batch
        return dataset_fn(ctx).map(wait)
    return slowed


def test_the_check_finds_input_that_cannot_feed_training(files):
    from trainer.config import TrainerConfig
    from trainer.input_check import check_input

    layout = synthetic.layout()
    cfg = TrainerConfig(train_steps=100, steps_per_execution=2, global_batch_size=32)
    fn = record_dataset_fn(files, synthetic.feature_spec(layout), 32, label=layout.label, training=True)
    strategy = tf.distribute.get_strategy()
    # 20 ms a batch: about 1,600 examples/s (a little more: prefetch fills its buffer while the first
    # call is timed out), against training said to run at 10,000.
    slow = check_input(strategy, cfg, strategy.distribute_datasets_from_function(_slow(fn, 0.02)),
                       train_examples_per_second=10_000, loop_seconds=10.0, steps=cfg.train_steps)
    assert slow.input_examples_per_second < 2_500 and slow.ratio < 0.25
    assert slow.verdict == "input-bound" and "trainer.global_batch_size" in slow.advice
    assert slow.steps == 8 and 0 < slow.seconds and slow.overhead == pytest.approx(slow.seconds / 10.0)
    # The real pipeline against training at 1 example/s: far from input-bound, and no advice.
    fast = check_input(strategy, cfg, strategy.distribute_datasets_from_function(fn),
                       train_examples_per_second=1.0, loop_seconds=10.0, steps=cfg.train_steps)
    assert fast.verdict == "not input-bound" and not fast.advice and fast.ratio > 100


def test_verdicts_name_the_knob():
    from trainer.config import TrainerConfig
    from trainer.input_check import HEADROOM_BELOW, INPUT_BOUND_BELOW, verdict

    small = TrainerConfig(global_batch_size=32)
    assert verdict(INPUT_BOUND_BELOW - 0.01, small, 1)[0] == "input-bound"
    assert verdict(INPUT_BOUND_BELOW, small, 1)[0] == "little headroom"
    assert verdict(HEADROOM_BELOW, small, 1) == ("not input-bound", "")
    big = TrainerConfig(global_batch_size=4096)
    assert "vertex.worker_pool.machine_type" in verdict(1.0, big, 8)[1]
    assert "512 examples per replica batch" not in verdict(1.0, big, 8)[1]
    assert "32 examples per replica batch" in verdict(1.0, small, 1)[1]

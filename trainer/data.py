"""tf.data input for the training loop: sharded, batched for static shapes, seeded.

The data is already transformed (Transform's materialised examples), so the
host does the parsing and the accelerator sees only dense numeric tensors: no
string ops reach the TPU.
"""

from __future__ import annotations

from typing import Callable, Optional

import tensorflow as tf

DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


def split_label(batch: dict, label: str) -> tuple[dict, tf.Tensor]:
    batch = dict(batch)
    return batch, batch.pop(label)


def record_dataset_fn(file_pattern: str | list[str], feature_spec: dict, global_batch_size: int,
                      *, label: str, training: bool, seed: int = 0, micro_batches: int = 1,
                      drop_remainder: bool = True, max_batches: int = 0) -> DatasetFn:
    """A dataset_fn for `strategy.distribute_datasets_from_function`.

    Each input pipeline reads its shard and yields per-replica micro-batches.
    Training data repeats forever in a seeded, reproducible order, so a resumed
    run that skips the batches already consumed sees exactly what it would have.
    Evaluation data is read once, in file order; `max_batches` > 0 caps the
    batches each input pipeline yields (a quick eval). Batches are (features,
    labels) with the transformed `label` feature split off.
    """
    files = sorted(tf.io.gfile.glob(file_pattern) if isinstance(file_pattern, str)
                   else [f for p in file_pattern for f in tf.io.gfile.glob(p)])
    if not files:
        raise FileNotFoundError(f"no input files match {file_pattern!r}")

    def dataset_fn(ctx: Optional[tf.distribute.InputContext] = None) -> tf.data.Dataset:
        ctx = ctx or tf.distribute.InputContext()
        per_replica = per_replica_batch_size(global_batch_size, ctx.num_replicas_in_sync, micro_batches)
        records = _shard_records(files, ctx)
        if training:
            ds = _shuffled_epochs(records, feature_spec, label, per_replica, seed)
        else:
            ds = records.batch(per_replica, drop_remainder=drop_remainder)
            if max_batches:
                ds = ds.take(max_batches)
            ds = ds.map(lambda x: split_label(tf.io.parse_example(x, feature_spec), label),
                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return ds.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def _shard_records(files: list[str], ctx: tf.distribute.InputContext) -> tf.data.Dataset:
    """This input pipeline's records: whole files when there are enough, else every n-th record."""
    ds = tf.data.Dataset.from_tensor_slices(files)
    by_file = len(files) >= ctx.num_input_pipelines
    if ctx.num_input_pipelines > 1 and by_file:
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"), cycle_length=1)
    if ctx.num_input_pipelines > 1 and not by_file:
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    return ds


def _shuffled_epochs(records: tf.data.Dataset, feature_spec: dict, label: str, batch_size: int,
                     seed: int) -> tf.data.Dataset:
    """Parse the shard once into host memory, then batch endless seeded permutations of it.

    Gathering a batch from parsed columns costs about the same at any batch
    size; re-parsing every batch, or shuffling example by example, grows with
    it and starves a small model on CPU (see bench/trainer_bench.py). The cost:
    the shard must fit in host memory. Each draw is enough whole epochs to fill
    at least one batch (a shard may be smaller than a batch); its last partial
    batch is dropped, so every batch has the static shape TPUs need.
    """
    def batches(serialized):
        columns = tf.io.parse_example(serialized, feature_spec)
        n = tf.size(serialized, out_type=tf.int64)
        epochs_per_draw = (batch_size + n - 1) // n

        def draw(i):
            keys = tf.random.stateless_uniform(tf.stack([epochs_per_draw, n]), seed=tf.stack([seed, i]))
            order = tf.reshape(tf.argsort(keys, axis=1, stable=True), [-1])
            usable = tf.size(order) // batch_size * batch_size
            return tf.data.Dataset.from_tensor_slices(tf.reshape(order[:usable], [-1, batch_size]))

        return tf.data.Dataset.counter().flat_map(draw).map(
            lambda index: split_label({name: tf.gather(column, index) for name, column in columns.items()}, label))

    return records.batch(_WHOLE_SHARD).flat_map(batches)


# A batch size no shard reaches: batching by it yields the whole shard as one element.
_WHOLE_SHARD = 1 << 40


class BatchSizeError(ValueError):
    """trainer.global_batch_size does not split evenly over replicas and micro-batches."""


def per_replica_batch_size(global_batch_size: int, num_replicas: int, micro_batches: int = 1) -> int:
    if global_batch_size % (num_replicas * micro_batches):
        raise BatchSizeError(
            f"trainer.global_batch_size={global_batch_size} must be a multiple of the replica count "
            f"({num_replicas}) times trainer.gradient_accumulation_steps ({micro_batches})")
    return global_batch_size // (num_replicas * micro_batches)

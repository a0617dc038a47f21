"""tf.data input for the training loop: sharded, batched for static shapes, seeded.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from trainer.errors import BatchSizeError

DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class InputOptions:
    """The tf.data fixes (tensorflow.org/guide/data_performance) that measured free here, switchable so
    `make bench` measures the pipeline with and without them side by side (bench/input_bench.py).
    None changes which rows a batch holds or their order, so training is the same either way.
    Tried and measured not to pay on this project's 2-core machine, so not here (docs/trainer.md):
    reading a shard's files whole on parallel threads, gathering training batches on parallel threads."""
    # Keep the parsed, padded eval batches in memory after the first evaluation; the training shard
    # is held in memory already, so the eval split fits by the same assumption.
    cache_eval: bool = True


TUNED, UNTUNED = InputOptions(), InputOptions(cache_eval=False)


def split_label(batch: dict, label: str) -> tuple[dict, tf.Tensor]:
    batch = dict(batch)
    return batch, batch.pop(label)


def list_files(file_pattern: str | list[str]) -> list[str]:
    """The files a glob, or a list of globs (in their order), matches: each glob's sorted, so every reader,
    on every host, sees one order and so one shard per input pipeline."""
    patterns = [file_pattern] if isinstance(file_pattern, str) else file_pattern
    return [f for p in patterns for f in sorted(tf.io.gfile.glob(p))]


def label_moments(file_pattern: str | list[str], label_key: str, log: bool = False) -> tuple[float, float]:
    """Mean and standard deviation of the label (of log(1 + max(label, 0)) with `log`, as trainer/tasks.py's
    Regression learns it) over Transform's (gzipped) training records."""
    spec = {label_key: tf.io.FixedLenFeature([], tf.float32)}
    ds = tf.data.TFRecordDataset(list_files(file_pattern), compression_type="GZIP").batch(4096).map(
        lambda x: tf.io.parse_example(x, spec)[label_key])
    n, total, squares = 0, 0.0, 0.0
    for batch in ds.as_numpy_iterator():
        values = batch.astype(np.float64)
        if log:
            values = np.log1p(np.maximum(values, 0.0))
        n, total, squares = n + values.size, total + values.sum(), squares + np.square(values).sum()
    if not n:
        raise ValueError(f"no training labels in {file_pattern!r}")
    mean = total / n
    return mean, float(np.sqrt(max(squares / n - mean * mean, 0.0)))


def record_dataset_fn(file_pattern: str | list[str], feature_spec: dict, global_batch_size: int,
                      *, label: str, training: bool, seed: int = 0, micro_batches: int = 1,
                      max_batches: int = 0, options: InputOptions = TUNED) -> DatasetFn:
    """A dataset_fn for `strategy.distribute_datasets_from_function`.

    Each input pipeline reads its shard and yields per-replica micro-batches.
    Training data repeats forever in a seeded, reproducible order, so a resumed
    run that skips the batches already consumed sees exactly what it would have.
    Evaluation data is read once, in file order, as (features, labels, weights)
    batches padded to the static shape TPUs need (see _padded_eval_batches);
    with several input pipelines (hosts), each yields as many batches as the
    largest shard needs, so every step has a batch on every replica
    (eval_batches_per_pipeline). `max_batches` > 0 caps the batches each input
    pipeline yields (a quick eval). `label` is the transformed label feature,
    split off as the labels.
    """
    files = list_files(file_pattern)
    if not files:
        raise FileNotFoundError(f"no input files match {file_pattern!r}")
    counts: list[int] = []  # records per file, counted once, for the first multi-pipeline eval dataset

    def dataset_fn(ctx: Optional[tf.distribute.InputContext] = None) -> tf.data.Dataset:
        ctx = ctx or tf.distribute.InputContext()
        per_replica = per_replica_batch_size(global_batch_size, ctx.num_replicas_in_sync, micro_batches)
        records = _shard_records(files, ctx)
        if training:
            ds = _shuffled_epochs(records, feature_spec, label, per_replica, seed)
        else:
            total = None
            if ctx.num_input_pipelines > 1:
                counts[:] = counts or record_counts(files)
                total = eval_batches_per_pipeline(counts, ctx, per_replica, max_batches)
            ds = _padded_eval_batches(records, feature_spec, label, per_replica,
                                      ctx.num_replicas_in_sync // ctx.num_input_pipelines, max_batches, total)
            if options.cache_eval:
                ds = ds.cache()
        return ds.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def resumed(dataset_fn: DatasetFn, step: int, micro_batches: int = 1) -> DatasetFn:
    """`dataset_fn` after `step` optimizer steps. Distributed iterators can't be checkpointed
    (tensorflow#56372), so the deterministic stream skips what each input pipeline fed: every step
    takes `micro_batches` batches for each of the pipeline's replicas (num_replicas_in_sync /
    num_input_pipelines: a host's cores on a TPU pod, so a host skips only its own batches)."""
    def resumed_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        per_pipeline = step * micro_batches * (ctx.num_replicas_in_sync // ctx.num_input_pipelines)
        return dataset_fn(ctx).skip(per_pipeline)
    return resumed_fn


def _shard_files(ctx: tf.distribute.InputContext, num_files: int) -> bool:
    """Whether input pipelines split the files between them; with fewer files than pipelines, the records."""
    return num_files >= ctx.num_input_pipelines


def _shard_records(files: list[str], ctx: tf.distribute.InputContext) -> tf.data.Dataset:
    """This input pipeline's records: whole files when there are enough, else every n-th record."""
    ds = tf.data.Dataset.from_tensor_slices(files)
    by_file = _shard_files(ctx, len(files))
    if ctx.num_input_pipelines > 1 and by_file:
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"), cycle_length=1)
    if ctx.num_input_pipelines > 1 and not by_file:
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    return ds


def record_counts(files: list[str]) -> list[int]:
    """The records in each (gzipped) file: one read of them, on the host that builds the dataset."""
    return [int(tf.data.TFRecordDataset(f, compression_type="GZIP").reduce(np.int64(0), lambda n, _: n + 1))
            for f in files]


def eval_batches_per_pipeline(counts: list[int], ctx: tf.distribute.InputContext, batch_size: int,
                              max_batches: int = 0) -> int:
    """The eval batches every input pipeline yields, so each step has a batch for every replica of every
    pipeline: the most any pipeline's shard (as _shard_records cuts it from files of `counts` records)
    needs, capped at `max_batches` > 0, rounded up to whole steps of the pipeline's replicas.

    With uneven shards a TPU pod's distributed iterator would go on while any host has data and give the
    others empty dummy batches (tensorflow/python/distribute/input_lib.py, get_next_as_optional), a
    shape the compiled step does not take; equal counts of static batches never need one."""
    n = ctx.num_input_pipelines
    if _shard_files(ctx, len(counts)):
        rows = [sum(counts[p::n]) for p in range(n)]
    else:  # shard(n, p) over the records in file order keeps records p, p + n, ...
        rows = [len(range(p, sum(counts), n)) for p in range(n)]
    batches = [-(-r // batch_size) for r in rows]
    most = max(min(b, max_batches) if max_batches else b for b in batches)
    replicas = ctx.num_replicas_in_sync // n
    return -(-most // replicas) * replicas


def _padded_eval_batches(records: tf.data.Dataset, feature_spec: dict, label: str, batch_size: int,
                         replicas: int, max_batches: int, total: Optional[int] = None) -> tf.data.Dataset:
    """Every eval row exactly once, in batches of the static size TPUs need.

    Dropping the last partial batch (86 eval rows at 64 per replica lose 22)
    would bias every evaluation; instead each row carries a weight, the last
    batch is padded to `batch_size` with weight-0 rows, and all-padding
    batches follow until each of this pipeline's `replicas` gets a batch in the
    last step, or, given `total`, until there are `total` batches (what every
    input pipeline yields: eval_batches_per_pipeline). The eval metrics weight
    by it, so they equal the metrics over exactly the real rows.
    """
    def weighted(serialized):
        features, labels = split_label(tf.io.parse_example(serialized, feature_spec), label)
        real = tf.shape(labels)[0]
        weights = tf.ones([real], tf.float32)

        def pad(t):
            padded = tf.pad(t, [[0, batch_size - real]] + [[0, 0]] * (t.shape.rank - 1))
            return tf.ensure_shape(padded, [batch_size, *t.shape[1:]])

        return tf.nest.map_structure(pad, (features, labels, weights))

    ds = records.batch(batch_size)
    if max_batches:
        ds = ds.take(max_batches)
    ds = ds.map(weighted, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    empty = tf.nest.map_structure(lambda spec: tf.zeros(spec.shape, spec.dtype), ds.element_spec)
    if total is not None:
        return ds.concatenate(tf.data.Dataset.from_tensors(empty).repeat()).take(total)
    if replicas == 1:
        return ds
    fillers = tf.data.Dataset.from_tensors((empty, True)).repeat(replicas - 1)

    def keep(count, element):
        batch, filler = element
        kept = tf.logical_or(tf.logical_not(filler), count % replicas != 0)
        return count + tf.cast(kept, tf.int64), (batch, kept)

    return (ds.map(lambda *batch: (batch, False)).concatenate(fillers)
            .scan(tf.constant(0, tf.int64), keep)
            .filter(lambda batch, kept: kept).map(lambda batch, kept: batch))


def _shuffled_epochs(records: tf.data.Dataset, feature_spec: dict, label: str, batch_size: int,
                     seed: int) -> tf.data.Dataset:
    """Parse the shard once into host memory, then batch endless seeded permutations of it.

    Gathering a batch from parsed columns costs about the same at any batch
    size; re-parsing every batch, or shuffling example by example, grows with
    it and starves a small model on CPU (see bench/trainer_bench.py). The cost:
    the shard must fit in host memory. Each draw is enough whole epochs to fill
    at least one batch (a shard may be smaller than a batch); its last partial
    batch is dropped, so every batch has the static shape TPUs need. The parsed
    shard is a cached dataset, so another iterator of the same dataset (the
    input check, trainer/input_check.py) reads it from memory instead of parsing again.
    """
    def parse(serialized):
        """A chunk's columns, padded to _PARSE_CHUNK rows (only the last chunk is short) so chunks stack."""
        size = tf.size(serialized, out_type=tf.int64)
        columns = tf.io.parse_example(serialized, feature_spec)
        return {name: tf.pad(c, [[0, _PARSE_CHUNK - size]] + [[0, 0]] * (c.shape.rank - 1))
                for name, c in columns.items()}, size

    def join(columns, sizes):
        """The stacked chunks as one set of columns; the padding is at the end, never drawn."""
        return {name: tf.reshape(c, [-1, *c.shape[2:]]) for name, c in columns.items()}, tf.reduce_sum(sizes)

    def draw(i, parsed):
        """Draw i: the batches of enough seeded permutations of the shard to fill one batch or more."""
        columns, n = parsed
        epochs_per_draw = (batch_size + n - 1) // n
        keys = tf.random.stateless_uniform(tf.stack([epochs_per_draw, n]), seed=tf.stack([seed, i]))
        order = tf.reshape(tf.argsort(keys, axis=1, stable=True), [-1])
        usable = tf.size(order) // batch_size * batch_size
        return tf.data.Dataset.from_tensor_slices(tf.reshape(order[:usable], [-1, batch_size])).map(
            lambda index: split_label({name: tf.gather(column, index) for name, column in columns.items()}, label))

    # Parsed a chunk at a time, so the serialized shard is never held whole (it took ~12x the parsed
    # columns' memory). The cache is complete only once an iterator reaches its end; draws are pulled
    # lazily and a large shard's first draw outlasts training, so prefetch(1) asks repeat() for the
    # next element at once: it reaches the end of the one-element cache, which completes it.
    # Fusing parse with the batch after it would allocate for _WHOLE_SHARD rows up front.
    unfused = tf.data.Options()
    unfused.experimental_optimization.map_and_batch_fusion = False
    chunks = records.batch(_PARSE_CHUNK).map(parse)
    shard = chunks.batch(_WHOLE_SHARD).map(join).cache().repeat().prefetch(1).with_options(unfused)
    return tf.data.Dataset.zip((tf.data.Dataset.counter(), shard)).flat_map(draw)


# A batch size no shard reaches: batching by it yields the whole shard as one element.
_WHOLE_SHARD = 1 << 40
# Records parsed at a time when loading a shard: large enough that per-chunk overhead is nil.
_PARSE_CHUNK = 1 << 16


def per_replica_batch_size(global_batch_size: int, num_replicas: int, micro_batches: int = 1) -> int:
    if global_batch_size % (num_replicas * micro_batches):
        raise BatchSizeError(
            f"trainer.global_batch_size={global_batch_size} must be a multiple of the replica count "
            f"({num_replicas}) times trainer.gradient_accumulation_steps ({micro_batches})")
    return global_batch_size // (num_replicas * micro_batches)

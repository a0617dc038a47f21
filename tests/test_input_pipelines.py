"""The input as a TPU pod feeds it: one input pipeline per host, each built by our dataset_fn from the
InputContext TPUStrategy.distribute_datasets_from_function gives it (num_input_pipelines = hosts,
num_replicas_in_sync = every host's cores), on generated TFRecords."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf

from trainer import synthetic
from trainer.data import record_dataset_fn, resumed
from trainer.errors import BatchSizeError

HOSTS = 4
LAYOUT = synthetic.layout()
SPEC = synthetic.feature_spec(LAYOUT)


def context(pipeline: int, cores_per_host: int) -> tf.distribute.InputContext:
    return tf.distribute.InputContext(num_input_pipelines=HOSTS, input_pipeline_id=pipeline,
                                      num_replicas_in_sync=HOSTS * cores_per_host)


def row(features: dict, label, i: int) -> tuple:
    """A record's values: the synthetic numbers are random normals, so they tell records apart."""
    return tuple(float(features[n][i]) for n in LAYOUT.dense) + (int(label[i]),)


def every_record(pattern) -> collections.Counter:
    """The records as they are in the files, read without the trainer's input code."""
    files = [f for p in ([pattern] if isinstance(pattern, str) else pattern) for f in tf.io.gfile.glob(p)]
    batch = next(iter(tf.data.TFRecordDataset(files, compression_type="GZIP").batch(100_000)))
    parsed = tf.io.parse_example(batch, SPEC)
    features, label = {n: parsed[n].numpy() for n in LAYOUT.dense}, parsed[LAYOUT.label].numpy()
    return collections.Counter(row(features, label, i) for i in range(len(label)))


def eval_batches(pattern, global_batch: int, pipeline: int, cores: int, max_batches: int = 0) -> list:
    fn = record_dataset_fn(pattern, SPEC, global_batch, label=LAYOUT.label, training=False, max_batches=max_batches)
    return [tf.nest.map_structure(lambda t: t.numpy(), b) for b in fn(context(pipeline, cores))]


def real_rows(batches: list) -> collections.Counter:
    return collections.Counter(row(f, label, i) for f, label, weights in batches
                               for i in range(len(label)) if weights[i] == 1.0)


@pytest.fixture(scope="module")
def by_file(tmp_path_factory) -> str:
    """8 files: at least one per host, so hosts split the files."""
    return synthetic.write_examples(str(tmp_path_factory.mktemp("by-file")), 203, shards=8, seed=11)


@pytest.fixture(scope="module")
def by_record(tmp_path_factory) -> str:
    """3 files for 4 hosts: hosts split the records."""
    return synthetic.write_examples(str(tmp_path_factory.mktemp("by-record")), 150, shards=3, seed=12)


@pytest.fixture(scope="module")
def uneven(tmp_path_factory) -> list[str]:
    """5 files of 30 records and 3 of 2: host 0 gets 60 records, the others 32 each."""
    big = synthetic.write_examples(str(tmp_path_factory.mktemp("big")), 150, shards=5, seed=13)
    small = synthetic.write_examples(str(tmp_path_factory.mktemp("small")), 6, shards=3, seed=14)
    return [big, small]


@pytest.mark.parametrize("shards", ["by_file", "by_record"])
def test_each_host_reads_only_its_shard_and_together_every_record(shards, request):
    pattern = request.getfixturevalue(shards)
    # Eval reads each shard once: the shards are disjoint and cover every record exactly once.
    shard = [real_rows(eval_batches(pattern, 32, p, cores=2)) for p in range(HOSTS)]
    assert sum(shard, collections.Counter()) == every_record(pattern)
    assert all(set(shard[a]).isdisjoint(shard[b]) for a in range(HOSTS) for b in range(a + 1, HOSTS))
    # Training draws from the same shard only.
    for p in range(HOSTS):
        fn = record_dataset_fn(pattern, SPEC, 32, label=LAYOUT.label, training=True, seed=3)
        drawn = {row(f, label, i) for f, label in fn(context(p, 2)).take(20).as_numpy_iterator()
                 for i in range(len(label))}
        assert drawn <= set(shard[p]) and len(drawn) > len(shard[p]) // 2


def test_the_global_batch_divides_over_every_hosts_cores(by_file):
    # 4 hosts x 4 cores = 16 replicas: a global batch of 64 is 4 examples per core, on every host.
    for p in range(HOSTS):
        fn = record_dataset_fn(by_file, SPEC, 64, label=LAYOUT.label, training=True, seed=3)
        assert {len(label) for _, label in fn(context(p, 4)).take(8).as_numpy_iterator()} == {4}
        assert {len(label) for _, label, _ in eval_batches(by_file, 64, p, cores=4)} == {4}
    with pytest.raises(BatchSizeError, match=r"global_batch_size=40 must be a multiple of the replica count \(16\)"):
        record_dataset_fn(by_file, SPEC, 40, label=LAYOUT.label, training=True)(context(0, 4))


@pytest.mark.parametrize("case", ["uneven-files", "uneven-records", "capped"])
def test_every_host_yields_the_same_eval_batches_so_no_host_waits(case, request, uneven, by_record):
    # uneven-files: 60 records on host 0 and 32 on the others, at 4 per core on 2 cores: 15 and 8 batches
    # of real rows. uneven-records: 38, 38, 37, 37 records at 37 per core on 1 core: 2, 2, 1, 1.
    pattern, global_batch, cores, cap = {"uneven-files": (uneven, 32, 2, 0), "uneven-records": (by_record, 148, 1, 0),
                                         "capped": (uneven, 32, 2, 3)}[case]
    batches = [eval_batches(pattern, global_batch, p, cores, max_batches=cap) for p in range(HOSTS)]
    counts = [len(b) for b in batches]
    assert len(set(counts)) == 1 and counts[0] % cores == 0, counts  # whole steps, the same on every host
    assert counts[0] == {"uneven-files": 16, "uneven-records": 2, "capped": 4}[case]
    shapes = {tuple(t.shape) for b in batches for batch in b for t in tf.nest.flatten(batch)}
    assert {s[0] for s in shapes} == {global_batch // (HOSTS * cores)}  # static: filler batches too
    rows = sum((real_rows(b) for b in batches), collections.Counter())
    if cap:  # each host's first 3 batches of real rows, no more
        assert all(np.sum(batch[2]) == 0 for b in batches for batch in b[3:])
        assert sum(rows.values()) == sum(float(np.sum(batch[2])) for b in batches for batch in b[:3])
    else:
        assert rows == every_record(pattern)  # every record once; the rest of each host's batches weigh 0


def test_a_resumed_host_skips_the_batches_it_fed_not_the_whole_pods(by_file):
    # 4 hosts x 2 cores, 2 micro-batches per step, resumed after 3 steps: each host fed 3 x 2 x 2 = 12 batches.
    steps, micro_batches, cores = 3, 2, 2
    fn = record_dataset_fn(by_file, SPEC, 32, label=LAYOUT.label, training=True, seed=3, micro_batches=micro_batches)
    for p in range(HOSTS):
        stream = fn(context(p, cores)).as_numpy_iterator()
        fed = [next(stream) for _ in range(steps) for _ in range(micro_batches) for _ in range(cores)]
        after = [next(stream) for _ in range(3)]
        again = list(resumed(fn, steps, micro_batches)(context(p, cores)).take(3).as_numpy_iterator())
        assert len(fed) == 12
        for a, b in zip(after, again):
            tf.nest.map_structure(np.testing.assert_array_equal, a, b)

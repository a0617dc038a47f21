"""In-loop evaluation counts every eval row, in the static-shape batches TPUs need.

86 eval rows at 8 per replica on 2 replicas: 5 full steps and 6 rows left
over. Dropping the remainder (what TPUs forced before) loses those 6; the
eval input pads them to a full batch with weight-0 rows instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROWS, GLOBAL_BATCH, REPLICAS = 86, 16, 2


@pytest.fixture(scope="module")
def eval_files(tmp_path_factory) -> str:
    from trainer import synthetic

    return synthetic.write_examples(str(tmp_path_factory.mktemp("eval")), ROWS, shards=2, seed=3)


def _batches(pattern: str, pipelines: int, pipeline_id: int) -> list:
    import tensorflow as tf

    from trainer import synthetic
    from trainer.data import record_dataset_fn

    layout = synthetic.layout()
    fn = record_dataset_fn(pattern, synthetic.feature_spec(layout), GLOBAL_BATCH, label=layout.label, training=False)
    return list(fn(tf.distribute.InputContext(pipelines, pipeline_id, REPLICAS)))


def test_every_row_once_in_full_batches_and_whole_steps(eval_files):
    import numpy as np
    import tensorflow as tf

    from trainer import synthetic

    batches = _batches(eval_files, 1, 0)
    per_replica = GLOBAL_BATCH // REPLICAS
    assert all(labels.shape == [per_replica] for _, labels, _ in batches)  # static, like drop_remainder
    assert len(batches) % REPLICAS == 0  # every replica has a batch in the last step
    weights = np.concatenate([w.numpy() for _, _, w in batches])
    assert weights.sum() == ROWS and set(weights) == {0.0, 1.0}
    real = np.concatenate([labels.numpy()[w.numpy() == 1] for _, labels, w in batches])
    every = [int(tf.train.Example.FromString(r.numpy()).features.feature[synthetic.layout().label].int64_list.value[0])
             for r in tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(eval_files)), compression_type="GZIP")]
    assert real.tolist() == every


def test_each_worker_pads_its_own_shard(eval_files):
    # Two input pipelines (workers) of one replica each: no filler batches, 43 rows each.
    totals = [sum(float(w.numpy().sum()) for _, _, w in _batches(eval_files, 2, i)) for i in range(2)]
    assert totals == [43.0, 43.0]


EVALUATE = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from trainer import synthetic
from trainer.config import TrainerConfig
from trainer.data import record_dataset_fn, split_label
from trainer.model import build_model
from trainer.state import build_state
from trainer.steps import make_evaluate
from trainer.tasks import Multiclass

pattern, batch = sys.argv[1], int(sys.argv[2])
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
layout, task = synthetic.layout(), Multiclass(synthetic.NUM_CLASSES)
state = build_state(strategy, TrainerConfig(train_steps=1, global_batch_size=batch, learning_rate=0.01),
                    lambda: build_model(layout, synthetic.NUM_CLASSES, [8]), task)
fn = record_dataset_fn(pattern, synthetic.feature_spec(layout), batch, label=layout.label, training=False)
loss, squared, count, acc = make_evaluate(strategy, state, strategy.distribute_datasets_from_function(fn))()
records = tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(pattern)), compression_type="GZIP").batch(10_000)
features, labels = split_label(tf.io.parse_example(next(iter(records)), synthetic.feature_spec(layout)), layout.label)
logits = state.model(features, training=False)
exact_acc = tf.reduce_mean(tf.cast(tf.argmax(logits, -1) == labels, tf.float32))
losses = task.per_example_loss(labels, logits)
print(json.dumps({"loss": float(loss), "squared": float(squared), "count": float(count),
                  "accuracy": float(acc), "rows": int(labels.shape[0]),
                  "exact_loss": float(tf.reduce_mean(losses)), "exact_squared": float(tf.reduce_mean(losses ** 2)),
                  "exact_accuracy": float(exact_acc)}))
"""


def test_mirrored_eval_over_padded_batches_equals_the_exact_metrics(eval_files):
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", EVALUATE, eval_files, str(GLOBAL_BATCH)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    assert metrics["rows"] == ROWS
    assert metrics["loss"] == pytest.approx(metrics["exact_loss"], rel=1e-6)
    # The eval loss's spread (the overfitting verdict's standard error) over the real rows alone, both replicas'.
    assert metrics["count"] == ROWS and metrics["squared"] == pytest.approx(metrics["exact_squared"], rel=1e-5)
    assert metrics["accuracy"] == pytest.approx(metrics["exact_accuracy"], abs=1e-7)

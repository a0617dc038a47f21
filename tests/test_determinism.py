"""Two full runs from the same snapshot, caching off: identical eval metrics and model weights."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from pipeline.cli import main
from pipeline.config import load_config
from pipeline.errors import EXIT_NOT_PUSHED, EXIT_NOTHING_NEW, EXIT_OK
from pipeline.runs.mlmd import open_store
from pipeline.runs.summary import summarize
from tests.bad_inputs import header_only
from tests.conftest import CONFIG

pytestmark = pytest.mark.e2e


def _output(store, execution_id: int, key: str):
    events = [e for e in store.get_events_by_execution_ids([execution_id])
              if e.type == e.OUTPUT and e.path.steps[0].key == key]
    return store.get_artifacts_by_id([events[0].artifact_id])[0]


def _transformed(metadata_path: str, transform_execution_id: int) -> list[dict]:
    """Transform's materialised rows, as {feature: values} (serialized bytes order map entries arbitrarily)."""
    uri = _output(open_store(metadata_path), transform_execution_id, "transformed_examples").uri
    rows = []
    for split in ("train", "eval"):
        for record in tf.data.TFRecordDataset(tf.io.gfile.glob(f"{uri}/Split-{split}/*"), compression_type="GZIP"):
            features = tf.train.Example.FromString(record.numpy()).features.feature
            rows.append({k: list(v.float_list.value) + list(v.int64_list.value) for k, v in features.items()})
    return rows


def _weights(metadata_path: str, trainer_execution_id: int) -> dict[str, np.ndarray]:
    model = _output(open_store(metadata_path), trainer_execution_id, "model")
    reader = tf.train.load_checkpoint(f"{model.uri}/Format-Serving/variables/variables")
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not name.startswith("_CHECKPOINTABLE_OBJECT_GRAPH")}


def test_rerun_from_the_same_snapshot_is_identical(safety_run, tmp_path):
    first = safety_run.summary
    # The source changes after the first run; pinning the snapshot (by a digest prefix) must not see it.
    changed = tmp_path / "penguins"
    changed.mkdir()
    (changed / "penguins.csv").write_text(header_only())
    overrides = safety_run.overrides("pipeline.enable_cache=false", f"data.input_dir={changed}")
    args = [a for o in overrides for a in ("--set", o)]
    # Bit-identical retraining may export byte-identical files: then nothing new is pushed (exit 4).
    assert main(["run", "--config", CONFIG, "--snapshot", first.snapshot_digest[:12], *args]) in (
        EXIT_OK, EXIT_NOT_PUSHED, EXIT_NOTHING_NEW)
    config = load_config(CONFIG, overrides)
    second = summarize(config.pipeline.metadata_path, config.pipeline.name)
    assert second.snapshot_digest == first.snapshot_digest
    assert all(c.state == "ran" for c in second.components), second.components
    assert second.metrics == first.metrics and second.metrics["example_count"] > 0
    assert second.exported == first.exported and first.exported.policy == "best"
    path = config.pipeline.metadata_path
    # Transform's analyzers (means, variances) must not depend on Beam's timing.
    assert _transformed(path, first.component("Transform").execution_id) == _transformed(
        path, second.component("Transform").execution_id)
    a = _weights(path, first.component("Trainer").execution_id)
    b = _weights(path, second.component("Trainer").execution_id)
    assert len(a) >= 6 and a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), f"{name} differs between the two runs"

"""The real pipeline, LocalDagRunner + MLMD on SQLite, on the bundled data: the penguins
CSV exactly as the palmerpenguins package ships it, NA for missing values."""

import io
import json
import os

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from bench import scoring
from pipeline.dag.evaluation import bounds
from pipeline.local.runner import run_local
from pipeline.runs.summary import ACCURACY, summarize
from trainer.export import SERVING_SIGNATURE, TRANSFORM_SIGNATURE

pytestmark = pytest.mark.e2e

ALL_COMPONENTS = {"Snapshot", "CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "DataGate",
                  "DriftGate", "Transform", "ServingModel", "Trainer", "Evaluator", "Pusher"}
# Functions tf_keras adds to a SavedModel when it saves the model's call traces.
KERAS_TRACES = ("layer_call_and_return_conditional_losses", "_wrapped_model")


def test_every_component_ran_and_a_blessed_model_was_pushed(pipeline_run):
    config, summary, console = pipeline_run
    assert {c.name for c in summary.components} == ALL_COMPONENTS
    assert all(c.state == "ran" for c in summary.components), summary.components
    assert summary.blessed is True
    assert summary.metrics[ACCURACY] >= bounds(config)[0] == 0.9
    # TF Serving layout: <serving_dir>/<integer version>/saved_model.pb
    assert os.path.dirname(summary.pushed_path) == config.pipeline.serving_dir
    assert summary.pushed_version.isdigit()
    assert os.path.isfile(os.path.join(summary.pushed_path, "saved_model.pb"))
    # The console showed progress per component and the final summary.
    for name in ("CsvExampleGen", "Transform", "Trainer", "Evaluator", "Pusher"):
        assert f"> {name} ..." in console
    assert "blessed: yes" in console and summary.pushed_path in console
    # The features the run used, said before it started.
    assert "label: species (multiclass)" in console and "not used: year" in console


def test_the_na_cells_of_the_shipped_file_became_missing_values(pipeline_run):
    config, summary, _ = pipeline_run
    manifest = json.loads(open(os.path.join(config.snapshots_root, summary.snapshot_digest, "manifest.json")).read())
    [entry] = manifest["files"]
    assert manifest["missing_values"] == sorted(config.data.missing_values)
    # 2 rows miss every measurement, 11 miss the sex: 19 NA cells in all.
    assert entry["emptied"] == {"bill_length_mm": 2, "bill_depth_mm": 2, "flipper_length_mm": 2, "body_mass_g": 2,
                                "sex": 11}


def _function_names(saved_model_dir) -> list[str]:
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(open(os.path.join(saved_model_dir, "saved_model.pb"), "rb").read())
    return [f.signature.name for f in proto.meta_graphs[0].graph_def.library.function]


def test_pushed_model_serves_raw_examples_accurately(pipeline_run):
    config, summary, _ = pipeline_run
    loaded = tf.saved_model.load(summary.pushed_path)
    assert set(loaded.signatures) == {SERVING_SIGNATURE, TRANSFORM_SIGNATURE}
    # trainer/export.py keeps tf_keras from tracing the model and every layer into the export (internal API):
    # a plain tf_keras export has __inference_<layer>_layer_call_and_return_conditional_losses_<n> and
    # __inference__wrapped_model_<n> functions.
    assert not [n for n in _function_names(summary.pushed_path) if any(t in n for t in KERAS_TRACES)]
    rows = scoring.examples(config.pipeline.pipeline_root)
    truth = [scoring.value(r, "species") for r in rows]
    # What a TF Serving client sends: serialized tf.Examples without the label (nor the unused year).
    out = scoring.serve(summary.pushed_path, rows, drop=["species", "year"])
    predicted = out["class_name"].tolist()
    accuracy = sum(p == t for p, t in zip(predicted, truth)) / len(truth)
    assert len(truth) > 50
    assert accuracy >= 0.9
    assert out["probabilities"].shape == (len(truth), 3)
    # Rows with missing measurements are still scored (imputed, not dropped).
    assert set(predicted) <= {b"Adelie", b"Chinstrap", b"Gentoo"}


def test_reruns_push_nothing_and_the_second_is_served_from_cache(pipeline_run):
    from pipeline.config import NotifySection
    from tests.fake_http import Hook

    config, first, _ = pipeline_run
    versions = sorted(os.listdir(config.pipeline.serving_dir))
    hook = Hook()
    url = hook.start()
    try:  # ... and the run tells the notify section's webhook how it ended (pipeline/local/notification.py)
        console = io.StringIO()
        second = run_local(config.model_copy(update={"notify": NotifySection(webhook_url=f"{url}/runs")}), console)
    finally:
        hook.stop()
    [told] = hook.requests
    assert told.body["state"] == "SUCCEEDED" and told.body["run"] == second.run_id and "pushed_version" not in told.body
    assert told.body["link"].endswith("report.html") and f"notified webhook {url}/runs: HTTP 200" in console.getvalue()
    # Nothing changed since the first run pushed: its Snapshot finds the model serving now trained on exactly
    # this data and config (components/data/snapshot/newness.py) and the run stops there, pushing nothing (exit 4).
    assert {c.name: c.state for c in second.components} == {"Snapshot": "ran"}, second.components
    assert second.nothing_new and "the source is unchanged" in second.nothing_new, second.nothing_new
    assert first.pushed_version in second.nothing_new
    assert second.pushed_path is None and second.pushed_version is None
    assert sorted(os.listdir(config.pipeline.serving_dir)) == versions
    assert summarize(config.pipeline.metadata_path, config.pipeline.name).run_id == second.run_id != first.run_id
    # The same serving version again: now the Snapshot, too, is served from cache; still nothing is pushed.
    third = run_local(config, stream=io.StringIO())
    assert {c.name: c.state for c in third.components} == {"Snapshot": "cached"}, third.components
    assert third.nothing_new and third.pushed_path is None
    assert sorted(os.listdir(config.pipeline.serving_dir)) == versions

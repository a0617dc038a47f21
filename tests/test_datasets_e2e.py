"""Datasets other than penguins through the real pipeline, by config alone: the Chicago
taxi data (binary, against TFX's own taxi model's AUC) and a regression dataset generated
here (a high-cardinality category, a column 30% missing written as NA, no curated schema)."""

from __future__ import annotations

import io
import os

import numpy as np
import pandas as pd
import pytest
import yaml

from bench import scoring
from pipeline.cli import main
from pipeline.config import load_config
from pipeline.errors import EXIT_NOT_PUSHED
from pipeline.local.runner import run_local
from pipeline.runs.summary import summarize

pytestmark = pytest.mark.e2e

# configs/taxi.yaml's model scores 0.953 on its 2,502 test rows (deterministic: same data, same
# seed; 0.952 on the 5,039 eval rows of the 2:1 split before the test split); TFX's own taxi
# pipeline scored 0.942 on its eval rows (bench/taxi.py scores both on our test rows, all among them).
# Below 0.94 ours would no longer match TFX's example.
TAXI_MIN_AUC = 0.94


@pytest.fixture(scope="module")
def taxi_run(tmp_path_factory):
    config = load_config("configs/taxi.yaml", [f"pipeline.root={tmp_path_factory.mktemp('taxi')}"])
    out = io.StringIO()
    return config, run_local(config, out), out.getvalue()


def test_taxi_trains_evaluates_and_pushes_through_config_alone(taxi_run):
    config, summary, console = taxi_run
    assert all(c.state == "ran" for c in summary.components), summary.components
    assert summary.blessed is True and summary.pushed_path, console
    assert summary.metrics["auc"] >= config.evaluator.lower_bound
    assert "test auc: " in console and "label: big_tipper (binary)" in console
    assert "not used: pickup_census_tract, tips, trip_start_timestamp" in console
    # The bundled data has no tokens: the snapshot holds it byte for byte.
    assert summary.snapshot_rows == 15002


def test_pushed_taxi_model_scores_raw_rows(taxi_run):
    config, summary, _ = taxi_run
    rows = scoring.examples(config.pipeline.pipeline_root)
    labels = [scoring.value(r, "big_tipper") for r in rows]
    # A client sends neither the label, nor the tips that give it away, nor the unused columns.
    out = scoring.serve(summary.pushed_path, rows,
                        drop=["big_tipper", "tips", "trip_start_timestamp", "pickup_census_tract"])
    assert len(rows) > 2000 and out["probability"].shape == (len(rows),)
    assert scoring.auc(labels, out["probability"]) >= TAXI_MIN_AUC
    assert np.array_equal(out["class_id"], (out["probability"] > 0.5).astype(np.int64))


def _houses(rows: int, seed: int = 0) -> tuple[pd.DataFrame, float]:
    """Prices from size, rooms, a district (400 of them) and a quality score that is missing
    in 30% of the rows; the noise's standard deviation is returned for the test's bar."""
    rng = np.random.default_rng(seed)
    district_effect = rng.normal(0, 400, 400)
    district = rng.integers(0, 400, rows)
    size = rng.uniform(30, 200, rows).round(1)
    rooms = rng.integers(1, 7, rows)
    quality = rng.uniform(1, 10, rows).round(1)
    noise = 150.0
    price = 20 * size + 150 * rooms + district_effect[district] + 80 * quality + rng.normal(0, noise, rows)
    frame = pd.DataFrame({"district": [f"D{d:03d}" for d in district], "size_m2": size, "rooms": rooms,
                          "quality": quality, "heating": rng.choice(["gas", "oil", "heat pump"], rows),
                          "price": price.round(2)})
    frame["quality"] = frame["quality"].astype(object).where(rng.random(rows) >= 0.3, "NA")
    return frame, noise


def test_a_generated_regression_dataset_trains_through_config_alone(tmp_path):
    data = tmp_path / "houses"
    data.mkdir()
    frame, noise = _houses(6000)
    frame.to_csv(data / "houses.csv", index=False)
    config_file = tmp_path / "houses.yaml"
    config_file.write_text(yaml.safe_dump({
        "pipeline": {"name": "house-prices", "root": str(tmp_path / "out")},
        # No curated schema: SchemaGen infers it; every column but the label and the
        # district is inferred from its type.
        "data": {"input_dir": str(data), "schema_file": None},
        # label_log: learned on log(1 + price) (as a skewed label would be), served and evaluated in its units.
        "features": {"label": "price", "task": "regression", "categorical": ["district"], "label_log": True},
        "trainer": {"train_steps": 600, "global_batch_size": 128, "eval_every_steps": 200,
                    "learning_rate": 0.01, "hidden_units": [32, 16]},
        # Well under the label's spread: what predicting the mean would score.
        "evaluator": {"upper_bound": float(frame["price"].std() / 2)},
    }))
    config = load_config(config_file)
    out = io.StringIO()
    summary = run_local(config, out)
    console = out.getvalue()
    assert summary.blessed is True and summary.pushed_path, console
    # The configured bound is stricter than the trivial model's (the mean's RMSE, about the label's spread).
    assert "test rmse: " in console and f"upper bound {config.evaluator.upper_bound:.6g}" in console
    assert summary.trivial_metric == pytest.approx(frame["price"].std(), rel=0.1)
    assert "regression, trained on log(1 + label), served on the label's own scale" in console

    rows = scoring.examples(config.pipeline.pipeline_root)
    truth = np.array([scoring.value(r, "price") for r in rows])
    predicted = scoring.serve(summary.pushed_path, rows, drop=["price"])["prediction"]
    rmse = float(np.sqrt(np.mean((predicted - truth) ** 2)))
    # Predicting the mean scores the label's spread (~1000); the district alone is worth ~400.
    assert rmse < 0.5 * truth.std(), (rmse, truth.std())
    # The log scale stays inside the model: serving answers in the label's units, and the Evaluator (TFMA, which
    # reads the label through transform_features) scores the same RMSE as these raw labels do. A log-scale label
    # or prediction leaking into either would be off by a factor of about a thousand.
    assert abs(predicted.mean() - truth.mean()) < 0.1 * truth.std(), (predicted.mean(), truth.mean())
    assert summary.metrics["root_mean_squared_error"] == pytest.approx(rmse, rel=0.02)
    # The 400 districts went through an embedding, the 30% missing quality was imputed.
    import tensorflow as tf

    # The export keeps no Keras layer objects (trainer/export.py, save_traces=False): read its variables.
    shapes = dict(tf.train.list_variables(os.path.join(summary.pushed_path, "variables", "variables")))
    embeddings = [shape for name, shape in shapes.items() if name.startswith("model/embeddings/district_xf/")]
    # Embedded, not one-hot: more ids than features.one_hot_max_size (32).
    assert len(embeddings) == 1 and embeddings[0][0] > 32, shapes
    assert noise < rmse


def test_a_model_no_better_than_the_trivial_one_is_not_blessed(tmp_path, capsys):
    """Features that say nothing (one constant column; the id is left out) leave the model one score for every
    row: AUC 0.5, exactly the trivial model's. The old default bound (AUC >= 0.5) blessed that; now the run is
    not blessed, exits 3, pushes nothing, and the summary says why with the numbers."""
    data = tmp_path / "coin"
    data.mkdir()
    rng = np.random.default_rng(0)
    pd.DataFrame({"id": np.arange(300), "x": np.ones(300), "label": rng.choice(["yes", "no"], 300, p=[0.3, 0.7])}
                 ).to_csv(data / "coin.csv", index=False)
    config_file = tmp_path / "coin.yaml"
    config_file.write_text(yaml.safe_dump({
        "pipeline": {"name": "coin", "root": str(tmp_path / "out")},
        "data": {"input_dir": str(data), "schema_file": None},
        "features": {"label": "label", "task": "binary", "positive_class": "yes", "ignore": ["id"]},
        "trainer": {"train_steps": 40, "eval_every_steps": 20, "steps_per_execution": 20}}))
    assert main(["run", "--config", str(config_file)]) == EXIT_NOT_PUSHED
    out = capsys.readouterr().out
    config = load_config(config_file)
    summary = summarize(config.pipeline.metadata_path, config.pipeline.name)
    assert summary.eval_split == "test" and summary.trivial_metric == 0.5
    assert summary.metrics["auc"] == 0.5 and summary.blessed is False and summary.pushed_path is None
    assert "test auc: 0.5000 (trivial model 0.5000; no model serving yet; bar: better than the trivial model's " \
           "0.5000)" in out, out
    assert "why: test auc 0.5000 is no better than the trivial model's 0.5000 (the same score for every row: " \
           "AUC 0.5; the bound is 0.500001)" in out, out
    assert "pushed: nothing, not blessed" in out
    assert not os.path.exists(config.pipeline.serving_dir) or not os.listdir(config.pipeline.serving_dir)

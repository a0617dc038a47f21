"""The retraining simulation at a small size: three spans, the third shifted."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from components.serving import serving_dir
from components.serving.warmup import WARMUP_DIR, WARMUP_FILE
from pipeline.config import load_config
from pipeline.local.simulate import simulate
from pipeline.runs.history import history
from pipeline.runs.history_page import history_path
from pipeline.runs.report import read_scalars
from pipeline.runs.summary import summarize
from tests.conftest import SAFETY_TRAIN_STEPS, tree_hashes

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def simulation(tmp_path_factory):
    root = tmp_path_factory.mktemp("simulate")
    config = load_config("configs/simulate.yaml", [f"pipeline.root={root}", f"data.input_dir={root}/spans",
                                                   SAFETY_TRAIN_STEPS, "data.analyzer_cache=true"])
    out = io.StringIO()
    assert simulate(config, spans=3, drift_at=3, rows=150, stream=out) == 0
    return config, out.getvalue()


def test_three_spans_push_retrain_and_stop_on_drift(simulation):
    config, text = simulation
    rows = history(config)
    assert [r.spans for r in rows] == ["span-1", "span-1,span-2", "span-2,span-3"], text
    first, second, third = rows
    # Span 1's gate had no serving model to compare with: not checked, not "ok" (docs/retraining.md, history).
    assert [r.drift for r in rows] == ["-", "ok", "DRIFT"], text
    # Span 1 trains and pushes; span 2 retrains, is judged against span 1's model, and is pushed.
    assert first.outcome == "pushed" and second.outcome == "pushed", text
    second_summary = summarize(config.pipeline.metadata_path, config.pipeline.name, second.run_id)
    assert second_summary.baseline_metrics and second.blessed is True
    assert second.pushed_version != first.pushed_version
    # Span 2's model started from span 1's weights: at the first evaluation it is already ahead of
    # span 1's cold start at the same step.
    first_summary = summarize(config.pipeline.metadata_path, config.pipeline.name, first.run_id)
    cold, warm = (read_scalars(s.output("Trainer", "ModelRun").uri)["eval_loss"][0]
                  for s in (first_summary, second_summary))
    assert cold[0] == warm[0] and warm[1] < cold[1], (cold, warm)
    # With data.analyzer_cache, span 2's run analyzed span 2 only; span 1's analysis came from run 1.
    graphs = [s.output("Transform", "TransformGraph").properties for s in (first_summary, second_summary)]
    assert [(g["analyzed_spans"], g["cached_spans"]) for g in graphs] == [("span-1", ""), ("span-2", "span-1")]
    # Span 3 is shifted: the drift gate stops the run before Transform, naming the shifted features.
    assert third.drift == "DRIFT" and third.outcome == "blocked by DriftGate", text
    assert "feature bill_length_mm: Jensen-Shannon distance" in text and "feature island: L-infinity" in text
    third_summary = summarize(config.pipeline.metadata_path, config.pipeline.name, third.run_id)
    assert third_summary.component("Transform") is None
    # What serves is span 2's model, byte for byte.
    serving = serving_dir.serving(config.pipeline.serving_dir)
    assert serving.name == second.pushed_version and [r.serving for r in rows] == [False, True, False]
    model = second_summary.output("Trainer", "Model")
    # The trained model's files, and the warm-up file the Pusher added (components/serving/warmup.py).
    served, trained = (tree_hashes(Path(p)) for p in (serving.path, f"{model.uri}/Format-Serving"))
    assert served.pop(f"{WARMUP_DIR}/{WARMUP_FILE}") and served == trained
    assert len(serving_dir.versions(config.pipeline.serving_dir)) == 2
    # The history table and page end the simulation.
    assert "history:" in text and "blocked by DriftGate" in text and "<- serving now" in text
    page = open(history_path(config)).read()
    assert os.path.isfile(history_path(config)) and "blocked by DriftGate" in page and "data:image/png" in page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_history_page_renders_in_a_real_browser(simulation, tmp_path):
    from PIL import Image

    config, _ = simulation
    shot = tmp_path / "history.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
                    f"--screenshot={shot}", f"file://{history_path(config)}"], check=True, capture_output=True,
                   timeout=120)
    image = Image.open(shot).convert("L")
    histogram = image.histogram()
    # A chart and a table, not a blank or error page.
    assert sum(1 for count in histogram if count) > 64
    assert sum(histogram[:128]) > 0.005 * image.size[0] * image.size[1]

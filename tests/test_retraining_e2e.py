"""Scheduled retraining on one pipeline root: runs take turns, and nothing new is never pushed again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from components.data.snapshot import newness, spans
from components.serving.model_config import CONFIG_FILE, TRACK_FILES
from components.serving.rollout import EVENTS_DIR
from components.serving.serving_dir import CLAIMS_DIR, claims, versions
from components.training_record import RECORDS_DIR
from pipeline.config import load_config, resolve
from pipeline.errors import EXIT_NOTHING_NEW, EXIT_OK
from pipeline.local import span_data
from pipeline.runs import mlmd
from pipeline.runs.summary import summarize
from tests.conftest import CONFIG, SAFETY_TRAIN_STEPS, tree_hashes

pytestmark = pytest.mark.e2e


_ENV = {**os.environ, "PYTHONPATH": os.getcwd()}


def _command(overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "pipeline", "run", "--config", CONFIG,
            *[a for o in overrides for a in ("--set", o)]]


def _start(overrides: list[str]) -> subprocess.Popen:
    return subprocess.Popen(_command(overrides), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_ENV)


def _recipe(config) -> span_data.Recipe:
    return span_data.Recipe.from_config(config)


def _four_spans(directory) -> str:
    config = load_config(CONFIG)
    span_data.write_spans(resolve("data/penguins/penguins.csv"), str(directory), _recipe(config), count=4, rows=170)
    return str(directory)


def test_two_runs_started_together_take_turns_and_the_rerun_pushes_nothing(tmp_path):
    """Two runs on one root, on four spans with window(2); each would retrain even without a new span."""
    source = _four_spans(tmp_path / "spans")
    overrides = [f"pipeline.root={tmp_path}", SAFETY_TRAIN_STEPS, f"data.input_dir={source}", "data.spans=window(2)",
                 "data.skip_when_no_new_span=false"]
    procs = [_start(overrides), _start(overrides)]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [EXIT_OK, EXIT_NOTHING_NEW], outputs
    first, second = (outputs[0], outputs[1]) if codes[0] == EXIT_OK else (outputs[1], outputs[0])
    assert "waiting for the run holding" in second and "run.lock" in second, second
    assert "pushed: nothing new: the candidate is the model serving now" in second, second

    config = load_config(CONFIG, overrides)
    serving = config.pipeline.serving_dir
    # One version, and beside it (under names TF Serving ignores) its training-data record, its claim, TF Serving's
    # model config files and the label move of its push only.
    assert len(versions(serving)) == 1 and sorted(os.listdir(serving)) == sorted([
        CLAIMS_DIR, RECORDS_DIR, EVENTS_DIR, CONFIG_FILE, *TRACK_FILES.values(), versions(serving)[0].name])
    assert len(os.listdir(os.path.join(serving, EVENTS_DIR))) == 1
    assert os.listdir(os.path.join(serving, RECORDS_DIR)) == [versions(serving)[0].name]
    assert list(claims(serving)) == [versions(serving)[0].number]
    # The second run decided against the first run's model: nothing had changed, so its Trainer was the
    # first run's execution from cache; the model serving now was the first run's push, so the Evaluator
    # compared the candidate with itself (components/serving/serving_model.py) and the Pusher, finding it
    # byte-identical to the serving version, did not push it again.
    later = summarize(config.pipeline.metadata_path, config.pipeline.name)
    assert {n: later.component(n).state for n in ("Trainer", "ServingModel", "Evaluator", "Pusher")} == {
        "Trainer": "cached", "ServingModel": "ran", "Evaluator": "ran", "Pusher": "ran"}
    assert later.blessed is True and later.unchanged_version == versions(serving)[0].name
    reader = mlmd.Reader.open(config.pipeline.metadata_path)
    assert len([a for a in reader.artifacts_of_type("PushedModel") if mlmd.properties(a).get("pushed") == 1]) == 1
    assert mlmd.properties(reader.artifact(later.output("Pusher", "PushedModel").id))["pushed"] == 0
    # Same inputs, but a model serves now that did not when the first run's gate ran: the gate ran again
    # against that version's training-data record instead of being a stale cache hit (components/data/drift_gate.py).
    assert later.component("DriftGate").state != "cached"

    # The snapshot held exactly the window's spans, and MLMD says so.
    assert later.snapshots()[0][1].properties["spans"] == "span-3,span-4"
    assert sorted(p.parent.name for p in Path(later.snapshots()[0][1].properties["snapshot_uri"]).rglob("*.csv")) \
        == ["span-3", "span-4"]

    # No new span since the serving model: a scheduled run stops after its Snapshot, and pushes nothing.
    before = tree_hashes(Path(serving))
    models = len(reader.artifacts_of_type("Model"))
    rerun = subprocess.run(_command([*overrides[:-1], "data.skip_when_no_new_span=true"]),
                           capture_output=True, text=True, env=_ENV, timeout=300)
    assert rerun.returncode == EXIT_NOTHING_NEW, rerun.stdout + rerun.stderr
    assert "no new span: the newest in" in rerun.stdout and "span-4" in rerun.stdout, rerun.stdout
    assert tree_hashes(Path(serving)) == before
    # The run is recorded: its Snapshot ran and said why, and nothing after it ran (pipeline/dag/conditions.py).
    skipped = summarize(config.pipeline.metadata_path, config.pipeline.name)
    assert skipped.run_id != later.run_id and [c.name for c in skipped.components] == ["Snapshot"], skipped.components
    assert "span-3, span-4" in skipped.nothing_new and skipped.nothing_new in rerun.stdout, skipped.nothing_new
    assert len(mlmd.Reader.open(config.pipeline.metadata_path).artifacts_of_type("Model")) == models
    # A span lands: now there is something new (the drift gate's runs are in test_simulate_e2e.py).
    span_data.write_spans(resolve("data/penguins/penguins.csv"), source, _recipe(config), count=1, first=5, rows=20)
    assert newness.check(spans.newest(source), serving).new

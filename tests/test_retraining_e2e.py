"""Scheduled retraining on one pipeline root: runs take turns, and nothing new is never pushed again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from components.pusher import UNCHANGED_VERSION
from components.serving_dir import versions
from pipeline.config import load_config
from pipeline.errors import EXIT_NOTHING_NEW, EXIT_OK
from pipeline.runs import mlmd
from pipeline.runs.summary import ACCURACY, summarize
from tests.conftest import CONFIG, SAFETY_TRAIN_STEPS

pytestmark = pytest.mark.e2e


def _start(overrides: list[str]) -> subprocess.Popen:
    args = [a for o in overrides for a in ("--set", o)]
    return subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--config", CONFIG, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_two_runs_started_together_take_turns_and_the_rerun_pushes_nothing(tmp_path):
    overrides = [f"pipeline.root={tmp_path}", SAFETY_TRAIN_STEPS]
    procs = [_start(overrides), _start(overrides)]
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [EXIT_OK, EXIT_NOTHING_NEW], outputs
    first, second = (outputs[0], outputs[1]) if codes[0] == EXIT_OK else (outputs[1], outputs[0])
    assert "waiting for the run holding" in second and "run.lock" in second, second
    assert "pushed: nothing new: the candidate is the model serving now" in second, second

    config = load_config(CONFIG, overrides)
    serving = config.pipeline.serving_dir
    assert len(versions(serving)) == 1 and sorted(os.listdir(serving)) == [versions(serving)[0].name]
    # The second run decided against the first run's model: its Evaluator's baseline is the model
    # the first pushed (the same artifact, its Trainer served from cache), and it was blessed.
    later = summarize(config.pipeline.metadata_path, config.pipeline.name)
    assert later.component("Trainer").state == "cached" and later.blessed is True
    assert later.baseline_metrics, "the second run had no baseline"
    assert later.baseline_metrics[ACCURACY] == later.metrics[ACCURACY]
    reader = mlmd.Reader.open(config.pipeline.metadata_path)
    # (Not the Evaluator's events: MLMD keeps one event for an artifact read under two keys, model and baseline.)
    pusher = reader.store.get_executions_by_id([later.component("Pusher").execution_id])[0]
    [push] = [a for a in reader.artifacts_of_type("PushedModel") if mlmd.properties(a).get("pushed") == 1]
    assert reader.inputs(reader.producer(push))["model"][0].id == reader.inputs(pusher)["model"][0].id
    pushed = later.output("Pusher", "PushedModel")
    assert pushed.properties["pushed"] == 0 and pushed.properties[UNCHANGED_VERSION] == versions(serving)[0].name

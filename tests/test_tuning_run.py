"""A tuned local run on the shared run's root: TFX's Tuner with our executor searches with
KerasTuner and our loop, the trainer's own values first; the Trainer trains with the best trial's values and scores
what that trial scored; the report, the summary and `history` show the trials; a rerun does not tune again."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from components.tuner import record
from pipeline.config import load_config
from pipeline.dag.tuning import tuning_dir
from pipeline.runs.history import format_history, history
from pipeline.runs.report import write_report
from tests.conftest import CONFIG
from trainer.tuning import configured_point

# Short trainings: the run's cost is the pipeline's (the tuning section is part of the training key, so ExampleGen
# and Transform run again), plus two trials and the Trainer.
TUNING = ("tuning.trials=2", "trainer.train_steps=100", "trainer.eval_every_steps=50")


@pytest.fixture(scope="module")
def tuned(pipeline_run):
    """(config, summary, output) of a run with two trials on pipeline_run's root, then its rerun's."""
    from pipeline.local.runner import run_local

    base, _, _ = pipeline_run
    config = load_config(CONFIG, [f"pipeline.root={base.pipeline.root}", *TUNING])
    runs = []
    for _ in range(2):
        out = io.StringIO()
        runs.append((run_local(config, stream=out), out.getvalue()))
    return config, runs


def test_the_search_trains_our_loop_and_the_trainer_scores_what_its_best_trial_scored(tuned):
    config, [(summary, output), _] = tuned
    states = {c.name: c.state for c in summary.components}
    assert states["Tuner"] == "ran" and states["Trainer"] == "ran", output
    found = summary.tuning
    assert [t.state for t in found.trials] == ["COMPLETED", "COMPLETED"] and found.where == "local"
    # The first trial is the trainer section's own values (components/tuner/search.py).
    assert found.trials[0].values == configured_point(config.trainer, config.tuning.search_space)
    assert found.trials[1].values != found.trials[0].values
    best = found.best_trial
    assert best.objective == max(t.objective for t in found.trials)
    # The Trainer took the best trial's values and, training alike, exported the step that trial scored.
    assert summary.trainer.export.value == pytest.approx(best.objective, abs=1e-6)
    assert summary.trainer.export.step == best.step
    hyperparameters = summary.output("Tuner", "HyperParameters")
    assert hyperparameters.id in summary.inputs["Trainer"]
    written = json.loads(Path(hyperparameters.uri, record.BEST_FILE).read_text())
    assert written["values"] == best.values
    # Kept for tuning.reuse: latest.
    assert record.latest(tuning_dir(config))[1] == written
    assert "tuning: 2 trials (2 completed), random" in output


def test_the_report_and_history_show_the_trials_and_their_hours(tuned):
    config, [(summary, _), _] = tuned
    page = Path(write_report(config, summary.run_id)).read_text()
    assert '<section id="tuning"><h2>Tuning</h2>' in page and 'alt="objective per trial"' in page
    assert "&#9733; best" in page and f"eval {summary.tuning.metric}" in page
    rows = {r.run_id: r for r in history(config)}
    row = rows[summary.run_id]
    assert row.cost.tuning == "2 trials (CPU-hours)" and row.cost.tuning_hours == pytest.approx(summary.tuning.hours)
    assert row.cost.total_hours == pytest.approx(row.cost.pool_hours + summary.tuning.hours)
    assert "2 trials " in format_history(list(rows.values()))


def test_a_rerun_with_nothing_changed_does_not_tune_again(tuned):
    _, [_, (again, output)] = tuned
    tuner = again.component("Tuner")
    # Nothing new after the Snapshot, or every step a cache hit: either way no trial ran.
    assert tuner is None or tuner.state == "cached", output

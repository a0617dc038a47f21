"""The retraining commands' argument handling and refusals, without running the pipeline."""

from __future__ import annotations

import pytest

from pipeline import cli
from pipeline.errors import EXIT_BAD_CONFIG, EXIT_NOT_PUSHED, EXIT_NOTHING_NEW, EXIT_OK, ConfigError


def test_simulate_defaults_to_its_own_config():
    assert cli.build_parser().parse_args(["simulate"]).config == "configs/simulate.yaml"
    assert cli.build_parser().parse_args(["history"]).config == "configs/local.yaml"


def test_simulate_refuses_an_input_dir_that_already_has_data(tmp_path, capsys):
    (tmp_path / "spans" / "span-1").mkdir(parents=True)
    code = cli.main(["simulate", "--set", f"pipeline.root={tmp_path}", "--set", f"data.input_dir={tmp_path}/spans"])
    assert code == EXIT_BAD_CONFIG
    assert "is not empty; the simulation writes its own spans there" in capsys.readouterr().err


def test_simulate_needs_a_span_selection(tmp_path, capsys):
    code = cli.main(["simulate", "--config", "configs/local.yaml", "--set", f"pipeline.root={tmp_path}"])
    assert code == EXIT_BAD_CONFIG and "simulate needs data.spans" in capsys.readouterr().err


def test_history_of_a_root_without_runs(tmp_path, capsys):
    assert cli.main(["history", "--set", f"pipeline.root={tmp_path}"]) == EXIT_OK
    assert capsys.readouterr().out.strip() == "no runs yet"


def _summary(**outcome):
    from pipeline.runs.summary import RunSummary

    fields = dict(run_id="run-1", components=[], metrics={}, baseline_metrics={}, blessed=None,
                  validation_failures=[], pushed_path=None, pushed_version=None)
    return RunSummary(**{**fields, **outcome})


@pytest.mark.parametrize("outcome, code", [
    (dict(blessed=True, pushed_path="/serving/2", pushed_version="2"), EXIT_OK),
    (dict(blessed=False, validation_failures=["accuracy below 0.9"]), EXIT_NOT_PUSHED),
    (dict(blessed=True), EXIT_NOT_PUSHED),  # blessed, but the Pusher pushed nothing
    (dict(nothing_new="no span newer than span-3"), EXIT_NOTHING_NEW),
    (dict(blessed=True, unchanged_version="2"), EXIT_NOTHING_NEW),
])
def test_run_outcome_to_exit_code(outcome, code):
    from pipeline.runs.summary import exit_code

    assert exit_code(_summary(**outcome)) == code


def test_a_run_without_a_summary_pushed_nothing():
    from pipeline.runs.summary import exit_code

    assert exit_code(None) == EXIT_NOT_PUSHED


def test_spans_refuse_features_they_cannot_drift():
    from pipeline.local.span_data import pick_drift

    with pytest.raises(ConfigError, match=r"^features: spans need a numeric FLOAT and a categorical"):
        pick_drift(["bill_length_mm"], [])
    with pytest.raises(ConfigError, match=r"drift column 'sex' is not one of the features section's inputs"):
        pick_drift(["bill_length_mm"], ["island"], categorical="sex")

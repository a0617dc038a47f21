"""The retraining commands' argument handling and refusals, without running the pipeline."""

from __future__ import annotations

from pipeline import cli
from pipeline.errors import EXIT_BAD_CONFIG, EXIT_OK


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

"""A features section that cannot fit the data is rejected before anything runs, naming
the field; `schema infer` writes a schema a run accepts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline.cli import main
from pipeline.config import load_config
from pipeline.data.checks import check_features
from pipeline.errors import EXIT_BAD_CONFIG, EXIT_FAILED, EXIT_OK, ConfigError

CONFIG = "configs/local.yaml"
NO_BILL_LENGTH = "features.numeric=[bill_depth_mm, flipper_length_mm, body_mass_g]"


@pytest.mark.parametrize("overrides, message", [
    (["features.label=bill"], "features.label: 'bill' is not a column of the data"),
    (["features.ignore=[year, colour]"], "features.ignore: 'colour' is not a column"),
    ([NO_BILL_LENGTH, "features.categorical=[island, sex, bill_length_mm]"],
     "features.categorical: 'bill_length_mm' is a float column in the schema"),
    (["features.numeric=[bill_length_mm, island]", "features.categorical=[sex]"],
     "features.numeric: 'island' holds strings"),
    (["features.task=regression"], "features.task: regression needs a numeric label; 'species' holds strings"),
    (["evaluator.lower_bound=1.5"], "evaluator.lower_bound: 1.5 is outside [0, 1], the range of accuracy"),
])
def test_features_that_do_not_fit_the_schema_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_features(load_config(CONFIG, overrides))


def test_a_regression_needs_no_configured_bound():
    """The trivial model (always the train split's mean) is the bar by default (components/evaluation/trivial.py)."""
    config = load_config(CONFIG, ["features.label=body_mass_g", "features.task=regression",
                                  "features.numeric=[bill_length_mm]", "evaluator.lower_bound=null"])
    assert check_features(config).task == "regression"


def test_without_a_schema_the_csv_header_is_checked(tmp_path):
    config = load_config(CONFIG, ["data.schema_file=", "features.label=Species"])
    with pytest.raises(ConfigError, match="features.label: 'Species' is not a column .*CSV header: species, island"):
        check_features(config)
    assert check_features(load_config(CONFIG, ["data.schema_file="])) is None  # names fine; types unknown yet


def test_a_config_without_features_cannot_build_a_pipeline():
    with pytest.raises(ConfigError, match="features: missing"):
        check_features(load_config(None))


def test_cli_rejects_a_bad_features_section_before_writing_anything(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--set", f"pipeline.root={tmp_path}",
         "--set", "features.categorical=[island, island]"], capture_output=True, text=True, timeout=120)
    assert result.returncode == EXIT_BAD_CONFIG, result.stderr
    assert "features: Value error, 'island' is named twice (categorical)" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--set", f"pipeline.root={tmp_path}",
         "--set", "features.label=penguin"], capture_output=True, text=True, timeout=120)
    assert result.returncode == EXIT_BAD_CONFIG, result.stderr
    assert "features.label: 'penguin' is not a column of the data" in result.stderr
    assert not any(tmp_path.iterdir()), "nothing may be written for a rejected config"


def test_schema_infer_writes_a_schema_for_review(tmp_path, capsys):
    out = tmp_path / "penguins.pbtxt"
    args = ["schema", "infer", "-o", str(out), "--set", f"pipeline.root={tmp_path / 'root'}"]
    assert main(args) == EXIT_OK
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "label: species (multiclass)" in printed
    schema = text_format.Parse(out.read_text(), schema_pb2.Schema())
    features = {f.name: f for f in schema.feature}
    # NA read as missing, as a run reads it: the measurements are numbers, not strings.
    assert features["bill_length_mm"].type == schema_pb2.FLOAT and features["body_mass_g"].type == schema_pb2.INT
    assert features["species"].presence.min_fraction == 1.0
    assert not features["sex"].value_count.HasField("min")  # empty cells have no values in CsvExampleGen's rows
    assert main(args) == EXIT_FAILED and "--force" in capsys.readouterr().err

import subprocess
import sys

import pytest

from pipeline.config import load_config
from pipeline.errors import ConfigError


def test_shipped_config_loads_and_overrides_are_typed():
    config = load_config("configs/local.yaml", ["trainer.train_steps=200", "trainer.hidden_units=[8, 4]"])
    assert config.trainer.train_steps == 200
    assert config.trainer.hidden_units == [8, 4]
    assert config.pipeline.serving_dir.endswith("/output/serving_model/penguin-tpu")


@pytest.mark.parametrize("override, field, hint", [
    ("trainer.strategy=gpu", "trainer.strategy", "'auto', 'tpu', 'mirrored', 'multi_worker' or 'default'"),
    ("trainer.train_steps=0", "trainer.train_steps", "greater than or equal to 1"),
    ("trainer.learning_rate=abc", "trainer.learning_rate", "valid number"),
    ("trainer.hidden_units=[]", "trainer.hidden_units", "non-empty"),
    ("trainer.bogus=1", "trainer.bogus", "unknown setting"),
    ("pipeline.name=My_Pipeline", "pipeline.name", "lower-case"),
    ("pipeline.root=../elsewhere", "pipeline.root", "'..' is not allowed"),
    ("data.input_dir=s3://bucket/x", "data.input_dir", "only local paths and gs://"),
    ("trainer.checkpoint_dir=gs://Bad_Bucket/ckpt", "trainer.checkpoint_dir", "not a valid GCS bucket"),
    ("evaluator.max_regression=-1", "evaluator.max_regression", "greater than or equal to 0"),
    ("features.numeric=[bill_length_mm, bill_length_mm]", "features", "'bill_length_mm' is named twice (numeric)"),
    ("features.task=ranking", "features.task", "'multiclass', 'binary' or 'regression'"),
    ("beam.direct_running_mode=fast", "beam.direct_running_mode", "in_memory"),
    # The Evaluator's split is not optional: nothing else may have seen its rows.
    ("data.test_buckets=0", "data.test_buckets", "greater than or equal to 1"),
])
def test_bad_values_are_rejected_naming_the_field(override, field, hint):
    with pytest.raises(ConfigError) as e:
        load_config("configs/local.yaml", [override])
    assert field in str(e.value)
    assert hint in str(e.value)


def test_cross_field_check():
    with pytest.raises(ConfigError, match="eval_every_steps"):
        load_config(None, ["trainer.train_steps=10", "trainer.eval_every_steps=20"])


def test_the_analyzer_cache_needs_spans():
    with pytest.raises(ConfigError, match="analyzer_cache .*needs data.spans"):
        load_config(None, ["data.analyzer_cache=true"])
    config = load_config(None, ["data.analyzer_cache=true", "data.spans=window(2)"])
    assert config.pipeline.analyzer_cache_root.startswith(config.pipeline.pipeline_root + "/")


def test_missing_file_and_malformed_override():
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("configs/nope.yaml")
    with pytest.raises(ConfigError, match="expected section.key=value"):
        load_config(None, ["trainer.train_steps"])


def test_cli_rejects_bad_config_before_running_anything(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--set", f"pipeline.root={tmp_path}",
         "--set", "trainer.strategy=gpu"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "trainer.strategy" in result.stderr
    assert not any(tmp_path.iterdir()), "nothing may be written for a rejected config"


def test_run_refuses_a_vertex_config_naming_the_commands_that_take_it():
    # What a new user tries first: a config error (exit 2) that says what to run instead, not a traceback.
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", "--config", "configs/vertex.yaml"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "error: this is a Vertex AI config (it has a vertex section; pipeline.root is gs://" in result.stderr
    assert "`python -m pipeline dryrun`" in result.stderr and "`python -m pipeline submit`" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- pipeline.target


def test_target_defaults_to_vertex_and_kubeflow_needs_its_section():
    assert load_config(None).pipeline.target == "vertex"
    kubeflow = load_config("configs/kubeflow.yaml")
    assert (kubeflow.pipeline.target, kubeflow.kubeflow.namespace) == ("kubeflow", "kubeflow")
    with pytest.raises(ConfigError, match="pipeline.target is kubeflow but there is no kubeflow section"):
        load_config(None, ["pipeline.target=kubeflow"])
    with pytest.raises(ConfigError, match="a kubeflow section is set but pipeline.target is 'vertex'"):
        load_config("configs/kubeflow.yaml", ["pipeline.target=vertex"])
    with pytest.raises(ConfigError, match="pipeline.target"):
        load_config(None, ["pipeline.target=argo"])


def test_kubeflow_target_takes_no_vertex_sections():
    with pytest.raises(ConfigError, match="remove the vertex and dataflow sections"):
        load_config("configs/kubeflow.yaml", ["dataflow.enabled=false"])

"""The tuning section (trainer/tuning.py) refuses what no search can do before anything runs; a trial's values make
the trainer config; the local search stops at tuning.max_failed_trials; LatestTuning hands the Trainer the last
search's result, or says there is none. No training here (tests/test_tuning_run.py trains)."""

from __future__ import annotations

import json

import pytest
from tfx.types import standard_artifacts

from components.errors import NoTuningToReuse, TuningFailed
from components.tuner import record
from components.tuner.component import LatestTuningExecutor
from pipeline.config import load_config
from pipeline.errors import ConfigError
from trainer.config import TrainerConfig
from trainer.errors import TrainerError
from trainer.tuning import DEFAULT_SPACE, apply, configured_point

TAXI = "configs/taxi.yaml"


def test_only_trials_set_searches_the_documented_default_space_around_the_configured_values():
    config = load_config(TAXI, ["tuning.trials=8"])
    assert {k: v.model_dump(exclude_none=True) for k, v in config.tuning.search_space.items()} == {
        "learning_rate": {"min": 1e-4, "max": 1e-1, "scale": "log"},
        "hidden_units": {"values": [[16, 16], [32, 16], [64, 32], [128, 64]]},
        "dropout": {"min": 0.0, "max": 0.5, "scale": "linear"}} == {
        k: {"scale": "linear", **v} if "min" in v else v for k, v in DEFAULT_SPACE.items()}
    # taxi.yaml's own values lie in it: the first trial trains them.
    assert configured_point(config.trainer, config.tuning.search_space) == {
        "learning_rate": 0.003, "hidden_units": "64,32", "dropout": 0.0}


@pytest.mark.parametrize("setting, error", [
    ("tuning.space={seed: {min: 1, max: 3}}", "tuning.space: Value error, 'seed' is not a tunable trainer key"),
    ("tuning.space={learning_rate: {min: 0.1, max: 0.01}}", "space.learning_rate: empty range: min 0.1 must be below"),
    ("tuning.space={learning_rate: {min: 0, max: 0.1, scale: log}}", "space.learning_rate: scale log needs min > 0"),
    ("tuning.space={hidden_units: {values: []}}", "hidden_units.values: List should have at least 1 item"),
    ("tuning.space={hidden_units: {min: 8, max: 64}}", "hidden_units takes {values: [[64, 32], ...]}"),
    ("tuning.space={dropout: {min: 0, max: 1}}", "1.0 is not a valid trainer.dropout"),
    ("tuning.space={train_steps: {min: 100, max: 1000}}", "tuning.space.train_steps goes below trainer.eval_every"),
    ("tuning.space={global_batch_size: {values: [128, 128]}}", "space.global_batch_size: the values repeat"),
    ("tuning.space={train_steps: {min: 250, max: 300, step: 100}}", "empty range: min 250.0 + step 100"),
    ("tuning.spaces={}", "tuning.spaces: unknown setting"),
    ("tuning.parallel_trials=9", "parallel_trials (9) exceeds trials (8)"),
    ("tuning.algorithm=grid", "tuning.algorithm: Input should be 'random' or 'bayesian'"),
])
def test_an_unknown_key_or_an_empty_range_is_a_config_error_naming_it(setting, error):
    with pytest.raises(ConfigError) as refused:
        load_config(TAXI, ["tuning.trials=8", setting])
    assert error in str(refused.value)


def test_keys_left_empty_start_the_search_where_the_trainer_would_train():
    from components.tuner.space import hyperparameters
    from trainer.budget import LEARNING_RATE
    from trainer.tuning import SIZED, Choice, Range

    space = {"hidden_units": Choice(values=[[16, 16], [64, 32]]), "learning_rate": Range(min=1e-4, max=0.1),
             "global_batch_size": Choice(values=[64, 128])}
    # A trainer section that leaves them empty: the sized widths are the first trial's choice, the learning rate
    # the budget's (not the range's low end, KerasTuner's default), and the batch (planned from the rows at
    # training time) has no configured point.
    assert configured_point(TrainerConfig(), space) == {"hidden_units": SIZED, "learning_rate": LEARNING_RATE}
    hp = hyperparameters(space, TrainerConfig())
    assert hp.values["hidden_units"] == SIZED and hp.get("hidden_units") == SIZED
    assert hp.values["learning_rate"] == LEARNING_RATE
    assert apply(TrainerConfig(hidden_units=[8]), {"hidden_units": SIZED}).hidden_units is None
    # Named widths are the configured point, and no sized choice is added.
    assert configured_point(TrainerConfig(hidden_units=[64, 32]), space)["hidden_units"] == "64,32"
    named = hyperparameters(space, TrainerConfig(hidden_units=[64, 32])).space
    assert [h.values for h in named if h.name == "hidden_units"] == [["16,16", "64,32"]]


def test_a_trials_values_make_the_trainer_config_and_unknown_ones_are_refused():
    cfg = apply(TrainerConfig(), {"hidden_units": "128,64", "global_batch_size": 256.0, "learning_rate": "0.001"})
    assert (cfg.hidden_units, cfg.global_batch_size, cfg.learning_rate) == ([128, 64], 256, 0.001)
    with pytest.raises(TrainerError, match="'seed' is no tunable trainer key"):
        apply(TrainerConfig(), {"seed": 3})
    with pytest.raises(TrainerError, match="trainer.global_batch_size is an integer"):
        apply(TrainerConfig(), {"global_batch_size": "64.5"})


def test_the_local_search_stops_once_max_failed_trials_failed(tmp_path):
    import tensorflow as tf
    from tfx.components.trainer.fn_args_utils import FnArgs

    from components.tuner.search import LoopTuner

    config = load_config("configs/local.yaml", ["tuning.trials=5", "tuning.max_failed_trials=2"])
    tuner = LoopTuner(config.tuning, config.trainer, "accuracy", True, str(tmp_path))
    broken = FnArgs(transform_graph_path=str(tmp_path / "no-transform-graph"), train_files=[], eval_files=[],
                    custom_config={})  # every trial fails reading its data
    with pytest.raises(TuningFailed, match=r"2 trial\(s\) failed \(tuning.max_failed_trials 2\)"):
        tuner.search(fn_args=broken, strategy=tf.distribute.get_strategy())
    found = tuner.record()
    assert [t.state for t in found.trials] == ["FAILED", "FAILED"] and found.best is None
    assert all(t.error for t in found.trials)


def _outputs(tmp_path) -> dict:
    best, results = standard_artifacts.HyperParameters(), standard_artifacts.TunerResults()
    best.uri, results.uri = str(tmp_path / "best"), str(tmp_path / "results")
    for a in (best, results):
        (tmp_path / a.uri.rsplit("/", 1)[-1]).mkdir(parents=True)
    return {"best_hyperparameters": [best], "tuner_results": [results]}


def test_reuse_latest_hands_the_trainer_the_last_search_and_refuses_when_there_is_none(tmp_path):
    tuning_dir = str(tmp_path / "tuning")
    with pytest.raises(NoTuningToReuse, match="no search has run on this root"):
        LatestTuningExecutor().Do({}, _outputs(tmp_path / "a"), {"tuning_dir": tuning_dir})
    searched = record.TuningRecord("auc", True, "random", "local",
                                   (record.Trial("0", record.COMPLETED, {"learning_rate": 0.003}, 0.91, 250, 3.0),),
                                   "0", run="run-1")
    best = {"space": [], "values": {"learning_rate": 0.003}}
    record.publish_latest(tuning_dir, searched, best)
    outputs = _outputs(tmp_path / "b")
    LatestTuningExecutor().Do({}, outputs, {"tuning_dir": tuning_dir})
    assert json.loads((tmp_path / "b" / "best" / record.BEST_FILE).read_text()) == best
    reused = record.read(str(tmp_path / "b" / "results"))
    assert reused.reused and reused.run == "run-1" and reused.best_trial.objective == 0.91
    assert reused.describe().startswith("reused the search of run run-1: 1 trials")
    assert outputs["best_hyperparameters"][0].get_string_custom_property("reused_from") == "run-1"


@pytest.mark.parametrize("algorithm", ["random", "bayesian"])
def test_either_oracle_starts_with_the_configured_values_then_searches(tmp_path, algorithm):
    from components.tuner.search import LoopTuner

    config = load_config(TAXI, ["tuning.trials=4", f"tuning.algorithm={algorithm}"])
    tuner = LoopTuner(config.tuning, config.trainer, "auc", True, str(tmp_path))
    first = tuner.oracle.create_trial("tuner0")
    assert first.hyperparameters.values == configured_point(config.trainer, config.tuning.search_space)
    tuner.oracle.update_trial(first.trial_id, {"auc": 0.9})
    first.status = "COMPLETED"
    tuner.oracle.end_trial(first)
    second = tuner.oracle.create_trial("tuner0")
    assert second.hyperparameters.values != first.hyperparameters.values
    assert set(second.hyperparameters.values) == {"learning_rate", "hidden_units", "dropout"}

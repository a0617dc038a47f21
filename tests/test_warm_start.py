"""Warm start from a base model's SavedModel (trainer/warm_start.py), on synthetic data, in process."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf
from tf_keras.src.saving.legacy.saved_model import utils as keras_saving

from trainer import synthetic, tasks
from trainer.config import TrainerConfig
from trainer.fit import TransformedData, fit_and_export
from trainer.model import build_model
from trainer.warm_start import restore_weights, vocabulary_mismatch, warm_start

TRACED = "-traced"
# Short runs on the learnable synthetic data; the first evaluation comes after 10 steps.
SMALL = dict(strategy="default", global_batch_size=32, steps_per_execution=10, eval_every_steps=10,
             checkpoint_every_steps=10, scale_lr_with_replicas=False)


def _export(model, directory):
    # The object graph of trainer/export.py's ServingModule: the Keras model under `.model`, saved
    # without Keras's traces as trainer/export.py saves it (variables named by layer), and with them
    # (named model/variables/<i>) beside it.
    module = tf.Module()
    module.model = model
    with keras_saving.keras_option_scope(save_traces=False):
        tf.saved_model.save(module, directory)
    tf.saved_model.save(module, directory + TRACED)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("warm")
    layout = synthetic.layout()
    return root, TransformedData(synthetic.write_examples(str(root / "train"), 1024, seed=0),
                                 synthetic.write_examples(str(root / "eval"), 256, seed=1),
                                 synthetic.feature_spec(layout), label=layout.label,
                                 task=tasks.Multiclass(synthetic.NUM_CLASSES),
                                 model_fn=lambda cfg: _model())


def _model(vocab_sizes=None):
    return build_model(synthetic.layout(vocab_sizes=vocab_sizes), synthetic.NUM_CLASSES)


def _fit(root, data, name, steps, init_model=None, **cfg):
    config = TrainerConfig(train_steps=steps, **{**SMALL, **cfg})
    return fit_and_export(config, lambda: data, checkpoint_dir=str(root / name / "ckpt"), logdir=None,
                          export_dir=str(root / name / "export"), export=_export, init_model=init_model)


@pytest.fixture(scope="module")
def base(data):
    root, d = data
    _fit(root, d, "base", 200)
    (root / "assets").mkdir()
    return root, d, str(root / "base" / "export")


def test_first_evaluation_of_a_warm_start_beats_a_cold_start_at_the_same_step(base, caplog):
    root, d, base_dir = base
    caplog.set_level(logging.INFO, logger="trainer.warm_start")
    cold = _fit(root, d, "cold", 10)
    warm = _fit(root, d, "warm", 10, init_model=lambda m: warm_start(m, base_dir, str(root / "assets")))
    assert "starting from the weights of" in caplog.text
    first_cold, first_warm = cold.result.history[0], warm.result.history[0]
    assert first_cold["step"] == first_warm["step"] == 10
    assert first_warm["eval_loss"] < first_cold["eval_loss"] * 0.8, (first_warm, first_cold)
    assert first_warm["eval_accuracy"] > first_cold["eval_accuracy"]


def test_both_export_layouts_restore_the_same_weights(base):
    root, d, base_dir = base
    fresh = _model()
    restored = []
    for directory in (base_dir, base_dir + TRACED):
        model = _model()
        assert restore_weights(model, directory) is None
        restored.append([v.numpy() for v in model.variables])
    assert len(restored[0]) == len(fresh.variables) >= 6
    for a, b, init in zip(*restored, fresh.variables):
        assert np.array_equal(a, b) and not np.array_equal(a, init.numpy())


@pytest.mark.parametrize("layout", ["", TRACED])
def test_other_shapes_cold_start_and_say_why(base, caplog, layout):
    root, d, base_dir = base
    base_dir += layout
    model = _model({"c0": synthetic.CATEGORY_SIZE + 1})
    before = [v.numpy() for v in model.variables]
    assert "shapes changed since the base model" in restore_weights(model, base_dir)
    # Nothing half-restored.
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.variables))
    caplog.set_level(logging.WARNING, logger="trainer.warm_start")
    assert warm_start(model, base_dir, str(root / "assets")) is False
    assert "cold start because shapes changed" in caplog.text


def test_changed_vocabularies_are_named(tmp_path):
    (tmp_path / "base" / "assets").mkdir(parents=True)
    (tmp_path / "now").mkdir()
    (tmp_path / "base" / "assets" / "island").write_text("Biscoe\nDream\n")
    (tmp_path / "now" / "island").write_text("Biscoe\nDream\nTorgersen\n")
    (tmp_path / "base" / "assets" / "sex").write_text("male\n")
    (tmp_path / "now" / "sex").write_text("male\n")
    assert vocabulary_mismatch(str(tmp_path / "base"), str(tmp_path / "now")) == \
        "vocabularies changed since the base model: island"
    (tmp_path / "now" / "island").write_text("Biscoe\nDream\n")
    assert vocabulary_mismatch(str(tmp_path / "base"), str(tmp_path / "now")) is None


def test_no_base_model_is_a_cold_start(base):
    root, d, _ = base
    assert warm_start(_model(), None, str(root / "assets")) is False


def _serving_model(serving, out):
    """The Trainer's base_model as the pipeline hands it over: components/serving/serving_model.py's artifact, read
    by TFX's Trainer executor at path_utils.serving_model_path (fn_args.base_model)."""
    from tfx.types import standard_artifacts
    from tfx.utils import path_utils

    from components.serving.serving_model import SERVING_DIR, ServingModelExecutor

    model = standard_artifacts.Model()
    model.uri = str(out)
    out.mkdir()
    ServingModelExecutor().Do({}, {"model": [model]}, {SERVING_DIR: str(serving)})
    return path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))


def test_warm_start_from_the_model_serving_now(base, tmp_path, caplog):
    """The serving version, not any other model: published to a serving dir, found there, copied, restored."""
    from components.serving import serving_dir

    root, d, base_dir = base
    nothing = _serving_model(tmp_path / "serving", tmp_path / "empty")
    caplog.set_level(logging.INFO, logger="trainer.warm_start")
    assert warm_start(_model(), nothing, str(root / "assets")) is False
    assert "no model serving yet" in caplog.text

    serving_dir.publish(base_dir, str(tmp_path / "serving"), 7)
    model = _model()
    assert warm_start(model, _serving_model(tmp_path / "serving", tmp_path / "copy"), str(root / "assets")) is True
    expected = _model()
    assert restore_weights(expected, base_dir) is None
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(model.variables, expected.variables))

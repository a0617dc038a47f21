"""Warm start: begin from the serving model's weights when they still fit. Why: docs/internals.md."""

from __future__ import annotations

import logging
import os
import re
from typing import Optional

import tensorflow as tf
import tf_keras

log = logging.getLogger(__name__)
# A variable of the Keras model the export holds under its module attribute `model`.
_MODEL_VARIABLE = re.compile(r"model/.*/\.ATTRIBUTES/VARIABLE_VALUE")


def _files(directory: str) -> dict[str, bytes]:
    if not tf.io.gfile.isdir(directory):
        return {}
    return {name: tf.io.gfile.GFile(os.path.join(directory, name), "rb").read()
            for name in tf.io.gfile.listdir(directory) if not tf.io.gfile.isdir(os.path.join(directory, name))}


def vocabulary_mismatch(base_model_dir: str, transform_assets_dir: str) -> Optional[str]:
    """Why the base model's vocabularies differ from the new Transform's, or None when they match."""
    before, now = _files(os.path.join(base_model_dir, "assets")), _files(transform_assets_dir)
    changed = sorted(n for n in set(before) | set(now) if before.get(n) != now.get(n))
    if changed:
        return f"vocabularies changed since the base model: {', '.join(changed)}"
    return None


def restore_weights(model: tf_keras.Model, base_model_dir: str) -> Optional[str]:
    """Load the base model's weights into `model` (built); returns why not, or None when done.

    Matched through the checkpoint's object graph, as tf.train.Checkpoint restores, so it does not
    depend on the names the export gave the variables (they differ with and without Keras's traces)."""
    path = os.path.join(base_model_dir, "variables", "variables")
    saved = [k for k in tf.train.load_checkpoint(path).get_variable_to_shape_map() if _MODEL_VARIABLE.fullmatch(k)]
    if len(saved) != len(model.variables):
        return f"the base model has {len(saved)} variables, this model {len(model.variables)}"
    before = [v.numpy() for v in model.variables]
    try:
        # The export's root object holds the Keras model as `model` (trainer/export.py's ServingModule).
        tf.train.Checkpoint(model=model).read(path).assert_existing_objects_matched()
    except (ValueError, AssertionError) as e:
        # A restore that fails halfway may have assigned some variables: all or nothing.
        for variable, value in zip(model.variables, before):
            variable.assign(value)
        what = "shapes changed" if isinstance(e, ValueError) else "the layers changed"
        return f"{what} since the base model: {str(e).splitlines()[0][:300]}"
    return None


def warm_start(model: tf_keras.Model, base_model_dir: Optional[str], transform_assets_dir: str) -> bool:
    """Try to start `model` from the base model; log what happened either way."""
    if not base_model_dir or not tf.io.gfile.exists(os.path.join(base_model_dir, "saved_model.pb")):
        log.info("warm start: no model serving yet (%s holds no SavedModel); cold start", base_model_dir)
        return False
    why = vocabulary_mismatch(base_model_dir, transform_assets_dir) or restore_weights(model, base_model_dir)
    if why:
        log.warning("warm start: cold start because %s", why)
        return False
    log.info("warm start: starting from the weights of %s", base_model_dir)
    return True

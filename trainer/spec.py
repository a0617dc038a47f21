"""What the Trainer learns about the data from the features section and Transform's
output: the resolved features, the model's input layout, and the task."""

from __future__ import annotations

import dataclasses
import logging
from typing import Mapping

import tensorflow_transform as tft
import tf_keras

from trainer import data, features, roles, tasks
from trainer.config import TrainerConfig
from trainer.feature_config import ResolvedFeatures, resolve
from trainer.features import ModelLayout, layout_from_schema
from trainer.model import load_builder

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrainingSpec:
    resolved: ResolvedFeatures
    layout: ModelLayout
    task: tasks.Task

    def build_model(self, cfg: TrainerConfig) -> tf_keras.Model:
        """`cfg`: planned and sized (trainer/fit.py), so a custom builder sees the widths and L2 the run uses."""
        return load_builder(self.resolved.config.model_builder)(self.layout, self.task.width, cfg)


def training_spec(custom_config: Mapping, tft_output: tft.TFTransformOutput, train_files) -> TrainingSpec:
    # The roles Transform inferred from the data (trainer/roles.py), so both read every column alike.
    resolved = resolve(features.from_custom_config(custom_config),
                       features.column_types(tft_output.raw_feature_spec()),
                       roles.read_beside(tft_output.transform_savedmodel_dir))
    log.info("features:\n%s", resolved.describe())
    schema = tft_output.transformed_metadata.schema
    layout = layout_from_schema(schema, resolved)
    return TrainingSpec(resolved, layout, make_task(resolved, schema, layout.label, train_files))


def make_task(resolved: ResolvedFeatures, transformed_schema, label_xf: str, train_files) -> tasks.Task:
    if resolved.task == "multiclass":
        # The label's vocabulary size, as Transform recorded it.
        [label] = [f for f in transformed_schema.feature if f.name == label_xf]
        return tasks.Multiclass(num_classes=int(label.int_domain.max) + 1)
    if resolved.task == "binary":
        return tasks.Binary()
    mean, std = data.label_moments(train_files, label_xf, log=resolved.label_log)
    log.info("regression label %s: mean %.6g, std %.6g over the training split%s", resolved.label, mean, std,
             " of log(1 + label): trained on a log scale, served on the label's own" if resolved.label_log else "")
    return tasks.Regression(mean, std, resolved.label_log)

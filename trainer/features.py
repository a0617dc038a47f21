"""The feature config as the TF code sees it: column types, transformed feature names, and the model's input
layout read from Transform's output schema. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Mapping, Optional

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2

from trainer.feature_config import ColumnType, FeatureConfig, ResolvedFeatures

# Key of the features section in Transform's and the Trainer's custom_config.
CONFIG_KEY = "features"


def xf(name: str) -> str:
    """Name of a feature after Transform."""
    return f"{name}_xf"


def vocab_name(column: str) -> str:
    """Transform's vocabulary file for a column: its name, made safe as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", column)


def from_custom_config(custom_config: Optional[Mapping]) -> FeatureConfig:
    if not custom_config or CONFIG_KEY not in custom_config:
        raise ValueError(f"custom_config has no {CONFIG_KEY!r} section: the pipeline passes the config's "
                         "features section to Transform and Trainer")
    return FeatureConfig.model_validate(custom_config[CONFIG_KEY])


def column_types(columns: Mapping[str, object]) -> dict[str, ColumnType]:
    """'int' | 'float' | 'string' per column, from tensors or tf.io feature specs."""
    return {name: _kind(value.dtype, name) for name, value in columns.items()}


def _kind(dtype: tf.DType, name: str) -> ColumnType:
    if dtype == tf.string:
        return "string"
    if dtype.is_integer:
        return "int"
    if dtype.is_floating:
        return "float"
    raise ValueError(f"column {name!r} has type {dtype.name}; expected strings, integers or floats")


@dataclasses.dataclass(frozen=True)
class CategoricalInput:
    name: str           # transformed feature
    size: int           # ids are 0 .. size-1
    embedding_dim: int  # 0: one-hot


@dataclasses.dataclass(frozen=True)
class ModelLayout:
    """The model's inputs: dense floats and categorical ids with their sizes, all static."""
    dense: tuple[str, ...]
    categorical: tuple[CategoricalInput, ...]
    label: str  # the transformed label: popped from the batch before the model sees it


def embedding_dim(size: int) -> int:
    """A common rule of thumb: grows with the fourth root of the vocabulary."""
    return min(32, math.ceil(6 * size ** 0.25))


def layout_from_schema(transformed_schema, resolved: ResolvedFeatures) -> ModelLayout:
    """Every transformed feature but the label is an input: floats dense, ints categorical
    with the id range Transform recorded (int_domain), so shapes are static."""
    label = xf(resolved.label)
    by_name = {f.name: f for f in transformed_schema.feature}
    if label not in by_name:
        raise ValueError(f"Transform produced no {label!r} (the label {resolved.label!r} transformed); "
                         "a custom preprocessing_fn must output it")
    preferred = [xf(n) for n in resolved.inputs if xf(n) in by_name]
    order = preferred + sorted(set(by_name) - set(preferred) - {label})
    options = {xf(f.name): f for f in resolved.categorical}
    dense, categorical = [], []
    for name in order:
        feature = by_name[name]
        if feature.type == schema_pb2.FLOAT:
            dense.append(name)
            continue
        if feature.type != schema_pb2.INT or not feature.int_domain.HasField("max"):
            raise ValueError(f"transformed feature {name!r} is neither a float nor an int with a known range "
                             "(int_domain max): the model needs static sizes. tft vocabularies and buckets "
                             "record it; for other ints use tft.schema_inference.set_tensor_schema_override")
        size = int(feature.int_domain.max) + 1
        categorical.append(CategoricalInput(name, size, _dim(options.get(name), size, resolved.config)))
    return ModelLayout(tuple(dense), tuple(categorical), label)


def _dim(option, size: int, config: FeatureConfig) -> int:
    encoding = option.encoding if option is not None else "auto"
    if encoding == "one_hot" or (encoding == "auto" and size <= config.one_hot_max_size):
        return 0
    return (option.embedding_dim if option is not None and option.embedding_dim else embedding_dim(size))

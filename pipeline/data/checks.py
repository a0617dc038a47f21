"""The dataset a config describes, checked before anything runs. Why: docs/internals.md."""

from __future__ import annotations

import difflib
import os
from typing import Optional

from pipeline.config import Config, resolve
from pipeline.errors import ConfigError
from trainer.errors import FeatureConfigError
from trainer.feature_config import FeatureConfig, ResolvedFeatures, columns_from_schema, not_a_column
from trainer.feature_config import resolve as resolve_features
from trainer.tasks import MAIN_METRICS


def require_features(config: Config) -> FeatureConfig:
    if config.features is None:
        raise ConfigError("features: missing. Name the dataset's label and task (features.label, features.task); "
                          "see docs/data.md")
    return config.features


def check_features(config: Config) -> Optional[ResolvedFeatures]:
    """Raises ConfigError naming the field; None when the columns can't be read from here
    (a gs:// schema or data when compiling for Vertex: Transform then checks at run time)."""
    features = require_features(config)
    _check_bounds(config)
    schema_file = config.data.schema_file and resolve(config.data.schema_file)
    try:
        if schema_file:
            if schema_file.startswith("gs://"):
                return None
            columns = columns_from_schema(load_schema(schema_file))
            check_slices(config, list(columns))
            return resolve_features(features, columns)
        header = _csv_header(resolve(config.data.input_dir))
        if header is not None:
            _check_names(features, header)
            check_slices(config, header)
    except FeatureConfigError as e:
        raise ConfigError(str(e)) from None
    return None


def check_slices(config: Config, columns: list[str]) -> None:
    """evaluator.slices names columns of the data (the examples carry every column, used by the model or not),
    and not the label: a slice of one label value has one class, where AUC or accuracy say nothing."""
    for i, slice_columns in enumerate(config.evaluator.slice_columns() or []):
        for name in slice_columns:
            if name == config.features.label:
                raise ConfigError(f"evaluator.slices[{i}]: {name!r} is the label (features.label); slice by the "
                                  "columns a prediction is made from")
            if name not in columns:
                close = difflib.get_close_matches(name, columns, n=1)
                raise ConfigError(f"evaluator.slices[{i}]: {name!r} is not a column of the data"
                                  + (f"; did you mean {close[0]!r}?" if close else f" ({', '.join(columns)})"))


def _check_bounds(config: Config) -> None:
    metric = MAIN_METRICS[config.features.task]
    for field in ("lower_bound", "upper_bound", "slice_lower_bound", "slice_upper_bound"):
        value = getattr(config.evaluator, field)
        if value is not None and metric.fraction and not 0 <= value <= 1:
            raise ConfigError(f"evaluator.{field}: {value} is outside [0, 1], the range of {metric.label} "
                              f"(the main metric of task {config.features.task})")


def load_schema(path: str):
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    if not os.path.isfile(path):
        raise ConfigError(f"data.schema_file: {path} does not exist (`python -m pipeline schema infer` writes one)")
    return text_format.Parse(open(path).read(), schema_pb2.Schema())


def _csv_header(input_dir: str) -> Optional[list[str]]:
    if input_dir.startswith("gs://") or not os.path.isdir(input_dir):
        return None
    files = sorted(f for f in os.listdir(input_dir) if f.lower().endswith(".csv"))
    if not files:
        return None
    # As ExampleGen will name the columns: the snapshot drops a byte-order mark ("utf-8-sig"), then TFX splits
    # the stripped first line on commas (tfx/utils/io_utils.py load_csv_column_names).
    with open(os.path.join(input_dir, files[0]), newline="", encoding="utf-8-sig", errors="replace") as f:
        return f.readline().strip().split(",")


def _check_names(features: FeatureConfig, header: list[str]) -> None:
    """Without a schema only the names can be checked; types are known once SchemaGen ran."""
    named = [("label", features.label), *(("numeric", f.name) for f in features.numeric),
             *(("categorical", f.name) for f in features.categorical), *(("ignore", n) for n in features.ignore)]
    for field, name in named:
        if name not in header:
            raise not_a_column(field, name, header, f"CSV header: {', '.join(header)}")

"""What a scoring run reads and writes, from the schema, the features section and the model itself."""

from __future__ import annotations

from typing import Optional, Sequence

from components.scoring import output
from components.scoring.columns import Columns, from_schema
from components.scoring.model import class_names, output_dims
from trainer.feature_config import FeatureConfig, columns_from_schema, resolve


def plan(schema, features: FeatureConfig, keep: Optional[Sequence[str]], missing_values: Sequence[str],
         model_dir: str, format: str) -> tuple[Columns, output.Layout]:
    """The input columns (the model's inputs, as the features section resolves against the schema) and the
    output layout (`keep`, by default the features.ignore columns, then the serving outputs)."""
    resolved = resolve(features, columns_from_schema(schema))
    kept = list(features.ignore if keep is None else keep)
    columns = from_schema(schema, resolved.inputs, kept, missing_values)
    names = class_names(model_dir, features.label) if features.task == "multiclass" else None
    return columns, output.layout_of(output_dims(model_dir), kept, names, format)

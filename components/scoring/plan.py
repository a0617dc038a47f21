"""What a scoring run reads and writes: from the version's own record of its inputs, the model's outputs, and the
columns to keep."""

from __future__ import annotations

from typing import Optional, Sequence

from components.errors import ModelInputsError
from components.scoring import output
from components.scoring.columns import Columns, from_model_inputs, from_schema
from components.scoring.model import class_names, output_dims
from trainer import model_inputs
from trainer.feature_config import FeatureConfig, columns_from_schema, resolve


def plan(model_dir: str, keep: Optional[Sequence[str]], missing_values: Sequence[str], format: str,
         schema=None, features: Optional[FeatureConfig] = None) -> tuple[Columns, output.Layout]:
    """The input columns and the output layout (`keep`, by default the features.ignore columns, then the serving
    outputs) for the version in `model_dir`, from what it recorded at export (trainer/model_inputs.py): no schema or
    features section needed, and whatever roles it was trained with. A version exported before versions kept that
    record is read with `schema` (a tensorflow_metadata Schema) and `features`, resolved as Transform resolved them
    before it inferred roles; without them, ModelInputsError names what is missing."""
    recorded = model_inputs.read(model_dir)
    if recorded is not None:
        kept = list(recorded.ignore if keep is None else keep)
        columns = from_model_inputs(recorded, kept, missing_values)
        label, task, id_names = recorded.label, recorded.task, recorded.classes
    elif schema is not None and features is not None:
        kept = list(features.ignore if keep is None else keep)
        columns = from_schema(schema, resolve(features, columns_from_schema(schema)).inputs, kept, missing_values)
        label, task, id_names = features.label, features.task, ()
    else:
        raise ModelInputsError(f"{model_dir} has no record of the columns it reads ({model_inputs.DIRECTORY}/"
                               f"{model_inputs.FILE}: versions exported before it was kept lack it) and no schema "
                               "was given to read them from")
    names = class_names(model_dir, label) if task == "multiclass" else None
    return columns, output.layout_of(output_dims(model_dir), kept, names, format, id_names)

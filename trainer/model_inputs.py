"""What a model version reads, kept inside its SavedModel directory so that whoever scores it later needs nothing
else: the raw columns of a serving request with their types and whether the model needs a value, the label and the
task with the binary classes' names, the columns it was trained without, and how it read each column (the table of
trainer/role_table.py). trainer/export.py writes it; batch scoring reads it (components/scoring/plan.py), for a
version in a gs:// serving directory too. Why: docs/predict.md."""

from __future__ import annotations

import dataclasses
import json
from typing import Mapping, Optional

import tensorflow as tf

from trainer import role_table
from trainer.feature_config import ResolvedFeatures
from trainer.features import column_types

# The SavedModel directory for files TensorFlow itself does not load (tensorflow/python/saved_model/constants.py,
# EXTRA_ASSETS_DIRECTORY); TF Serving reads only its warm-up file there, and a push copies the version whole.
DIRECTORY, FILE = "assets.extra", "model_inputs.json"


@dataclasses.dataclass(frozen=True)
class Input:
    name: str
    type: str       # int | float | string: the column's type in the request (trainer/feature_config.ColumnType)
    required: bool  # parsed as a FixedLenFeature without a default: a request without a value fails


@dataclasses.dataclass(frozen=True)
class ModelInputs:
    label: str
    task: str
    inputs: tuple[Input, ...]
    ignore: tuple[str, ...]   # features.ignore: the ids and the like a model never sees
    # binary with a string label: the names of class_id 0 and 1 (the other value, or "not <positive>"); else empty.
    classes: tuple[str, ...]
    columns: tuple[dict, ...]  # role_table.rows: each column's role, encoding and why

    def to_json(self) -> str:
        body = dataclasses.asdict(self)
        return json.dumps(body, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ModelInputs":
        body = json.loads(text)
        return cls(label=body["label"], task=body["task"], inputs=tuple(Input(**i) for i in body["inputs"]),
                   ignore=tuple(body.get("ignore", ())), classes=tuple(body.get("classes", ())),
                   columns=tuple(body.get("columns", ())))


def describe(request_spec: Mapping[str, object], resolved: ResolvedFeatures, raw_schema) -> ModelInputs:
    """The record of a model whose serving signature parses `request_spec` (tf.io feature specs), trained with
    `resolved` on data of `raw_schema` (the raw tensorflow_metadata Schema Transform read)."""
    kinds = column_types(request_spec)
    inputs = []
    for name in sorted(request_spec):
        spec = request_spec[name]
        if isinstance(spec, tf.io.FixedLenFeature):
            required = spec.default_value is None
        elif isinstance(spec, tf.io.VarLenFeature):
            required = False
        else:
            raise ValueError(f"model input {name!r} is parsed as {type(spec).__name__}; a request's raw columns are "
                             "FixedLenFeature or VarLenFeature (tensorflow_transform's schema_as_feature_spec)")
        inputs.append(Input(name, kinds[name], required))
    return ModelInputs(resolved.label, resolved.task, tuple(inputs), tuple(resolved.config.ignore),
                       binary_classes(resolved, raw_schema), tuple(role_table.rows(resolved)))


def binary_classes(resolved: ResolvedFeatures, raw_schema) -> tuple[str, ...]:
    """(name of class_id 0, name of class_id 1) for a binary task on a string label: the positive class, and the
    label's one other value in the schema's string domain (else "not <positive class>"); () otherwise."""
    positive = resolved.config.positive_class
    if resolved.task != "binary" or positive is None:
        return ()
    others = [v for v in _string_domain(raw_schema, resolved.label) if v != positive]
    return (others[0] if len(others) == 1 else f"not {positive}", positive)


def _string_domain(schema, name: str) -> list[str]:
    feature = next((f for f in schema.feature if f.name == name), None)
    if feature is None:
        return []
    if feature.HasField("string_domain"):
        return list(feature.string_domain.value)
    if feature.HasField("domain"):  # a reference to a top-level string_domain
        return next((list(d.value) for d in schema.string_domain if d.name == feature.domain), [])
    return []


def path(model_dir: str) -> str:
    return f"{model_dir.rstrip('/')}/{DIRECTORY}/{FILE}"


def write(model_dir: str, record: ModelInputs) -> str:
    target = path(model_dir)
    tf.io.gfile.makedirs(target.rsplit("/", 1)[0])
    with tf.io.gfile.GFile(target, "w") as f:
        f.write(record.to_json())
    return target


def read(model_dir: str) -> Optional[ModelInputs]:
    """The version's record; None for a version exported before versions carried one."""
    if not tf.io.gfile.exists(path(model_dir)):
        return None
    with tf.io.gfile.GFile(path(model_dir)) as f:
        return ModelInputs.from_json(f.read())

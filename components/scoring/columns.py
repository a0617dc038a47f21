"""Which CSV columns a scoring run reads, of what type, and which it keeps beside the outputs."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from tfx_bsl.coders import csv_decoder

from components.errors import CsvInputError

ColumnType = csv_decoder.ColumnType
# The schema's types as TFX's CSV decoder maps them (tfx_bsl/coders/csv_decoder.py _SCHEMA_TYPE_TO_COLUMN_TYPE).
_SCHEMA_TYPES = {"INT": ColumnType.INT, "FLOAT": ColumnType.FLOAT, "BYTES": ColumnType.STRING}
# The same for a model's recorded inputs (trainer/model_inputs.py: trainer/feature_config.ColumnType).
_INPUT_TYPES = {"int": ColumnType.INT, "float": ColumnType.FLOAT, "string": ColumnType.STRING}


@dataclasses.dataclass(frozen=True)
class Columns:
    """The model's raw inputs (what a serving request carries) with their schema types, those the model cannot
    do without, the columns kept in the output, and the cells that mean missing (data.missing_values)."""
    inputs: tuple[str, ...]
    types: dict[str, ColumnType]
    required: frozenset[str]
    keep: tuple[str, ...]
    missing_values: tuple[bytes, ...]

    def positions(self, header: Sequence[str], path: str) -> tuple[list[int], list[int]]:
        """Where the inputs and the kept columns are in `header`; CsvInputError naming every absent one."""
        absent = [f"{name} ({role})" for role, names in (("a model input", self.inputs), ("predict.keep", self.keep))
                  for name in names if name not in header]
        if absent:
            raise CsvInputError(f"{path}: no column {', '.join(absent)} (CSV header: {','.join(header)})")
        return [header.index(n) for n in self.inputs], [header.index(n) for n in self.keep]


def from_schema(schema, inputs: Iterable[str], keep: Iterable[str], missing_values: Iterable[str]) -> Columns:
    """The columns from the schema (tensorflow_metadata Schema) the model was trained with.

    A feature with a fixed `shape` parses as a FixedLenFeature without a default (tensorflow_transform's
    schema_utils.schema_as_feature_spec), so a row without it would fail its whole batch: it is required.
    """
    from tensorflow_metadata.proto.v0 import schema_pb2

    by_name = {f.name: f for f in schema.feature}
    types, required = {}, set()
    for name in inputs:
        feature = by_name.get(name)
        kind = feature is not None and schema_pb2.FeatureType.Name(feature.type)
        if kind not in _SCHEMA_TYPES:
            raise CsvInputError(f"model input {name!r}: the schema has no INT, FLOAT or BYTES feature of that name")
        types[name] = _SCHEMA_TYPES[kind]
        if feature.HasField("shape"):
            required.add(name)
    return Columns(tuple(inputs), types, frozenset(required), tuple(keep), _tokens(missing_values))


def from_model_inputs(recorded, keep: Iterable[str], missing_values: Iterable[str]) -> Columns:
    """The columns a version recorded when it was exported (trainer/model_inputs.ModelInputs): its request's raw
    columns, their types, and those parsed without a default (required), exactly as its serving_default reads them."""
    return Columns(tuple(i.name for i in recorded.inputs), {i.name: _INPUT_TYPES[i.type] for i in recorded.inputs},
                   frozenset(i.name for i in recorded.inputs if i.required), tuple(keep), _tokens(missing_values))


def _tokens(missing_values: Iterable[str]) -> tuple[bytes, ...]:
    return tuple(t.encode() for t in missing_values if t)

"""The `evaluator` section's slice keys: which slices the Evaluator reports and the gates on each
(components/evaluation/slicing.py, docs/evaluation.md)."""

from __future__ import annotations

import re
from typing import Optional, Union

from pydantic import Field, field_validator, model_validator

from trainer.config import Section

# A column name as a CSV header or a schema writes it; slicing reads the raw column of that name.
_COLUMN_RE = re.compile(r"^[^\s,:]([^,:]*[^\s,:])?$")
MAX_CROSS = 3  # columns in one crossed slice: beyond that the slices are too small to say anything


class SliceSettings(Section):
    # Each entry a column, or a list of columns for a cross: [island, [island, sex]]. null (the default): one
    # slice per categorical (or boolean) column with at most auto_slice_max_values values in the evaluated split,
    # as the run's column roles read them; []: the overall slice only. The overall slice is always evaluated.
    slices: Optional[list[Union[str, list[str]]]] = None
    auto_slice_max_values: int = Field(10, ge=2, le=1000)
    # The slice gates below apply only to slices with at least this many evaluated examples; smaller ones are
    # reported with their count, not gated.
    slice_min_examples: int = Field(20, ge=1)
    # Bounds on the task's main metric in every such slice (unset: no bound per slice) ...
    slice_lower_bound: Optional[float] = None
    slice_upper_bound: Optional[float] = None
    # ... and how much worse than the model serving now (on the same rows) such a slice may be (unset: no limit).
    slice_max_regression: Optional[float] = Field(None, ge=0)

    @field_validator("slices")
    @classmethod
    def _slices(cls, v: Optional[list[Union[str, list[str]]]]) -> Optional[list[Union[str, list[str]]]]:
        if v is None:
            return None
        seen = set()
        for i, entry in enumerate(v):
            columns = [entry] if isinstance(entry, str) else list(entry)
            where = f"evaluator.slices[{i}]"
            if not columns:
                raise ValueError(f"{where} is an empty list: name a column, or a list of columns to cross")
            if len(columns) > MAX_CROSS:
                raise ValueError(f"{where} crosses {len(columns)} columns; at most {MAX_CROSS}")
            for name in columns:
                if not _COLUMN_RE.match(name):
                    raise ValueError(f"{where}: {name!r} is not a column name")
            if len(set(columns)) != len(columns):
                raise ValueError(f"{where} names a column twice: {columns}")
            key = frozenset(columns)
            if key in seen:
                raise ValueError(f"{where} repeats the slice {columns}")
            seen.add(key)
        return v

    @model_validator(mode="after")
    def _slice_bounds_ordered(self) -> "SliceSettings":
        low, high = self.slice_lower_bound, self.slice_upper_bound
        if low is not None and high is not None and low > high:
            raise ValueError(f"slice_lower_bound {low} is above slice_upper_bound {high}")
        return self

    def slice_columns(self) -> Optional[list[list[str]]]:
        """The configured slices as lists of columns; None: inferred at run time."""
        return None if self.slices is None else [[s] if isinstance(s, str) else list(s) for s in self.slices]

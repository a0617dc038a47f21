"""The model's size from its inputs: the hidden layers' widths from how many values reach the first layer
(numbers, one-hot ids and embedding widths), unless trainer.hidden_units names them. docs/trainer.md (a model
sized to the table) has the rule's measurements."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from trainer.features import ModelLayout

# The first layer is the power of two at or above twice the input width, within these bounds; each later layer
# is half the one before, down to MIN_WIDTH; LAYERS layers.
MIN_WIDTH, MAX_WIDTH = 32, 512
WIDTH_PER_INPUT = 2
LAYERS = 2


@dataclasses.dataclass(frozen=True)
class Sizing:
    hidden_units: tuple[int, ...]
    input_width: int  # values the first layer reads
    why: str  # "inferred from ..." or "trainer.hidden_units"

    def describe(self) -> str:
        return f"hidden layers {', '.join(map(str, self.hidden_units))} ({self.why})"


def input_width(layout: ModelLayout) -> int:
    """Values reaching the first layer: one per number, the ids of a one-hot category, an embedding's width."""
    return len(layout.dense) + sum(c.embedding_dim or c.size for c in layout.categorical)


def size(layout: ModelLayout, hidden_units: Optional[list[int]] = None) -> Sizing:
    width = input_width(layout)
    if hidden_units:
        return Sizing(tuple(hidden_units), width, "trainer.hidden_units")
    first = min(MAX_WIDTH, max(MIN_WIDTH, 2 ** math.ceil(math.log2(max(1, WIDTH_PER_INPUT * width)))))
    units = tuple(max(MIN_WIDTH, first // 2 ** i) for i in range(LAYERS))
    dense, onehot = len(layout.dense), sum(1 for c in layout.categorical if not c.embedding_dim)
    embedded = len(layout.categorical) - onehot
    return Sizing(units, width, f"inferred from {width:,} input values: {dense} numbers, {onehot} one-hot and "
                                f"{embedded} embedded categories; trainer.hidden_units overrides")

"""The model's size from its inputs: the hidden layers' widths from how many values reach the first layer
(numbers, one-hot ids and embedding widths), unless trainer.hidden_units names them; and the L2 penalty on their
weights from how many weights each training row has to pin down, unless trainer.l2 names it. docs/trainer.md (a
model sized to the table) has the rules' measurements."""

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
# L2 on the hidden kernels: this much per weight of them per training row, within [MIN_L2, MAX_L2]. Many weights
# for few rows (a wide table of 6,000 loans) want a strong pull towards zero; few for many (diamonds' 9 columns,
# 32,000 rows) almost none. Without a row count (a step budget), the step budget's STEP_L2, as it always was.
L2_PER_WEIGHT_PER_ROW = 2.3e-4
MIN_L2, MAX_L2 = 1e-5, 0.03
STEP_L2 = 0.01


@dataclasses.dataclass(frozen=True)
class Sizing:
    hidden_units: tuple[int, ...]
    input_width: int  # values the first layer reads
    why: str  # "inferred from ..." or "trainer.hidden_units"

    @property
    def weights(self) -> int:
        """The hidden layers' kernel weights: what the L2 penalty applies to."""
        widths = (self.input_width, *self.hidden_units)
        return sum(a * b for a, b in zip(widths, widths[1:]))

    def describe(self, l2: Optional[float] = None, l2_why: str = "") -> str:
        text = f"hidden layers {', '.join(map(str, self.hidden_units))} ({self.why})"
        return text + (f"; L2 {l2:.2g} ({l2_why})" if l2 is not None else "")


def l2(sized: Sizing, rows: int) -> tuple[float, str]:
    """The L2 penalty for `sized` trained on `rows` rows, and why."""
    if not rows:
        return STEP_L2, "the step budget's"
    value = min(MAX_L2, max(MIN_L2, L2_PER_WEIGHT_PER_ROW * sized.weights / rows))
    return value, (f"inferred: {L2_PER_WEIGHT_PER_ROW:g} x {sized.weights:,} weights / {rows:,} rows; "
                   "trainer.l2 overrides")


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

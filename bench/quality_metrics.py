"""The quality part's figures: a table's main metric on the held-out rows (binary AUC, multiclass accuracy,
regression RMSE), and how far our model got from the linear model towards the GBM."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from bench.quality_tables import Table
from bench.scoring import auc


def truth(table: Table, label: pd.Series) -> np.ndarray:
    """The label as the metric reads it: 0/1 for binary (the positive class, or a non-zero integer, is 1, as the
    pipeline reads it), the class name for multiclass, the number for regression."""
    if table.task == "binary":
        if table.positive_class is not None:
            return (label.astype(str) == table.positive_class).to_numpy(int)
        return (label.astype(float) != 0).to_numpy(int)
    if table.task == "multiclass":
        return label.astype(str).to_numpy()
    return label.astype(float).to_numpy()


def value(table: Table, labels: np.ndarray, predicted: np.ndarray) -> float:
    """`predicted`: the positive class's probability (binary), the class name (multiclass), the number
    (regression)."""
    if len(labels) != len(predicted) or not len(labels):
        raise ValueError(f"{table.name}: {len(labels)} labels against {len(predicted)} predictions")
    if table.task == "binary":
        return auc(labels, predicted)
    if table.task == "multiclass":
        return float(np.mean(np.asarray(labels).astype(str) == np.asarray(predicted).astype(str)))
    diff = np.asarray(predicted, float) - np.asarray(labels, float)
    return float(np.sqrt(np.mean(diff * diff)))


def gap_closed(ours: Optional[float], linear: float, gbm: float) -> Optional[float]:
    """(ours - linear) / (gbm - linear): 0 is the linear model, 1 the GBM, on AUC, accuracy or RMSE alike (for RMSE
    both differences are negative when we improve). None without our figure, or when the GBM is no better than the
    linear model (no gap to close)."""
    if ours is None or gbm == linear:
        return None
    return (ours - linear) / (gbm - linear)


def beats(table: Table, ours: Optional[float], other: float) -> bool:
    if ours is None:
        return False
    return ours > other if table.higher_is_better else ours < other

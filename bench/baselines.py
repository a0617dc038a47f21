"""The quality part's yardsticks: scikit-learn's HistGradientBoosting and a linear model, fit on every row the
pipeline was given and scored on the held-out rows, on the same feature columns as our model (the table's
features.ignore left out).

The columns, from the training rows: numbers stay numbers (the linear model imputes the median and adds a
missing indicator, then standardizes); ISO date and timestamp strings become numeric parts (year, month, day of
week, hour); every other string is a category of its 254 most frequent values plus "other" (HistGradientBoosting
takes at most 255), one-hot for the linear model. The linear model also reads each number with few distinct
whole values (an hour, a month, a day of the month: at most FEW_VALUES) one-hot beside its value, as a person
fitting a logistic regression would: on flights that lifts its held-out AUC from 0.662 to 0.710 (churn: 0.833
to 0.885), and a weaker yardstick would flatter ours. Seeds are fixed. Results are cached beside the prepared table,
keyed by it, the ignored columns and this module's version.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from typing import Optional

import numpy as np
import pandas as pd

from bench import quality_metrics
from bench.quality_data import Prepared

VERSION = 2  # bump when a change here changes the scores: the cached ones are then refit
SEED = 0
MAX_CATEGORIES = 255  # HistGradientBoosting's most categories per feature (max_bins)
OTHER = "(other)"
MISSING = "(missing)"
DATE_SHARE = 0.95  # of a string column's present values parsing as ISO dates, for it to count as a date
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")
DATE_PARTS = ("year", "month", "dayofweek", "hour")
FEW_VALUES = 32
ONE_HOT = "{}=one-hot"  # the linear model's one-hot copy of a few-valued number


@dataclasses.dataclass(frozen=True)
class Columns:
    """How each feature column is read, decided on the training rows."""
    numeric: tuple[str, ...]
    dates: tuple[str, ...]
    categories: dict[str, tuple[str, ...]]  # column -> the values kept, most frequent first


def feature_columns(prepared: Prepared, frame: pd.DataFrame) -> list[str]:
    table = prepared.table
    return [c for c in frame.columns if c != table.label and c not in table.ignore]


def columns_of(frame: pd.DataFrame, names: list[str]) -> Columns:
    numeric, dates, categories = [], [], {}
    for name in names:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column):
            numeric.append(name)
            continue
        present = column.dropna().astype(str)
        if len(present) and present.str.match(_ISO_DATE).mean() >= DATE_SHARE:
            dates.append(name)
            continue
        counts = present.value_counts()
        # Most frequent first, ties by value: the same categories on every run.
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        categories[name] = tuple(v for v, _ in ranked[:MAX_CATEGORIES - 1])
    return Columns(tuple(numeric), tuple(dates), categories)


def design(frame: pd.DataFrame, columns: Columns) -> pd.DataFrame:
    """The model's input frame: floats, date parts, and pandas categoricals (kept values + OTHER; missing stays
    missing)."""
    out = {name: frame[name].astype(float) for name in columns.numeric}
    for name in columns.dates:
        # The hour as written: a trailing Z is UTC already, and the pipeline also reads the hour written.
        parsed = pd.to_datetime(frame[name], errors="coerce", utc=True)
        for part in DATE_PARTS:
            out[f"{name}_{part}"] = getattr(parsed.dt, part).astype(float)
    for name, kept in columns.categories.items():
        values = frame[name].astype(object)
        known = values.isin(kept) | values.isna()
        values = values.where(known, OTHER)
        out[name] = pd.Categorical(values, categories=[*kept, OTHER])
    return pd.DataFrame(out, index=frame.index)


def _linear(task: str, numeric: list[str], categorical: list[str]):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    steps = [("numeric", make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler()),
              numeric),
             ("categorical", OneHotEncoder(handle_unknown="ignore"), categorical)]
    model = (Ridge(alpha=1.0) if task == "regression"
             else LogisticRegression(max_iter=2000, random_state=SEED))
    return make_pipeline(ColumnTransformer([s for s in steps if s[2]]), model)


def _gbm(task: str):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    kind = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    return kind(categorical_features="from_dtype", random_state=SEED)


def few_valued(x: pd.DataFrame, numeric: list[str]) -> list[str]:
    """The numbers whose present values are at most FEW_VALUES distinct whole numbers."""
    def few(column: pd.Series) -> bool:
        present = column.dropna()
        return len(present) > 0 and (present == present.round()).all() and present.nunique() <= FEW_VALUES
    return [name for name in numeric if few(x[name])]


def _for_linear(x: pd.DataFrame, categorical: list[str], one_hot: list[str]) -> pd.DataFrame:
    """Categoricals as plain strings with missing as a value of its own, which OneHotEncoder takes; each few-valued
    number also as such a string."""
    x = x.copy()
    for name in one_hot:
        x[ONE_HOT.format(name)] = x[name]
    for name in [*categorical, *map(ONE_HOT.format, one_hot)]:
        x[name] = x[name].astype(object).where(x[name].notna(), MISSING).astype(str)
    return x


def _predicted(task: str, model, x: pd.DataFrame) -> np.ndarray:
    if task == "binary":
        return model.predict_proba(x)[:, list(model.classes_).index(1)]
    return model.predict(x)


def fit_and_score(prepared: Prepared) -> dict:
    """Both baselines fit on the pipeline's rows and scored on the held-out rows: {name: {metric, seconds}}.
    One thread: on this 2-core machine shared with other work, OpenMP's spinning threads made HistGradientBoosting
    5 to 10 times slower (hpc_data: 20 to 44 s against 2 to 4 s), for the same scores."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _fit_and_score(prepared)


def _fit_and_score(prepared: Prepared) -> dict:
    table = prepared.table
    train, heldout = prepared.frames()
    names = feature_columns(prepared, train)
    columns = columns_of(train, names)
    x_train, x_held = design(train, columns), design(heldout, columns)
    y_train = quality_metrics.truth(table, train[table.label])
    y_held = quality_metrics.truth(table, heldout[table.label])
    categorical = list(columns.categories)
    numeric = [c for c in x_train.columns if c not in columns.categories]
    one_hot = few_valued(x_train, numeric)
    linear_categorical = [*categorical, *map(ONE_HOT.format, one_hot)]
    result = {"columns": {"numeric": list(columns.numeric), "dates": list(columns.dates),
                          "categorical": {c: len(v) for c, v in columns.categories.items()},
                          "linear_one_hot_numbers": one_hot}}
    for name, model, prepare_x in (
            ("linear", _linear(table.task, numeric, linear_categorical),
             lambda x: _for_linear(x, categorical, one_hot)),
            ("gbm", _gbm(table.task), lambda x: x)):
        start = time.perf_counter()
        model.fit(prepare_x(x_train), y_train)
        predicted = _predicted(table.task, model, prepare_x(x_held))
        result[name] = {"value": round(quality_metrics.value(table, y_held, predicted), 6),
                        "seconds": round(time.perf_counter() - start, 1)}
    return result


def cache_key(prepared: Prepared) -> str:
    import sklearn

    definition = {"data": prepared.key, "ignore": sorted(prepared.table.ignore), "version": VERSION,
                  "sklearn": sklearn.__version__, "task": prepared.table.task,
                  "positive_class": prepared.table.positive_class}
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:12]


def scores(prepared: Prepared, refit: bool = False) -> dict:
    """fit_and_score's result, from the cache beside the prepared table unless `refit` or absent."""
    path = prepared.directory / f"baselines-{cache_key(prepared)}.json"
    cached: Optional[dict] = json.loads(path.read_text()) if path.is_file() and not refit else None
    if cached is not None:
        return {**cached, "reused": True}
    result = fit_and_score(prepared)
    path.write_text(json.dumps(result, indent=1) + "\n")
    return {**result, "reused": False}

"""Column roles inferred from a sample of the training data: numeric, categorical, boolean, date, id-like, free
text. Every threshold is here and in docs/data.md (column roles)."""

from __future__ import annotations

import dataclasses
import json
import statistics
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from trainer import date_formats as dates

# Rows of the training split read to infer the roles (spread over it: components/data/column_roles.py sample; the
# whole split when smaller).
SAMPLE_ROWS = 20_000
# The rules below that count distinct values need this many present values; fewer, and a column keeps the
# role of its type (numeric or categorical).
MIN_ROWS_FOR_DISTINCT = 50
# id-like: at least this share of the present values distinct (and, for integers, densely numbered: the
# range at most ID_INT_SPREAD times the number of distinct values, as sequential ids are).
ID_UNIQUE_RATIO = 0.95
ID_INT_SPREAD = 2.0
# Free text: values of at least this many words on average, and at least this share of them distinct.
TEXT_MIN_WORDS = 3.0
TEXT_DISTINCT_RATIO = 0.2
# Integers are read as categories (days of the week, a route's distance, a store number) when, on half the sampled
# rows held out, each value's mean label explains at least this much more of the label's variance than a smooth
# curve of the value does (a line bent at its quartiles, fitted by least squares: what a network makes of a number
# easily), and the rows' paired squared errors say so by at least CATEGORY_T standard errors; otherwise they are
# numbers (counts, amounts, years). Reading every integer of a few values as categories instead was measured to
# cost the loans table 0.05 RMSE (docs/data.md, column roles).
CATEGORY_GAIN = 0.005
CATEGORY_T = 2.0
SHRINK_ROWS = 5  # a value's mean label is pulled toward the overall mean as if by this many rows of it
# Numbers (and a regression label) read on a log scale, log(1 + x): no value below 0, and a skew of at least this
# that the log lowers (incomes, prices, counts with a long tail).
LOG_SKEW = 2.0
# Notes in the table: a column whose present values are all one, or that is empty in at least this share of rows.
MOSTLY_EMPTY = 0.5
# Date: at least this share of the present values valid dates of one format.
DATE_MATCH_RATIO = 0.95
# Boolean: every present value, lower-cased, in one of these pairs.
BOOLEAN_PAIRS = (("true", "false"), ("yes", "no"), ("y", "n"), ("t", "f"), ("1", "0"))
TRUE_VALUES = tuple(t for t, _ in BOOLEAN_PAIRS)
FALSE_VALUES = tuple(f for _, f in BOOLEAN_PAIRS)

# Key of the inferred roles in Transform's custom_config (components/transform.py puts them there).
CONFIG_KEY = "column_roles"
# The same roles beside the transform graph, for the Trainer (and a tuning trial) to resolve the features alike.
ROLES_FILE = "column_roles.json"
EXCLUDED = ("id", "text")


@dataclasses.dataclass(frozen=True)
class Sample:
    """A column's present values in the sampled rows (missing ones left out), and how many rows were read."""
    name: str
    kind: str  # int | float | string
    values: Sequence[Any]
    rows: int
    # Each value's row among the sampled rows; empty: not known (the rules that compare a column with the label
    # are then skipped).
    index: Sequence[int] = ()


@dataclasses.dataclass(frozen=True)
class Role:
    role: str
    why: str                # the rule and the figures it saw
    distinct: int = 0       # distinct values in the sample
    date_format: Optional[str] = None
    with_time: bool = False
    log: bool = False       # numeric: read as log(1 + x) (LOG_SKEW)
    codes: bool = False     # date: its single days carry the label (_codes), so each day is a category too

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, False)}

    @classmethod
    def from_json(cls, body: Mapping) -> "Role":
        return cls(**body)


def dumps(roles: Mapping[str, Role]) -> str:
    return json.dumps({name: r.to_json() for name, r in sorted(roles.items())}, sort_keys=True)


def loads(text: Optional[str]) -> dict[str, Role]:
    return {name: Role.from_json(body) for name, body in json.loads(text or "{}").items()}


def read_beside(transform_savedmodel_dir: str) -> dict[str, Role]:
    """The roles Transform kept beside its graph (`<transform_graph>/column_roles.json`); none from older runs."""
    import tensorflow as tf  # only here: role inference itself needs no TensorFlow

    path = f"{transform_savedmodel_dir.rstrip('/').rsplit('/', 1)[0]}/{ROLES_FILE}"
    if not tf.io.gfile.exists(path):
        return {}
    with tf.io.gfile.GFile(path) as f:
        return loads(f.read())


def infer(samples: Iterable[Sample], label: Optional[str] = None, task: Optional[str] = None,
          positive_class: Optional[str] = None) -> dict[str, Role]:
    """Each column's role as its sampled values suggest, whatever the config says (it overrides, resolve()).
    With the `label` (and its task) the rules that compare a column with the label can run."""
    samples = list(samples)
    target = None
    if label is not None:
        found = [s for s in samples if s.name == label]
        target = _target(found[0], task, positive_class) if found and found[0].index else None
    return {s.name: _noted(s, infer_one(s, target if s.name != label else None)) for s in samples}


def _noted(s: Sample, role: Role) -> Role:
    """The role with a note when the column is constant or mostly empty in the sample."""
    notes = []
    if len(s.values) >= 2 and len(set(s.values)) == 1:
        notes.append(f"constant: every sampled value is {s.values[0]!r}, nothing to learn from")
    if s.rows and 1 - len(s.values) / s.rows >= MOSTLY_EMPTY:
        notes.append(f"mostly empty: {1 - len(s.values) / s.rows:.0%} of {s.rows:,} sampled rows have no value")
    return dataclasses.replace(role, why="; ".join([role.why, *notes])) if notes else role


def infer_one(s: Sample, target: Optional[Mapping[int, Sequence[float]]] = None) -> Role:
    """`target`: the label of each sampled row as a vector (trainer/roles.py _target), for the integer rule."""
    present = len(s.values)
    if not present:
        return Role("numeric" if s.kind != "string" else "categorical", "no values in the sample: its type's role")
    distinct = len(set(s.values))
    ratio = distinct / present
    if s.kind == "float":
        return _number(s, "floats", distinct)
    if s.kind == "int":
        if set(s.values) <= {0, 1}:
            return Role("boolean", "integers 0 and 1 only", distinct)
        spread = (max(s.values) - min(s.values) + 1) / distinct
        if present >= MIN_ROWS_FOR_DISTINCT and ratio >= ID_UNIQUE_RATIO and spread <= ID_INT_SPREAD:
            return Role("id", f"{ratio:.0%} of {present} values distinct, numbered densely", distinct)
        if present >= MIN_ROWS_FOR_DISTINCT and target and s.index:
            codes = _codes(s, target)
            if codes:
                return Role("categorical", f"integers, {distinct} distinct, as categories: {codes}", distinct)
        return _number(s, "integers", distinct)
    strings = [str(v).strip() for v in s.values]
    lowered = {v.lower() for v in strings}
    for pair in BOOLEAN_PAIRS:
        if lowered <= set(pair) and len(lowered) == 2:
            return Role("boolean", f"values {'/'.join(pair)} only", distinct)
    fmt = _date_format(strings)
    if fmt:
        with_time = any(dates.has_time(v) for v in strings)
        why = f"{'timestamps' if with_time else 'dates'} as {fmt}"
        if target and s.index:
            days = [y * 10_000 + m * 100 + d for y, m, d, _ in (dates.fields(v, fmt) for v in strings)]
            codes = _codes(dataclasses.replace(s, values=days), target)
            if codes:
                return Role("date", f"{why}; each day a category too: {codes}", distinct, fmt, with_time, codes=True)
        return Role("date", why, distinct, fmt, with_time)
    if present >= MIN_ROWS_FOR_DISTINCT:
        words = statistics.fmean(len(v.split()) for v in strings)
        if words >= TEXT_MIN_WORDS and ratio >= TEXT_DISTINCT_RATIO:
            return Role("text", f"{words:.1f} words a value, {ratio:.0%} of {present} distinct", distinct)
        if ratio >= ID_UNIQUE_RATIO:
            return Role("id", f"{ratio:.0%} of {present} values distinct", distinct)
    return Role("categorical", f"{distinct} distinct strings", distinct)


def _number(s: Sample, what: str, distinct: int) -> Role:
    """A numeric role, read on a log scale when its values are positive and skewed (LOG_SKEW)."""
    values = np.asarray(s.values, dtype=np.float64)
    if len(values) >= MIN_ROWS_FOR_DISTINCT and values.min() >= 0 and distinct > 2:
        raw, logged = _skew(values), _skew(np.log1p(values))
        if raw >= LOG_SKEW and abs(logged) < raw:
            return Role("numeric", f"{what}, positive and skewed ({raw:.1f}; {logged:.1f} after log)", distinct,
                        log=True)
    return Role("numeric", what, distinct)


def _skew(values: np.ndarray) -> float:
    std = values.std()
    return float(np.mean(((values - values.mean()) / std) ** 3)) if std > 0 else 0.0


def _target(label: Sample, task: Optional[str], positive_class: Optional[str]) -> Optional[dict[int, np.ndarray]]:
    """Each sampled row's label as a vector whose squared error a guess is scored by: the standardized value (on a
    log scale when skewed) for regression, 1/0 for binary, one entry per class for multiclass."""
    if task == "regression":
        values = np.asarray(label.values, dtype=np.float64)
        if _number(label, "", len(set(label.values))).log:
            values = np.log1p(values)
        values = (values - values.mean()) / (values.std() or 1.0)
        return {row: np.array([v]) for row, v in zip(label.index, values)}
    if task == "binary":
        if label.kind == "string":
            if positive_class is None:
                return None
            return {row: np.array([float(str(v) == positive_class)]) for row, v in zip(label.index, label.values)}
        return {row: np.array([float(v != 0)]) for row, v in zip(label.index, label.values)}
    if task == "multiclass":
        classes = {c: i for i, c in enumerate(sorted(set(map(str, label.values))))}
        eye = np.eye(len(classes))
        return {row: eye[classes[str(v)]] for row, v in zip(label.index, label.values)}
    return None


def _codes(s: Sample, target: Mapping[int, Sequence[float]]) -> str:
    """Why an integer column is categories rather than a number, or a date's single days matter (empty when not):
    on the odd sampled rows, the even rows' mean label per value (shrunk toward the overall mean by SHRINK_ROWS)
    explains at least CATEGORY_GAIN more of the label's variance than a smooth curve of the value fitted on the
    even rows does, by CATEGORY_T standard errors of the rows' paired differences."""
    pairs = [(v, target[row]) for v, row in zip(s.values, s.index) if row in target]
    fit = [(v, y) for i, (v, y) in enumerate(pairs) if i % 2 == 0]
    held = [(v, y) for i, (v, y) in enumerate(pairs) if i % 2 == 1]
    if len(fit) < MIN_ROWS_FOR_DISTINCT or len(held) < MIN_ROWS_FOR_DISTINCT or len(set(s.values)) < 3:
        return ""
    x_fit, y_fit = np.array([v for v, _ in fit], dtype=np.float64), np.stack([y for _, y in fit])
    x_held, y_held = np.array([v for v, _ in held], dtype=np.float64), np.stack([y for _, y in held])
    overall = y_fit.mean(axis=0)
    total = np.square(y_held - overall).sum()
    if total <= 0:
        return ""
    means = {}
    for key in np.unique(x_fit):
        rows = y_fit[x_fit == key]
        means[key] = (rows.sum(axis=0) + SHRINK_ROWS * overall) / (len(rows) + SHRINK_ROWS)
    per_value_errors = np.square(y_held - np.stack([means.get(k, overall) for k in x_held])).sum(axis=1)
    smooth_errors = np.square(y_held - _bent_line(x_fit, y_fit, x_held)).sum(axis=1)
    per_value, smooth = 1 - per_value_errors.sum() / total, 1 - smooth_errors.sum() / total
    better = smooth_errors - per_value_errors
    spread = better.std() / np.sqrt(len(better))
    if per_value < smooth + CATEGORY_GAIN or better.mean() < CATEGORY_T * spread:
        return ""
    return (f"each value's mean label explains {per_value:.1%} of the label's variance on held-out rows, a smooth "
            f"curve of it {smooth:.1%}")


def _bent_line(x_fit: np.ndarray, y_fit: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The least-squares line through (x_fit, y_fit) bent at x_fit's quartiles, at `x`."""
    center, scale = x_fit.mean(), x_fit.std() or 1.0
    knots = np.unique(np.quantile((x_fit - center) / scale, [0.25, 0.5, 0.75]))

    def design(values):
        z = (values - center) / scale
        return np.column_stack([np.ones_like(z), z, *(np.maximum(z - k, 0.0) for k in knots)])

    coefficients, *_ = np.linalg.lstsq(design(x_fit), y_fit, rcond=None)
    return design(x) @ coefficients


def _date_format(strings: Sequence[str]) -> Optional[str]:
    """The format most of the values are valid dates of; day-first when a day above 12 says so, else month-first."""
    head = strings[:100]  # most columns are plainly not dates: a look at the first values settles those
    if sum(any(dates.valid(v, fmt) for fmt in dates.FORMATS) for v in head) < DATE_MATCH_RATIO * len(head):
        return None
    needed = DATE_MATCH_RATIO * len(strings)
    candidates = {fmt: sum(dates.valid(v, fmt) for v in strings) for fmt in dates.FORMATS}
    best = max(candidates.values())
    if best < needed:
        return None
    # "01/02/2024" fits both slash orders; the one with more valid values wins, month-first on a tie (Excel US).
    return max((fmt for fmt, n in candidates.items() if n == best),
               key=lambda fmt: (fmt == "mdy_slash", fmt == "iso"))

"""Column roles inferred from a sample of the training data: numeric, categorical, boolean, date, id-like, free
text. Every threshold is here and in docs/data.md (column roles)."""

from __future__ import annotations

import dataclasses
import json
import statistics
from typing import Any, Iterable, Mapping, Optional, Sequence

from trainer import date_formats as dates

# Rows of the training split read to infer the roles (the first ones: the whole split when smaller).
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


@dataclasses.dataclass(frozen=True)
class Role:
    role: str
    why: str                # the rule and the figures it saw
    distinct: int = 0       # distinct values in the sample
    date_format: Optional[str] = None
    with_time: bool = False

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


def infer(samples: Iterable[Sample]) -> dict[str, Role]:
    """Each column's role as its sampled values suggest, whatever the config says (it overrides, resolve())."""
    return {s.name: infer_one(s) for s in samples}


def infer_one(s: Sample) -> Role:
    present = len(s.values)
    if not present:
        return Role("numeric" if s.kind != "string" else "categorical", "no values in the sample: its type's role")
    distinct = len(set(s.values))
    ratio = distinct / present
    if s.kind == "float":
        return Role("numeric", "floats", distinct)
    if s.kind == "int":
        if set(s.values) <= {0, 1}:
            return Role("boolean", "integers 0 and 1 only", distinct)
        spread = (max(s.values) - min(s.values) + 1) / distinct
        if present >= MIN_ROWS_FOR_DISTINCT and ratio >= ID_UNIQUE_RATIO and spread <= ID_INT_SPREAD:
            return Role("id", f"{ratio:.0%} of {present} values distinct, numbered densely", distinct)
        return Role("numeric", "integers", distinct)
    strings = [str(v).strip() for v in s.values]
    lowered = {v.lower() for v in strings}
    for pair in BOOLEAN_PAIRS:
        if lowered <= set(pair) and len(lowered) == 2:
            return Role("boolean", f"values {'/'.join(pair)} only", distinct)
    fmt = _date_format(strings)
    if fmt:
        with_time = any(dates.has_time(v) for v in strings)
        return Role("date", f"{'timestamps' if with_time else 'dates'} as {fmt}", distinct, fmt, with_time)
    if present >= MIN_ROWS_FOR_DISTINCT:
        words = statistics.fmean(len(v.split()) for v in strings)
        if words >= TEXT_MIN_WORDS and ratio >= TEXT_DISTINCT_RATIO:
            return Role("text", f"{words:.1f} words a value, {ratio:.0%} of {present} distinct", distinct)
        if ratio >= ID_UNIQUE_RATIO:
            return Role("id", f"{ratio:.0%} of {present} values distinct", distinct)
    return Role("categorical", f"{distinct} distinct strings", distinct)


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

"""Deterministic data like a configured dataset, at any size, for benchmarks and scale tests.

The distributions are fitted from the dataset's own CSV files (the config's
data.input_dir, read with its missing-value tokens) and shaped by its features
section, not typed in: per label class (one group for regression) the class
share, a multivariate normal over the numeric features (so their correlations
survive; a regression label joins them) clipped to the observed range, and the
value frequencies of every other column. Each generated row takes the missing
cells of a random source row of its class, so the real missing-value pattern
(which cells go missing together) is kept. Integer columns stay integers in
the source's steps, floats keep the source's decimals: same columns, order and
types as the source, so the same schema and pipeline apply unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from pipeline.config import REPO_ROOT, Config, load_config, resolve
from trainer.feature_config import FeatureConfig
from trainer.feature_config import resolve as resolve_features

DEFAULT_CONFIG = REPO_ROOT / "configs" / "local.yaml"
_ALL = "(all rows)"


@dataclasses.dataclass(frozen=True)
class Group:
    share: float
    mean: np.ndarray  # of the numeric columns
    cov: np.ndarray
    values: dict[str, tuple[np.ndarray, np.ndarray]]  # other column -> (values, probabilities)
    missing: np.ndarray  # [source rows, columns] bool: each source row's missing cells


@dataclasses.dataclass(frozen=True)
class Profile:
    columns: tuple[str, ...]
    numeric: tuple[str, ...]     # drawn from the normal
    groups: dict[object, Group]  # by label value, or one group for regression
    label: str
    low: np.ndarray              # observed range of the numeric columns
    high: np.ndarray
    steps: dict[str, float]      # integer column -> step (e.g. grams in 25s)
    decimals: dict[str, int]     # float column -> decimals


def read_source(config: Config) -> pd.DataFrame:
    """Every CSV file of data.input_dir, the config's missing-value tokens read as missing."""
    files = sorted(Path(resolve(config.data.input_dir)).glob("*.csv"))
    if not files:
        raise ValueError(f"data.input_dir {config.data.input_dir}: no CSV files")
    na = ["", *config.data.missing_values]
    return pd.concat([pd.read_csv(f, na_values=na, keep_default_na=False) for f in files], ignore_index=True)


def fit(df: pd.DataFrame, features: FeatureConfig) -> Profile:
    named = [features.label, *(f.name for f in (*features.numeric, *features.categorical))]
    if missing := [c for c in named if c not in df.columns]:
        raise ValueError(f"source data lacks columns {missing}; the features section names {named}")
    resolved = resolve_features(features, {c: _kind(df[c]) for c in df.columns})
    numeric = [f.name for f in resolved.numeric]
    if features.task == "regression":
        numeric.append(features.label)
    grouped = [(_ALL, df)] if features.task == "regression" else list(df.groupby(features.label))
    groups = {}
    for key, rows in grouped:
        complete = rows[numeric].dropna().to_numpy(float)
        if len(complete) < len(numeric) + 1:
            raise ValueError(f"class {key!r}: {len(complete)} rows have every numeric feature; "
                             f"fitting {len(numeric)} needs at least {len(numeric) + 1}")
        values = {}
        for col in df.columns.difference(numeric):
            freq = rows[col].dropna().value_counts(normalize=True).sort_index()
            values[col] = (freq.index.to_numpy(), freq.to_numpy())
        groups[key] = Group(share=len(rows) / len(df), mean=complete.mean(axis=0),
                            cov=np.atleast_2d(np.cov(complete, rowvar=False)), values=values,
                            missing=rows[list(df.columns)].isna().to_numpy())
    ints = [c for c in df.columns if _kind(df[c]) == "int"]
    return Profile(columns=tuple(df.columns), numeric=tuple(numeric), groups=groups, label=features.label,
                   low=df[numeric].min().to_numpy(float), high=df[numeric].max().to_numpy(float),
                   steps={c: _step(df[c]) for c in ints},
                   decimals={c: _decimals(df[c]) for c in df.columns if _kind(df[c]) == "float"})


def _kind(column: pd.Series) -> str:
    present = column.dropna()
    if not pd.api.types.is_numeric_dtype(column):
        return "string"
    return "int" if len(present) and np.all(np.mod(present, 1) == 0) else "float"


def _step(column: pd.Series) -> float:
    present = column.dropna().astype(np.int64).to_numpy()
    return float(np.gcd.reduce(np.abs(present)) or 1) if len(present) else 1.0


def _decimals(column: pd.Series) -> int:
    text = column.dropna().astype(str)
    return int(text.str.partition(".")[2].str.len().max() or 0) if len(text) else 0


def load_profile(config: Optional[Config] = None) -> Profile:
    config = config or load_config(DEFAULT_CONFIG)
    if config.features is None:
        raise ValueError("the config has no features section: the generator follows it")
    return fit(read_source(config), config.features)


def generate(rows: int, seed: int | np.random.Generator = 0, profile: Profile | None = None) -> pd.DataFrame:
    """`rows` rows like the source; the same (rows, seed, profile) always gives the same frame."""
    if rows < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    profile = profile or load_profile()
    rng = np.random.default_rng(seed)
    keys = list(profile.groups)
    which = rng.choice(len(keys), size=rows, p=_normalized([profile.groups[k].share for k in keys]))
    columns: dict[str, np.ndarray] = {c: np.empty(rows, dtype=object) for c in profile.columns}
    missing = np.zeros((rows, len(profile.columns)), dtype=bool)
    for g, key in enumerate(keys):
        group, idx = profile.groups[key], np.flatnonzero(which == g)
        drawn = rng.multivariate_normal(group.mean, group.cov, size=idx.size, method="cholesky")
        drawn = np.clip(drawn, profile.low, profile.high)
        for j, col in enumerate(profile.numeric):
            columns[col][idx] = drawn[:, j]
        for col, (values, p) in group.values.items():
            columns[col][idx] = rng.choice(values, size=idx.size, p=p) if len(values) else None
        if key is not _ALL:
            columns[profile.label][idx] = key
        missing[idx] = group.missing[rng.integers(0, len(group.missing), idx.size)]
    return pd.DataFrame({c: _typed(c, columns[c], profile).mask(missing[:, j])
                         for j, c in enumerate(profile.columns)})


def _typed(col: str, values: np.ndarray, profile: Profile) -> pd.Series:
    if col in profile.steps:
        step = profile.steps[col]
        numbers = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(float)
        return pd.Series(np.round(numbers / step) * step).astype("Int64")
    if col in profile.decimals:
        return pd.Series(np.round(pd.to_numeric(pd.Series(values), errors="coerce"), profile.decimals[col]))
    return pd.Series(values, dtype=object)


def write_dataset(out_dir: str | os.PathLike, rows: int, seed: int = 0, shards: int | None = None,
                  profile: Profile | None = None) -> list[Path]:
    """Write `rows` generated rows as CSV shards with a header each (CsvExampleGen
    reads every file of a directory and parallelises over files)."""
    shards = shards or max(1, min(16, rows // 50_000))
    if not 1 <= shards <= rows:
        raise ValueError(f"shards must be between 1 and rows ({rows}), got {shards}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; CsvExampleGen would read whatever else is there")
    profile = profile or load_profile()
    sizes = [rows // shards + (i < rows % shards) for i in range(shards)]
    seeds = np.random.SeedSequence(seed).spawn(shards)
    digits = max(5, math.ceil(math.log10(shards + 1)))
    paths = []
    for i, (size, shard_seed) in enumerate(zip(sizes, seeds)):
        path = out / f"data-{i:0{digits}d}-of-{shards:0{digits}d}.csv"
        generate(size, np.random.default_rng(shard_seed), profile).to_csv(path, index=False, na_rep="")
        paths.append(path)
    return paths


def _normalized(p: list[float]) -> np.ndarray:
    a = np.asarray(p, dtype=float)
    return a / a.sum()

"""Deterministic penguin-like data at any size, for benchmarks and scale tests.

The distributions are fitted from the bundled Palmer penguins CSV rather than
typed in: per species the island, year and sex frequencies; per species and
sex a multivariate normal over the four measurements (so bill length, depth,
flipper length and body mass keep their real correlations); and the real
missing-value pattern (a few rows miss every measurement and the sex, a few
more miss only the sex). Same columns, order and types as the bundled file,
so the same schema and pipeline apply unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.config import REPO_ROOT
from trainer import features

SOURCE_CSV = REPO_ROOT / "data" / "penguins" / "penguins.csv"
COLUMNS = ("species", "island", *features.NUMERIC, "sex", "year")
_INT_COLUMNS = ("flipper_length_mm", "body_mass_g")
# The source records body mass in steps of 25 g and bills to 0.1 mm.
_MASS_STEP = 25


@dataclasses.dataclass(frozen=True)
class SpeciesProfile:
    share: float
    islands: dict[str, float]
    years: dict[int, float]
    male_share: float
    # Per sex: mean vector and covariance of features.NUMERIC.
    mean: dict[str, np.ndarray]
    cov: dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Profile:
    species: dict[str, SpeciesProfile]
    all_missing_rate: float  # every measurement and the sex missing
    sex_missing_rate: float  # only the sex missing, among the other rows


def fit(df: pd.DataFrame) -> Profile:
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"source data lacks columns {missing}; expected {list(COLUMNS)}")
    all_missing = df[list(features.NUMERIC)].isna().all(axis=1)
    complete = df[~all_missing]
    profiles = {}
    for name, rows in df.groupby("species"):
        measured = rows.dropna(subset=list(features.NUMERIC) + ["sex"])
        if measured["sex"].nunique() < 2 or measured.groupby("sex").size().min() < len(features.NUMERIC) + 1:
            raise ValueError(f"species {name!r}: too few complete rows of each sex to fit a distribution")
        by_sex = {sex: g[list(features.NUMERIC)].to_numpy(float) for sex, g in measured.groupby("sex")}
        profiles[name] = SpeciesProfile(
            share=len(rows) / len(df),
            islands=rows["island"].value_counts(normalize=True).sort_index().to_dict(),
            years={int(k): v for k, v in rows["year"].value_counts(normalize=True).sort_index().items()},
            male_share=float((measured["sex"] == "male").mean()),
            mean={sex: x.mean(axis=0) for sex, x in by_sex.items()},
            cov={sex: np.cov(x, rowvar=False) for sex, x in by_sex.items()})
    return Profile(species=profiles, all_missing_rate=float(all_missing.mean()),
                   sex_missing_rate=float(complete["sex"].isna().mean()))


def load_profile(source: str | os.PathLike = SOURCE_CSV) -> Profile:
    return fit(pd.read_csv(source))


def generate(rows: int, seed: int | np.random.Generator = 0, profile: Profile | None = None) -> pd.DataFrame:
    """`rows` penguin-like rows; the same (rows, seed, profile) always gives the same frame."""
    if rows < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    profile = profile or load_profile()
    rng = np.random.default_rng(seed)
    names = sorted(profile.species)
    species = rng.choice(names, size=rows, p=_normalized([profile.species[n].share for n in names]))
    island = np.empty(rows, dtype=object)
    year = np.empty(rows, dtype=np.int64)
    sex = np.empty(rows, dtype=object)
    numeric = np.empty((rows, len(features.NUMERIC)))
    for name in names:
        sp = profile.species[name]
        idx = np.flatnonzero(species == name)
        island[idx] = rng.choice(list(sp.islands), size=idx.size, p=_normalized(list(sp.islands.values())))
        year[idx] = rng.choice(list(sp.years), size=idx.size, p=_normalized(list(sp.years.values())))
        sex[idx] = np.where(rng.random(idx.size) < sp.male_share, "male", "female")
        for s in ("female", "male"):
            sub = idx[sex[idx] == s]
            numeric[sub] = rng.multivariate_normal(sp.mean[s], sp.cov[s], size=sub.size, method="cholesky")

    frame = pd.DataFrame({"species": species, "island": island})
    for i, col in enumerate(features.NUMERIC):
        values = numeric[:, i]
        if col == "body_mass_g":
            frame[col] = pd.array(np.round(values / _MASS_STEP) * _MASS_STEP, dtype="Int64")
        elif col in _INT_COLUMNS:
            frame[col] = pd.array(np.round(values), dtype="Int64")
        else:
            frame[col] = np.round(values, 1)
    frame["sex"] = pd.array(sex, dtype=object)
    frame["year"] = year

    all_missing = rng.random(rows) < profile.all_missing_rate
    sex_missing = all_missing | (rng.random(rows) < profile.sex_missing_rate)
    frame.loc[all_missing, list(features.NUMERIC)] = pd.NA
    frame.loc[sex_missing, "sex"] = None
    return frame[list(COLUMNS)]


def write_dataset(out_dir: str | os.PathLike, rows: int, seed: int = 0, shards: int | None = None) -> list[Path]:
    """Write `rows` generated rows as CSV shards with a header each (CsvExampleGen
    reads every file of a directory and parallelises over files)."""
    shards = shards or max(1, min(16, rows // 50_000))
    if not 1 <= shards <= rows:
        raise ValueError(f"shards must be between 1 and rows ({rows}), got {shards}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; CsvExampleGen would read whatever else is there")
    profile = load_profile()
    sizes = [rows // shards + (i < rows % shards) for i in range(shards)]
    seeds = np.random.SeedSequence(seed).spawn(shards)
    paths = []
    for i, (size, shard_seed) in enumerate(zip(sizes, seeds)):
        path = out / f"penguins-{i:05d}-of-{shards:05d}.csv"
        generate(size, np.random.default_rng(shard_seed), profile).to_csv(path, index=False, na_rep="")
        paths.append(path)
    return paths


def _normalized(p: list[float]) -> np.ndarray:
    a = np.asarray(p, dtype=float)
    return a / a.sum()

"""Spans derived from a flat CSV dataset, for the retraining simulation and its tests.
Why and sources: docs/internals.md."""

from __future__ import annotations

import csv
import dataclasses
import random
from pathlib import Path
from typing import Optional

from tensorflow_metadata.proto.v0 import schema_pb2

from components.data.snapshot.spans import DEFAULT_READY_MARKER
from pipeline.config import Config, resolve
from pipeline.data.checks import check_features, columns_from_schema, load_schema
from pipeline.errors import ConfigError

NOISE = 0.02          # relative standard deviation of the noise on FLOAT columns
SCALE = 1.25          # the drifted FLOAT column is multiplied by this
KEEP_SHARE = 0.1      # of rows holding the shifted column's most common value


@dataclasses.dataclass(frozen=True)
class Drift:
    numeric: str       # FLOAT column whose unit changes
    categorical: str   # column whose most common value becomes rare


def float_domains(schema: schema_pb2.Schema) -> dict[str, tuple[float, float]]:
    """FLOAT features' [min, max] from the schema (unbounded sides are infinite)."""
    out = {}
    for f in schema.feature:
        if f.HasField("float_domain"):
            d = f.float_domain
            out[f.name] = (d.min if d.HasField("min") else -float("inf"), d.max if d.HasField("max") else float("inf"))
    return out


def pick_drift(floats: list[str], categories: list[str], numeric: Optional[str] = None,
               categorical: Optional[str] = None) -> Drift:
    if not floats or not categories:
        raise ConfigError("features: spans need a numeric FLOAT and a categorical model input to drift "
                         f"(numeric FLOAT: {floats or 'none'}; categorical: {categories or 'none'})")
    for name, pool in ((numeric, floats), (categorical, categories)):
        if name is not None and name not in pool:
            raise ConfigError(f"drift column {name!r} is not one of the features section's inputs {pool}")
    return Drift(numeric or floats[0], categorical or categories[0])


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How spans are made from a dataset: which columns get noise (numeric FLOAT inputs), their domains
    (from the schema), the drift, and the cell values that mean missing."""
    noisy: tuple[str, ...]
    domains: dict[str, tuple[float, float]]
    drift: Drift
    missing: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, config: Config, numeric: Optional[str] = None,
                    categorical: Optional[str] = None) -> "Recipe":
        resolved = check_features(config)
        if resolved is None or not config.data.schema_file:
            raise ConfigError("spans are derived with the curated schema: set data.schema_file to a local file")
        schema = load_schema(resolve(config.data.schema_file))
        types = columns_from_schema(schema)
        floats = [f.name for f in resolved.numeric if types.get(f.name) == "float"]
        categories = [f.name for f in resolved.categorical]
        return cls(tuple(floats), float_domains(schema), pick_drift(floats, categories, numeric, categorical),
                   frozenset(["", *config.data.missing_values]))


def write_spans(source_csv: str, out_dir: str, recipe: Recipe, count: int, rows: int,
                drift_at: Optional[int] = None, seed: int = 0, first: int = 1,
                marker: Optional[str] = DEFAULT_READY_MARKER) -> list[Path]:
    """Write span-<first>..span-<first+count-1>/data.csv under out_dir, each followed by its ready `marker`
    (data.span_ready_marker; None writes none) as a producer does; returns their directories."""
    drift = recipe.drift
    with open(source_csv, newline="") as f:
        reader = csv.DictReader(f)
        header, source = reader.fieldnames, list(reader)
    written = []
    for n in range(first, first + count):
        rng = random.Random(seed * 1000 + n)
        drifted = drift_at is not None and n >= drift_at
        pool = source
        if drifted:
            common = max({r[drift.categorical] for r in source} - recipe.missing,
                         key=lambda v: sum(r[drift.categorical] == v for r in source))
            pool = [r for r in source if r[drift.categorical] != common or rng.random() < KEEP_SHARE]
        span_rows = [_noisy(rng.choice(pool), recipe, drifted, rng)
                     for _ in range(rows)]
        directory = Path(out_dir) / f"span-{n}"
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / "data.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(span_rows)
        if marker:
            (directory / marker).write_bytes(b"")  # last: the span is complete
        written.append(directory)
    return written


def _noisy(row: dict, recipe: Recipe, drifted: bool, rng: random.Random) -> dict:
    out = dict(row)
    for column in recipe.noisy:
        if out.get(column, "") in recipe.missing:
            continue  # a missing value stays missing
        value = float(out[column]) * (1 + rng.gauss(0, NOISE))
        if drifted and column == recipe.drift.numeric:
            value *= SCALE
        low, high = recipe.domains.get(column, (-float("inf"), float("inf")))
        out[column] = f"{min(max(value, low), high):.2f}"
    return out

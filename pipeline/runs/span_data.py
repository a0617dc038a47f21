"""Spans derived from a flat CSV dataset, for the retraining simulation and its tests.

Each span is a resample (with replacement) of the source rows, with a little
Gaussian noise on the FLOAT columns so spans differ like real days do. From
`drift_at` on, spans carry a real shift that still passes the schema (the
data gate must not see it; the drift gate must): one FLOAT column reads 25%
high, as after an instrument's recalibration, and one categorical column's
most common value becomes rare (its rows are mostly dropped), as when a site
stops reporting. FLOAT values stay inside the schema's float_domain (a unit
change such as mm -> cm would leave it and is the data gate's to catch).
Which columns: FLOAT and BYTES features from the schema, the first of each
unless named, never the label.
"""

from __future__ import annotations

import csv
import dataclasses
import random
from pathlib import Path
from typing import Optional

from tensorflow_metadata.proto.v0 import schema_pb2

NOISE = 0.02          # relative standard deviation of the noise on FLOAT columns
SCALE = 1.25          # the drifted FLOAT column is multiplied by this
KEEP_SHARE = 0.1      # of rows holding the shifted column's most common value


@dataclasses.dataclass(frozen=True)
class Drift:
    numeric: str       # FLOAT column whose unit changes
    categorical: str   # column whose most common value becomes rare


def _schema(schema_file: str) -> schema_pb2.Schema:
    from google.protobuf import text_format

    return text_format.Parse(Path(schema_file).read_text(), schema_pb2.Schema())


def column_types(schema_file: str) -> dict[str, str]:
    return {f.name: schema_pb2.FeatureType.Name(f.type) for f in _schema(schema_file).feature}


def float_domains(schema_file: str) -> dict[str, tuple[float, float]]:
    """FLOAT features' [min, max] from the schema (unbounded sides are infinite)."""
    out = {}
    for f in _schema(schema_file).feature:
        if f.HasField("float_domain"):
            d = f.float_domain
            out[f.name] = (d.min if d.HasField("min") else -float("inf"), d.max if d.HasField("max") else float("inf"))
    return out


def pick_drift(types: dict[str, str], label: str, numeric: Optional[str] = None,
               categorical: Optional[str] = None) -> Drift:
    floats = [c for c, t in types.items() if t == "FLOAT" and c != label]
    strings = [c for c, t in types.items() if t == "BYTES" and c != label]
    if not floats or not strings:
        raise ValueError("the schema needs a FLOAT and a BYTES feature besides the label to drift")
    for name, pool in ((numeric, floats), (categorical, strings)):
        if name is not None and name not in pool:
            raise ValueError(f"drift column {name!r} is not one of {pool}")
    return Drift(numeric or floats[0], categorical or strings[0])


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How spans are made from a dataset: its column types and domains (from the schema) and the drift."""
    types: dict[str, str]
    domains: dict[str, tuple[float, float]]
    drift: Drift

    @classmethod
    def from_schema(cls, schema_file: str, label: str, numeric: Optional[str] = None,
                    categorical: Optional[str] = None) -> "Recipe":
        types = column_types(schema_file)
        return cls(types, float_domains(schema_file), pick_drift(types, label, numeric, categorical))


def write_spans(source_csv: str, out_dir: str, recipe: Recipe, count: int, rows: int,
                drift_at: Optional[int] = None, seed: int = 0, first: int = 1) -> list[Path]:
    """Write span-<first>..span-<first+count-1>/data.csv under out_dir; returns their directories."""
    types, drift, domains = recipe.types, recipe.drift, recipe.domains
    with open(source_csv, newline="") as f:
        reader = csv.DictReader(f)
        header, source = reader.fieldnames, list(reader)
    written = []
    for n in range(first, first + count):
        rng = random.Random(seed * 1000 + n)
        drifted = drift_at is not None and n >= drift_at
        pool = source
        if drifted:
            common = max({r[drift.categorical] for r in source},
                         key=lambda v: sum(r[drift.categorical] == v for r in source))
            pool = [r for r in source if r[drift.categorical] != common or rng.random() < KEEP_SHARE]
        span_rows = [_noisy(rng.choice(pool), types, drift if drifted else None, rng, domains)
                     for _ in range(rows)]
        directory = Path(out_dir) / f"span-{n}"
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / "data.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(span_rows)
        written.append(directory)
    return written


def _noisy(row: dict, types: dict[str, str], drift: Optional[Drift], rng: random.Random,
           domains: dict[str, tuple[float, float]]) -> dict:
    out = dict(row)
    for column, kind in types.items():
        if kind != "FLOAT" or not out.get(column):
            continue  # empty: a missing value stays missing
        value = float(out[column]) * (1 + rng.gauss(0, NOISE))
        if drift is not None and column == drift.numeric:
            value *= SCALE
        low, high = domains.get(column, (-float("inf"), float("inf")))
        out[column] = f"{min(max(value, low), high):.2f}"
    return out
